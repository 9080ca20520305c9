package smartdev_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// GetDevice (the spec's get_device) reads the device: a simulation-file edit shows in GetDevice, not in
// Device before it.
func TestGetDeviceReadsTheDevice(t *testing.T) {
	ctl, dir := openSim(t, false)
	d, err := ctl.GetDevice(smartdev.ByName("Garage"))
	must(t, err)
	if !d.Online || d.Name != "Garage" || d.Outputs[1].State == nil || *d.Outputs[1].State {
		t.Fatalf("GetDevice = %+v", d)
	}
	must(t, os.WriteFile(filepath.Join(dir, "Garage.json"),
		[]byte(`{"Outputs": [{"ComponentIndex": 1, "State": true}]}`), 0o644))
	last, err := ctl.Device(smartdev.ByName("Garage"))
	must(t, err)
	if last.Outputs[1].State == nil || *last.Outputs[1].State {
		t.Errorf("Device (last known) already sees the edit: %+v", last.Outputs[1])
	}
	d, err = ctl.GetDevice(smartdev.ByID(1))
	must(t, err)
	if d.Outputs[1].State == nil || !*d.Outputs[1].State {
		t.Errorf("GetDevice did not read the device: %+v", d.Outputs[1])
	}
	if d, err := ctl.GetDevice(smartdev.ByName("Nowhere")); d != nil || !errors.Is(err, smartdev.ErrNotFound) {
		t.Errorf("GetDevice of an unknown device: %+v, %v", d, err)
	}
}

// GetDevice of a device that cannot be reached (a closed port on 127.0.0.1) returns the read's error AND the
// object: Online false, LastError saying why.
func TestGetDeviceOfAnUnreachableDevice(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	must(t, l.Close())
	ctl, err := smartdev.OpenYAML(fmt.Sprintf(`SmartDevices:
  ResponseTimeout: 0.5
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 0
  Devices:
    - {Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %d}
`, port))
	must(t, err)
	defer func() { must(t, ctl.Close()) }()

	d, err := ctl.GetDevice(smartdev.ByName("Shed"))
	if !errors.Is(err, smartdev.ErrDevice) {
		t.Fatalf("GetDevice of an unreachable device: %v, want ErrDevice", err)
	}
	if !strings.Contains(err.Error(), "Shed") {
		t.Errorf("the error does not name the device: %v", err)
	}
	if d == nil || d.Name != "Shed" || d.Online || d.LastError == nil ||
		!strings.Contains(*d.LastError, "connection refused") || d.Outputs[0].State != nil {
		t.Errorf("GetDevice returned %+v with its error, want the device offline with its LastError", d)
	}
}

// GetDeviceComponent is Component under the spec's name; the 0.1.0 names GetComponent and DeviceOnline still
// work, with their 0.1.0 meaning (last known state).
func TestSpecNamesAndDeprecatedAliases(t *testing.T) {
	ctl, _ := openSim(t, false)
	_, _, err := ctl.ChangeOutput(smartdev.ByName("Door Light"), true)
	must(t, err)
	spec, err := ctl.GetDeviceComponent(smartdev.KindOutput, smartdev.ByName("Door Light"))
	must(t, err)
	rule, err := ctl.Component(smartdev.KindOutput, smartdev.ByName("Door Light"))
	must(t, err)
	old, err := ctl.GetComponent(smartdev.KindOutput, smartdev.ByName("Door Light")) //nolint:staticcheck // the deprecated alias is under test
	must(t, err)
	if !reflect.DeepEqual(spec, rule) || !reflect.DeepEqual(old, rule) {
		t.Errorf("GetDeviceComponent %+v, GetComponent %+v, Component %+v differ", spec, old, rule)
	}
	if spec.State == nil || !*spec.State {
		t.Errorf("GetDeviceComponent = %+v", spec)
	}
	online, err := ctl.DeviceOnline(smartdev.ByName("Garage")) //nolint:staticcheck // the deprecated alias is under test
	must(t, err)
	if !online {
		t.Error("DeviceOnline = false for an online simulated device")
	}
	if _, err := ctl.GetDeviceComponent(smartdev.KindOutput, smartdev.ByName("Nowhere")); !errors.Is(err, smartdev.ErrNotFound) {
		t.Errorf("GetDeviceComponent of an unknown output: %v", err)
	}
}
