package smartdev

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// Custom attributes are flattened into the library's JSON objects next to the built-in fields. Each object
// type is therefore decoded twice: once into its struct (through a method-less copy of the type, so the
// custom UnmarshalJSON does not recurse), and once into a map whose keys, minus the struct's JSON field
// names, become Custom. A field a newer library adds also lands in Custom until the binding learns it.

var knownKeyCache sync.Map // reflect.Type -> map[string]bool

// knownKeys lists the JSON names of the struct fields of t.
func knownKeys(t reflect.Type) map[string]bool {
	if v, ok := knownKeyCache.Load(t); ok {
		return v.(map[string]bool)
	}
	keys := make(map[string]bool, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if name != "" && name != "-" {
			keys[name] = true
		}
	}
	knownKeyCache.Store(t, keys)
	return keys
}

// customOf decodes the keys of the JSON object b that are not fields of t; nil when there are none.
func customOf(b []byte, t reflect.Type) (map[string]interface{}, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	known := knownKeys(t)
	var custom map[string]interface{}
	for k, raw := range all {
		if known[k] {
			continue
		}
		var v interface{}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		if custom == nil {
			custom = make(map[string]interface{})
		}
		custom[k] = v
	}
	return custom, nil
}

// decodeWithCustom decodes the JSON object b into p, a pointer to a method-less copy of an object type, and
// sets its Custom field.
func decodeWithCustom(b []byte, p interface{}) error {
	if err := json.Unmarshal(b, p); err != nil {
		return err
	}
	v := reflect.ValueOf(p).Elem()
	custom, err := customOf(b, v.Type())
	if err != nil {
		return err
	}
	v.FieldByName("Custom").Set(reflect.ValueOf(custom))
	return nil
}

// UnmarshalJSON decodes a device object, its components and its custom attributes.
func (d *Device) UnmarshalJSON(b []byte) error {
	type plain Device
	return decodeWithCustom(b, (*plain)(d))
}

// UnmarshalJSON decodes an input object and its custom attributes.
func (c *Input) UnmarshalJSON(b []byte) error {
	type plain Input
	return decodeWithCustom(b, (*plain)(c))
}

// UnmarshalJSON decodes an output object and its custom attributes.
func (c *Output) UnmarshalJSON(b []byte) error {
	type plain Output
	return decodeWithCustom(b, (*plain)(c))
}

// UnmarshalJSON decodes a meter object and its custom attributes.
func (c *Meter) UnmarshalJSON(b []byte) error {
	type plain Meter
	return decodeWithCustom(b, (*plain)(c))
}

// UnmarshalJSON decodes a temperature-probe object and its custom attributes.
func (c *TempProbe) UnmarshalJSON(b []byte) error {
	type plain TempProbe
	return decodeWithCustom(b, (*plain)(c))
}

// UnmarshalJSON decodes a cover object and its custom attributes.
func (c *Cover) UnmarshalJSON(b []byte) error {
	type plain Cover
	return decodeWithCustom(b, (*plain)(c))
}

// UnmarshalJSON decodes a sensor object and its custom attributes.
func (c *Sensor) UnmarshalJSON(b []byte) error {
	type plain Sensor
	return decodeWithCustom(b, (*plain)(c))
}

// decodeComponent fills a Component from one component object of the given kind. State is decoded for
// inputs and outputs only: other kinds have no on/off state (a cover's State is a word).
func decodeComponent(kind Kind, b []byte) (Component, error) {
	var c Component
	if err := json.Unmarshal(b, &c); err != nil {
		return Component{}, err
	}
	if kind == KindInput || kind == KindOutput {
		var s struct {
			State *bool `json:"State"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return Component{}, err
		}
		c.State = s.State
	}
	if err := json.Unmarshal(b, &c.Fields); err != nil {
		return Component{}, err
	}
	c.Kind = kind
	c.JSON = append(json.RawMessage(nil), b...)
	return c, nil
}
