//go:build smartdev_release && !smartdev_ldflags

package smartdev

// Links the release build of the library (cargo build --lib --release).

/*
#cgo LDFLAGS: ${SRCDIR}/../../target/release/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
*/
import "C"
