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

// TestEnergyHistory runs against `sdctl emulate ShellyEMG3`: an hour of records at 1200 W (backfilled through
// the admin endpoint) with a 5-minute gap, read as records and a gap; a range with from after to is
// ErrInvalidParameter; a simulated meter is ErrNoHistory.
func TestEnergyHistory(t *testing.T) {
	device, admin := startEmulatorModel(t, "ShellyEMG3")
	now := time.Now().Unix()
	from := now/60*60 - 3600
	for _, q := range []string{"load?id=0&watts=1200", "history?backfill_s=7200",
		fmt.Sprintf("history?gap_from=%d&gap_to=%d", from+600, from+900)} {
		resp, err := http.Post(admin+"/devices/0/"+q, "text/plain", nil)
		must(t, err)
		resp.Body.Close()
	}
	dir := t.TempDir()
	yaml := fmt.Sprintf(`SmartDevices:
  PingAllowed: false
  RefreshInterval: 0
  SimulationFileFolder: '%s'
  Devices:
    - {Name: Shed, Model: ShellyEMG3, Hostname: 127.0.0.1, Port: %s, Meters: [{Name: Heat Pump}, {Name: Lights}]}
    - {Name: Sim, Model: ShellyPlus1PM, Simulate: true, Meters: [{Name: Sim Meter}]}
`, dir, port(t, device))
	ctl, err := smartdev.OpenYAML(yaml)
	must(t, err)
	defer ctl.Close()

	h, err := ctl.EnergyHistory(smartdev.ByName("Heat Pump"), time.Unix(from, 0), time.Unix(from+1800, 0))
	must(t, err)
	if len(h.Channels) != 1 || h.Channels[0] != "Heat Pump" || !h.From.Equal(time.Unix(from, 0)) {
		t.Fatalf("history: %+v", h)
	}
	if n := len(h.Records()); n != 25 {
		t.Fatalf("%d records, want 25", n)
	}
	gaps := h.Gaps()
	if len(gaps) != 1 || gaps[0].Start.Unix() != from+600 || gaps[0].End.Unix() != from+900 || gaps[0].Channels != nil {
		t.Fatalf("gaps: %+v", gaps)
	}
	r := h.Records()[0]
	if r.Period != 60 || r.Channels[0].Energy == nil || *r.Channels[0].Energy != 20 || r.Channels[0].MinCurrent == nil {
		t.Fatalf("first record: %+v", r)
	}
	if tot := h.TotalEnergy(); tot[0] == nil || *tot[0] != 500 {
		t.Fatalf("total: %v", tot)
	}

	_, err = ctl.EnergyHistory(smartdev.ByName("Heat Pump"), time.Unix(from, 0), time.Unix(from-60, 0))
	if !errors.Is(err, smartdev.ErrInvalidParameter) || !strings.Contains(err.Error(), "not before") {
		t.Errorf("an empty range: %v, want ErrInvalidParameter", err)
	}
	_, err = ctl.EnergyHistory(smartdev.ByName("Sim Meter"), time.Unix(from, 0), time.Unix(from+60, 0))
	if !errors.Is(err, smartdev.ErrNoHistory) || !strings.Contains(err.Error(), "keeps no history") {
		t.Errorf("a simulated meter: %v, want ErrNoHistory", err)
	}
}
