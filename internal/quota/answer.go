package quota

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// A check answer kept under its request id is replayed for 24 hours, by
// any quotad process, possibly of a newer version: it is stored in this
// wire form, tagged and versioned, never as Decision happens to marshal.

// answerVersion is the version encodeAnswer writes.
const answerVersion = 1

type wireAnswer struct {
	Version    int          `json:"v"`
	Allowed    bool         `json:"allowed"`
	Customer   string       `json:"customer"`
	Metric     string       `json:"metric"`
	Cost       int64        `json:"cost"`
	Overage    bool         `json:"overage"`
	Elastic    bool         `json:"elastic"`
	RetryAfter *int64       `json:"retry_after"` // null: never
	Degraded   bool         `json:"degraded"`
	Limits     []wireWindow `json:"limits"`
}

type wireWindow struct {
	Window    tiers.Window `json:"window"`
	Mode      tiers.Mode   `json:"mode"`
	Limit     int64        `json:"limit"`
	Used      int64        `json:"used"`
	Remaining int64        `json:"remaining"`
	ResetAt   time.Time    `json:"reset_at"`
	State     State        `json:"state"`
	LengthMs  int64        `json:"length_ms"`
}

// encodeAnswer returns d in the wire form.
func encodeAnswer(d Decision) ([]byte, error) {
	w := wireAnswer{
		Version: answerVersion, Allowed: d.Allowed, Customer: d.Customer, Metric: d.Metric, Cost: d.Cost,
		Overage: d.Overage, Elastic: d.Elastic, Degraded: d.Degraded, Limits: make([]wireWindow, len(d.Limits)),
	}
	if !d.Never {
		w.RetryAfter = &d.RetryAfter
	}
	for i, l := range d.Limits {
		w.Limits[i] = wireWindow{Window: l.Window, Mode: l.Mode, Limit: l.Limit, Used: l.Used,
			Remaining: l.Remaining, ResetAt: l.ResetAt, State: l.State, LengthMs: l.Length.Milliseconds()}
	}
	return json.Marshal(w)
}

// decodeAnswer reads an answer in the wire form, or in the form quotad
// kept before it had one (an untagged Decision), which a request id of the
// last 24 hours may still hold after an upgrade.
func decodeAnswer(b []byte) (Decision, error) {
	var probe struct {
		Version *int `json:"v"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return Decision{}, fmt.Errorf("decode recorded answer: %w", err)
	}
	if probe.Version == nil {
		return decodeUntagged(b)
	}
	if *probe.Version != answerVersion {
		return Decision{}, fmt.Errorf("decode recorded answer: unknown version %d", *probe.Version)
	}
	var w wireAnswer
	if err := json.Unmarshal(b, &w); err != nil {
		return Decision{}, fmt.Errorf("decode recorded answer: %w", err)
	}
	d := Decision{Allowed: w.Allowed, Customer: w.Customer, Metric: w.Metric, Cost: w.Cost,
		Overage: w.Overage, Elastic: w.Elastic, Degraded: w.Degraded, Never: w.RetryAfter == nil,
		Limits: make([]WindowResult, len(w.Limits))}
	if w.RetryAfter != nil {
		d.RetryAfter = *w.RetryAfter
	}
	for i, l := range w.Limits {
		d.Limits[i] = WindowResult{Window: l.Window, Mode: l.Mode, Limit: l.Limit, Used: l.Used,
			Remaining: l.Remaining, ResetAt: l.ResetAt, State: l.State, Length: time.Duration(l.LengthMs) * time.Millisecond}
	}
	return d, nil
}

// untaggedAnswer is the form answers were kept in before wireAnswer: a
// Decision marshalled with Go's field names.
type untaggedAnswer struct {
	Allowed, Overage, Elastic, Never, Degraded bool
	Customer, Metric                           string
	Cost, RetryAfter                           int64
	Limits                                     []struct {
		Window                 tiers.Window
		Mode                   tiers.Mode
		Limit, Used, Remaining int64
		ResetAt                time.Time
		State                  State
		Length                 time.Duration
	}
}

func decodeUntagged(b []byte) (Decision, error) {
	var u untaggedAnswer
	if err := json.Unmarshal(b, &u); err != nil {
		return Decision{}, fmt.Errorf("decode recorded answer: %w", err)
	}
	d := Decision{Allowed: u.Allowed, Customer: u.Customer, Metric: u.Metric, Cost: u.Cost,
		Overage: u.Overage, Elastic: u.Elastic, RetryAfter: u.RetryAfter, Never: u.Never, Degraded: u.Degraded,
		Limits: make([]WindowResult, len(u.Limits))}
	for i, l := range u.Limits {
		d.Limits[i] = WindowResult{Window: l.Window, Mode: l.Mode, Limit: l.Limit, Used: l.Used,
			Remaining: l.Remaining, ResetAt: l.ResetAt, State: l.State, Length: l.Length}
	}
	return d, nil
}
