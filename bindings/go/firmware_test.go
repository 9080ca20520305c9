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
	ctl, _ := openFirmwareDevice(t, "Kitchen", 100, 300)
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

// TestFirmwareUpdateProgress: UpdateFirmwareProgress reports Started (1.4.4 to 1.5.0), Downloading with each
// new percent the device tells over its WebSocket (and maybe once without, from a look), Restarting and Back
// (1.5.0) in that order; a panic in the callback comes back after the update finished.
func TestFirmwareUpdateProgress(t *testing.T) {
	// A download of 1 s: the device tells each tenth; the first ones reach the callback long before the
	// restart. A restart long enough that the first look after it finds the device offline even on a loaded
	// machine, so Restarting is always seen.
	ctl, offer := openFirmwareDevice(t, "Attic", 1000, 1500)
	defer ctl.Close()

	str := func(s *string) string {
		if s == nil {
			return "nil"
		}
		return *s
	}
	var seen []string
	var percents []int
	after, err := ctl.UpdateFirmwareProgress(smartdev.ByName("Attic"),
		smartdev.UpdateOptions{Channel: smartdev.FirmwareStable, Timeout: time.Minute},
		func(p smartdev.UpdateProgress) {
			if p.Step == smartdev.UpdateDownloading {
				if p.From != nil || p.To != nil {
					t.Errorf("Downloading with versions: %+v", p)
				}
				if p.Percent != nil {
					percents = append(percents, *p.Percent)
				}
				return
			}
			if p.Percent != nil {
				t.Errorf("%v with a percent: %d", p.Step, *p.Percent)
			}
			seen = append(seen, fmt.Sprintf("%v %s %s", p.Step, str(p.From), str(p.To)))
		})
	must(t, err)
	if after.Current == nil || *after.Current != "1.5.0" {
		t.Fatalf("after the update: %+v", after)
	}
	want := []string{"Started 1.4.4 1.5.0", "Restarting nil nil", "Back nil 1.5.0"}
	if strings.Join(seen, "; ") != strings.Join(want, "; ") {
		t.Fatalf("progress = %q, want %q (and Downloading between Started and Restarting)", seen, want)
	}
	if len(percents) == 0 {
		t.Fatalf("no percent of the download was told")
	}
	for i, p := range percents {
		if p < 0 || p > 100 || (i > 0 && p <= percents[i-1]) {
			t.Fatalf("percents %v: each within 0-100 and rising", percents)
		}
	}

	// A panicking callback: the update still ends (the device runs 1.5.0), then the panic is raised here.
	offer()
	calls := 0
	func() {
		defer func() {
			if v := recover(); v != "stop" {
				t.Errorf("recovered %v, want the callback's panic", v)
			}
		}()
		_, _ = ctl.UpdateFirmwareProgress(smartdev.ByName("Attic"), smartdev.UpdateOptions{Timeout: time.Minute},
			func(smartdev.UpdateProgress) { calls++; panic("stop") })
		t.Error("UpdateFirmwareProgress returned instead of raising the callback's panic")
	}()
	if calls != 1 {
		t.Errorf("the callback was called %d times after it panicked once, want no more calls", calls)
	}
	info, err := ctl.CheckFirmware(smartdev.ByName("Attic"))
	must(t, err)
	if info.Current == nil || *info.Current != "1.5.0" {
		t.Fatalf("after the update with a panicking callback: %+v", info)
	}
}

// openFirmwareDevice starts one emulated ShellyPlus1PM running 1.4.4 with 1.5.0 on offer (a download of
// downloadMs, a restart of restartMs) and opens a controller on it, named name; offer() puts the same offer up again.
func openFirmwareDevice(t *testing.T, name string, downloadMs, restartMs int) (*smartdev.Controller, func()) {
	t.Helper()
	device, admin := startEmulator(t)
	yaml := fmt.Sprintf(`SmartDevices:
  ResponseTimeout: 0.4
  PingAllowed: false
  RefreshInterval: 0
  Devices:
    - {Name: %s, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}
`, name, port(t, device))
	offer := func() {
		resp, err := http.Post(fmt.Sprintf("%s/devices/0/firmware?version=1.4.4&stable=1.5.0&beta=&download_ms=%d&restart_ms=%d",
			admin, downloadMs, restartMs), "text/plain", nil)
		must(t, err)
		resp.Body.Close()
	}
	offer()
	ctl, err := smartdev.OpenYAML(yaml)
	must(t, err)
	return ctl, offer
}
