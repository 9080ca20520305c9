//go:build smartdev_ldflags

package smartdev

// With -tags smartdev_ldflags the binding names no library and pkg-config is not used: CGO_LDFLAGS must, e.g.
// to link the static library into a self-contained program:
//
//	CGO_LDFLAGS="/usr/local/lib/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl" \
//	    go build -tags smartdev_ldflags ./...
//
// (bindings/go/run-tests.sh checks this way of linking with the library it just built.)
