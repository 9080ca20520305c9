package smartdev

/*
#include "sdgo.h"
*/
import "C"

import (
	"encoding/json"
	"time"
)

// FirmwareInfo is what a firmware check found (CheckFirmware): the version a device runs and the newer ones
// it can install. Unknown is nil: Stable and Beta are nil when nothing newer is on offer, and always for
// Tasmota, which cannot tell (Checked false).
type FirmwareInfo struct {
	// Device is the device's name.
	Device string `json:"Device"`
	// Current is the version it runs ("1.4.4").
	Current *string `json:"Current"`
	// Stable is a newer stable version on offer.
	Stable *string `json:"Stable"`
	// Beta is a newer beta version on offer.
	Beta *string `json:"Beta"`
	// Checked says whether the device can tell which versions are on offer.
	Checked bool `json:"Checked"`
}

// FirmwareChannel says which firmware an update installs.
type FirmwareChannel int

const (
	// FirmwareStable is the latest stable release.
	FirmwareStable FirmwareChannel = C.SD_FIRMWARE_STABLE
	// FirmwareBeta is the latest beta (Shelly only).
	FirmwareBeta FirmwareChannel = C.SD_FIRMWARE_BETA
)

// UpdateOptions says how to update: the channel, whether other updates may run at the same time (by default
// a second update is refused with ErrFirmware), and how long to wait for the device to come back (0: 10
// minutes).
type UpdateOptions struct {
	Channel         FirmwareChannel
	AllowConcurrent bool
	Timeout         time.Duration
}

// CheckFirmware asks the device which firmware it runs and which newer versions it can install (device I/O).
func (c *Controller) CheckFirmware(id Identity) (*FirmwareInfo, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) (err error) {
			data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
				return C.sdgo_check_firmware(p, name, num, b, n, nd, m)
			})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	info := new(FirmwareInfo)
	if err := json.Unmarshal(data, info); err != nil {
		return nil, err
	}
	return info, nil
}

// UpdateFirmware installs the latest firmware of opts.Channel and waits until the device runs it, following
// it through its restart (expected; not logged as a warning). It blocks for as long as the update takes and
// returns CheckFirmware's answer afterwards. Failures to end with the new version are ErrFirmware (the
// message says why); a device that cannot be asked gives its usual error.
func (c *Controller) UpdateFirmware(id Identity, opts UpdateOptions) (*FirmwareInfo, error) {
	if opts.Channel != FirmwareStable && opts.Channel != FirmwareBeta {
		return nil, errInvalid("UpdateOptions.Channel %d is not FirmwareStable or FirmwareBeta", opts.Channel)
	}
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			r := C.sdgo_update_firmware(p, name, num, C.int(opts.Channel), C.bool(opts.AllowConcurrent),
				C.double(opts.Timeout.Seconds()), &msg)
			return check(r, msg)
		})
	})
	if err != nil {
		return nil, err
	}
	return c.CheckFirmware(id)
}
