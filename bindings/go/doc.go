// Package smartdev is the Go binding of the smartdev library, which manages Shelly (Gen1, Gen2/3/4) and
// Tasmota smart switches and energy meters, real or simulated, through one configuration file.
//
// The binding calls the library's C API (include/smartdev.h) through cgo and links the library pkg-config
// finds as "smartdev" (install it with bindings/c/install.sh PREFIX and set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig).
// With -tags smartdev_ldflags it names no library and CGO_LDFLAGS must, e.g. to link libsmartdev.a statically.
//
// Quick start:
//
//	ctl, err := smartdev.Open("smartdev.yaml")
//	if err != nil {
//		log.Fatal(err) // *smartdev.Error; errors.Is(err, smartdev.ErrConfig) etc.
//	}
//	defer ctl.Close()
//	_, did, err := ctl.ChangeOutput(smartdev.ByName("Door Light"), true)
//	dev, err := ctl.ReadDevice(smartdev.ByID(1))
//
// Identities: devices and components are named with ByName or ByID, never guessed from a string.
//
// Unknown is never false: a state or value the device has not reported (not read yet, a component not in the
// device's current profile) is a nil pointer in the structs (Output.State, Cover.Position, Sensor.Value, ...)
// and ErrUnknown from OutputState, InputState and SensorValue.
//
// Errors: every failure is an *Error holding the library's result code and message; compare with errors.Is
// against ErrTimeout, ErrNotFound, ErrConfig, ... The library keeps the message of the last failure per OS
// thread; the binding fetches it inside the same C call as the failing function (see sdgo.h), so messages
// are always those of the call that failed, whatever thread Go ran it on.
//
// Concurrency: a Controller may be used from any number of goroutines at once. Close waits for calls in
// progress, is idempotent, and makes later calls return ErrClosed. A finalizer closes a forgotten controller.
//
// Events: Events delivers the events devices send on a channel (waiting on the library's wake descriptor):
// webhooks with ShellyWebhooks enabled, and the push channel's events (Channel: auto) with or without it;
// PullEvent takes one without waiting.
package smartdev
