package smartdev

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Identity names a device or component either by its Name or by its numeric ID. Build it with ByName or
// ByID: the binding never guesses whether "12" is a name or an ID. A literal Identity{Name: "x"} (Name set
// without ByName) is rejected with ErrInvalidParameter rather than silently treated as ID 0.
type Identity struct {
	// Name is the Name of the device or component (used when built with ByName).
	Name string
	// ID is the numeric ID of the device or component (used when built with ByID).
	ID int64

	byName bool
}

// ByName identifies a device or component by its Name.
func ByName(name string) Identity { return Identity{Name: name, byName: true} }

// ByID identifies a device or component by its numeric ID.
func ByID(id int64) Identity { return Identity{ID: id} }

// IsName reports whether the identity was built with ByName.
func (i Identity) IsName() bool { return i.byName }

// String renders 'Name' or "ID n", as the library does in its messages.
func (i Identity) String() string {
	if i.byName {
		return "'" + i.Name + "'"
	}
	return "ID " + strconv.FormatInt(i.ID, 10)
}

// Kind is one of the component kinds.
type Kind int

// The component kinds (named Kind... because Input, Output, Meter, TempProbe, Cover and Sensor are the
// component types).
const (
	// KindInput is a digital input.
	KindInput Kind = C.SD_KIND_INPUT
	// KindOutput is a relay output.
	KindOutput Kind = C.SD_KIND_OUTPUT
	// KindMeter is an energy meter.
	KindMeter Kind = C.SD_KIND_METER
	// KindTempProbe is an add-on temperature probe.
	KindTempProbe Kind = C.SD_KIND_TEMP_PROBE
	// KindCover is a cover (roller shutter, blind).
	KindCover Kind = C.SD_KIND_COVER
	// KindSensor is a sensor (humidity, voltage, a device's own temperature).
	KindSensor Kind = C.SD_KIND_SENSOR
)

