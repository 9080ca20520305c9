package smartdev

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"
)

// initialBuffer is the first size tried for text and JSON answers; a bigger one is allocated when the library
// says so (SD_INSUFFICIENT_SIZE with the size needed).
const initialBuffer = 16 << 10

// Option configures Open and OpenYAML.
type Option func(*options)

type options struct {
	schemaPath, schemaYAML, modelsPath *string
	noWake                             bool
	logger                             func(level int, msg string)
	logLevel                           int
}

// WithSchemaFile merges a validation-dictionary extension file (YAML or JSON) that defines custom attributes.
func WithSchemaFile(path string) Option { return func(o *options) { o.schemaPath = &path } }

// WithSchemaYAML merges a validation-dictionary extension given as YAML text.
func WithSchemaYAML(text string) Option { return func(o *options) { o.schemaYAML = &text } }

// WithModelsFile uses the model library in path instead of the built-in one.
func WithModelsFile(path string) Option { return func(o *options) { o.modelsPath = &path } }

// WithoutWake opens the controller without a wake flag. Events then polls the event queue every 200 ms
// instead of waiting on the wake descriptor.
func WithoutWake() Option { return func(o *options) { o.noWake = true } }

// WithLogger sends the library's log records (up to LogInfo, see WithLogLevel) to fn instead of the
// configuration's Files block. fn is called from library threads; the binding serialises the calls, so fn
// need not be reentrant, but it must return quickly and must not call the Controller (that could deadlock).
// A panic in fn is recovered and dropped. fn receives this controller's records only, and is not called
// once Close returns.
func WithLogger(fn func(level int, msg string)) Option { return func(o *options) { o.logger = fn } }

// WithLogLevel sets the highest level forwarded to the WithLogger function: 0 off, LogError … LogTrace.
func WithLogLevel(level int) Option { return func(o *options) { o.logLevel = level } }

// Controller is an open installation: configuration, one worker per device, the supervisor and the webhook
// listener. Its methods may be called from any goroutine at the same time. Close it when done; a finalizer
// closes a forgotten one, but only when the garbage collector gets to it.
type Controller struct {
	// mu guards ptr: every call holds a read lock (the C API allows concurrent calls), Close takes the write
	// lock (sd_close must not run while another call is in progress).
	mu     sync.RWMutex
	ptr    *C.sd_controller
	wake   bool
	logger cgo.Handle // 0 without WithLogger; deleted once sd_close returned

	done      chan struct{} // closed when Close starts, so Events goroutines stop
	closeOnce sync.Once

	// stash keeps events taken from the library that an Events goroutine could not deliver (its context
	// ended); PullEvent and Events return them first.
	stashMu sync.Mutex
	stash   []Event
}

// cstr returns a C copy of s (free it with the returned function) or an error when s holds a NUL byte.
func cstr(s *string, what string) (*C.char, error) {
	if s == nil {
		return nil, nil
	}
	if strings.IndexByte(*s, 0) >= 0 {
		return nil, errInvalid("%s contains a NUL byte", what)
	}
	return C.CString(*s), nil
}

func free(p *C.char) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}

// Open opens the installation described by the YAML configuration file at path (either layout). Unreachable
// devices do not make it fail. Errors: ErrConfig (every problem is in the message), ErrInit, ErrSimulation,
// ErrModelLibrary, ErrIO, ...
func Open(path string, opts ...Option) (*Controller, error) {
	return open(false, path, opts)
}

// OpenYAML is Open with the configuration given as YAML text (relative paths resolve against the current
// directory).
func OpenYAML(yaml string, opts ...Option) (*Controller, error) {
	return open(true, yaml, opts)
}

