#!/usr/bin/env bash
# Builds smartdev in release mode and installs the C library, header and pkg-config file.
#   bindings/c/install.sh [PREFIX]        (default PREFIX: /usr/local)
# Then: cc app.c $(pkg-config --cflags --libs smartdev)            (shared)
#       cc app.c $(pkg-config --cflags --libs --static smartdev)   (static, with LD flags below)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="${1:-/usr/local}"
version="$(grep -m1 '^version' "$root/Cargo.toml" | cut -d'"' -f2)"

# Without the device emulator: it is a tool, not part of the library a C program links.
cargo build --release --lib --no-default-features --manifest-path "$root/Cargo.toml"
target="${CARGO_TARGET_DIR:-$root/target}/release"

install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0644 "$target/libsmartdev.a" "$prefix/lib/"
install -m 0755 "$target/libsmartdev.so" "$prefix/lib/"
install -m 0644 "$root/include/smartdev.h" "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$root/bindings/c/smartdev.pc.in" \
  > "$prefix/lib/pkgconfig/smartdev.pc"
echo "installed smartdev $version into $prefix (set PKG_CONFIG_PATH=$prefix/lib/pkgconfig if it is not a system prefix)"
