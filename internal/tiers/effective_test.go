package tiers

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// hard returns a hard limit.
func hard(metric string, w Window, n int64) Limit {
	return Limit{Metric: metric, Window: w, Limit: n, Mode: Hard}
}

// override returns acme's override with the given limit and expiry.
func override(l Limit, expires *time.Time) Override {
	return Override{Customer: "acme", Limit: l, ExpiresAt: expires}
}

// subject returns l per subject.
func subject(l Limit) Limit {
	l.Per = PerSubject
	return l
}

func fromPlan(l Limit) EffectiveLimit { return EffectiveLimit{Limit: l, Source: FromPlan} }

func fromOverride(l Limit, expires *time.Time) EffectiveLimit {
	return EffectiveLimit{Limit: l, Source: FromOverride, ExpiresAt: expires}
}

// describe renders effective limits one per line for failure messages.
func describe(list []EffectiveLimit) string {
	if len(list) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, e := range list {
		opt := func(p *int64) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprint(*p)
		}
		exp := "-"
		if e.ExpiresAt != nil {
			exp = e.ExpiresAt.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "  %s limit=%d mode=%s pct=%d price=%s ceiling=%s source=%s expires=%s\n",
			e.Key(), e.Limit.Limit, e.Mode, e.OveragePercent, opt(e.OveragePriceMicros), opt(e.Ceiling), e.Source, exp)
	}
	return b.String()
}

