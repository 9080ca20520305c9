package smartdev

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"runtime"
	"time"
	"unsafe"
)

// Discovered is a device found on the local network (mDNS) and confirmed with one HTTP request.
type Discovered struct {
	// MacAddress is "AA:BB:CC:DD:EE:FF", or nil when the device did not tell (a Tasmota with a web password).
	MacAddress *string `json:"MacAddress"`
	// Model is a model id of the model library or "Tasmota"; nil when the library does not know the device's model.
	Model *string `json:"Model"`
	// ReportedModel is what the device calls itself (/shelly model or type).
	ReportedModel *string `json:"ReportedModel"`
	// Generation is 1 (Gen1) or 2, 3, 4 (Gen2+); nil for Tasmota.
	Generation *int `json:"Generation"`
	// Address is the IP address the device answered on.
	Address string `json:"Address"`
	// Port is the port the device answered on.
	Port int `json:"Port"`
	// Name is the device's own name, else its mDNS instance name.
	Name string `json:"Name"`
	// Hostname is the mDNS host name without .local.
	Hostname string `json:"Hostname"`
	// Firmware is the firmware version as reported.
	Firmware *string `json:"Firmware"`
	// AuthRequired says whether the device asks for a password (nil: it did not say).
	AuthRequired *bool `json:"AuthRequired"`
	// CertSha256 is the SHA-256 fingerprint of the certificate of a device that answered over HTTPS (nil: over
	// HTTP); check it against the device's web page and configure it as CertSha256 with Tls: true.
	CertSha256 *string `json:"CertSha256"`
	// Configured is false or the configured device's name (Controller.Discover only; nil from Discover).
	Configured any `json:"Configured,omitempty"`
}

// discoverBuffer is the first buffer given to sd_discover; a bigger result is fetched with sd_discovered on the
// same OS thread, so the network is searched once per call.
const discoverBuffer = 64 << 10

func discover(p *C.sd_controller, timeout time.Duration) ([]Discovered, error) {
	ms := timeout.Milliseconds()
	if ms < 1 || ms > 600000 {
		return nil, &Error{Code: int(C.SD_INVALID_PARAMETER), Message: "the timeout must be 1 ms to 10 min (3 s is usual)"}
	}
	// sd_discovered answers for the OS thread that discovered.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, discoverBuffer)
	var needed C.size_t
	var msg *C.char
	r := C.sdgo_discover(p, C.uint32_t(ms), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &needed, &msg)
	var data []byte
	switch r {
	case C.SD_OK:
		free(msg)
		n := bytes.IndexByte(buf, 0)
		if n < 0 {
			n = len(buf)
		}
		data = buf[:n]
	case C.SD_INSUFFICIENT_SIZE:
		free(msg)
		var err error
		data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
			return C.sdgo_discovered(b, n, nd, m)
		})
		if err != nil {
			return nil, err
		}
	default:
		return nil, newError(r, msg)
	}
	var found []Discovered
	if err := json.Unmarshal(data, &found); err != nil {
		return nil, err
	}
	return found, nil
}

// Discover finds Shelly and Tasmota devices on the local network: it listens for mDNS announcements for timeout
// on the interfaces with a private or link-local address, then confirms each with one HTTP request (2 s more
// for each 32 candidates). Needs no configuration. Sends multicast.
func Discover(timeout time.Duration) ([]Discovered, error) {
	return discover(nil, timeout)
}

// Discover is the package's Discover with each result's Configured set: false or the name of the configured
// device it is (by MAC when known, else by address and port).
func (c *Controller) Discover(timeout time.Duration) ([]Discovered, error) {
	var found []Discovered
	err := c.use(func(p *C.sd_controller) (err error) {
		found, err = discover(p, timeout)
		return err
	})
	return found, err
}
