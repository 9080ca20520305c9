#!/usr/bin/env bash
# Builds the smartdev library and sdctl, then checks and tests the Go binding:
#   gofmt -l . (must print nothing), go vet ./..., go test -count=1 ./... (with SDCTL_BIN for the emulator test).
# Honours CARGO_TARGET_DIR (relative to the repository, as cargo runs there): the library and sdctl are then
# taken from it, linked through -tags smartdev_ldflags and CGO_LDFLAGS.
# Works from any directory. Installs Go from apt (golang-go) when `go` is missing; that needs root (or
# password-less sudo). Set GO_RACE=1 to also run the tests under the race detector.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

say() { printf '==> %s\n' "$*"; }
die() { printf 'run-tests.sh: %s\n' "$*" >&2; exit 1; }

# --- apt packages (Go, a C compiler for cgo) ----------------------------------------------------------------
apt_install() {
  local runner=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      runner=(sudo -n)
    else
      die "$* is needed but missing, and installing it needs root. Run as root, or install it yourself:
    sudo apt-get update && sudo apt-get install -y $*"
    fi
  fi
  command -v apt-get >/dev/null 2>&1 || die "$* is needed but missing, and apt-get is not available: install it yourself"
  say "installing $* with apt-get"
  "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

if ! command -v go >/dev/null 2>&1; then
  apt_install golang-go
  hash -r
  command -v go >/dev/null 2>&1 || die "golang-go was installed but 'go' is still not on PATH"
fi
if ! command -v "${CC:-cc}" >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
  apt_install gcc libc6-dev
fi
command -v cargo >/dev/null 2>&1 || die "cargo is needed to build the library: install Rust (https://rustup.rs)"

# --- Go environment: local toolchain, standard library only, no network ---------------------------------------
export GOTOOLCHAIN=local   # never download another toolchain (ignored by Go < 1.21)
export GOFLAGS="${GOFLAGS:--mod=mod}"
export GOPROXY=off         # the binding uses the standard library only
export CGO_ENABLED=1
if [ -z "${HOME:-}" ] || [ ! -w "${HOME:-/nonexistent}" ]; then
  # No usable home (some CI containers): keep Go's caches under the temporary directory.
  export GOPATH="${GOPATH:-${TMPDIR:-/tmp}/smartdev-go/gopath}"
  export GOCACHE="${GOCACHE:-${TMPDIR:-/tmp}/smartdev-go/cache}"
fi
say "$(go version)"

# --- the library and sdctl ------------------------------------------------------------------------------------
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in /*) ;; *) target="$repo/$target" ;; esac
say "cargo build --lib"
(cd "$repo" && cargo build --lib)
say "cargo build --bin sdctl"
(cd "$repo" && cargo build --bin sdctl)
[ -f "$target/debug/libsmartdev.a" ] || die "$target/debug/libsmartdev.a was not built"
if [ "$target" != "$repo/target" ]; then
  # The default build links ../../target/debug/libsmartdev.a; name the library in CARGO_TARGET_DIR instead.
  export GOFLAGS="$GOFLAGS -tags=smartdev_ldflags"
  export CGO_LDFLAGS="$target/debug/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl"
  say "linking $target/debug/libsmartdev.a (CARGO_TARGET_DIR)"
fi

# --- the binding ----------------------------------------------------------------------------------------------
cd "$here"
say "gofmt -l ."
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  printf '%s\n' "$unformatted" >&2
  die "these files need gofmt -w"
fi
say "go vet ./..."
go vet ./...
export SDCTL_BIN="$target/debug/sdctl"
say "go test -count=1 ./...  (SDCTL_BIN=$SDCTL_BIN)"
go test -count=1 ./...
if [ "${GO_RACE:-0}" = "1" ]; then
  say "go test -race -count=1 ./..."
  go test -race -count=1 ./...
fi
say "Go binding: all checks passed"
