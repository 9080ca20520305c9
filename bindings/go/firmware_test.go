package smartdev_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// TestFirmwareCheckAndUpdate runs against `sdctl emulate`: the admin endpoint offers 1.5.0, CheckFirmware
// reports it (nil beta), UpdateFirmware follows the device through its restart to 1.5.0, and a second update
// with nothing on offer is ErrFirmware.
func TestFirmwareCheckAndUpdate(t *testing.T) {
	device, admin := startEmulator(t)
	resp, err := http.Post(admin+"/devices/0/firmware?version=1.4.4&stable=1.5.0&beta=&download_ms=100&restart_ms=300",
		"text/plain", nil)
	must(t, err)
	resp.Body.Close()
	yaml := fmt.Sprintf(`SmartDevices:
  ResponseTimeout: 0.4
  PingAllowed: false
  RefreshInterval: 0
  Devices:
    - {Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}
`, port(t, device))
	ctl, err := smartdev.OpenYAML(yaml)
	must(t, err)
	defer ctl.Close()

	info, err := ctl.CheckFirmware(smartdev.ByName("Kitchen"))
	must(t, err)
	if info.Current == nil || *info.Current != "1.4.4" || info.Stable == nil || *info.Stable != "1.5.0" ||
		info.Beta != nil || !info.Checked {
		t.Fatalf("CheckFirmware = %+v", info)
	}
	after, err := ctl.UpdateFirmware(smartdev.ByName("Kitchen"),
		smartdev.UpdateOptions{Channel: smartdev.FirmwareStable, Timeout: time.Minute})
	must(t, err)
	if after.Current == nil || *after.Current != "1.5.0" || after.Stable != nil {
		t.Fatalf("after the update: %+v", after)
	}
	_, err = ctl.UpdateFirmware(smartdev.ByName("Kitchen"), smartdev.UpdateOptions{})
	if !errors.Is(err, smartdev.ErrFirmware) || !strings.Contains(err.Error(), "no newer stable version") {
		t.Fatalf("an update with nothing on offer: %v, want ErrFirmware", err)
	}
	if _, err := ctl.UpdateFirmware(smartdev.ByID(1), smartdev.UpdateOptions{Channel: 9}); !errors.Is(err, smartdev.ErrInvalidParameter) {
		t.Errorf("a bad channel: %v, want ErrInvalidParameter", err)
	}
}