func TestEffective(t *testing.T) {
	later := t0.Add(24 * time.Hour)
	justLater := t0.Add(time.Nanosecond)
	earlier := t0.Add(-time.Hour)
	now := t0

	soft := Limit{Metric: "api_calls", Window: Day, Limit: 100000, Mode: Soft, OveragePercent: 20, OveragePriceMicros: ptr[int64](1000)}
	elastic := Limit{Metric: "api_calls", Window: Day, Limit: 500, Mode: Elastic, Ceiling: ptr[int64](800)}

	tests := []struct {
		name      string
		plan      []Limit
		overrides []Override
		want      []EffectiveLimit
	}{
		{
			name: "no limits at all",
			want: []EffectiveLimit{},
		},
		{
			name: "plan limits only, sorted by metric then window",
			plan: []Limit{hard("tokens", Day, 9), hard("api_calls", Month, 3), hard("api_calls", Second, 1), hard("api_calls", Hour, 2)},
			want: []EffectiveLimit{
				fromPlan(hard("api_calls", Second, 1)),
				fromPlan(hard("api_calls", Hour, 2)),
				fromPlan(hard("api_calls", Month, 3)),
				fromPlan(hard("tokens", Day, 9)),
			},
		},
		{
			name: "every window in order from shortest to longest",
			plan: []Limit{hard("m", Month, 6), hard("m", Week, 5), hard("m", Day, 4), hard("m", Hour, 3), hard("m", Minute, 2), hard("m", Second, 1)},
			want: []EffectiveLimit{
				fromPlan(hard("m", Second, 1)), fromPlan(hard("m", Minute, 2)), fromPlan(hard("m", Hour, 3)),
				fromPlan(hard("m", Day, 4)), fromPlan(hard("m", Week, 5)), fromPlan(hard("m", Month, 6)),
			},
		},
		{
			name:      "override replaces the plan's limit on the same metric+window",
			plan:      []Limit{hard("api_calls", Second, 50), hard("api_calls", Day, 1000)},
			overrides: []Override{override(hard("api_calls", Day, 5000), &later)},
			want: []EffectiveLimit{
				fromPlan(hard("api_calls", Second, 50)),
				fromOverride(hard("api_calls", Day, 5000), &later),
			},
		},
		{
			name:      "override can lower a limit to zero",
			plan:      []Limit{hard("exports", Day, 10)},
			overrides: []Override{override(hard("exports", Day, 0), nil)},
			want:      []EffectiveLimit{fromOverride(hard("exports", Day, 0), nil)},
		},
		{
			name:      "override adds a window the plan lacks",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(hard("api_calls", Minute, 10), nil)},
			want: []EffectiveLimit{
				fromOverride(hard("api_calls", Minute, 10), nil),
				fromPlan(hard("api_calls", Day, 1000)),
			},
		},
		{
			name:      "override adds a metric the plan lacks",
			plan:      []Limit{hard("b", Day, 1)},
			overrides: []Override{override(hard("a", Day, 2), nil), override(hard("c", Hour, 3), nil)},
			want: []EffectiveLimit{
				fromOverride(hard("a", Day, 2), nil),
				fromPlan(hard("b", Day, 1)),
				fromOverride(hard("c", Hour, 3), nil),
			},
		},
		{
			name:      "override with no plan limits",
			overrides: []Override{override(hard("a", Week, 7), &later)},
			want:      []EffectiveLimit{fromOverride(hard("a", Week, 7), &later)},
		},
		{
			name:      "override expiring exactly now is ignored",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(hard("api_calls", Day, 5000), &now)},
			want:      []EffectiveLimit{fromPlan(hard("api_calls", Day, 1000))},
		},
		{
			name:      "override that expired earlier is ignored",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(hard("api_calls", Day, 5000), &earlier)},
			want:      []EffectiveLimit{fromPlan(hard("api_calls", Day, 1000))},
		},
		{
			name:      "expired override adds nothing",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(hard("api_calls", Second, 5), &earlier), override(hard("tokens", Day, 5), &now)},
			want:      []EffectiveLimit{fromPlan(hard("api_calls", Day, 1000))},
		},
		{
			name:      "override expiring a nanosecond from now still applies",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(hard("api_calls", Day, 5000), &justLater)},
			want:      []EffectiveLimit{fromOverride(hard("api_calls", Day, 5000), &justLater)},
		},
		{
			name: "live and expired overrides together",
			plan: []Limit{hard("a", Day, 1), hard("b", Day, 1), hard("c", Day, 1)},
			overrides: []Override{
				override(hard("a", Day, 10), &earlier),
				override(hard("b", Day, 20), nil),
				override(hard("c", Day, 30), &later),
				override(hard("d", Day, 40), &now),
			},
			want: []EffectiveLimit{
				fromPlan(hard("a", Day, 1)),
				fromOverride(hard("b", Day, 20), nil),
				fromOverride(hard("c", Day, 30), &later),
			},
		},
		{
			name: "plan modes are carried with all their terms",
			plan: []Limit{soft, {Metric: "exports", Window: Month, Limit: 10, Mode: Elastic, Ceiling: ptr[int64](15)}, hard("api_calls", Second, 50)},
			want: []EffectiveLimit{
				fromPlan(hard("api_calls", Second, 50)),
				fromPlan(soft),
				fromPlan(Limit{Metric: "exports", Window: Month, Limit: 10, Mode: Elastic, Ceiling: ptr[int64](15)}),
			},
		},
		{
			name:      "soft override replaces a hard plan limit",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(soft, nil)},
			want:      []EffectiveLimit{fromOverride(soft, nil)},
		},
		{
			name:      "elastic override replaces a soft plan limit",
			plan:      []Limit{soft},
			overrides: []Override{override(elastic, &later)},
			want:      []EffectiveLimit{fromOverride(elastic, &later)},
		},
		{
			name:      "hard override inherits nothing from a soft plan limit",
			plan:      []Limit{soft},
			overrides: []Override{override(hard("api_calls", Day, 10), nil)},
			want:      []EffectiveLimit{fromOverride(hard("api_calls", Day, 10), nil)},
		},
		{
			name: "limits per subject beside the customer's, the customer's first",
			plan: []Limit{subject(hard("api_calls", Day, 100)), hard("api_calls", Day, 1000), subject(hard("api_calls", Second, 1))},
			want: []EffectiveLimit{
				fromPlan(subject(hard("api_calls", Second, 1))),
				fromPlan(hard("api_calls", Day, 1000)),
				fromPlan(subject(hard("api_calls", Day, 100))),
			},
		},
		{
			name:      "a per-subject override replaces the plan's limit per subject, not the customer's",
			plan:      []Limit{hard("api_calls", Day, 1000), subject(hard("api_calls", Day, 100))},
			overrides: []Override{override(subject(hard("api_calls", Day, 300)), &later)},
			want: []EffectiveLimit{
				fromPlan(hard("api_calls", Day, 1000)),
				fromOverride(subject(hard("api_calls", Day, 300)), &later),
			},
		},
		{
			name:      "a customer-wide override replaces the customer's limit, not the one per subject",
			plan:      []Limit{hard("api_calls", Day, 1000), subject(hard("api_calls", Day, 100))},
			overrides: []Override{override(hard("api_calls", Day, 5000), nil)},
			want: []EffectiveLimit{
				fromOverride(hard("api_calls", Day, 5000), nil),
				fromPlan(subject(hard("api_calls", Day, 100))),
			},
		},
		{
			name:      "a per-subject override adds a limit per subject beside the plan's customer-wide one",
			plan:      []Limit{hard("api_calls", Day, 1000)},
			overrides: []Override{override(subject(hard("api_calls", Day, 50)), nil)},
			want: []EffectiveLimit{
				fromPlan(hard("api_calls", Day, 1000)),
				fromOverride(subject(hard("api_calls", Day, 50)), nil),
			},
		},
		{
			name: "overrides of both kinds on one metric+window",
			plan: []Limit{hard("api_calls", Day, 1000), subject(hard("api_calls", Day, 100))},
			overrides: []Override{
				override(subject(hard("api_calls", Day, 200)), nil),
				override(hard("api_calls", Day, 2000), &later),
			},
			want: []EffectiveLimit{
				fromOverride(hard("api_calls", Day, 2000), &later),
				fromOverride(subject(hard("api_calls", Day, 200)), nil),
			},
		},
		{
			name:      "an expired per-subject override gives the plan's limit per subject back",
			plan:      []Limit{hard("api_calls", Day, 1000), subject(hard("api_calls", Day, 100))},
			overrides: []Override{override(subject(hard("api_calls", Day, 300)), &earlier)},
			want: []EffectiveLimit{
				fromPlan(hard("api_calls", Day, 1000)),
				fromPlan(subject(hard("api_calls", Day, 100))),
			},
		},
		{
			name:      "expired elastic override leaves the soft plan limit untouched",
			plan:      []Limit{soft},
			overrides: []Override{override(elastic, &earlier)},
			want:      []EffectiveLimit{fromPlan(soft)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := Plan{Key: "pro", Limits: tc.plan}
			got := Effective(plan, tc.overrides, now)
			if len(got) != len(tc.want) || (len(got) > 0 && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("Effective =\n%swant\n%s", describe(got), describe(tc.want))
			}
		})
	}
}

