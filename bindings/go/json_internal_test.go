package smartdev

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCustomAttributesAreTheUnknownKeys(t *testing.T) {
	var d Device
	err := json.Unmarshal([]byte(`{"ID":4,"Name":"Hall","Online":true,"Temperature":null,"Room":"Hall",
		"Floor":2,"Outputs":[{"ID":1,"Name":"L","State":true,"Group":"Lights"}],"Meters":[{"ID":1,"Power":-12.5}]}`), &d)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != 4 || d.Name != "Hall" || !d.Online || d.Temperature != nil {
		t.Errorf("device = %+v", d)
	}
	if len(d.Custom) != 2 || d.Custom["Room"] != "Hall" || d.Custom["Floor"] != 2.0 {
		t.Errorf("Custom = %v", d.Custom)
	}
	if len(d.Outputs) != 1 || d.Outputs[0].State == nil || !*d.Outputs[0].State ||
		d.Outputs[0].Custom["Group"] != "Lights" {
		t.Errorf("outputs = %+v", d.Outputs)
	}
	if p := d.Meters[0].Power; p == nil || *p != -12.5 || d.Meters[0].Voltage != nil || d.Meters[0].Custom != nil {
		t.Errorf("meter = %+v", d.Meters[0])
	}
	if err := json.Unmarshal([]byte(`{"ID":"x"}`), &d); err == nil {
		t.Error("a string ID was accepted")
	}
}

func TestKnownKeysFollowTheJSONTags(t *testing.T) {
	var p TempProbe
	custom, err := customOf([]byte(`{"ID":1,"ProbeID":100,"LastReadingTime":"x","Zone":"N"}`), reflect.TypeOf(p))
	if err != nil {
		t.Fatal(err)
	}
	if len(custom) != 1 || custom["Zone"] != "N" {
		t.Errorf("custom = %v", custom)
	}
	if (Identity{}).String() != "ID 0" || ByName("7").String() != "'7'" || !ByName("7").IsName() || ByID(7).IsName() {
		t.Error("Identity String/IsName")
	}
	if KindTempProbe.String() != "temp_probe" || KindCover.String() != "cover" || KindSensor.String() != "sensor" ||
		Kind(9).String() != "Kind(9)" {
		t.Error("Kind.String")
	}
}

// A null State is unknown (nil), never false; a cover's State is a word and Covers/Sensors are fields, not
// custom attributes.
func TestUnknownStatesAndNewKindsDecode(t *testing.T) {
	var d Device
	err := json.Unmarshal([]byte(`{"ID":1,"Profile":"cover","ConfigMismatch":null,"TotalReturnedEnergy":null,
		"Inputs":[{"ID":1,"State":null}],"Outputs":[{"ID":1,"State":null,"Brightness":40}],
		"Covers":[{"ID":1,"Name":"Blind","State":"opening","Position":null,"Calibrated":false}],
		"Sensors":[{"ID":1,"Quantity":"humidity","Value":null,"Unit":"%RH","BuiltIn":true}]}`), &d)
	if err != nil {
		t.Fatal(err)
	}
	if d.Custom != nil {
		t.Errorf("known fields landed in Custom: %v", d.Custom)
	}
	if d.Inputs[0].State != nil || d.Outputs[0].State != nil || *d.Outputs[0].Brightness != 40 {
		t.Errorf("unknown states: %+v %+v", d.Inputs[0], d.Outputs[0])
	}
	c := d.Covers[0]
	if c.State == nil || *c.State != CoverOpening || c.Position != nil || c.Calibrated == nil || *c.Calibrated {
		t.Errorf("cover = %+v", c)
	}
	if s := d.Sensors[0]; s.Value != nil || s.Quantity != "humidity" || !s.BuiltIn || s.Custom != nil {
		t.Errorf("sensor = %+v", s)
	}
	comp, err := decodeComponent(KindCover, []byte(`{"ID":1,"Name":"Blind","State":"open"}`))
	if err != nil || comp.State != nil {
		t.Errorf("a cover component: %+v, %v", comp, err)
	}
	comp, err = decodeComponent(KindOutput, []byte(`{"ID":1,"Name":"L","State":null}`))
	if err != nil || comp.State != nil {
		t.Errorf("an output of unknown state: %+v, %v", comp, err)
	}
}