func open(fromYAML bool, source string, opts []Option) (*Controller, error) {
	o := options{logLevel: LogInfo}
	for _, opt := range opts {
		opt(&o)
	}
	what := "the configuration path"
	if fromYAML {
		what = "the configuration text"
	}
	var owned []*C.char
	defer func() {
		for _, p := range owned {
			free(p)
		}
	}()
	strs := []struct {
		s    *string
		what string
	}{{&source, what}, {o.schemaPath, "the schema path"}, {o.schemaYAML, "the schema text"}, {o.modelsPath, "the models path"}}
	for _, x := range strs {
		p, err := cstr(x.s, x.what)
		if err != nil {
			return nil, err
		}
		owned = append(owned, p)
	}
	var logger cgo.Handle // handles are never 0, so 0 tells sdgo_open "no logger"
	if o.logger != nil {
		logger = newLogHandle(o.logger)
	}
	yamlFlag := C.int(0)
	if fromYAML {
		yamlFlag = 1
	}
	var ptr *C.sd_controller
	var msg *C.char
	r := C.sdgo_open(yamlFlag, owned[0], owned[1], owned[2], owned[3], C.uintptr_t(logger), C.int(o.logLevel),
		C.bool(!o.noWake), &ptr, &msg)
	if err := check(r, msg); err != nil {
		if logger != 0 {
			logger.Delete() // a failed sd_open never calls it again
		}
		return nil, err
	}
	c := &Controller{ptr: ptr, wake: !o.noWake, logger: logger, done: make(chan struct{})}
	runtime.SetFinalizer(c, (*Controller).Close)
	return c, nil
}

// Close stops every library thread and frees the controller. It waits for calls in progress to finish, ends
// running Events goroutines (closing their channels) and is idempotent: closing again returns nil. Every other
// method returns ErrClosed afterwards.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == nil {
		return nil
	}
	p := c.ptr
	C.sd_close(&p) // frees the controller and sets p to NULL
	c.ptr = nil
	if c.logger != 0 {
		c.logger.Delete() // sd_close returned: the library no longer calls it
		c.logger = 0
	}
	runtime.SetFinalizer(c, nil)
	runtime.KeepAlive(c)
	return nil
}

// use runs f with the C handle under the read lock, or returns ErrClosed.
func (c *Controller) use(f func(p *C.sd_controller) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ptr == nil {
		return ErrClosed
	}
	err := f(c.ptr)
	runtime.KeepAlive(c)
	return err
}

// withIdentity runs f with the C form of id: a C string for a name (NULL otherwise) and the ID.
func withIdentity(id Identity, f func(name *C.char, num C.int64_t) error) error {
	if !id.byName {
		if id.Name != "" {
			return errInvalid("Identity{Name: %q} was not built with ByName; use ByName or ByID", id.Name)
		}
		return f(nil, C.int64_t(id.ID))
	}
	name, err := cstr(&id.Name, "the name")
	if err != nil {
		return err
	}
	defer free(name)
	return f(name, 0)
}

// textCall is one sdgo_ call that writes text into a caller buffer.
type textCall func(buf *C.char, n C.size_t, needed *C.size_t, msg **C.char) C.sd_result

