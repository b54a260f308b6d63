package tiers

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	tests := []struct {
		name   string
		window Window
		short  bool
		length time.Duration
		// resets: false for the one window that never ends.
		resets bool
	}{
		{"second", Second, true, time.Second, true},
		{"minute", Minute, true, time.Minute, true},
		{"hour", Hour, false, 0, true},
		{"day", Day, false, 0, true},
		{"week", Week, false, 0, true},
		{"month", Month, false, 0, true},
		{"total", Total, false, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := ParseWindow(tc.name)
			if !ok || w != tc.window {
				t.Fatalf("ParseWindow(%q) = %v, %v, want %v, true", tc.name, w, ok, tc.window)
			}
			checkNamed(t, tc.name, w)
			if !w.Valid() {
				t.Errorf("Valid() = false")
			}
			if got := w.Short(); got != tc.short {
				t.Errorf("Short() = %v, want %v", got, tc.short)
			}
			if got := w.Length(); got != tc.length {
				t.Errorf("Length() = %v, want %v", got, tc.length)
			}
			if got := w.Resets(); got != tc.resets {
				t.Errorf("Resets() = %v, want %v", got, tc.resets)
			}
		})
	}
	t.Run("listed shortest first", func(t *testing.T) {
		want := []Window{Second, Minute, Hour, Day, Week, Month, Total}
		if !reflect.DeepEqual(Windows, want) {
			t.Errorf("Windows = %v, want %v", Windows, want)
		}
		for i := 1; i < len(Windows); i++ {
			if Windows[i-1] >= Windows[i] {
				t.Errorf("window %v does not sort before %v", Windows[i-1], Windows[i])
			}
		}
	})
}

// textual is a pointer to a value named by text both ways, as a Window or
// a Mode is.
type textual[T any] interface {
	*T
	String() string
	MarshalText() ([]byte, error)
	UnmarshalText([]byte) error
}

// checkNamed checks that String and MarshalText name v name, and that
// UnmarshalText of name gives v back.
func checkNamed[T comparable, P textual[T]](t *testing.T, name string, v T) {
	t.Helper()
	if got := P(&v).String(); got != name {
		t.Errorf("String() = %q, want %q", got, name)
	}
	text, err := P(&v).MarshalText()
	if err != nil || string(text) != name {
		t.Errorf("MarshalText() = %q, %v, want %q", text, err, name)
	}
	var back T
	if err := P(&back).UnmarshalText([]byte(name)); err != nil || back != v {
		t.Errorf("UnmarshalText(%q) = %v, %v, want %v", name, back, err, v)
	}
}

// checkUnnamed checks that s names no value: parse (its name) gave v and
// ok for it, and UnmarshalText must fail too.
func checkUnnamed[T any, P textual[T]](t *testing.T, parse, s string, v T, ok bool) {
	t.Helper()
	if ok {
		t.Errorf("%s(%q) = %v, true; want false", parse, s, v)
	}
	var back T
	if err := P(&back).UnmarshalText([]byte(s)); err == nil {
		t.Errorf("UnmarshalText(%q) succeeded with %v", s, back)
	}
}

func TestInvalidWindows(t *testing.T) {
	for _, s := range []string{"", "Second", "DAY", "hours", "year", " day", "0", "Total", "lifetime"} {
		t.Run("parse "+s, func(t *testing.T) {
			w, ok := ParseWindow(s)
			checkUnnamed(t, "ParseWindow", s, w, ok)
		})
	}
	for _, w := range []Window{0, Total + 1, 255} {
		t.Run("value "+w.String(), func(t *testing.T) {
			if w.Valid() {
				t.Errorf("Valid() = true")
			}
			if text, err := w.MarshalText(); err == nil {
				t.Errorf("MarshalText() = %q, want an error", text)
			}
			if w.Short() || w.Length() != 0 {
				t.Errorf("Short() = %v, Length() = %v for an invalid window", w.Short(), w.Length())
			}
		})
	}
	if got := Window(9).String(); got != "Window(9)" {
		t.Errorf("Window(9).String() = %q", got)
	}
}

