package tiers

import (
	"encoding/json"
	"time"
)

// How limits look in JSON: in API answers (plans, overrides, effective
// limits) and in the audit log's images of plans and overrides. Every
// field is always there, except four:
//
//   - "per" is shown on limits per subject only ("per": "subject"): a
//     customer-wide limit looks as it did before limits per subject;
//   - "algorithm" is shown on short windows only, the default named
//     ("sliding_window" when the limit names none); long windows have none;
//   - "burst" is shown for token buckets only: the bucket's size, the burst
//     if one was set, else the limit;
//   - "rollover" is shown where it is set.
//
// Limit, Override and EffectiveLimit all marshal through limitJSON, so that
// the rule lives in one place. Override and EffectiveLimit need methods of
// their own: Limit's would otherwise be promoted to them and stand for the
// whole value.
//
// Decoding (by the struct tags) reads the fields as they are: a shown limit
// decodes into one that counts the same, a token bucket's burst set even
// where it was not, and either value of per ("customer" or "subject").

// limitJSON is a Limit as JSON shows it.
type limitJSON struct {
	Metric             string     `json:"metric"`
	Window             Window     `json:"window"`
	Per                *Per       `json:"per,omitempty"`
	Limit              int64      `json:"limit"`
	Mode               Mode       `json:"mode"`
	OveragePercent     int64      `json:"overage_percent"`
	OveragePriceMicros *int64     `json:"overage_price_micros"`
	Ceiling            *int64     `json:"ceiling"`
	Algorithm          *Algorithm `json:"algorithm,omitempty"`
	Burst              *int64     `json:"burst,omitempty"`
	Rollover           *Rollover  `json:"rollover,omitempty"`
}

func (l Limit) toJSON() limitJSON {
	return limitJSON{
		Metric: l.Metric, Window: l.Window, Per: l.ShownPer(), Limit: l.Limit, Mode: l.Mode,
		OveragePercent: l.OveragePercent, OveragePriceMicros: l.OveragePriceMicros, Ceiling: l.Ceiling,
		Algorithm: l.ShownAlgorithm(), Burst: l.ShownBurst(), Rollover: l.Rollover,
	}
}

// ShownPer returns the per the API shows for l: nil for a customer-wide
// limit (the default, left out), else its own (PerSubject).
func (l Limit) ShownPer() *Per {
	if l.Per == PerCustomer {
		return nil
	}
	p := l.Per
	return &p
}

// ShownAlgorithm returns the algorithm the API shows for l: its own on a
// short window (SlidingWindow when it names none), nil on a long one.
func (l Limit) ShownAlgorithm() *Algorithm {
	if !l.Window.Short() {
		return nil
	}
	a := l.Algorithm
	return &a
}

// ShownBurst returns the burst the API shows for l: a token bucket's size
// (Size: the burst if set, else the limit), nil for any other limit and
// for a bucket of size 0 (a limit of 0 without a burst), as a burst of 0
// could not be sent back.
func (l Limit) ShownBurst() *int64 {
	if !l.Window.Short() || l.Algorithm != TokenBucket || l.Size() == 0 {
		return nil
	}
	b := l.Size()
	return &b
}

// MarshalJSON implements json.Marshaler.
func (l Limit) MarshalJSON() ([]byte, error) {
	return json.Marshal(l.toJSON())
}

// MarshalJSON implements json.Marshaler.
func (o Override) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Customer string `json:"customer"`
		limitJSON
		ExpiresAt *time.Time `json:"expires_at"`
		Reason    string     `json:"reason"`
		Expired   bool       `json:"expired"`
		Version   int64      `json:"version"`
		CreatedAt time.Time  `json:"created_at"`
		UpdatedAt time.Time  `json:"updated_at"`
	}{
		Customer: o.Customer, limitJSON: o.Limit.toJSON(),
		ExpiresAt: o.ExpiresAt, Reason: o.Reason, Expired: o.Expired,
		Version: o.Version, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	})
}

// MarshalJSON implements json.Marshaler.
func (e EffectiveLimit) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		limitJSON
		Source    Source     `json:"source"`
		ExpiresAt *time.Time `json:"expires_at"`
	}{limitJSON: e.Limit.toJSON(), Source: e.Source, ExpiresAt: e.ExpiresAt})
}
