package smartdev_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// startEmulator runs `$SDCTL_BIN emulate ShellyPlus1PM` and returns the device's and the admin endpoint's
// base URLs ("http://127.0.0.1:<port>"). The process is killed when the test ends.
func startEmulator(t *testing.T) (device, admin string) {
	t.Helper()
	return startEmulatorModel(t, "ShellyPlus1PM")
}

// startEmulatorModel is startEmulator with another model.
func startEmulatorModel(t *testing.T, model string) (device, admin string) {
	t.Helper()
	devices, admin := startEmulatorSpecs(t, model)
	return devices[0].url, admin
}

// emulated is one device `sdctl emulate` serves: its base URL and, for a tls device, its certificate's
// SHA-256 fingerprint ("AB:CD:…").
type emulated struct{ url, sha256 string }

// startEmulatorSpecs runs `$SDCTL_BIN emulate SPEC…` (e.g. "ShellyPlus1PM,tls") and returns its devices in
// order and the admin endpoint's base URL. The process is killed when the test ends.
func startEmulatorSpecs(t *testing.T, specs ...string) (devices []emulated, admin string) {
	t.Helper()
	bin := os.Getenv("SDCTL_BIN")
	if bin == "" {
		t.Skip("SDCTL_BIN is not set (run-tests.sh sets it to target/debug/sdctl)")
	}
	cmd := exec.Command(bin, append([]string{"emulate"}, specs...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(10 * time.Second)
	for admin == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the emulator exited before printing its endpoints")
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && strings.HasPrefix(f[2], "http"):
				devices = append(devices, emulated{url: f[2]})
			case len(f) == 4 && strings.HasPrefix(f[2], "https://") && strings.HasPrefix(f[3], "sha256="):
				devices = append(devices, emulated{url: f[2], sha256: strings.TrimPrefix(f[3], "sha256=")})
			case len(f) == 2 && f[0] == "admin":
				admin = f[1]
			default:
				t.Fatalf("unexpected emulator line %q", line)
			}
		case <-timeout:
			t.Fatal("the emulator printed no endpoints within 10 s")
		}
	}
	go func() { // keep draining stdout so the emulator never blocks on a full pipe
		for range lines {
		}
	}()
	if len(devices) != len(specs) {
		t.Fatalf("the emulator printed %d device lines for %d specs", len(devices), len(specs))
	}
	return devices, admin
}

func port(t *testing.T, url string) string {
	t.Helper()
	i := strings.LastIndexByte(url, ':')
	if i < 0 {
		t.Fatalf("no port in %q", url)
	}
	return url[i+1:]
}

func TestEmulatedDevice(t *testing.T) {
	device, admin := startEmulator(t)
	yaml := fmt.Sprintf(`SmartDevices:
  ResponseTimeout: 0.3
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 0
  Devices:
    - {Name: Plug, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s}
`, port(t, device))
	ctl, err := smartdev.OpenYAML(yaml)
	must(t, err)
	defer ctl.Close()

	_, did, err := ctl.ChangeOutput(smartdev.ByID(1), true)
	must(t, err)
	if !did {
		t.Error("switching the emulated output on: did = false")
	}
	if _, did, err = ctl.ChangeOutput(smartdev.ByID(1), true); err != nil || did {
		t.Errorf("switching on again: %v, %v", did, err)
	}
	d, err := ctl.ReadDevice(smartdev.ByName("Plug"))
	must(t, err)
	if !d.Online || d.Protocol == nil || *d.Protocol != "RPC" || len(d.Outputs) != 1 ||
		d.Outputs[0].State == nil || !*d.Outputs[0].State {
		t.Errorf("device = %+v", d)
	}
	m, err := ctl.Meter(smartdev.ByID(1))
	must(t, err)
	if m.Power == nil || m.Voltage == nil || m.Energy == nil || *m.Voltage <= 0 {
		t.Errorf("meter reading = %+v", m)
	}

	// Blackhole the device: it accepts connections but never answers.
	resp, err := http.Post(admin+"/devices/0/fault?kind=blackhole", "text/plain", nil)
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin fault: status %d", resp.StatusCode)
	}
	start := time.Now()
	_, err = ctl.ReadDevice(smartdev.ByName("Plug"))
	if !errors.Is(err, smartdev.ErrTimeout) {
		t.Fatalf("ReadDevice on a blackholed device: %v, want ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "Plug") {
		t.Errorf("timeout message does not name the device: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the timeout took %v with ResponseTimeout 0.3 and RetryCount 0", d)
	}
	if _, _, err := ctl.ChangeOutput(smartdev.ByID(1), false); !errors.Is(err, smartdev.ErrTimeout) {
		t.Errorf("ChangeOutput on a blackholed device: %v", err)
	}
	if online, err := ctl.ReadDeviceOnline(smartdev.ByName("Plug")); err != nil || online {
		t.Errorf("ReadDeviceOnline on a blackholed device: %v, %v; want false, nil", online, err)
	}
	if err := ctl.RefreshAll(); !errors.Is(err, smartdev.ErrTimeout) {
		t.Errorf("RefreshAll with a blackholed device: %v", err)
	}
}

// TestWrongDeviceAtTheAddress: the configured MAC is not the emulated device's, so the device at the address
// is another one: switching it fails with ErrWrongDevice, whose message names both MACs.
func TestWrongDeviceAtTheAddress(t *testing.T) {
	device, _ := startEmulator(t)
	yaml := fmt.Sprintf(`SmartDevices:
  ResponseTimeout: 0.3
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 0
  Channel: http
  FollowMoves: false
  Devices:
    - {Name: Plug, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, MAC: a8-03-2a-b1-23-45}
`, port(t, device))
	ctl, err := smartdev.OpenYAML(yaml)
	must(t, err)
	defer ctl.Close()
	_, _, err = ctl.ChangeOutput(smartdev.ByID(1), true)
	if !errors.Is(err, smartdev.ErrWrongDevice) {
		t.Fatalf("ChangeOutput on another device at the address: %v, want ErrWrongDevice", err)
	}
	if !strings.Contains(err.Error(), "A8:03:2A:B1:23:45") {
		t.Errorf("the message does not name the configured MAC: %v", err)
	}
	if _, err := ctl.ReadDevice(smartdev.ByName("Plug")); !errors.Is(err, smartdev.ErrWrongDevice) {
		t.Errorf("ReadDevice: %v, want ErrWrongDevice", err)
	}
}
