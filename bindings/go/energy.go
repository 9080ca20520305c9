package smartdev

/*
#include "sdgo.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"time"
)

// EnergyHistory is a meter's own interval records over a time range (EnergyHistory on Controller): records
// and gaps in time order. A gap is time the device has no record for: its energy is unknown, never 0, so a sum
// of the records is the energy of the recorded time only (TotalEnergy; check Gaps).
type EnergyHistory struct {
	// Device is the device's name.
	Device string `json:"Device"`
	// Meter is the meter asked for.
	Meter string `json:"Meter"`
	// Channels names what each entry of a record's Channels is: a 3-phase meter's three phases, else the
	// meter.
	Channels []string `json:"Channels"`
	// From and To are the range asked for (To exclusive), UTC.
	From time.Time `json:"From"`
	To   time.Time `json:"To"`
	// Entries are the records and gaps in time order.
	Entries []HistoryEntry `json:"Entries"`
}

// HistoryEntry is one record ("Record": Start, Period, Channels) or one gap ("Gap": Start, End).
type HistoryEntry struct {
	// Kind is "Record" or "Gap".
	Kind string `json:"Kind"`
	// Start is when the interval (or the gap) starts, UTC.
	Start time.Time `json:"Start"`
	// Period is a record's length in seconds (0 for a gap).
	Period int `json:"Period"`
	// End is where a gap ends (zero for a record).
	End time.Time `json:"End"`
	// Channels are a record's values, in the order of EnergyHistory.Channels (nil for a gap).
	Channels []ChannelEnergy `json:"Channels"`
}

// IsGap says whether the entry is time the device has no record for.
func (e HistoryEntry) IsGap() bool { return e.Kind == "Gap" }

// ChannelEnergy is one channel's values in one record; what the device did not record is nil.
type ChannelEnergy struct {
	// Energy drawn during the interval, Wh.
	Energy *float64 `json:"Energy"`
	// ReturnedEnergy is the energy returned (exported) during the interval, Wh.
	ReturnedEnergy *float64 `json:"ReturnedEnergy"`
	// MinVoltage and MaxVoltage, V.
	MinVoltage *float64 `json:"MinVoltage"`
	MaxVoltage *float64 `json:"MaxVoltage"`
	// MinCurrent and MaxCurrent, A.
	MinCurrent *float64 `json:"MinCurrent"`
	MaxCurrent *float64 `json:"MaxCurrent"`
}

// Records returns the records, in time order.
func (h *EnergyHistory) Records() []HistoryEntry {
	var out []HistoryEntry
	for _, e := range h.Entries {
		if !e.IsGap() {
			out = append(out, e)
		}
	}
	return out
}

// Gaps returns the gaps, in time order.
func (h *EnergyHistory) Gaps() []HistoryEntry {
	var out []HistoryEntry
	for _, e := range h.Entries {
		if e.IsGap() {
			out = append(out, e)
		}
	}
	return out
}

// TotalEnergy is the energy drawn per channel over the recorded intervals, Wh; nil where no record gave it.
// Gaps are not in it.
func (h *EnergyHistory) TotalEnergy() []*float64 {
	totals := make([]*float64, len(h.Channels))
	for _, r := range h.Records() {
		for i, c := range r.Channels {
			if i < len(totals) && c.Energy != nil {
				if totals[i] == nil {
					totals[i] = new(float64)
				}
				*totals[i] += *c.Energy
			}
		}
	}
	return totals
}

// EnergyHistory reads a meter's own interval records over [from, to) from the device (device I/O; whole
// seconds). A 3-phase meter's records hold all its phases. ErrNoHistory for a meter that keeps none (a
// switch's or plug's meter, Tasmota, simulated devices); ErrInvalidParameter when from is not before to.
func (c *Controller) EnergyHistory(meter Identity, from, to time.Time) (*EnergyHistory, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) error {
		return withIdentity(meter, func(name *C.char, num C.int64_t) (err error) {
			// The document of a size query is kept per OS thread: the retry must run on the same one.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			first := true
			data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
				if first {
					first = false
					return C.sdgo_energy_history(p, name, num, C.int64_t(from.Unix()), C.int64_t(to.Unix()),
						b, n, nd, m)
				}
				return C.sdgo_energy_history_last(b, n, nd, m)
			})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	h := new(EnergyHistory)
	if err := json.Unmarshal(data, h); err != nil {
		return nil, err
	}
	return h, nil
}
