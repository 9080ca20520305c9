package smartdev_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// TestHTTPSDevices runs against `sdctl emulate` serving HTTPS: a device pinned by its fingerprint is read
// over TLS and switched; a device pinned to another certificate is refused with ErrCertificate naming both
// fingerprints, and stays unswitched; a device with no pin is trusted at first use and kept in the trust file.
func TestHTTPSDevices(t *testing.T) {
	devices, _ := startEmulatorSpecs(t, "ShellyPlus1PM,tls", "ShellyPlus1PM,tls", "ShellyPlus1PM,tls")
	for i, d := range devices {
		if !strings.HasPrefix(d.url, "https://") || len(d.sha256) != 95 {
			t.Fatalf("device %d: %+v", i, d)
		}
	}
	trust := filepath.Join(t.TempDir(), "trust.json")
	yaml := fmt.Sprintf(`SmartDevices:
  ResponseTimeout: 2
  RetryCount: 0
  PingAllowed: false
  RefreshInterval: 0
  TrustFile: %s
  Devices:
    - {Name: Pinned, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Tls: true, CertSha256: '%s'}
    - {Name: Wrong, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Tls: true, CertSha256: '%s'}
    - {Name: FirstUse, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Tls: true}
`, trust, port(t, devices[0].url), devices[0].sha256, port(t, devices[1].url), devices[2].sha256,
		port(t, devices[2].url))
	ctl, err := smartdev.OpenYAML(yaml)
	must(t, err)
	defer ctl.Close()

	d, err := ctl.ReadDevice(smartdev.ByName("Pinned"))
	must(t, err)
	if !d.Online || d.Transport == nil || *d.Transport != "https" {
		t.Fatalf("Pinned: online %v, transport %v", d.Online, d.Transport)
	}
	state, did, err := ctl.ChangeOutput(smartdev.ByID(1), true)
	must(t, err)
	if !state || !did {
		t.Fatalf("ChangeOutput = %v, %v", state, did)
	}

	_, err = ctl.ReadDevice(smartdev.ByName("Wrong"))
	if !errors.Is(err, smartdev.ErrCertificate) {
		t.Fatalf("Wrong: %v, want ErrCertificate", err)
	}
	for _, fp := range []string{devices[1].sha256, devices[2].sha256, "CertSha256"} {
		if !strings.Contains(err.Error(), fp) {
			t.Errorf("the refusal does not name %s: %v", fp, err)
		}
	}
	if _, _, err := ctl.ChangeOutput(smartdev.ByID(2), true); !errors.Is(err, smartdev.ErrCertificate) {
		t.Errorf("switching the refused device: %v, want ErrCertificate", err)
	}
	if on, err := ctl.IsDeviceOnline(smartdev.ByName("Wrong")); err != nil || on {
		t.Errorf("Wrong online = %v, %v", on, err)
	}

	_, err = ctl.ReadDevice(smartdev.ByName("FirstUse"))
	must(t, err)
	text, err := os.ReadFile(trust)
	must(t, err)
	if !strings.Contains(string(text), "FirstUse") || !strings.Contains(string(text), devices[2].sha256) ||
		strings.Contains(string(text), "Pinned") {
		t.Errorf("the trust file: %s", text)
	}
}