func TestModes(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
	}{
		{"hard", Hard},
		{"soft", Soft},
		{"elastic", Elastic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := ParseMode(tc.name)
			if !ok || m != tc.mode {
				t.Fatalf("ParseMode(%q) = %v, %v, want %v, true", tc.name, m, ok, tc.mode)
			}
			checkNamed(t, tc.name, m)
		})
	}
	for _, s := range []string{"", "HARD", "Soft", "burst"} {
		t.Run("invalid "+s, func(t *testing.T) {
			m, ok := ParseMode(s)
			checkUnnamed(t, "ParseMode", s, m, ok)
		})
	}
	for _, m := range []Mode{0, Elastic + 1} {
		if text, err := m.MarshalText(); err == nil {
			t.Errorf("Mode(%d).MarshalText() = %q, want an error", uint8(m), text)
		}
	}
	if got := Mode(0).String(); got != "Mode(0)" {
		t.Errorf("Mode(0).String() = %q", got)
	}
}

// checkMarshal checks that v marshals to want, and returns what it
// marshalled to.
func checkMarshal(t *testing.T, v any, want string) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if string(b) != want {
		t.Errorf("Marshal =\n  %s\nwant\n  %s", b, want)
	}
	return b
}

func TestLimitJSON(t *testing.T) {
	l := Limit{Metric: "api_calls", Window: Day, Limit: 100000, Mode: Soft, OveragePercent: 20, OveragePriceMicros: ptr[int64](1000)}
	b := checkMarshal(t, l, `{"metric":"api_calls","window":"day","limit":100000,"mode":"soft","overage_percent":20,"overage_price_micros":1000,"ceiling":null}`)
	var back Limit
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(back, l) {
		t.Errorf("round trip = %+v, want %+v", back, l)
	}
	if _, err := json.Marshal(Limit{Metric: "m"}); err == nil {
		t.Errorf("a limit without window and mode marshalled without error")
	}
}

