package tiers

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAccountFeature(t *testing.T) {
	expiry := t0.Add(time.Hour)
	plan := Plan{Key: "pro", Features: map[string]FeatureValue{
		"sso": FeatureBool(true), "max_projects": FeatureInt(10), "support": FeatureString("priority"),
		"audit_log": FeatureBool(false),
	}}
	override := func(key string, v FeatureValue, expires *time.Time) FeatureOverride {
		return FeatureOverride{Customer: "acme", Feature: key, Value: v, ExpiresAt: expires}
	}
	tests := []struct {
		name      string
		overrides []FeatureOverride
		at        time.Time
		key       string
		want      FeatureValue
		allowed   bool
	}{
		{"plan's boolean", nil, t0, "sso", FeatureBool(true), true},
		{"plan's integer", nil, t0, "max_projects", FeatureInt(10), true},
		{"plan's string", nil, t0, "support", FeatureString("priority"), true},
		{"plan's false", nil, t0, "audit_log", FeatureBool(false), false},
		{"granted by no one", nil, t0, "sandbox", FeatureBool(false), false},
		{"override replaces the plan's", []FeatureOverride{override("max_projects", FeatureInt(50), nil)},
			t0, "max_projects", FeatureInt(50), true},
		{"override withdraws", []FeatureOverride{override("sso", FeatureBool(false), nil)},
			t0, "sso", FeatureBool(false), false},
		{"override of 0 is not granted", []FeatureOverride{override("max_projects", FeatureInt(0), nil)},
			t0, "max_projects", FeatureInt(0), false},
		{"override grants what the plan does not name", []FeatureOverride{override("sandbox", FeatureBool(true), &expiry)},
			t0, "sandbox", FeatureBool(true), true},
		{"override just before its expiry", []FeatureOverride{override("sandbox", FeatureBool(true), &expiry)},
			expiry.Add(-time.Millisecond), "sandbox", FeatureBool(true), true},
		{"override at its expiry's instant", []FeatureOverride{override("sandbox", FeatureBool(true), &expiry)},
			expiry, "sandbox", FeatureBool(false), false},
		{"expired override gives the plan's back", []FeatureOverride{override("support", FeatureString("dedicated"), &expiry)},
			expiry.Add(time.Second), "support", FeatureString("priority"), true},
		{"another feature's override", []FeatureOverride{override("sso", FeatureBool(false), nil)},
			t0, "support", FeatureString("priority"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Account{Plan: plan, FeatureOverrides: tt.overrides}
			got := a.Feature(tt.key, tt.at)
			if got != tt.want {
				t.Errorf("Feature(%q) = %v, want %v", tt.key, got, tt.want)
			}
			if got.Allowed() != tt.allowed {
				t.Errorf("Feature(%q).Allowed() = %v, want %v", tt.key, got.Allowed(), tt.allowed)
			}
			all := a.Features(tt.at)
			if v, ok := all[tt.key]; ok && v != tt.want {
				t.Errorf("Features()[%q] = %v, want %v", tt.key, v, tt.want)
			}
		})
	}
}

func TestAccountFeatures(t *testing.T) {
	expiry := t0.Add(time.Hour)
	a := Account{
		Plan: Plan{Features: map[string]FeatureValue{"sso": FeatureBool(true), "max_projects": FeatureInt(10)}},
		FeatureOverrides: []FeatureOverride{
			{Feature: "max_projects", Value: FeatureInt(50), ExpiresAt: &expiry},
			{Feature: "sandbox", Value: FeatureBool(true), ExpiresAt: &expiry},
		},
	}
	before := map[string]FeatureValue{"sso": FeatureBool(true), "max_projects": FeatureInt(50), "sandbox": FeatureBool(true)}
	after := map[string]FeatureValue{"sso": FeatureBool(true), "max_projects": FeatureInt(10)}
	if got := a.Features(t0); !reflect.DeepEqual(got, before) {
		t.Errorf("Features before expiry = %v, want %v", got, before)
	}
	if got := a.Features(expiry); !reflect.DeepEqual(got, after) {
		t.Errorf("Features at expiry = %v, want %v", got, after)
	}
}