// readText performs call with a 16 KiB buffer, growing it as long as the library asks for more. It returns
// the text without its NUL, and (nil, nil) for SD_NO_EVENT.
func readText(call textCall) ([]byte, error) {
	size := initialBuffer
	for attempt := 0; attempt < 8; attempt++ {
		buf := make([]byte, size)
		var needed C.size_t
		var msg *C.char
		r := call((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &needed, &msg)
		switch r {
		case C.SD_OK:
			free(msg)
			n := bytes.IndexByte(buf, 0)
			if n < 0 {
				n = len(buf)
			}
			return buf[:n], nil
		case C.SD_INSUFFICIENT_SIZE:
			free(msg)
			if int(needed) <= size {
				size *= 2
			} else {
				size = int(needed) + int(needed)/8 // a little slack: the text may grow before the retry
			}
		case C.SD_NO_EVENT:
			free(msg)
			return nil, nil
		default:
			return nil, newError(r, msg)
		}
	}
	return nil, &Error{Code: int(C.SD_INSUFFICIENT_SIZE), Message: "the answer kept growing; giving up"}
}

// getDeviceBuffer is the buffer GetDevice passes to sd_get_device: big enough for any usual device object, so
// the object comes with the one read. A bigger object is fetched with sd_device after it (no second read).
// A variable only so that a test can take that path.
var getDeviceBuffer = 64 << 10

// GetDevice is the spec's get_device (C sd_get_device, Rust get_device, Python get_device): it reads the device
// now (device I/O) and returns its object. When the read fails, the error (ErrTimeout, ErrDevice, ErrOffline,
// ErrAuth, ...) comes together with the device's object as it stands after the failure: Online false and
// LastError saying why when it could not be reached. The device is nil only with ErrNotFound (no device
// matches), ErrClosed and argument errors. The device is read exactly once per call.
func (c *Controller) GetDevice(id Identity) (*Device, error) {
	var d *Device
	var readErr error
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			buf := make([]byte, getDeviceBuffer)
			var needed C.size_t
			var msg *C.char
			r := C.sdgo_get_device(p, name, num, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &needed, &msg)
			switch {
			case r == C.SD_OK || (r >= 300 && r < 400):
				// 3xx: the read failed and the buffer holds the object.
				if r == C.SD_OK {
					free(msg)
				} else {
					readErr = newError(r, msg)
				}
				n := bytes.IndexByte(buf, 0)
				if n < 0 {
					n = len(buf)
				}
				d = new(Device)
				return json.Unmarshal(buf[:n], d)
			case r == C.SD_INSUFFICIENT_SIZE:
				// The device was read; its object is fetched below without another read.
				text := ""
				if msg != nil {
					text = C.GoString(msg)
					free(msg)
				}
				readErr = readOutcome(text)
				return nil
			default:
				return newError(r, msg)
			}
		})
	})
	if err != nil {
		return nil, err
	}
	if d == nil {
		if d, err = c.Device(id); err != nil {
			return nil, err
		}
	}
	return d, readErr
}

// readOutcome is the read's error from sd_get_device's SD_INSUFFICIENT_SIZE message, which says "the device
// was read" or "the read failed (SD_<CODE>: <message>)".
func readOutcome(text string) error {
	const failed = "the read failed ("
	i := strings.Index(text, failed)
	if i < 0 {
		return nil
	}
	rest := text[i+len(failed):]
	code := int(C.SD_DEVICE)
	if j := strings.Index(rest, ":"); j > 0 {
		for n := 300; n < 400; n++ {
			if C.GoString(C.sd_result_name(C.int(n))) == rest[:j] {
				code = n
				break
			}
		}
	}
	return &Error{Code: code, Message: text}
}

// GetDeviceComponent is the spec's get_device_component: one component of the given kind as last read (no
// device I/O), the same as Component.
func (c *Controller) GetDeviceComponent(kind Kind, id Identity) (Component, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) (err error) {
			data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
				return C.sdgo_get_device_component(p, C.int(kind), name, num, b, n, nd, m)
			})
			return err
		})
	})
	if err != nil {
		return Component{}, err
	}
	return decodeComponent(kind, data)
}

// GetComponent is the 0.1.0 name of Component: one component as last read (no device I/O).
//
// Deprecated: use Component (same arguments and meaning) or GetDeviceComponent, the spec's name.
func (c *Controller) GetComponent(kind Kind, id Identity) (Component, error) {
	return c.Component(kind, id)
}

// DeviceOnline is the 0.1.0 name of IsDeviceOnline: whether the device was online at its last contact (no
// device I/O).
//
// Deprecated: use IsDeviceOnline (same arguments and meaning; ReadDeviceOnline reads the device now).
func (c *Controller) DeviceOnline(id Identity) (bool, error) {
	return c.IsDeviceOnline(id)
}

// ReadDevice reads the device now (device I/O) and returns it. When the device cannot be read the error
// (ErrTimeout, ErrOffline, ErrDevice, ...) comes with the device as last known, not nil: Online false and
// LastError saying why. The device is nil only with ErrNotFound (no device matches), ErrClosed and argument
// errors.
func (c *Controller) ReadDevice(id Identity) (*Device, error) {
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			return check(C.sdgo_read_device(p, name, num, &msg), msg)
		})
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidParameter) ||
			errors.Is(err, ErrNullParameter) {
			return nil, err
		}
		if d, derr := c.Device(id); derr == nil {
			return d, err
		}
		return nil, err
	}
	return c.Device(id)
}

