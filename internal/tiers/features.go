package tiers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A feature is what a plan grants besides metered limits: a switch (SSO),
// a number (10 projects), a level ("priority" support). A plan's Features
// name them by key (as metrics are named); a customer's FeatureOverride
// replaces one until it expires. A feature nothing grants is false.

// MaxFeatureString is the longest string a feature's value may be, in
// characters.
const MaxFeatureString = 256

// maxFeaturesPerPlan bounds a plan's features, as maxLimitsPerPlan bounds
// its limits.
const maxFeaturesPerPlan = 500

// featureValueRule is what a feature's value must be, as a client is told.
var featureValueRule = fmt.Sprintf("must be true, false, an integer between %d and %d, or a string of 1 to %d characters",
	-MaxLimit, MaxLimit, MaxFeatureString)

// featureKind is which of its three types a FeatureValue holds.
type featureKind uint8

const (
	featureBool featureKind = iota // the zero value: false
	featureInt
	featureString
)

// FeatureValue is what a plan or an override grants of a feature: a
// boolean, an integer or a string. The zero value is false, the value of
// a feature nothing grants. Values compare with ==.
type FeatureValue struct {
	kind featureKind
	b    bool
	n    int64
	s    string
}

// FeatureBool, FeatureInt and FeatureString return a feature's value of
// each type. FeatureInt's n and FeatureString's s are not checked: values
// from clients go through ParseFeatureValue.
func FeatureBool(b bool) FeatureValue     { return FeatureValue{kind: featureBool, b: b} }
func FeatureInt(n int64) FeatureValue     { return FeatureValue{kind: featureInt, n: n} }
func FeatureString(s string) FeatureValue { return FeatureValue{kind: featureString, s: s} }

// Allowed reports whether the value grants the feature: anything but
// false and 0 (a string is never empty).
func (v FeatureValue) Allowed() bool {
	switch v.kind {
	case featureInt:
		return v.n != 0
	case featureString:
		return true
	}
	return v.b
}

// Any returns the value as encoding/json decodes into an any, but for
// integers: a bool, an int64 or a string.
func (v FeatureValue) Any() any {
	switch v.kind {
	case featureInt:
		return v.n
	case featureString:
		return v.s
	}
	return v.b
}

// String returns the value as JSON writes it.
func (v FeatureValue) String() string {
	b, _ := v.MarshalJSON()
	return string(b)
}

// MarshalJSON implements json.Marshaler.
func (v FeatureValue) MarshalJSON() ([]byte, error) {
	switch v.kind {
	case featureInt:
		return strconv.AppendInt(nil, v.n, 10), nil
	case featureString:
		return json.Marshal(v.s)
	}
	return strconv.AppendBool(nil, v.b), nil
}

// UnmarshalJSON implements json.Unmarshaler, by ParseFeatureValue's rule.
func (v *FeatureValue) UnmarshalJSON(b []byte) error {
	fv, err := ParseFeatureValue(b)
	if err != nil {
		return err
	}
	*v = fv
	return nil
}

// ParseFeatureValue returns the feature's value raw, a JSON text, holds:
// true or false, an integer within ±MaxLimit (written without fraction or
// exponent), or a string of 1 to MaxFeatureString characters (valid UTF-8,
// no NUL). Anything else (null, other numbers, arrays, objects) is an
// error whose text is the rule, for the client.
func ParseFeatureValue(raw []byte) (FeatureValue, error) {
	bad := errors.New(featureValueRule)
	raw = bytes.TrimSpace(raw)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil || dec.More() {
		return FeatureValue{}, bad
	}
	switch t := x.(type) {
	case bool:
		return FeatureBool(t), nil
	case json.Number:
		n, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil || n < -MaxLimit || n > MaxLimit {
			return FeatureValue{}, bad
		}
		return FeatureInt(n), nil
	case string:
		if t == "" || !utf8.ValidString(t) || strings.IndexByte(t, 0) >= 0 ||
			utf8.RuneCountInString(t) > MaxFeatureString {
			return FeatureValue{}, bad
		}
		return FeatureString(t), nil
	}
	return FeatureValue{}, bad
}

