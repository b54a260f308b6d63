package tiers

import (
	"testing"
)

func TestCheapestUpgrade(t *testing.T) {
	daily := func(n int64) Limit { return Limit{Metric: "calls", Window: Day, Limit: n, Mode: Hard} }
	monthly := func(n int64) Limit { return Limit{Metric: "calls", Window: Month, Limit: n, Mode: Hard} }
	plan := func(key string, public bool, cents int64, interval string, limits ...Limit) Plan {
		return Plan{Key: key, Name: "Plan " + key, Public: public,
			Price: Price{AmountCents: cents, Currency: "USD", Interval: interval}, Limits: limits}
	}
	inEUR := plan("euro", true, 100, "month", daily(1000))
	inEUR.Price.Currency = "EUR"
	free := plan("free", true, 0, "month", daily(100))
	// The check needs 150 units a day and 2,000 a month.
	needs := []Need{{Metric: "calls", Window: Day, Units: 150}, {Metric: "calls", Window: Month, Units: 2000}}
	ptr := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name      string
		plans     []Plan
		want      string // "" for none
		wantLimit *int64
	}{
		{name: "the cheapest that admits", want: "pro", wantLimit: ptr(1000), plans: []Plan{
			plan("business", true, 9900, "month", daily(5000)),
			plan("pro", true, 2900, "month", daily(1000)),
			plan("starter", true, 900, "month", daily(120)), // too small
		}},
		{name: "a yearly price compares per month", want: "annual", wantLimit: ptr(500), plans: []Plan{
			plan("pro", true, 2900, "month", daily(1000)),
			plan("annual", true, 30000, "year", daily(500)), // 25.00 a month
		}},
		{name: "a weekly price compares per month", want: "pro", wantLimit: ptr(1000), plans: []Plan{
			plan("pro", true, 2900, "month", daily(1000)),
			plan("weekly", true, 700, "week", daily(500)), // 30.33 a month
		}},
		{name: "a tie goes to the first key", want: "alpha", wantLimit: ptr(200), plans: []Plan{
			plan("alpha", true, 2900, "month", daily(200)),
			plan("beta", true, 2900, "month", daily(1000)),
		}},
		{name: "a tie across intervals goes to the first key", want: "monthly", wantLimit: ptr(200), plans: []Plan{
			plan("yearly", true, 12000, "year", daily(200)),
			plan("monthly", true, 1000, "month", daily(200)),
		}},
		{name: "none big enough", plans: []Plan{
			plan("starter", true, 900, "month", daily(149)),
		}},
		{name: "exactly big enough", want: "starter", wantLimit: ptr(150), plans: []Plan{
			plan("starter", true, 900, "month", daily(150)),
		}},
		{name: "another window too small", plans: []Plan{
			plan("pro", true, 2900, "month", daily(1000), monthly(1999)),
		}},
		{name: "no limit in the window: unlimited", want: "unlimited", plans: []Plan{
			plan("unlimited", true, 9900, "month", monthly(100_000)),
			plan("pro", true, 12900, "month", daily(1000)),
		}},
		{name: "not public", plans: []Plan{
			plan("secret", false, 100, "month", daily(1000)),
		}},
		{name: "the customer's own plan never", plans: []Plan{
			plan("free", true, 0, "month", daily(10_000)),
		}},
		{name: "another currency skipped", plans: []Plan{inEUR}},
		{name: "a limit per subject is another limit", want: "cheap", wantLimit: ptr(1000), plans: []Plan{
			plan("pro", true, 2900, "month", daily(1000)),
			plan("cheap", true, 100, "month", Limit{Metric: "calls", Window: Day, Limit: 10, Per: PerSubject}, daily(1000)),
		}},
		{name: "another metric's limit does not count", want: "pro", wantLimit: ptr(1000), plans: []Plan{
			plan("pro", true, 2900, "month", daily(1000)),
			plan("other", true, 100, "month", Limit{Metric: "storage", Window: Day, Limit: 1, Mode: Hard}, daily(10)),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := CheapestUpgrade(tc.plans, free, needs)
			switch {
			case tc.want == "" && ok:
				t.Fatalf("upgrade %+v, want none", u)
			case tc.want == "":
				return
			case !ok:
				t.Fatalf("no upgrade, want %s", tc.want)
			}
			var want Plan
			for _, p := range tc.plans {
				if p.Key == tc.want {
					want = p
				}
			}
			if u.Plan != want.Key || u.Name != want.Name || u.Price != want.Price {
				t.Errorf("upgrade %+v, want plan %s (%s, %+v)", u, want.Key, want.Name, want.Price)
			}
			if (u.Limit == nil) != (tc.wantLimit == nil) || (u.Limit != nil && *u.Limit != *tc.wantLimit) {
				t.Errorf("limit %v, want %v", u.Limit, tc.wantLimit)
			}
		})
	}
}
