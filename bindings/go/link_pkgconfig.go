//go:build !smartdev_ldflags

package smartdev

// Links the libsmartdev that pkg-config finds as "smartdev": the one bindings/c/install.sh installed (set
// PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix pkg-config does not search), or the build
// bindings/go/run-tests.sh wrote a smartdev.pc for. Its Libs carry an rpath, so programs find
// libsmartdev.so at run time. Build with -tags smartdev_ldflags to name the library in CGO_LDFLAGS instead
// (for example to link libsmartdev.a statically).

/*
#cgo pkg-config: smartdev
*/
import "C"
