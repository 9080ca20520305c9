package smartdev

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Error is a failure reported by the library: Code is the sd_result number (see include/smartdev.h) and
// Message the library's explanation (sd_last_error_message of the failing call).
//
// Compare with errors.Is against the sentinels: errors.Is(err, ErrTimeout) is true for every *Error whose
// Code is SD_TIMEOUT, whatever its message.
type Error struct {
	// Code is the sd_result number, e.g. 300 for SD_TIMEOUT.
	Code int
	// Message is the library's message; it may be empty.
	Message string
}

// Error renders "smartdev: SD_TIMEOUT: <message>".
func (e *Error) Error() string {
	if e.Message == "" {
		return "smartdev: " + CodeName(e.Code)
	}
	return fmt.Sprintf("smartdev: %s: %s", CodeName(e.Code), e.Message)
}

// Is reports whether target is an *Error with the same Code, so that errors.Is(err, ErrNotFound) matches
// any not-found failure.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && e != nil && t != nil && t.Code == e.Code
}

// CodeName is the library's name of a result code (e.g. "SD_TIMEOUT"), or "SD_UNRECOGNISED" for a number
// that is not a code ("SD_UNKNOWN" is the name of ErrUnknown's code).
func CodeName(code int) string {
	return C.GoString(C.sd_result_name(C.int(code)))
}

func sentinel(code C.sd_result, what string) *Error {
	return &Error{Code: int(code), Message: what}
}

// Sentinel errors, one per sd_result code a call can return to Go code. Use them with errors.Is; the errors
// actually returned carry the library's specific message.
var (
	// ErrNullParameter: a required pointer argument was NULL (a binding bug if it ever shows).
	ErrNullParameter = sentinel(C.SD_NULL_PARAMETER, "a required argument is missing")
	// ErrInvalidParameter: an argument is not acceptable (a NUL byte in a string, an unknown kind or mode, an
	// Identity not built with ByName or ByID, ...).
	ErrInvalidParameter = sentinel(C.SD_INVALID_PARAMETER, "an argument is not acceptable")
	// ErrNotFound: no device, component or model matches the identity (also: the webhook listener is off).
	ErrNotFound = sentinel(C.SD_NOT_FOUND, "not found")
	// ErrClosed: the controller was closed (reported by the binding itself; the C API cannot see a closed
	// controller).
	ErrClosed = sentinel(C.SD_CLOSED, "the controller is closed")
	// ErrPanic: the library caught an internal panic.
	ErrPanic = sentinel(C.SD_PANIC, "internal error in the library")
	// ErrConfig: the configuration or a schema extension could not be read or failed validation.
	ErrConfig = sentinel(C.SD_CONFIG, "configuration error")
	// ErrInit: valid settings could not be turned into an installation (component counts, unknown model, ...).
	ErrInit = sentinel(C.SD_INIT, "the installation could not be set up")
	// ErrLogger: the logger could not be set up.
	ErrLogger = sentinel(C.SD_LOGGER, "the logger could not be set up")
	// ErrModelLibrary: the model library could not be loaded.
	ErrModelLibrary = sentinel(C.SD_MODEL_LIBRARY, "the model library could not be loaded")
	// ErrTimeout: a device did not answer in time, after all retries.
	ErrTimeout = sentinel(C.SD_TIMEOUT, "the device did not answer in time")
	// ErrOffline: the device is marked offline and the operation was not attempted (a simulated device whose
	// file says Online: false); an unreachable real device gives ErrTimeout or ErrDevice.
	ErrOffline = sentinel(C.SD_OFFLINE, "the device is offline")
	// ErrDevice: the device could not be used: the connection failed (refused, reset, cut short, host not
	// found) or it answered with an error or an unusable answer (HTTP error, redirect, invalid JSON, RPC error).
	ErrDevice = sentinel(C.SD_DEVICE, "the device could not be used")
	// ErrUnsupported: the operation is not possible on this device.
	ErrUnsupported = sentinel(C.SD_UNSUPPORTED, "not supported by this device")
	// ErrSimulation: a simulation file is unreadable.
	ErrSimulation = sentinel(C.SD_SIMULATION, "a simulation file is unreadable")
	// ErrWorkerFailed: the device's driver panicked (a bug); it is offline until rebuilt after a back-off.
	ErrWorkerFailed = sentinel(C.SD_WORKER_FAILED, "the device's worker failed")
	// ErrAuth: the device refused the credentials.
	ErrAuth = sentinel(C.SD_AUTH, "the device refused the credentials")
	// ErrUnknown: the value is unknown because the device has not reported it (not read yet, a sleeping
	// device, or a component the device does not have in its current profile). OutputState, InputState and
	// SensorValue return it rather than false or 0; in the structs the value is nil.
	ErrUnknown = sentinel(C.SD_UNKNOWN, "the device has not reported this value")
	// ErrWrongDevice: another device answers at the device's address (its MAC is not the configured one, or
	// not the one the device had earlier): nothing was switched or read from it; the device is offline until
	// the right MAC answers there again. The message names both MACs and the address.
	ErrWrongDevice = sentinel(C.SD_WRONG_DEVICE, "another device answers at the device's address")
	// ErrSleeping: the device sleeps between reports (a battery device reporting through the outbound
	// WebSocket): the command was not sent. Its Device keeps the last report (Sleeping, LastSeen).
	ErrSleeping = sentinel(C.SD_SLEEPING, "the device is asleep")
	// ErrFirmware: a firmware update did not end with the device running the new version, or was not
	// started (nothing newer on offer, another update running, refused by the device, not back within the
	// timeout, back with the old version). The message says which.
	ErrFirmware = sentinel(C.SD_FIRMWARE, "the firmware update did not end with the new version")
	// ErrCertificate: the device's TLS certificate was refused (an HTTPS device): not the pinned one, or not
	// valid under the configured CA. The message names both fingerprints and how to accept a new certificate
	// (sdctl trust DEVICE).
	ErrCertificate = sentinel(C.SD_CERTIFICATE, "the device's TLS certificate was refused")
	// ErrNoHistory: the meter keeps no energy history of its own (a switch's or plug's meter, Tasmota,
	// simulated devices): there is no history to read, rather than an empty one that would look like no energy.
	ErrNoHistory = sentinel(C.SD_NO_HISTORY, "this device keeps no history")
	// ErrIO: a local I/O failure (a file, a socket, a thread).
	ErrIO = sentinel(C.SD_IO, "local I/O failure")
)

// newError turns a failed result and the message captured by the sdgo_ wrapper (which it frees) into an
// *Error.
func newError(r C.sd_result, msg *C.char) error {
	e := &Error{Code: int(r)}
	if msg != nil {
		e.Message = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return e
}

// check is newError for any result: nil on SD_OK.
func check(r C.sd_result, msg *C.char) error {
	if r == C.SD_OK {
		if msg != nil {
			C.free(unsafe.Pointer(msg))
		}
		return nil
	}
	return newError(r, msg)
}

// errInvalid is an ErrInvalidParameter found by the binding itself.
func errInvalid(format string, args ...interface{}) error {
	return &Error{Code: int(C.SD_INVALID_PARAMETER), Message: fmt.Sprintf(format, args...)}
}