// Device returns the device as last read (no device I/O). A device that cannot be reached has one too: Online
// false, LastError saying why, and the values it reported before (nil for those never reported).
func (c *Controller) Device(id Identity) (*Device, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) (err error) {
			data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
				return C.sdgo_device(p, name, num, b, n, nd, m)
			})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	d := new(Device)
	if err := json.Unmarshal(data, d); err != nil {
		return nil, err
	}
	return d, nil
}

// Devices returns every device as last read (no device I/O).
func (c *Controller) Devices() ([]Device, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) (err error) {
		data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
			return C.sdgo_devices(p, b, n, nd, m)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	var ds []Device
	if err := json.Unmarshal(data, &ds); err != nil {
		return nil, err
	}
	return ds, nil
}

// Component returns one component of the given kind as last read (no device I/O).
func (c *Controller) Component(kind Kind, id Identity) (Component, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) (err error) {
			data, err = componentJSON(p, kind, name, num)
			return err
		})
	})
	if err != nil {
		return Component{}, err
	}
	return decodeComponent(kind, data)
}

// ChangeOutput switches an output on or off; state is the new state as the device reports it, did whether it
// changed (the same two values as ToggleOutput).
func (c *Controller) ChangeOutput(id Identity, on bool) (state bool, did bool, err error) {
	var st, changed C.bool
	err = c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			return check(C.sdgo_change_output(p, name, num, C.bool(on), &st, &changed, &msg), msg)
		})
	})
	return bool(st), bool(changed), err
}

// ToggleOutput switches an output to the opposite state; state is the new state as the device reports it,
// did whether it changed.
func (c *Controller) ToggleOutput(id Identity) (state bool, did bool, err error) {
	var st, changed C.bool
	err = c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			return check(C.sdgo_toggle_output(p, name, num, &st, &changed, &msg), msg)
		})
	})
	return bool(st), bool(changed), err
}

// boolGetter is one of the sdgo_ getters that write a bool.
type boolGetter func(p *C.sd_controller, name *C.char, num C.int64_t, out *C.bool, msg **C.char) C.sd_result

func (c *Controller) getBool(id Identity, get boolGetter) (bool, error) {
	var out C.bool
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			return check(get(p, name, num, &out, &msg), msg)
		})
	})
	return bool(out), err
}

// OutputState reports whether an output is on, as last read (no device I/O). ErrUnknown when the device has
// not reported it (not read yet, or no such output in its current profile): unknown is never false.
func (c *Controller) OutputState(id Identity) (bool, error) {
	return c.getBool(id, func(p *C.sd_controller, n *C.char, i C.int64_t, o *C.bool, m **C.char) C.sd_result {
		return C.sdgo_output_state(p, n, i, o, m)
	})
}

// InputState reports whether an input is on, as last read (no device I/O). ErrUnknown when the device has
// not reported it (not read yet, or an input in button mode): unknown is never false.
func (c *Controller) InputState(id Identity) (bool, error) {
	return c.getBool(id, func(p *C.sd_controller, n *C.char, i C.int64_t, o *C.bool, m **C.char) C.sd_result {
		return C.sdgo_input_state(p, n, i, o, m)
	})
}

// IsDeviceOnline reports whether the device was online at its last contact (no device I/O).
func (c *Controller) IsDeviceOnline(id Identity) (bool, error) {
	return c.getBool(id, func(p *C.sd_controller, n *C.char, i C.int64_t, o *C.bool, m **C.char) C.sd_result {
		return C.sdgo_is_device_online(p, n, i, o, m)
	})
}

// ReadDeviceOnline reads the device now (device I/O) and reports whether it answered; an unreachable device
// is (false, nil), not an error.
func (c *Controller) ReadDeviceOnline(id Identity) (bool, error) {
	return c.getBool(id, func(p *C.sd_controller, n *C.char, i C.int64_t, o *C.bool, m **C.char) C.sd_result {
		return C.sdgo_read_device_online(p, n, i, o, m)
	})
}