// TestEffectiveDeterministic checks that the answer does not depend on the
// order of the plan's limits or of the overrides, and that Effective leaves
// its inputs as they were.
func TestEffectiveDeterministic(t *testing.T) {
	later := t0.Add(time.Hour)
	expired := t0.Add(-time.Second)
	limits := []Limit{
		hard("a", Second, 1), subject(hard("a", Day, 7)), hard("a", Day, 2), hard("b", Minute, 3), hard("b", Month, 4),
		hard("c", Week, 5),
	}
	overrides := []Override{
		override(hard("a", Day, 20), nil),
		override(subject(hard("b", Minute, 33)), nil),
		override(hard("b", Hour, 30), &later),
		override(hard("c", Week, 50), &expired),
		override(hard("d", Second, 60), nil),
	}
	want := []EffectiveLimit{
		fromPlan(hard("a", Second, 1)),
		fromOverride(hard("a", Day, 20), nil),
		fromPlan(subject(hard("a", Day, 7))),
		fromPlan(hard("b", Minute, 3)),
		fromOverride(subject(hard("b", Minute, 33)), nil),
		fromOverride(hard("b", Hour, 30), &later),
		fromPlan(hard("b", Month, 4)),
		fromPlan(hard("c", Week, 5)),
		fromOverride(hard("d", Second, 60), nil),
	}

	// Every rotation of the limits combined with every rotation of the
	// overrides, both forwards and reversed.
	for i := range limits {
		for j := range overrides {
			for _, reverse := range []bool{false, true} {
				l := append(slices.Clone(limits[i:]), limits[:i]...)
				o := append(slices.Clone(overrides[j:]), overrides[:j]...)
				if reverse {
					slices.Reverse(l)
					slices.Reverse(o)
				}
				lBefore, oBefore := slices.Clone(l), slices.Clone(o)
				got := Effective(Plan{Key: "p", Limits: l}, o, t0)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("limits rotated by %d, overrides by %d, reversed %v: Effective =\n%swant\n%s",
						i, j, reverse, describe(got), describe(want))
				}
				if !reflect.DeepEqual(l, lBefore) || !reflect.DeepEqual(o, oBefore) {
					t.Fatalf("Effective modified its inputs")
				}
			}
		}
	}
}

