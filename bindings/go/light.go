package smartdev

/*
#include "sdgo.h"
*/
import "C"

import "encoding/json"

// LightChange is a change to a light: nil parts stay as they are. Units: Brightness and White in % (0–100),
// Temperature in K (within the light's range), RGB red/green/blue 0–255, Transition in s.
type LightChange struct {
	On          *bool
	Brightness  *float64
	Temperature *uint32
	RGB         *[3]uint8
	White       *float64
	Transition  *float64
}

// SetLight sets a light as change says and returns the output as the device reported it right after.
// Out-of-range values (ErrInvalidParameter, the range in the message) and capabilities the light lacks
// (ErrUnsupported, naming the model) are refused before anything is sent.
func (c *Controller) SetLight(id Identity, change LightChange) (*Output, error) {
	var ch C.sd_light_change
	if change.On != nil {
		ch.set_on, ch.on = true, C.bool(*change.On)
	}
	if change.Brightness != nil {
		ch.set_brightness, ch.brightness = true, C.double(*change.Brightness)
	}
	if change.Temperature != nil {
		ch.set_temperature, ch.temperature = true, C.uint32_t(*change.Temperature)
	}
	if change.RGB != nil {
		ch.set_rgb = true
		for i, v := range change.RGB {
			ch.rgb[i] = C.uint8_t(v)
		}
	}
	if change.White != nil {
		ch.set_white, ch.white = true, C.double(*change.White)
	}
	if change.Transition != nil {
		ch.set_transition, ch.transition = true, C.double(*change.Transition)
	}
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(id, func(name *C.char, num C.int64_t) (err error) {
			// The answer fits the first buffer; a retry would only set the light again to the same values.
			data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
				return C.sdgo_set_light(p, name, num, &ch, b, n, nd, m)
			})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	var o Output
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, err
	}
	return &o, nil
}
