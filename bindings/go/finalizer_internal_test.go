package smartdev

import (
	"runtime"
	"testing"
	"time"
)

func registered(key uintptr) bool {
	logMu.RLock()
	defer logMu.RUnlock()
	_, ok := logFns[key]
	return ok
}

// A controller that is never closed is closed by its finalizer once unreachable (seen here through its
// logger registration, which Close removes).
func TestFinalizerClosesForgottenController(t *testing.T) {
	yaml := "SmartDevices:\n  SimulationFileFolder: '" + t.TempDir() + "'\n  RefreshInterval: 0\n  Devices:\n" +
		"    - {Name: Lonely, Model: ShellyPlus1PM, Simulate: true}\n"
	key := func() uintptr {
		c, err := OpenYAML(yaml, WithLogger(func(int, string) {}))
		if err != nil {
			t.Fatal(err)
		}
		if !registered(c.logKey) {
			t.Fatal("the logger is not registered")
		}
		return c.logKey
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if !registered(key) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the forgotten controller was not closed by its finalizer within 5 s")
}
