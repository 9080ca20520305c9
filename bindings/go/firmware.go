package smartdev

/*
#include "sdgo.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"runtime/cgo"
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
	return c.UpdateFirmwareProgress(id, opts, nil)
}

// UpdateStep is a step of a firmware update (UpdateProgress.Step).
type UpdateStep int

const (
	// UpdateStarted: the device accepted the request (From: the version it ran, To: the one it installs).
	UpdateStarted UpdateStep = C.SD_UPDATE_STARTED
	// UpdateDownloading: the device still answers and is downloading or installing (Percent: how far, where
	// it tells).
	UpdateDownloading UpdateStep = C.SD_UPDATE_DOWNLOADING
	// UpdateRestarting: the device stopped answering; it restarts (expected).
	UpdateRestarting UpdateStep = C.SD_UPDATE_RESTARTING
	// UpdateBack: the device answers again (To: the version it runs now).
	UpdateBack UpdateStep = C.SD_UPDATE_BACK
)

// String names the step ("Started", "Downloading", "Restarting", "Back").
func (s UpdateStep) String() string {
	switch s {
	case UpdateStarted:
		return "Started"
	case UpdateDownloading:
		return "Downloading"
	case UpdateRestarting:
		return "Restarting"
	case UpdateBack:
		return "Back"
	}
	return fmt.Sprintf("UpdateStep(%d)", int(s))
}

// UpdateProgress is one step of a firmware update. Unknown versions, and those the step does not carry, are
// nil: Started has From and To, Back has To (the version the device runs now), the others neither. Percent is
// how much of the image is in (0-100) on a Downloading step where the device told it (Gen2+ over its push
// channel: one step per new percent), else nil.
type UpdateProgress struct {
	Step    UpdateStep
	From    *string
	To      *string
	Percent *int
}

// UpdateFirmwareProgress is UpdateFirmware that also calls progress for each step of the update (Started,
// possibly Downloading (again for each new percent), Restarting, Back), in order, on the calling goroutine, before it returns. A nil
// progress makes it UpdateFirmware. progress must not close the controller. A panic in progress does not
// reach the library: the update runs to its end, then the panic is raised again here.
func (c *Controller) UpdateFirmwareProgress(id Identity, opts UpdateOptions, progress func(UpdateProgress)) (*FirmwareInfo, error) {
	if opts.Channel != FirmwareStable && opts.Channel != FirmwareBeta {
		return nil, errInvalid("UpdateOptions.Channel %d is not FirmwareStable or FirmwareBeta", opts.Channel)
	}
	var listener *progressListener
	var handle C.uintptr_t // 0: no callback
	if progress != nil {
		listener = &progressListener{fn: progress}
		h := cgo.NewHandle(listener)
		defer h.Delete() // after the C call: the library calls back only before it returns
		handle = C.uintptr_t(h)
	}
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			r := C.sdgo_update_firmware_progress(p, name, num, C.int(opts.Channel), C.bool(opts.AllowConcurrent),
				C.double(opts.Timeout.Seconds()), handle, &msg)
			return check(r, msg)
		})
	})
	if listener != nil && listener.panicked {
		panic(listener.panicValue)
	}
	if err != nil {
		return nil, err
	}
	return c.CheckFirmware(id)
}
