//go:build smartdev_ldflags

package smartdev

// With -tags smartdev_ldflags the binding names no library: CGO_LDFLAGS must, for a library built outside the
// repository's target/ folder (CARGO_TARGET_DIR), e.g.
//
//	CGO_LDFLAGS="$CARGO_TARGET_DIR/debug/libsmartdev.a -lgcc_s -lutil -lrt -lpthread -lm -ldl" \
//	    go test -tags smartdev_ldflags ./...
//
// (bindings/go/run-tests.sh does this when CARGO_TARGET_DIR is set.)
