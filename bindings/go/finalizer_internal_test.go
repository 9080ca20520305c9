package smartdev

import (
	"runtime"
	"runtime/cgo"
	"testing"
	"time"
)

// registered reports whether the logger handle is still live (Close deletes it; Value panics then).
func registered(h cgo.Handle) (live bool) {
	defer func() {
		if recover() != nil {
			live = false
		}
	}()
	h.Value()
	return true
}

// A controller that is never closed is closed by its finalizer once unreachable (seen here through its
// logger handle, which Close deletes).
func TestFinalizerClosesForgottenController(t *testing.T) {
	yaml := "SmartDevices:\n  SimulationFileFolder: '" + t.TempDir() + "'\n  RefreshInterval: 0\n  Devices:\n" +
		"    - {Name: Lonely, Model: ShellyPlus1PM, Simulate: true}\n"
	h := func() cgo.Handle {
		c, err := OpenYAML(yaml, WithLogger(func(int, string) {}))
		if err != nil {
			t.Fatal(err)
		}
		if !registered(c.logger) {
			t.Fatal("the logger is not registered")
		}
		return c.logger
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if !registered(h) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the forgotten controller was not closed by its finalizer within 5 s")
}
