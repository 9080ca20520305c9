//go:build !smartdev_release

package smartdev

// Links the debug build of the library (cargo build --lib). Build with -tags smartdev_release to link
// target/release instead.

/*
#cgo LDFLAGS: ${SRCDIR}/../../target/debug/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
*/
import "C"
