//go:build !smartdev_release && !smartdev_ldflags

package smartdev

// Links the debug build of the library (cargo build --lib). Build with -tags smartdev_release to link
// target/release instead, or with -tags smartdev_ldflags to link what CGO_LDFLAGS names (another
// CARGO_TARGET_DIR).

/*
#cgo LDFLAGS: ${SRCDIR}/../../target/debug/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
*/
import "C"
