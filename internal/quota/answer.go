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

// answerVersion is the version encodeAnswer writes: 2 added the items of
// a check of items and each window's metric and subject; version 1's
// windows are all of the answer's metric, the customer's own.
const answerVersion = 2

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
	Granted    int64        `json:"granted,omitempty"`
	Limits     []wireWindow `json:"limits"`
	Items      []wireItem   `json:"items,omitempty"`
}

type wireItem struct {
	Customer   string       `json:"customer"`
	Metric     string       `json:"metric"`
	Subject    string       `json:"subject,omitempty"`
	Cost       int64        `json:"cost"`
	Allowed    bool         `json:"allowed"`
	Remaining  *int64       `json:"remaining"`
	RetryAfter *int64       `json:"retry_after"` // null: never
	Limits     []wireWindow `json:"limits"`
}

type wireWindow struct {
	Metric    string       `json:"metric,omitempty"`
	Subject   string       `json:"subject,omitempty"`
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
		Overage: d.Overage, Elastic: d.Elastic, Degraded: d.Degraded, Granted: d.Granted, Limits: toWireWindows(d.Limits),
		RetryAfter: wireRetry(d.RetryAfter, d.Never),
	}
	for _, it := range d.Items {
		w.Items = append(w.Items, wireItem{Customer: it.Customer, Metric: it.Metric, Subject: it.Subject, Cost: it.Cost,
			Allowed: it.Allowed, Remaining: it.Remaining, RetryAfter: wireRetry(it.RetryAfter, it.Never),
			Limits: toWireWindows(it.Limits)})
	}
	return json.Marshal(w)
}

// wireRetry is retry_after as the wire form keeps it: null for never.
func wireRetry(after int64, never bool) *int64 {
	if never {
		return nil
	}
	return &after
}

func toWireWindows(ls []WindowResult) []wireWindow {
	out := make([]wireWindow, len(ls))
	for i, l := range ls {
		out[i] = wireWindow{Metric: l.Metric, Subject: l.Subject, Window: l.Window, Mode: l.Mode, Limit: l.Limit, Used: l.Used,
			Remaining: l.Remaining, ResetAt: l.ResetAt, State: l.State, LengthMs: l.Length.Milliseconds()}
	}
	return out
}

func fromWireWindows(ws []wireWindow, metric string) []WindowResult {
	out := make([]WindowResult, len(ws))
	for i, l := range ws {
		if l.Metric == "" {
			l.Metric = metric // version 1: the answer's metric
		}
		out[i] = WindowResult{Metric: l.Metric, Subject: l.Subject, Window: l.Window, Mode: l.Mode, Limit: l.Limit,
			Used: l.Used, Remaining: l.Remaining, ResetAt: l.ResetAt, State: l.State,
			Length: time.Duration(l.LengthMs) * time.Millisecond}
	}
	return out
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
	if *probe.Version < 1 || *probe.Version > answerVersion {
		return Decision{}, fmt.Errorf("decode recorded answer: unknown version %d", *probe.Version)
	}
	var w wireAnswer
	if err := json.Unmarshal(b, &w); err != nil {
		return Decision{}, fmt.Errorf("decode recorded answer: %w", err)
	}
	d := Decision{Allowed: w.Allowed, Customer: w.Customer, Metric: w.Metric, Cost: w.Cost,
		Overage: w.Overage, Elastic: w.Elastic, Degraded: w.Degraded, Granted: w.Granted, Never: w.RetryAfter == nil,
		Limits: fromWireWindows(w.Limits, w.Metric)}
	if w.RetryAfter != nil {
		d.RetryAfter = *w.RetryAfter
	}
	for _, it := range w.Items {
		r := ItemResult{Customer: it.Customer, Metric: it.Metric, Subject: it.Subject, Cost: it.Cost, Allowed: it.Allowed,
			Remaining: it.Remaining, Never: it.RetryAfter == nil, Limits: fromWireWindows(it.Limits, it.Metric)}
		if it.RetryAfter != nil {
			r.RetryAfter = *it.RetryAfter
		}
		d.Items = append(d.Items, r)
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
		d.Limits[i] = WindowResult{Metric: u.Metric, Window: l.Window, Mode: l.Mode, Limit: l.Limit, Used: l.Used,
			Remaining: l.Remaining, ResetAt: l.ResetAt, State: l.State, Length: l.Length}
	}
	return d, nil
}
