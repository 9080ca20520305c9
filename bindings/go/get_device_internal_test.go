package smartdev

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// With a buffer too small for any object, GetDevice still reads once and returns the object (from sd_device)
// with the read's outcome (from the SD_INSUFFICIENT_SIZE message): nil for a simulated device, ErrDevice and the
// offline object for a refused port.
func TestGetDeviceWithAnObjectBiggerThanItsBuffer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctl, err := OpenYAML(fmt.Sprintf(`SmartDevices:
  SimulationFileFolder: '%s'
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 0
  Devices:
    - {Name: Garden, Model: ShellyPlus1PM, Simulate: true}
    - {Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %d}
`, t.TempDir(), port))
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	saved := getDeviceBuffer
	getDeviceBuffer = 8
	defer func() { getDeviceBuffer = saved }()

	d, err := ctl.GetDevice(ByName("Garden"))
	if err != nil || d == nil || !d.Online || d.Name != "Garden" {
		t.Errorf("GetDevice(Garden) = %+v, %v", d, err)
	}
	d, err = ctl.GetDevice(ByName("Shed"))
	if !errors.Is(err, ErrDevice) {
		t.Errorf("GetDevice(Shed): %v, want ErrDevice", err)
	}
	if d == nil || d.Online || d.LastError == nil || !strings.Contains(*d.LastError, "connection refused") {
		t.Errorf("GetDevice(Shed) = %+v, want the offline object", d)
	}
}

// readOutcome turns sd_get_device's SD_INSUFFICIENT_SIZE message into the read's error (the path GetDevice
// takes for an object bigger than its buffer, where the code itself is SD_INSUFFICIENT_SIZE).
func TestReadOutcomeFromTheSizeMessage(t *testing.T) {
	if err := readOutcome("the buffer holds 8 bytes; the device object needs 900 (the device was read): call sd_device ..."); err != nil {
		t.Errorf("a successful read gave %v", err)
	}
	err := readOutcome("the buffer holds 8 bytes; the device object needs 900 (the read failed (SD_TIMEOUT: device Attic (ID: 3): GET /shelly timed out)): call sd_device ...")
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("a timed-out read gave %v, want ErrTimeout", err)
	}
	if err := readOutcome("the read failed (SD_NOT_A_CODE: x)"); !errors.Is(err, ErrDevice) {
		t.Errorf("an unrecognised code gave %v, want ErrDevice", err)
	}
}
