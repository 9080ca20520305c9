#!/usr/bin/env bash
# Builds the smartdev library and sdctl, then checks and tests the Go binding:
#   gofmt -l . (must print nothing), go vet ./..., go test -count=1 ./... (with SDCTL_BIN for the emulator test),
#   and one test linked the other documented way (-tags smartdev_ldflags, libsmartdev.a in CGO_LDFLAGS).
# The binding links what pkg-config finds as "smartdev": this script writes TARGET/debug/pkgconfig/smartdev.pc
# for the library it just built and puts that folder first on PKG_CONFIG_PATH, so the tests always use this
# build. TARGET is CARGO_TARGET_DIR when set (relative to the repository, as cargo runs there), else target/.
# Works from any directory. Installs Go (golang-go) and pkg-config from apt when missing; that needs root (or
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
if ! command -v "${PKG_CONFIG:-pkg-config}" >/dev/null 2>&1; then
  apt_install pkg-config
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
lib="$target/debug"
say "cargo build --lib --bin sdctl  (into $lib)"
(cd "$repo" && cargo build --lib --bin sdctl)
for f in libsmartdev.so libsmartdev.a sdctl; do
  [ -f "$lib/$f" ] || die "$lib/$f was not built"
done
version="$(grep -m1 '^version' "$repo/Cargo.toml" | cut -d'"' -f2)"
# The library's soname (build.rs: libsmartdev.so.0.MINOR before 1.0, .MAJOR after) is what linked programs ask
# the loader for; cargo writes only libsmartdev.so, so the soname link is made here, as install.sh makes it.
major="${version%%.*}"
minor="${version#*.}"; minor="${minor%%.*}"
if [ "$major" = 0 ]; then soname="libsmartdev.so.0.$minor"; else soname="libsmartdev.so.$major"; fi
ln -sfn libsmartdev.so "$lib/$soname"
# A pkg-config file for this build (the same template bindings/c/install.sh installs), found first.
mkdir -p "$lib/pkgconfig"
sed -e "s|@PREFIX@|$lib|" -e "s|@LIBDIR@|$lib|" -e "s|@INCLUDEDIR@|$repo/include|" -e "s|@VERSION@|$version|" \
  "$repo/bindings/c/smartdev.pc.in" > "$lib/pkgconfig/smartdev.pc"
export PKG_CONFIG_PATH="$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
say "linking $("${PKG_CONFIG:-pkg-config}" --libs smartdev)  (PKG_CONFIG_PATH=$lib/pkgconfig)"

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
export SDCTL_BIN="$lib/sdctl"
say "go test -count=1 ./...  (SDCTL_BIN=$SDCTL_BIN)"
go test -count=1 ./...
say "go test -tags smartdev_ldflags -run TestVersion  (static: CGO_LDFLAGS names $lib/libsmartdev.a)"
CGO_LDFLAGS="$lib/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl" \
  go test -count=1 -tags smartdev_ldflags -run '^TestVersion$' .
say "the README's Go block: a complete program that builds and runs"
readme_dir="$(mktemp -d)"
trap 'rm -rf "$readme_dir"' EXIT
awk '/^```go$/{on=1; next} /^```$/{if (on) exit} on' "$repo/README.md" > "$readme_dir/main.go"
[ -s "$readme_dir/main.go" ] || die "the README has no Go block"
printf 'module readme\n\ngo 1.19\n\nrequire github.com/smartdev/smartdev/bindings/go v0.0.0\n\nreplace github.com/smartdev/smartdev/bindings/go => %s\n' \
  "$here" > "$readme_dir/go.mod"
(cd "$readme_dir" && gofmt -l . | grep . >/dev/null && die "the README's Go block needs gofmt" || true)
# The output goes to a file first: `./readme | grep -q` let grep leave at the first match, and the program's
# next line then died of SIGPIPE (a failure under pipefail, depending on timing).
(cd "$readme_dir" && go vet . && go build -o readme . && ./readme > out.txt && grep -q "blind at 40 %" out.txt) \
  || die "the README's Go block does not build or run as pasted: $(cat "$readme_dir/out.txt" 2>/dev/null)"
if [ "${GO_RACE:-0}" = "1" ]; then
  say "go test -race -count=1 ./..."
  go test -race -count=1 ./...
fi
say "Go binding: all checks passed"