func TestParseFeatureValue(t *testing.T) {
	tests := []struct {
		raw  string
		want FeatureValue
		ok   bool
	}{
		{`true`, FeatureBool(true), true},
		{` false `, FeatureBool(false), true},
		{`10`, FeatureInt(10), true},
		{`-3`, FeatureInt(-3), true},
		{`9007199254740991`, FeatureInt(MaxLimit), true},
		{`9007199254740992`, FeatureValue{}, false},
		{`1.5`, FeatureValue{}, false},
		{`1e3`, FeatureValue{}, false},
		{`10.0`, FeatureValue{}, false},
		{`"priority"`, FeatureString("priority"), true},
		{`"` + strings.Repeat("é", MaxFeatureString) + `"`, FeatureString(strings.Repeat("é", MaxFeatureString)), true},
		{`"` + strings.Repeat("a", MaxFeatureString+1) + `"`, FeatureValue{}, false},
		{`""`, FeatureValue{}, false},
		{`"a\u0000b"`, FeatureValue{}, false},
		{`null`, FeatureValue{}, false},
		{`[true]`, FeatureValue{}, false},
		{`{"a":1}`, FeatureValue{}, false},
		{`true true`, FeatureValue{}, false},
		{``, FeatureValue{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseFeatureValue([]byte(tt.raw))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseFeatureValue(%s) = %v, %v; want %v, ok %v", tt.raw, got, err, tt.want, tt.ok)
			}
			if !tt.ok {
				return
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back FeatureValue
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Fatalf("round trip of %s: got %v, %v", b, back, err)
			}
		})
	}
}

func TestPlanSpecFeatures(t *testing.T) {
	raw := func(m map[string]string) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for k, v := range m {
			out[k] = json.RawMessage(v)
		}
		return out
	}
	tests := []struct {
		name     string
		features map[string]string
		want     map[string]FeatureValue
		fields   []string
	}{
		{"none", nil, map[string]FeatureValue{}, nil},
		{"three types", map[string]string{"sso": `true`, "max_projects": `10`, "support": `"priority"`},
			map[string]FeatureValue{"sso": FeatureBool(true), "max_projects": FeatureInt(10), "support": FeatureString("priority")}, nil},
		{"bad key", map[string]string{"SSO": `true`}, nil, []string{"features.SSO"}},
		{"bad values", map[string]string{"a": `1.5`, "b": `null`, "c": `""`, "d": `[1]`},
			nil, []string{"features.a", "features.b", "features.c", "features.d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanSpec{Features: raw(tt.features)}.Validate("pro")
			var ve *ValidationError
			if tt.fields == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if !reflect.DeepEqual(p.Features, tt.want) {
					t.Fatalf("features = %v, want %v", p.Features, tt.want)
				}
				return
			}
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %v, want a ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if !reflect.DeepEqual(got, tt.fields) {
				t.Fatalf("fields = %v, want %v", got, tt.fields)
			}
		})
	}
}