// A short window shows its algorithm, the default named; a token bucket
// shows its size. Long windows show neither, whatever the value holds.
func TestLimitJSONShortWindows(t *testing.T) {
	const terms = `"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null`
	tests := []struct {
		name  string
		limit Limit
		want  string
		// same: decoding the answer gives the limit back exactly (else a
		// limit that counts the same: equal Size).
		same bool
	}{
		{"default sliding window", Limit{Metric: "m", Window: Second, Limit: 50, Mode: Hard},
			`{"metric":"m","window":"second","limit":50,` + terms + `,"algorithm":"sliding_window"}`, true},
		{"fixed window", Limit{Metric: "m", Window: Minute, Limit: 50, Mode: Hard, Algorithm: FixedWindow},
			`{"metric":"m","window":"minute","limit":50,` + terms + `,"algorithm":"fixed_window"}`, true},
		{"sliding log", Limit{Metric: "m", Window: Second, Limit: 50, Mode: Hard, Algorithm: SlidingLog},
			`{"metric":"m","window":"second","limit":50,` + terms + `,"algorithm":"sliding_log"}`, true},
		{"token bucket with burst", Limit{Metric: "m", Window: Minute, Limit: 50, Mode: Hard, Algorithm: TokenBucket, Burst: ptr[int64](80)},
			`{"metric":"m","window":"minute","limit":50,` + terms + `,"algorithm":"token_bucket","burst":80}`, true},
		{"token bucket without burst shows the limit", Limit{Metric: "m", Window: Second, Limit: 50, Mode: Hard, Algorithm: TokenBucket},
			`{"metric":"m","window":"second","limit":50,` + terms + `,"algorithm":"token_bucket","burst":50}`, false},
		{"token bucket of limit 0 shows no burst (0 could not be sent back)", Limit{Metric: "m", Window: Second, Limit: 0, Mode: Hard, Algorithm: TokenBucket},
			`{"metric":"m","window":"second","limit":0,` + terms + `,"algorithm":"token_bucket"}`, false},
		{"a burst without token bucket is not shown", Limit{Metric: "m", Window: Second, Limit: 5, Mode: Hard, Burst: ptr[int64](9)},
			`{"metric":"m","window":"second","limit":5,` + terms + `,"algorithm":"sliding_window"}`, false},
		{"long window shows neither", Limit{Metric: "m", Window: Hour, Limit: 5, Mode: Hard, Algorithm: TokenBucket, Burst: ptr[int64](9)},
			`{"metric":"m","window":"hour","limit":5,` + terms + `}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := checkMarshal(t, tc.limit, tc.want)
			var back Limit
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if tc.same && !reflect.DeepEqual(back, tc.limit) {
				t.Errorf("round trip = %+v, want %+v", back, tc.limit)
			}
			if back.Window.Short() && back.Size() != tc.limit.Size() {
				t.Errorf("round trip size = %d, want %d", back.Size(), tc.limit.Size())
			}
		})
	}
	if _, err := json.Marshal(Limit{Metric: "m", Window: Second, Mode: Hard, Algorithm: TokenBucket + 1}); err == nil {
		t.Errorf("a limit with an unknown algorithm marshalled without error")
	}
}

// per is shown on limits per subject only: a customer-wide limit looks as
// it did before limits per subject. Either value decodes.
func TestLimitJSONPer(t *testing.T) {
	const terms = `"limit":5,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null`
	exp := t0.Add(time.Hour)
	subject := Limit{Metric: "m", Window: Day, Limit: 5, Mode: Hard, Per: PerSubject}
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"customer-wide limit", Limit{Metric: "m", Window: Day, Limit: 5, Mode: Hard},
			`{"metric":"m","window":"day",` + terms + `}`},
		{"limit per subject", subject,
			`{"metric":"m","window":"day","per":"subject",` + terms + `}`},
		{"short limit per subject", Limit{Metric: "m", Window: Second, Limit: 5, Mode: Hard, Per: PerSubject},
			`{"metric":"m","window":"second","per":"subject",` + terms + `,"algorithm":"sliding_window"}`},
		{"override per subject", Override{Customer: "acme", Limit: subject, ExpiresAt: &exp, CreatedAt: t0, UpdatedAt: t0},
			`{"customer":"acme","metric":"m","window":"day","per":"subject",` + terms + `,"expires_at":"2026-11-22T11:00:00Z",` +
				`"reason":"","expired":false,"version":0,"created_at":"2026-11-22T10:00:00Z","updated_at":"2026-11-22T10:00:00Z"}`},
		{"effective limit per subject", EffectiveLimit{Limit: subject, Source: FromPlan},
			`{"metric":"m","window":"day","per":"subject",` + terms + `,"source":"plan","expires_at":null}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkMarshal(t, tc.v, tc.want)
		})
	}

	decodes := []struct {
		json string
		want Per
	}{
		{`{"metric":"m","window":"day","limit":5,"mode":"hard"}`, PerCustomer},
		{`{"metric":"m","window":"day","per":"customer","limit":5,"mode":"hard"}`, PerCustomer},
		{`{"metric":"m","window":"day","per":"subject","limit":5,"mode":"hard"}`, PerSubject},
	}
	for _, tc := range decodes {
		var got Limit
		if err := json.Unmarshal([]byte(tc.json), &got); err != nil {
			t.Errorf("Unmarshal(%s): %v", tc.json, err)
			continue
		}
		if got.Per != tc.want {
			t.Errorf("Unmarshal(%s).Per = %v, want %v", tc.json, got.Per, tc.want)
		}
	}
	var bad Limit
	if err := json.Unmarshal([]byte(`{"metric":"m","window":"day","per":"user"}`), &bad); err == nil {
		t.Errorf("an unknown per decoded without error")
	}
	if _, err := json.Marshal(Limit{Metric: "m", Window: Day, Mode: Hard, Per: PerSubject + 1}); err == nil {
		t.Errorf("a limit with an unknown per marshalled without error")
	}
}