// Meter returns a meter's readings as last read (no device I/O); values the device does not report are nil.
func (c *Controller) Meter(id Identity) (MeterReading, error) {
	var r C.sd_meter_reading
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			return check(C.sdgo_meter(p, name, num, &r, &msg), msg)
		})
	})
	if err != nil {
		return MeterReading{}, err
	}
	value := func(has C.bool, v C.double) *float64 {
		if !has {
			return nil
		}
		f := float64(v)
		return &f
	}
	return MeterReading{
		Power:          value(r.has_power, r.power),
		Voltage:        value(r.has_voltage, r.voltage),
		Current:        value(r.has_current, r.current),
		PowerFactor:    value(r.has_power_factor, r.power_factor),
		Energy:         value(r.has_energy, r.energy),
		ReturnedEnergy: value(r.has_returned_energy, r.returned_energy),
	}, nil
}

// componentJSON is sd_component for one identity on an open handle.
func componentJSON(p *C.sd_controller, kind Kind, name *C.char, num C.int64_t) ([]byte, error) {
	return readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
		return C.sdgo_component(p, C.int(kind), name, num, b, n, nd, m)
	})
}

// Cover returns a cover as last read (no device I/O); State, Position and Calibrated are nil until the device
// reports them.
func (c *Controller) Cover(id Identity) (Cover, error) {
	comp, err := c.Component(KindCover, id)
	if err != nil {
		return Cover{}, err
	}
	return comp.AsCover()
}

// Covers returns the covers of every device as last read (no device I/O), in configuration order.
func (c *Controller) Covers() ([]Cover, error) {
	ds, err := c.Devices()
	if err != nil {
		return nil, err
	}
	all := []Cover{}
	for _, d := range ds {
		all = append(all, d.Covers...)
	}
	return all, nil
}

// Sensor returns a sensor as last read (no device I/O); Value is nil until the device reports it.
func (c *Controller) Sensor(id Identity) (Sensor, error) {
	comp, err := c.Component(KindSensor, id)
	if err != nil {
		return Sensor{}, err
	}
	return comp.AsSensor()
}

// Sensors returns the sensors of every device as last read (no device I/O), in configuration order.
func (c *Controller) Sensors() ([]Sensor, error) {
	ds, err := c.Devices()
	if err != nil {
		return nil, err
	}
	all := []Sensor{}
	for _, d := range ds {
		all = append(all, d.Sensors...)
	}
	return all, nil
}

// SensorValue returns a sensor's value as last read (no device I/O), in its Unit. ErrUnknown when the device
// has not reported it (not read yet, a sleeping device that has not woken up): unknown is never 0.
func (c *Controller) SensorValue(id Identity) (float64, error) {
	var v C.double
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) error {
			var msg *C.char
			return check(C.sdgo_sensor_value(p, name, num, &v, &msg), msg)
		})
	})
	return float64(v), err
}

// coverCall is one of the sdgo_ cover operations.
type coverCall func(p *C.sd_controller, name *C.char, num C.int64_t, msg **C.char) C.sd_result

// moveCover runs a cover operation and returns the cover as the device reports it right after the command
// (usually opening or closing: the move takes the motor's time).
func (c *Controller) moveCover(id Identity, call coverCall) (Cover, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) (err error) {
			var msg *C.char
			if err = check(call(p, name, num, &msg), msg); err != nil {
				return err
			}
			data, err = componentJSON(p, KindCover, name, num)
			return err
		})
	})
	if err != nil {
		return Cover{}, err
	}
	var cv Cover
	if err := json.Unmarshal(data, &cv); err != nil {
		return Cover{}, err
	}
	return cv, nil
}

// OpenCover starts opening a cover fully (device I/O) and returns it as reported right after the command.
func (c *Controller) OpenCover(id Identity) (Cover, error) {
	return c.moveCover(id, func(p *C.sd_controller, n *C.char, i C.int64_t, m **C.char) C.sd_result {
		return C.sdgo_open_cover(p, n, i, m)
	})
}

