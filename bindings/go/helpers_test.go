package smartdev_test

import (
	"fmt"
	"testing"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// simConfig is a configuration of one simulated ShellyPlus2PM ("Garage", ID 1) with custom attributes, its
// simulation files in dir, and the webhook listener on a free port when webhooks is true.
func simConfig(dir string, webhooks bool) string {
	hooks := ""
	if webhooks {
		hooks = "  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n"
	}
	return fmt.Sprintf(`SmartDevices:
  SimulationFileFolder: '%s'
  RefreshInterval: 0
%s  Devices:
    - Name: Garage
      Model: ShellyPlus2PM
      Simulate: true
      Location: Backyard
      Outputs: [{Name: Door Light, Group: Lights}, {Name: Compressor, Group: Tools}]
      Meters: [{Name: Door Meter, MockRate: 1}, {Name: Compressor Meter}]
`, dir, hooks)
}

// schema defines the custom attributes simConfig uses: Location on devices, Group on outputs.
const schema = `SmartDevices:
  type: dict
  schema:
    Devices:
      type: list
      schema:
        type: dict
        schema:
          Location: {type: string}
          Outputs:
            type: list
            schema:
              type: dict
              schema:
                Group: {type: string}
`

// openSim opens simConfig in a fresh temporary folder; the controller is closed when the test ends.
func openSim(t *testing.T, webhooks bool, opts ...smartdev.Option) (*smartdev.Controller, string) {
	t.Helper()
	dir := t.TempDir()
	ctl, err := smartdev.OpenYAML(simConfig(dir, webhooks), append([]smartdev.Option{smartdev.WithSchemaYAML(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("OpenYAML: %v", err)
	}
	t.Cleanup(func() {
		if err := ctl.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ctl, dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