// FeatureOverride is a feature's value set for one customer: it replaces
// what the customer's plan grants of the feature (or grants one the plan
// does not name) until it expires.
type FeatureOverride struct {
	Customer  string       `json:"customer"`
	Feature   string       `json:"feature"`
	Value     FeatureValue `json:"value"`
	ExpiresAt *time.Time   `json:"expires_at"`
	Reason    string       `json:"reason"`
	// Expired is computed when the override is read.
	Expired   bool      `json:"expired"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ExpiredAt reports whether the override no longer counts at now.
func (o FeatureOverride) ExpiredAt(now time.Time) bool { return expiredAt(o.ExpiresAt, now) }

// Feature returns what the account grants of feature key at now: its
// unexpired override's value, else its plan's, else false. An override
// stops applying at its expiry's instant, without anyone removing it.
// It is a pure function of the account, so the check path runs it on
// cached accounts.
func (a Account) Feature(key string, now time.Time) FeatureValue {
	for _, o := range a.FeatureOverrides {
		if o.Feature == key && !o.ExpiredAt(now) {
			return o.Value
		}
	}
	return a.Plan.Features[key]
}

// Features returns every feature the account's plan or its unexpired
// overrides name, with what the account is granted of each at now (see
// Feature).
func (a Account) Features(now time.Time) map[string]FeatureValue {
	out := make(map[string]FeatureValue, len(a.Plan.Features)+len(a.FeatureOverrides))
	for key := range maps.Keys(a.Plan.Features) {
		out[key] = a.Feature(key, now)
	}
	for _, o := range a.FeatureOverrides {
		if !o.ExpiredAt(now) {
			out[o.Feature] = a.Feature(o.Feature, now)
		}
	}
	return out
}

// AccountSource returns a customer's account, or ErrCustomerNotFound:
// a Cache, from memory.
type AccountSource interface {
	Account(ctx context.Context, id string) (Account, error)
}

// FeatureChecker answers feature checks from an AccountSource, by its
// clock: a Cache makes them as cheap as a check's lookup of the customer.
// It is safe for concurrent use as its source is.
type FeatureChecker struct {
	accounts AccountSource
	now      func() time.Time
}

// NewFeatureChecker returns a FeatureChecker over accounts; now is its
// clock.
func NewFeatureChecker(accounts AccountSource, now func() time.Time) *FeatureChecker {
	return &FeatureChecker{accounts: accounts, now: now}
}

// Feature returns what the customer is granted of feature key now (false
// when nothing grants it). Errors: a *ValidationError for a bad customer
// id or key, the source's ErrCustomerNotFound and ErrUnavailable.
func (f *FeatureChecker) Feature(ctx context.Context, customer, key string) (FeatureValue, error) {
	if err := CheckFeatureAddress(customer, key); err != nil {
		return FeatureValue{}, err
	}
	a, err := f.accounts.Account(ctx, customer)
	if err == nil {
		err = a.Customer.CheckActive()
	}
	if err != nil {
		return FeatureValue{}, err
	}
	now := f.now()
	return a.At(now).Feature(key, now), nil
}

// FeatureOverrideSpec is the body of PUT /v1/customers/{customer}/features/{feature}.
type FeatureOverrideSpec struct {
	// Value is the feature's value as JSON: see ParseFeatureValue.
	Value     json.RawMessage `json:"value"`
	ExpiresAt *time.Time      `json:"expires_at" nullable:"true"`
	Reason    *string         `json:"reason" nullable:"true"`
}

// Validate returns the override the spec describes for customer on
// feature, with Version and times unset. expires_at must lie after now.
func (s FeatureOverrideSpec) Validate(customer, feature string, now time.Time) (FeatureOverride, error) {
	var p problems
	p.featureAddress(customer, feature)
	o := FeatureOverride{Customer: customer, Feature: feature}
	if len(s.Value) == 0 {
		p.add("value", "is required")
	} else if v, err := ParseFeatureValue(s.Value); err != nil {
		p.add("value", err.Error())
	} else {
		o.Value = v
	}
	o.ExpiresAt = p.checkExpiry(s.ExpiresAt, now)
	if s.Reason != nil {
		p.checkText("reason", *s.Reason, maxReasonLen)
		o.Reason = *s.Reason
	}
	return o, p.err()
}

// validateFeatures checks a plan's features: keys as metric keys, values
// by ParseFeatureValue.
func validateFeatures(features map[string]json.RawMessage, p *problems) map[string]FeatureValue {
	out := make(map[string]FeatureValue, len(features))
	if len(features) > maxFeaturesPerPlan {
		p.add("features", fmt.Sprintf("must have at most %d entries", maxFeaturesPerPlan))
	}
	for _, key := range slices.Sorted(maps.Keys(features)) {
		field := "features." + key
		if !ValidKey(key) {
			p.add(field, "the feature's key "+keyRule)
			continue
		}
		v, err := ParseFeatureValue(features[key])
		if err != nil {
			p.add(field, err.Error())
			continue
		}
		out[key] = v
	}
	return out
}

// featureAddress checks a feature override's address as a request names
// it.
func (p *problems) featureAddress(customer, feature string) {
	if !ValidCustomerID(customer) {
		p.add("customer", customerIDRule)
	}
	if !ValidKey(feature) {
		p.add("feature", keyRule)
	}
}

// CheckFeatureAddress returns a ValidationError unless customer is a
// valid customer id and feature a valid feature key.
func CheckFeatureAddress(customer, feature string) error {
	var p problems
	p.featureAddress(customer, feature)
	return p.err()
}