// CloseCover starts closing a cover fully (device I/O) and returns it as reported right after the command.
func (c *Controller) CloseCover(id Identity) (Cover, error) {
	return c.moveCover(id, func(p *C.sd_controller, n *C.char, i C.int64_t, m **C.char) C.sd_result {
		return C.sdgo_close_cover(p, n, i, m)
	})
}

// StopCover stops a moving cover where it is (device I/O) and returns it as reported right after.
func (c *Controller) StopCover(id Identity) (Cover, error) {
	return c.moveCover(id, func(p *C.sd_controller, n *C.char, i C.int64_t, m **C.char) C.sd_result {
		return C.sdgo_stop_cover(p, n, i, m)
	})
}

// SetCoverPosition sends a cover to position % (0 closed … 100 open; device I/O) and returns it as reported
// right after the command. ErrInvalidParameter outside 0..100 (nothing is sent); ErrUnsupported when the
// cover is not calibrated (it does not know its end positions: calibrate it in the vendor app).
func (c *Controller) SetCoverPosition(id Identity, position int) (Cover, error) {
	if position < 0 || position > 255 { // beyond uint8; the library checks 101..255 itself
		return Cover{}, errInvalid("cover position %d is out of range; use 0 (closed) to 100 (open)", position)
	}
	return c.moveCover(id, func(p *C.sd_controller, n *C.char, i C.int64_t, m **C.char) C.sd_result {
		return C.sdgo_set_cover_position(p, n, i, C.uint8_t(position), m)
	})
}

// RefreshAll reads every device at once. On failure the error is the first device's, and its message says
// how many more failed.
func (c *Controller) RefreshAll() error {
	return c.use(func(p *C.sd_controller) error {
		var msg *C.char
		return check(C.sdgo_refresh_all(p, nil, &msg), msg)
	})
}

// textOf runs a text-writing sdgo_ call on the handle.
func (c *Controller) textOf(call func(p *C.sd_controller, b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result) (string, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) (err error) {
		data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
			return call(p, b, n, nd, m)
		})
		return err
	})
	return string(data), err
}

// PrintDeviceStatus returns the status listing of every device.
func (c *Controller) PrintDeviceStatus() (string, error) {
	return c.textOf(func(p *C.sd_controller, b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
		return C.sdgo_print_device_status(p, b, n, nd, m)
	})
}

// WebhookAddress returns where the webhook listener listens, e.g. "127.0.0.1:8787" (the real port even when
// 0 was configured); ErrNotFound when the listener is not running.
func (c *Controller) WebhookAddress() (string, error) {
	return c.textOf(func(p *C.sd_controller, b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
		return C.sdgo_webhook_address(p, b, n, nd, m)
	})
}

// Modes of PrintModelLibrary.
const (
	// ModeBrief lists one line per model.
	ModeBrief = "brief"
	// ModeDetailed lists each model's components.
	ModeDetailed = "detailed"
)

func printModels(p *C.sd_controller, mode, model string) (string, error) {
	cmode, err := cstr(&mode, "the mode")
	if err != nil {
		return "", err
	}
	defer free(cmode)
	var cmodel *C.char
	if model != "" {
		if cmodel, err = cstr(&model, "the model"); err != nil {
			return "", err
		}
		defer free(cmodel)
	}
	data, err := readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
		return C.sdgo_print_model_library(p, cmode, cmodel, b, n, nd, m)
	})
	return string(data), err
}

// PrintModelLibrary returns the listing of the controller's model library. mode is ModeBrief or
// ModeDetailed; model limits it to one model ("" for all).
func (c *Controller) PrintModelLibrary(mode, model string) (string, error) {
	var s string
	err := c.use(func(p *C.sd_controller) (err error) {
		s, err = printModels(p, mode, model)
		return err
	})
	return s, err
}

// PrintBuiltinModelLibrary is PrintModelLibrary for the built-in model library, without a controller.
func PrintBuiltinModelLibrary(mode, model string) (string, error) {
	return printModels(nil, mode, model)
}

// Version is the library version, e.g. "0.1.0".
func Version() string {
	return C.GoString(C.sd_version())
}
