package smartdev

import (
	"errors"
	"testing"
	"time"
)

// Discovery itself sends multicast, so it is tested only inside network namespaces; here: the refusals that
// use no network.
func TestDiscoverRefusesTimeoutsOutOfRange(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, 11 * time.Minute} {
		if _, err := Discover(d); !errors.Is(err, ErrInvalidParameter) {
			t.Fatalf("Discover(%v) = %v, want ErrInvalidParameter", d, err)
		}
	}
}
