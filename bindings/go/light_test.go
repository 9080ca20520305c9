package smartdev_test

import (
	"errors"
	"strings"
	"testing"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// A simulated tunable-white bulb: SetLight returns what the file now holds; a colour or an out-of-range
// temperature is refused with the capability or the range.
func TestSetLightOnASimulatedBulb(t *testing.T) {
	dir := t.TempDir()
	ctl, err := smartdev.OpenYAML("SmartDevices:\n  SimulationFileFolder: '" + dir + "'\n  RefreshInterval: 0\n  Devices:\n" +
		"    - {Name: Bulb, Model: ShellyDuoBulbG3, Simulate: true, Outputs: [{Name: Bulb Light}]}\n")
	must(t, err)
	defer ctl.Close()
	on, b, k := true, 40.0, uint32(3000)
	o, err := ctl.SetLight(smartdev.ByName("Bulb Light"), smartdev.LightChange{On: &on, Brightness: &b, Temperature: &k})
	must(t, err)
	if o.State == nil || !*o.State || o.Brightness == nil || *o.Brightness != 40 ||
		o.ColorTemperature == nil || *o.ColorTemperature != 3000 || o.Rgb != nil {
		t.Errorf("light after SetLight = %+v", o)
	}
	rgb := [3]uint8{255, 0, 0}
	if _, err := ctl.SetLight(smartdev.ByName("Bulb Light"), smartdev.LightChange{RGB: &rgb}); !errors.Is(err, smartdev.ErrUnsupported) ||
		!strings.Contains(err.Error(), "ShellyDuoBulbG3") {
		t.Errorf("colour on a tunable-white bulb: %v", err)
	}
	cold := uint32(9000)
	if _, err := ctl.SetLight(smartdev.ByName("Bulb Light"), smartdev.LightChange{Temperature: &cold}); !errors.Is(err, smartdev.ErrInvalidParameter) ||
		!strings.Contains(err.Error(), "2700 to 6500 K") {
		t.Errorf("9000 K: %v", err)
	}
}