// String is the library's ObjectType of the kind: input, output, meter, temp_probe, cover or sensor.
func (k Kind) String() string {
	switch k {
	case KindInput:
		return "input"
	case KindOutput:
		return "output"
	case KindMeter:
		return "meter"
	case KindTempProbe:
		return "temp_probe"
	case KindCover:
		return "cover"
	case KindSensor:
		return "sensor"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Log levels passed to a WithLogger function (and accepted by WithLogLevel).
const (
	// LogError is for errors.
	LogError = int(C.SD_LOG_ERROR)
	// LogWarn is for warnings.
	LogWarn = int(C.SD_LOG_WARN)
	// LogInfo is for summary information (the default level).
	LogInfo = int(C.SD_LOG_INFO)
	// LogDebug is for detailed operations.
	LogDebug = int(C.SD_LOG_DEBUG)
	// LogTrace is for everything.
	LogTrace = int(C.SD_LOG_TRACE)
)

// Device is a device and all its components, as decoded from the library's JSON. Readings and facts the
// device does not report are nil, never 0. Units: W, Wh, V, A, °C, seconds.
type Device struct {
	// ID is the numeric ID (configured or assigned).
	ID int64 `json:"ID"`
	// Name is the configured name (or "Device <ID>").
	Name string `json:"Name"`
	// ObjectType is always "device".
	ObjectType string `json:"ObjectType"`
	// Model is the model id (e.g. "Shelly2PMG3") or "Tasmota".
	Model string `json:"Model"`
	// ModelName is the marketing name of the model.
	ModelName string `json:"ModelName"`
	// Generation is the hardware generation (Shelly only).
	Generation *int `json:"Generation"`
	// Protocol is "REST" (Shelly Gen1), "RPC" (Shelly Gen2+) or "Tasmota".
	Protocol *string `json:"Protocol"`
	// Hostname is the network address (nil for simulated devices without one).
	Hostname *string `json:"Hostname"`
	// Port is the HTTP port: the configured one, or the one the device answers on since it moved.
	Port int `json:"Port"`
	// Address is where the device is reached now: the configured Hostname, or where discovery found a device
	// configured with a MAC after it moved; nil while no address is known (and for simulated devices).
	Address *string `json:"Address"`
	// Transport is "http", "https" (Tls: true; the certificate verified) or "mqtt" (Channel: mqtt, through the
	// broker); nil for simulated devices.
	Transport *string `json:"Transport"`
	// Simulate is true for a device simulated from a local JSON file.
	Simulate bool `json:"Simulate"`
	// ExpectOffline is true for a device expected to be offline at times.
	ExpectOffline bool `json:"ExpectOffline"`
	// Online is whether the last contact succeeded.
	Online bool `json:"Online"`
	// Sleeping is true for a device that sleeps between reports (a battery device reporting through the
	// outbound WebSocket) and reported within its period: its values are its last report, and commands fail
	// with ErrSleeping. False for devices that are always awake, and once a sleeping one missed its period.
	Sleeping bool `json:"Sleeping"`
	// LastSeen is when a sleeping device last reported (RFC 3339, UTC); nil for other devices and before
	// the first report.
	LastSeen *string `json:"LastSeen"`
	// WakeupPeriod is the seconds between a sleeping device's reports as the device states them
	// (sys.wakeup_period); nil when it does not say.
	WakeupPeriod *uint64 `json:"WakeupPeriod"`
	// MacAddress is the MAC address as reported.
	MacAddress *string `json:"MacAddress"`
	// Temperature is the device temperature in °C.
	Temperature *float64 `json:"Temperature"`
	// Battery is the battery charge in percent (battery devices).
	Battery *float64 `json:"Battery"`
	// Uptime is the number of seconds since the device started.
	Uptime *uint64 `json:"Uptime"`
	// RestartRequired says whether the device asks for a restart, if it says.
	RestartRequired *bool `json:"RestartRequired"`
	// UpdateAvailable says whether a firmware update is available, if the device says.
	UpdateAvailable *bool `json:"UpdateAvailable"`
	// Firmware is the firmware version as reported.
	Firmware *string `json:"Firmware"`
	// ReportedModel is the model the device reports about itself.
	ReportedModel *string `json:"ReportedModel"`
	// Profile is the profile the device reports it is in ("switch", "cover", Gen1 "relay"/"roller", ...); for
	// simulated devices the configured one. Nil for models with one shape or before first contact.
	Profile *string `json:"Profile"`
	// ConfigMismatch says what differs when the device is not what the configuration says (e.g. in cover
	// profile while outputs are configured) and how to fix it; nil when it matches.
	ConfigMismatch *string `json:"ConfigMismatch"`
	// TotalPower is the sum of the power of the device's meters in W.
	TotalPower *float64 `json:"TotalPower"`
	// TotalEnergy is the sum of the energy of the device's meters in Wh.
	TotalEnergy *float64 `json:"TotalEnergy"`
	// TotalReturnedEnergy is the sum of the returned (exported) energy of the device's meters in Wh.
	TotalReturnedEnergy *float64 `json:"TotalReturnedEnergy"`
	// SupportedWebhooks lists the webhook events the device can send.
	SupportedWebhooks []string `json:"SupportedWebhooks"`
	// LastError is the last failure talking to (or simulating) the device, cleared by the next success.
	LastError *string `json:"LastError"`
	// SimulationFile is the simulation file of a simulated device.
	SimulationFile *string `json:"SimulationFile"`
	// Inputs are the inputs in hardware order.
	Inputs []Input `json:"Inputs"`
	// Outputs are the outputs in hardware order.
	Outputs []Output `json:"Outputs"`
	// Meters are the meters in hardware order.
	Meters []Meter `json:"Meters"`
	// TempProbes are the add-on temperature probes.
	TempProbes []TempProbe `json:"TempProbes"`
	// Covers are the covers in hardware order.
	Covers []Cover `json:"Covers"`
	// Sensors are the device's own sensors (an H&T's) and add-on humidity, voltage and temperature sensors.
	Sensors []Sensor `json:"Sensors"`
	// Custom holds the custom attributes from the configuration: every JSON key that is not one of the
	// fields above (numbers decode as float64). Nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// Input is a digital input.
type Input struct {
	// ID is the numeric ID, unique among inputs.
	ID int64 `json:"ID"`
	// Name is unique among inputs.
	Name string `json:"Name"`
	// ObjectType is always "input".
	ObjectType string `json:"ObjectType"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the hardware channel (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// State is true when the input is on (closed), false when off, and nil when unknown: not read yet, or an
	// input in button mode (no state). Unknown is never false.
	State *bool `json:"State"`
	// Webhooks is whether default webhooks are installed for it.
	Webhooks bool `json:"Webhooks"`
	// Custom holds the custom attributes (keys that are not fields above); nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// Output is a relay output.
type Output struct {
	// ID is the numeric ID, unique among outputs.
	ID int64 `json:"ID"`
	// Name is unique among outputs.
	Name string `json:"Name"`
	// ObjectType is always "output".
	ObjectType string `json:"ObjectType"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the hardware channel (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// State is true when the relay (or light) is on, false when off, and nil when unknown: not read yet, or
	// the device does not have this output in its current profile. Unknown is never false.
	State *bool `json:"State"`
	// Brightness is the brightness in % of a dimmable light output; nil for relays.
	Brightness *float64 `json:"Brightness"`
	// ColorTemperature is the colour temperature in K of a tunable-white light; nil otherwise or until read.
	ColorTemperature *float64 `json:"ColorTemperature"`
	// Rgb is red, green, blue (0–255) of a colour light; nil otherwise or until read.
	Rgb *[3]uint8 `json:"Rgb"`
	// White is the white channel in % of an RGBW light; nil otherwise or until read.
	White *float64 `json:"White"`
	// Temperature is the temperature of the switch in °C, where reported.
	Temperature *float64 `json:"Temperature"`
	// HasMeter is whether a meter measures this output.
	HasMeter bool `json:"HasMeter"`
	// Webhooks is whether default webhooks are installed for it.
	Webhooks bool `json:"Webhooks"`
	// Custom holds the custom attributes (keys that are not fields above); nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// Meter is an energy meter. Power keeps its sign: negative means energy flows back.
type Meter struct {
	// ID is the numeric ID, unique among meters.
	ID int64 `json:"ID"`
	// Name is unique among meters.
	Name string `json:"Name"`
	// ObjectType is always "meter".
	ObjectType string `json:"ObjectType"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the hardware channel (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// OutputID is the ID of the output this meter measures, if any.
	OutputID *int64 `json:"OutputID"`
	// CoverID is the ID of the cover this meter measures, if any.
	CoverID *int64 `json:"CoverID"`
	// Power is the active power in W.
	Power *float64 `json:"Power"`
	// ApparentPower is in VA.
	ApparentPower *float64 `json:"ApparentPower"`
	// Frequency is the mains frequency in Hz.
	Frequency *float64 `json:"Frequency"`
	// Voltage is in V.
	Voltage *float64 `json:"Voltage"`
	// Current is in A.
	Current *float64 `json:"Current"`
	// PowerFactor is between -1 and 1.
	PowerFactor *float64 `json:"PowerFactor"`
	// Energy is the energy consumed in Wh (lifetime counter).
	Energy *float64 `json:"Energy"`
	// ReturnedEnergy is the energy returned (exported) in Wh.
	ReturnedEnergy *float64 `json:"ReturnedEnergy"`
	// MockRate is the simulated growth of Energy in Wh per second.
	MockRate *float64 `json:"MockRate"`
	// Custom holds the custom attributes (keys that are not fields above); nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// TempProbe is an add-on temperature probe.
type TempProbe struct {
	// ID is the numeric ID, unique among probes.
	ID int64 `json:"ID"`
	// Name equals the probe's name in the vendor app.
	Name string `json:"Name"`
	// ObjectType is always "temp_probe".
	ObjectType string `json:"ObjectType"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the position in the device's probe list (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// Temperature is in °C.
	Temperature *float64 `json:"Temperature"`
	// LastReadingTime is when the temperature was last read (RFC 3339, UTC).
	LastReadingTime *string `json:"LastReadingTime"`
	// ProbeID is the device's own id of the probe, once mapped.
	ProbeID *int64 `json:"ProbeID"`
	// RequiresOutput names the output that must be on for the reading to be updated.
	RequiresOutput *string `json:"RequiresOutput"`
	// Custom holds the custom attributes (keys that are not fields above); nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// CoverState is what a cover is doing, as the device reports it (the library's JSON word).
type CoverState string

// The cover states.
const (
	// CoverOpen is fully open and still.
	CoverOpen CoverState = "open"
	// CoverClosed is fully closed and still.
	CoverClosed CoverState = "closed"
	// CoverOpening is moving towards open.
	CoverOpening CoverState = "opening"
	// CoverClosing is moving towards closed.
	CoverClosing CoverState = "closing"
	// CoverStopped is still, somewhere between open and closed.
	CoverStopped CoverState = "stopped"
	// CoverCalibrating is running its calibration.
	CoverCalibrating CoverState = "calibrating"
)

// Cover is a cover (roller shutter, blind, garage door motor).
type Cover struct {
	// ID is the numeric ID, unique among covers.
	ID int64 `json:"ID"`
	// Name is unique among covers.
	Name string `json:"Name"`
	// ObjectType is always "cover".
	ObjectType string `json:"ObjectType"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the hardware channel (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// State is what the cover is doing; nil until the device reports it (never assumed closed).
	State *CoverState `json:"State"`
	// Position is in % (0 closed, 100 open); nil until read and while the cover is not calibrated.
	Position *float64 `json:"Position"`
	// Calibrated is whether the cover knows its end positions (needed by SetCoverPosition); nil until read.
	Calibrated *bool `json:"Calibrated"`
	// Temperature is the temperature of the device's cover channel in °C, where reported.
	Temperature *float64 `json:"Temperature"`
	// HasMeter is whether a meter measures this cover.
	HasMeter bool `json:"HasMeter"`
	// Webhooks is whether default webhooks are installed for it.
	Webhooks bool `json:"Webhooks"`
	// Custom holds the custom attributes (keys that are not fields above); nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// Sensor is a sensor: a device's own (an H&T's temperature and humidity) or an add-on's humidity, voltage or
// temperature input.
type Sensor struct {
	// ID is the numeric ID, unique among sensors.
	ID int64 `json:"ID"`
	// Name is unique among sensors; for add-on sensors the peripheral's name in the vendor app.
	Name string `json:"Name"`
	// ObjectType is always "sensor".
	ObjectType string `json:"ObjectType"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the position in the device's sensor list (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// Quantity is what it measures: "temperature", "humidity" or "voltage".
	Quantity string `json:"Quantity"`
	// Value is the reading in Unit; nil until the device reports it (never 0).
	Value *float64 `json:"Value"`
	// Unit is "°C", "%RH" or "V".
	Unit string `json:"Unit"`
	// LastReadingTime is when the value was last read (RFC 3339, UTC).
	LastReadingTime *string `json:"LastReadingTime"`
	// SensorID is the device's own id of the sensor, once mapped.
	SensorID *int64 `json:"SensorID"`
	// BuiltIn is whether it is the device's own sensor (not an add-on peripheral).
	BuiltIn bool `json:"BuiltIn"`
	// RequiresOutput names the output that must be on for the reading to be updated.
	RequiresOutput *string `json:"RequiresOutput"`
	// Custom holds the custom attributes (keys that are not fields above); nil when there are none.
	Custom map[string]interface{} `json:"-"`
}

// MeterReading is one meter's readings as last read. A nil field is a value the device does not report.
type MeterReading struct {
	// Power is the active power in W (negative: energy flows back).
	Power *float64
	// Voltage is in V.
	Voltage *float64
	// Current is in A.
	Current *float64
	// PowerFactor is between -1 and 1.
	PowerFactor *float64
	// Energy is the energy consumed in Wh.
	Energy *float64
	// ReturnedEnergy is the energy returned in Wh.
	ReturnedEnergy *float64
}

// Component is any one component as returned by Controller.Component: the common fields typed, plus the
// whole JSON object (custom attributes included) in Fields and JSON. Use AsInput, AsOutput, AsMeter,
// AsTempProbe, AsCover or AsSensor for the fully typed struct.
type Component struct {
	// Kind is the component's kind (the one asked for).
	Kind Kind `json:"-"`
	// ID is the component's numeric ID.
	ID int64 `json:"ID"`
	// Name is the component's name.
	Name string `json:"Name"`
	// DeviceID is the ID of the device it belongs to.
	DeviceID int64 `json:"DeviceID"`
	// ComponentIndex is the hardware channel or list position (0-based).
	ComponentIndex int `json:"ComponentIndex"`
	// State is the on/off state of an input or output; nil when unknown (not read yet) and for other kinds
	// (a cover's state is a word: use AsCover).
	State *bool `json:"-"`
	// Fields is the whole JSON object decoded generically (numbers as float64).
	Fields map[string]interface{} `json:"-"`
	// JSON is the object exactly as the library wrote it.
	JSON json.RawMessage `json:"-"`
}

func (c Component) as(want Kind, v interface{}) error {
	if c.Kind != want {
		return errInvalid("the component is a %s, not a %s", c.Kind, want)
	}
	return json.Unmarshal(c.JSON, v)
}

// AsInput decodes the component as an Input (ErrInvalidParameter when it is another kind).
func (c Component) AsInput() (Input, error) {
	var v Input
	err := c.as(KindInput, &v)
	return v, err
}

// AsOutput decodes the component as an Output (ErrInvalidParameter when it is another kind).
func (c Component) AsOutput() (Output, error) {
	var v Output
	err := c.as(KindOutput, &v)
	return v, err
}

// AsMeter decodes the component as a Meter (ErrInvalidParameter when it is another kind).
func (c Component) AsMeter() (Meter, error) {
	var v Meter
	err := c.as(KindMeter, &v)
	return v, err
}

// AsTempProbe decodes the component as a TempProbe (ErrInvalidParameter when it is another kind).
func (c Component) AsTempProbe() (TempProbe, error) {
	var v TempProbe
	err := c.as(KindTempProbe, &v)
	return v, err
}

// AsCover decodes the component as a Cover (ErrInvalidParameter when it is another kind).
func (c Component) AsCover() (Cover, error) {
	var v Cover
	err := c.as(KindCover, &v)
	return v, err
}

// AsSensor decodes the component as a Sensor (ErrInvalidParameter when it is another kind).
func (c Component) AsSensor() (Sensor, error) {
	var v Sensor
	err := c.as(KindSensor, &v)
	return v, err
}

// Event is one webhook a device sent, resolved against the configuration where possible.
type Event struct {
	// Event is the event name, e.g. "switch.on" or "input.toggle_on".
	Event string `json:"Event"`
	// Component is the name of the component that raised it; empty when unknown.
	Component string `json:"Component"`
	// ComponentID is the ID of that component, when given.
	ComponentID *int64 `json:"ComponentID"`
	// ObjectType is "input" or "output"; empty when not given.
	ObjectType string `json:"ObjectType"`
	// Device is the name of the device; empty when unknown.
	Device string `json:"Device"`
	// DeviceID is the ID of the device, when given.
	DeviceID *int64 `json:"DeviceID"`
	// ReceivedAt is when the listener received it.
	ReceivedAt time.Time `json:"ReceivedAt"`
	// Source is the remote address of the sender.
	Source string `json:"Source"`
	// Params holds any other query or body fields.
	Params map[string]interface{} `json:"Params"`
	// Channel is how the event came: "webhook", "push" (the device's WebSocket, Channel: auto), "mqtt" (the
	// broker, Channel: mqtt) or "coiot" (a Gen1 device's CoIoT status); "read" for smartdev's own
	// device.profile_changed noticed by a refresh.
	Channel string `json:"Channel"`
}

// String renders a short description, e.g. "switch.on from Garage/Door Light".
func (e Event) String() string {
	return fmt.Sprintf("%s from %s/%s", e.Event, e.Device, e.Component)
}