// TestEffectiveOverTime follows one account as its override expires: the
// plan's limit comes back at the expiry instant, not a moment later.
func TestEffectiveOverTime(t *testing.T) {
	expires := t0.Add(time.Hour)
	plan := Plan{Key: "p", Limits: []Limit{hard("api_calls", Day, 1000)}}
	overrides := []Override{override(hard("api_calls", Day, 5000), &expires)}
	tests := []struct {
		name      string
		now       time.Time
		wantLimit int64
		wantFrom  Source
	}{
		{"long before expiry", t0, 5000, FromOverride},
		{"last nanosecond", expires.Add(-time.Nanosecond), 5000, FromOverride},
		{"at expiry", expires, 1000, FromPlan},
		{"after expiry", expires.Add(time.Hour), 1000, FromPlan},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Effective(plan, overrides, tc.now)
			if len(got) != 1 || got[0].Limit.Limit != tc.wantLimit || got[0].Source != tc.wantFrom {
				t.Errorf("Effective at %v =\n%swant one limit of %d from %s", tc.now, describe(got), tc.wantLimit, tc.wantFrom)
			}
		})
	}
}

func TestNextExpiry(t *testing.T) {
	in := func(d time.Duration) *time.Time { return ptr(t0.Add(d)) }
	tests := []struct {
		name      string
		overrides []Override
		want      time.Time // zero: none
	}{
		{"no overrides", nil, time.Time{}},
		{"overrides that never expire", []Override{{}, {}}, time.Time{}},
		{"only expired ones", []Override{{ExpiresAt: in(-time.Hour)}, {ExpiresAt: in(0)}}, time.Time{}},
		{"one future expiry", []Override{{ExpiresAt: in(time.Hour)}}, t0.Add(time.Hour)},
		{"earliest of several", []Override{
			{ExpiresAt: in(3 * time.Hour)}, {}, {ExpiresAt: in(time.Minute)}, {ExpiresAt: in(-time.Minute)}, {ExpiresAt: in(time.Hour)},
		}, t0.Add(time.Minute)},
		{"one nanosecond ahead", []Override{{ExpiresAt: in(time.Nanosecond)}, {ExpiresAt: in(0)}}, t0.Add(time.Nanosecond)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NextExpiry(tc.overrides, t0)
			if !got.Equal(tc.want) {
				t.Errorf("NextExpiry = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNextExpiryBoundsEffective checks NextExpiry's promise: Effective's
// answer is the same at every instant before it, and changes at it.
func TestNextExpiryBoundsEffective(t *testing.T) {
	plan := Plan{Key: "p", Limits: []Limit{hard("a", Day, 1), hard("b", Day, 1)}}
	overrides := []Override{
		override(hard("a", Day, 10), ptr(t0.Add(90*time.Minute))),
		override(hard("b", Day, 20), ptr(t0.Add(30*time.Minute))),
	}
	next := NextExpiry(overrides, t0)
	if !next.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("NextExpiry = %v, want %v", next, t0.Add(30*time.Minute))
	}
	first := Effective(plan, overrides, t0)
	for _, at := range []time.Time{t0.Add(time.Minute), next.Add(-time.Nanosecond)} {
		if got := Effective(plan, overrides, at); !reflect.DeepEqual(got, first) {
			t.Errorf("Effective changed at %v, before NextExpiry %v:\n%s", at, next, describe(got))
		}
	}
	if got := Effective(plan, overrides, next); reflect.DeepEqual(got, first) {
		t.Errorf("Effective did not change at NextExpiry %v:\n%s", next, describe(got))
	}
}
