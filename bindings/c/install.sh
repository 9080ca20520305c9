#!/usr/bin/env bash
# Builds smartdev in release mode and installs the C library, header, pkg-config file and CMake package.
#   bindings/c/install.sh [PREFIX]        (default PREFIX: /usr/local)
# Then: cc app.c $(pkg-config --cflags --libs smartdev)   (shared; the .pc carries an rpath to PREFIX/lib, so
#       the program finds libsmartdev.so without LD_LIBRARY_PATH). Static: see examples/c/Makefile (LINK=static).
# Or with CMake (PREFIX/lib/cmake/smartdev/smartdevConfig.cmake, relocatable; see examples/cmake):
#       find_package(smartdev CONFIG REQUIRED)   (cmake -DCMAKE_PREFIX_PATH=PREFIX if it is not a system prefix)
#       target_link_libraries(app PRIVATE smartdev::smartdev)   (shared; smartdev::smartdev_static links statically)
#       find_package(smartdev 0.2 ...) accepts 0.2.x (0.x: same MINOR, the soname's ABI; from 1.0 same MAJOR).
# The shared library is installed as libsmartdev.so.X.Y.Z with the usual symlinks: libsmartdev.so.<ABI> (its
# soname, set by build.rs: 0.MINOR before 1.0, MAJOR after) -> libsmartdev.so.X.Y.Z, and libsmartdev.so ->
# libsmartdev.so.<ABI> for the linker. Programs ask the loader for libsmartdev.so.<ABI> at run time.
# The Go binding links the library this installs too (#cgo pkg-config: smartdev).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="${1:-/usr/local}"
# The .pc file (and the rpath in it) needs an absolute prefix.
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
version="$(grep -m1 '^version' "$root/Cargo.toml" | cut -d'"' -f2)"

# Without the device emulator: it is a tool, not part of the library a C program links.
cargo build --release --lib --no-default-features --manifest-path "$root/Cargo.toml"
target="${CARGO_TARGET_DIR:-$root/target}/release"

install -d "$prefix/lib/pkgconfig" "$prefix/lib/cmake/smartdev" "$prefix/include"
install -m 0644 "$target/libsmartdev.a" "$prefix/lib/"
major="${version%%.*}"
minor="${version#*.}"; minor="${minor%%.*}"
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
install -m 0755 "$target/libsmartdev.so" "$prefix/lib/libsmartdev.so.$version"
ln -sfn "libsmartdev.so.$version" "$prefix/lib/libsmartdev.so.$abi"
ln -sfn "libsmartdev.so.$abi" "$prefix/lib/libsmartdev.so"
install -m 0644 "$root/include/smartdev.h" "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|\${prefix}/lib|" -e "s|@INCLUDEDIR@|\${prefix}/include|" \
  -e "s|@VERSION@|$version|" "$root/bindings/c/smartdev.pc.in" > "$prefix/lib/pkgconfig/smartdev.pc"
# The CMake files hold no path: the config finds the prefix from its own location.
sed -e "s|@VERSION@|$version|g" -e "s|@ABI@|$abi|g" "$root/bindings/c/smartdevConfig.cmake.in" \
  > "$prefix/lib/cmake/smartdev/smartdevConfig.cmake"
# The pointer size of the library built here (the host's), for the version file's 32/64-bit check.
sizeof_void_p=$(( $(getconf LONG_BIT) / 8 ))
sed -e "s|@VERSION@|$version|g" -e "s|@ABI@|$abi|g" -e "s|@SIZEOF_VOID_P@|$sizeof_void_p|g" \
  "$root/bindings/c/smartdevConfigVersion.cmake.in" > "$prefix/lib/cmake/smartdev/smartdevConfigVersion.cmake"
echo "installed smartdev $version into $prefix (set PKG_CONFIG_PATH=$prefix/lib/pkgconfig, or CMAKE_PREFIX_PATH=$prefix, if it is not a system prefix)"