// Override and EffectiveLimit marshal through methods of their own: every
// field of theirs and of their limit must be in the answer, in order, and a
// long window's answer is what plain reflection gave before limits had
// algorithms.
func TestOverrideAndEffectiveLimitJSON(t *testing.T) {
	exp := t0.Add(time.Hour)
	o := Override{Customer: "acme", Limit: Limit{Metric: "m", Window: Day, Limit: 5, Mode: Elastic, Ceiling: ptr[int64](9)},
		ExpiresAt: &exp, Reason: "launch", Expired: true, Version: 3, CreatedAt: t0, UpdatedAt: t0}
	const ts = `"2026-11-22T10:00:00Z"`
	const long = `"metric":"m","window":"day","limit":5,"mode":"elastic","overage_percent":0,"overage_price_micros":null,"ceiling":9`
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"override, long window", o,
			`{"customer":"acme",` + long + `,"expires_at":"2026-11-22T11:00:00Z","reason":"launch","expired":true,"version":3,"created_at":` + ts + `,"updated_at":` + ts + `}`},
		{"effective limit, long window", EffectiveLimit{Limit: o.Limit, Source: FromOverride, ExpiresAt: &exp},
			`{` + long + `,"source":"override","expires_at":"2026-11-22T11:00:00Z"}`},
		{"override, token bucket", Override{Customer: "acme", Limit: Limit{Metric: "m", Window: Second, Limit: 5, Mode: Hard,
			Algorithm: TokenBucket, Burst: ptr[int64](20)}, CreatedAt: t0, UpdatedAt: t0},
			`{"customer":"acme","metric":"m","window":"second","limit":5,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,` +
				`"algorithm":"token_bucket","burst":20,"expires_at":null,"reason":"","expired":false,"version":0,"created_at":` + ts + `,"updated_at":` + ts + `}`},
		{"effective limit, default algorithm", EffectiveLimit{Limit: Limit{Metric: "m", Window: Minute, Limit: 5, Mode: Hard}, Source: FromPlan},
			`{"metric":"m","window":"minute","limit":5,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,` +
				`"algorithm":"sliding_window","source":"plan","expires_at":null}`},
		{"plan limits", Plan{Key: "p", Limits: []Limit{{Metric: "m", Window: Second, Limit: 1, Mode: Hard, Algorithm: FixedWindow}},
			Features:      map[string]FeatureValue{"sso": FeatureBool(true), "seats": FeatureInt(10), "support": FeatureString("priority")},
			LatestVersion: 2, CreatedAt: t0, UpdatedAt: t0},
			`{"key":"p","name":"","description":"","public":false,"price":{"amount_cents":0,"currency":"","interval":""},"limits":[` +
				`{"metric":"m","window":"second","limit":1,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"algorithm":"fixed_window"}],` +
				`"features":{"seats":10,"sso":true,"support":"priority"},"latest_version":2,"version":0,"created_at":` + ts + `,"updated_at":` + ts + `}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkMarshal(t, tc.v, tc.want)
		})
	}

	// Every field the types declare is in the answer of a token bucket per
	// subject with a rollover (no valid limit has both: marshalling does
	// not judge): a field added to Override or EffectiveLimit must be
	// added to its MarshalJSON too.
	tb := Limit{Metric: "m", Window: Second, Limit: 1, Mode: Hard, Algorithm: TokenBucket, Per: PerSubject,
		Rollover: &Rollover{Max: 1}}
	for _, v := range []any{Override{Limit: tb}, EffectiveLimit{Limit: tb, Source: FromPlan}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal %T: %v", v, err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		want := jsonNames(reflect.TypeOf(v))
		if len(got) != len(want) {
			t.Errorf("%T shows %d fields, declares %d (%q): %s", v, len(got), len(want), want, b)
		}
		for _, name := range want {
			if _, ok := got[name]; !ok {
				t.Errorf("%T declares %s, its JSON lacks it: %s", v, name, b)
			}
		}
	}
}

// jsonNames lists the JSON names of typ's fields, those of embedded
// structs included.
func jsonNames(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func TestOverrideExpiredAt(t *testing.T) {
	tests := []struct {
		name    string
		expires *time.Time
		want    bool
	}{
		{"no expiry", nil, false},
		{"expires later", ptr(t0.Add(time.Nanosecond)), false},
		{"expires now", ptr(t0), true},
		{"expired before", ptr(t0.Add(-time.Hour)), true},
		{"same instant in another zone", ptr(t0.In(time.FixedZone("X", 3600))), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Override{ExpiresAt: tc.expires}
			if got := o.ExpiredAt(t0); got != tc.want {
				t.Errorf("ExpiredAt(now) = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidationErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *ValidationError
		want string
	}{
		{"one field", Invalid("plan", "is required"), "invalid input: plan: is required"},
		{"several fields", &ValidationError{Fields: []FieldError{
			{Field: "limits[0].window", Message: "is required"},
			{Field: "name", Message: "must not be empty"},
		}}, "invalid input: limits[0].window: is required; name: must not be empty"},
		{"no field name", &ValidationError{Fields: []FieldError{{Message: "body is empty"}}}, "invalid input: body is empty"},
		{"no fields", &ValidationError{}, "invalid input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	var err error = Invalid("x", "y")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0] != (FieldError{Field: "x", Message: "y"}) {
		t.Errorf("Invalid(x, y) = %#v", err)
	}
	b, err := json.Marshal(ve.Fields[0])
	if err != nil || string(b) != `{"field":"x","message":"y"}` {
		t.Errorf("FieldError JSON = %s, %v", b, err)
	}
}

func TestPreconditionCheck(t *testing.T) {
	tests := []struct {
		name    string
		p       Precondition
		exists  bool
		version int64
		wantOK  bool
	}{
		{"no If-Match, resource exists", Precondition{}, true, 3, true},
		{"no If-Match, resource missing", Precondition{}, false, 0, true},
		{"matching version", Precondition{Set: true, Versions: []int64{3}}, true, 3, true},
		{"one of several versions matches", Precondition{Set: true, Versions: []int64{1, 2, 3}}, true, 2, true},
		{"stale version", Precondition{Set: true, Versions: []int64{2}}, true, 3, false},
		{"newer version than stored", Precondition{Set: true, Versions: []int64{4}}, true, 3, false},
		{"star on existing resource", Precondition{Set: true, Any: true}, true, 7, true},
		{"star and stale version", Precondition{Set: true, Any: true, Versions: []int64{1}}, true, 7, true},
		{"star on missing resource", Precondition{Set: true, Any: true}, false, 0, false},
		{"version on missing resource", Precondition{Set: true, Versions: []int64{1}}, false, 0, false},
		{"version 0 on missing resource", Precondition{Set: true, Versions: []int64{0}}, false, 0, false},
		{"header with no usable tag (weak or malformed)", Precondition{Set: true}, true, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(tc.exists, tc.version)
			switch {
			case tc.wantOK && err != nil:
				t.Errorf("Check(%v, %d) = %v, want nil", tc.exists, tc.version, err)
			case !tc.wantOK && !errors.Is(err, ErrPreconditionFailed):
				t.Errorf("Check(%v, %d) = %v, want ErrPreconditionFailed", tc.exists, tc.version, err)
			}
		})
	}
}

func TestLimitKeyString(t *testing.T) {
	tests := []struct {
		key  LimitKey
		want string
	}{
		{LimitKey{Metric: "api_calls", Window: Day}, "api_calls/day"},
		{LimitKey{Metric: "api_calls", Window: Second, Per: PerSubject}, "api_calls/second/subject"},
	}
	for _, tc := range tests {
		if got := tc.key.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.key, got, tc.want)
		}
		if back, ok := ParseLimitKey(tc.want); !ok || back != tc.key {
			t.Errorf("ParseLimitKey(%q) = %#v, %v; want %#v", tc.want, back, ok, tc.key)
		}
	}
	for _, bad := range []string{"", "api_calls", "api_calls/", "api_calls/year", "API/day", "/day",
		"api_calls/day/", "api_calls/day/customer", "api_calls/day/subject/x", "api_calls/day/Subject"} {
		if k, ok := ParseLimitKey(bad); ok {
			t.Errorf("ParseLimitKey(%q) = %#v, want no key", bad, k)
		}
	}
}