func TestFeatureOverrideSpecValidate(t *testing.T) {
	past, future := t0.Add(-time.Second), t0.Add(time.Hour)
	reason := "trial"
	long := strings.Repeat("x", maxReasonLen+1)
	tests := []struct {
		name              string
		customer, feature string
		spec              FeatureOverrideSpec
		fields            []string
	}{
		{"valid", "acme", "sso", FeatureOverrideSpec{Value: json.RawMessage(`true`), ExpiresAt: &future, Reason: &reason}, nil},
		{"value required", "acme", "sso", FeatureOverrideSpec{}, []string{"value"}},
		{"bad value", "acme", "sso", FeatureOverrideSpec{Value: json.RawMessage(`2.5`)}, []string{"value"}},
		{"expiry in the past", "acme", "sso", FeatureOverrideSpec{Value: json.RawMessage(`true`), ExpiresAt: &past}, []string{"expires_at"}},
		{"expiry now", "acme", "sso", FeatureOverrideSpec{Value: json.RawMessage(`true`), ExpiresAt: &t0}, []string{"expires_at"}},
		{"reason too long", "acme", "sso", FeatureOverrideSpec{Value: json.RawMessage(`true`), Reason: &long}, []string{"reason"}},
		{"bad address", "-acme", "SSO", FeatureOverrideSpec{Value: json.RawMessage(`true`)}, []string{"customer", "feature"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.spec.Validate(tt.customer, tt.feature, t0)
			var got []string
			var ve *ValidationError
			if errors.As(err, &ve) {
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !reflect.DeepEqual(got, tt.fields) {
				t.Fatalf("fields = %v, want %v", got, tt.fields)
			}
			if tt.fields == nil && (o.Value != FeatureBool(true) || o.Reason != reason || !o.ExpiresAt.Equal(future)) {
				t.Fatalf("override = %+v", o)
			}
		})
	}
}

func TestServiceFeatureOverrides(t *testing.T) {
	ts := newTestService()
	ts.seed(t)
	ctx := t.Context()
	future := t0.Add(time.Hour)
	spec := FeatureOverrideSpec{Value: json.RawMessage(`true`), ExpiresAt: &future}
	if _, created, err := ts.PutFeatureOverride(ctx, Write{Actor: "a"}, "acme", "sandbox", spec); err != nil || !created {
		t.Fatalf("PutFeatureOverride: created %v, %v", created, err)
	}
	if got := ts.changes[len(ts.changes)-1]; got != (Change{Kind: CustomerChanged, Key: "acme"}) {
		t.Fatalf("change = %+v, want the customer's", got)
	}
	_, features, err := ts.Features(ctx, "acme")
	if err != nil || features["sandbox"] != FeatureBool(true) {
		t.Fatalf("Features = %v, %v; want sandbox true", features, err)
	}
	ts.now = future
	a, features, err := ts.Features(ctx, "acme")
	if err != nil || features["sandbox"].Allowed() || !a.FeatureOverrides[0].Expired {
		t.Fatalf("Features at expiry = %v, %+v, %v; want sandbox gone, its override expired", features, a.FeatureOverrides, err)
	}
	if err := ts.DeleteFeatureOverride(ctx, Write{}, "acme", "sandbox"); err != nil {
		t.Fatalf("DeleteFeatureOverride: %v", err)
	}
	if err := ts.DeleteFeatureOverride(ctx, Write{}, "acme", "sandbox"); !errors.Is(err, ErrFeatureOverrideNotFound) {
		t.Fatalf("second DeleteFeatureOverride: %v, want ErrFeatureOverrideNotFound", err)
	}
}

// accountFunc is an AccountSource of a function.
type accountFunc func(ctx context.Context, id string) (Account, error)

func (f accountFunc) Account(ctx context.Context, id string) (Account, error) { return f(ctx, id) }

// TestFeatureChecker: answers come from the source's account at the
// checker's clock, which is read on every call: an override stops
// applying when the clock passes its expiry, the account unchanged.
func TestFeatureChecker(t *testing.T) {
	expiry := t0.Add(time.Minute)
	loads := 0
	src := accountFunc(func(_ context.Context, id string) (Account, error) {
		loads++
		if id != "acme" {
			return Account{}, ErrCustomerNotFound
		}
		return Account{
			Plan:             Plan{Features: map[string]FeatureValue{"sso": FeatureBool(false)}},
			FeatureOverrides: []FeatureOverride{{Feature: "sso", Value: FeatureBool(true), ExpiresAt: &expiry}},
		}, nil
	})
	now := t0
	fc := NewFeatureChecker(src, func() time.Time { return now })
	tests := []struct {
		name              string
		at                time.Time
		customer, feature string
		want              FeatureValue
		err               error
	}{
		{"override before its expiry", t0, "acme", "sso", FeatureBool(true), nil},
		{"plan's at the expiry", expiry, "acme", "sso", FeatureBool(false), nil},
		{"unknown customer", t0, "ghost", "sso", FeatureValue{}, ErrCustomerNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = tt.at
			got, err := fc.Feature(t.Context(), tt.customer, tt.feature)
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("Feature = %v, %v; want %v, %v", got, err, tt.want, tt.err)
			}
		})
	}
	before := loads
	var ve *ValidationError
	if _, err := fc.Feature(t.Context(), "acme", "Not A Key"); !errors.As(err, &ve) || loads != before {
		t.Errorf("bad key: %v after %d loads, want a ValidationError before any", err, loads-before)
	}
}

// TestCacheKeepsFeatureOverrides: a cached account carries its feature
// overrides on every hit, not only on the load that brought it, and a
// change of the customer brings the new ones.
func TestCacheKeepsFeatureOverrides(t *testing.T) {
	src := newFakeSource()
	src.plans["pro"] = Plan{Key: "pro", Features: map[string]FeatureValue{"sso": FeatureBool(false)}}
	src.accounts["acme"] = Customer{ID: "acme", Plan: "pro"}
	src.features = map[string][]FeatureOverride{"acme": {{Customer: "acme", Feature: "sso", Value: FeatureBool(true)}}}
	c := NewCache(src, 0)
	fc := NewFeatureChecker(c, func() time.Time { return t0 })
	for i := range 3 {
		if v, err := fc.Feature(t.Context(), "acme", "sso"); err != nil || v != FeatureBool(true) {
			t.Fatalf("check %d: %v, %v; want the override's true", i, v, err)
		}
	}
	if n := src.count("c:acme"); n != 1 {
		t.Fatalf("acme loaded %d times, want once", n)
	}
	src.mu.Lock()
	src.features["acme"] = nil
	src.mu.Unlock()
	c.Invalidate(Change{Kind: CustomerChanged, Key: "acme"})
	if v, err := fc.Feature(t.Context(), "acme", "sso"); err != nil || v != FeatureBool(false) {
		t.Fatalf("after the override's deletion: %v, %v; want the plan's false", v, err)
	}
}
