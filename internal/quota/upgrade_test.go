package quota_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// TestCheckUpgrade: a denied check whose denying window is a hard limit
// names the cheapest public plan that would have admitted it; an admitted
// check, a soft or an elastic limit's answer, names none.
func TestCheckUpgrade(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	usd := func(cents int64) tiers.Price {
		return tiers.Price{AmountCents: cents, Currency: "USD", Interval: "month"}
	}
	public := func(key string, cents int64, limits ...tiers.Limit) tiers.Plan {
		return tiers.Plan{Key: key, Name: "Plan " + key, Public: true, Price: usd(cents), Limits: limits}
	}
	pro := public("pro", 2900, hard(tiers.Day, 100))
	business := public("business", 9900, hard(tiers.Day, 1000))
	for _, tc := range []struct {
		name   string
		limits []tiers.Limit // the customer's plan's
		own    bool          // the customer's plan is public too, and the biggest
		plans  []tiers.Plan
		before int64 // units checked first
		cost   int64
		want   string // the upgrade's plan; "" for none
	}{
		{name: "hard limit: the cheapest that admits", limits: []tiers.Limit{hard(tiers.Day, 10)},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 5, want: "pro"},
		{name: "hard limit: the cheapest big enough", limits: []tiers.Limit{hard(tiers.Day, 10)},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 200, want: "business"},
		{name: "cost beyond the limit (never)", limits: []tiers.Limit{hard(tiers.Day, 10)},
			plans: []tiers.Plan{business, pro}, cost: 50, want: "pro"},
		{name: "no plan big enough", limits: []tiers.Limit{hard(tiers.Day, 10)},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 5000},
		{name: "admitted", limits: []tiers.Limit{hard(tiers.Day, 10)},
			plans: []tiers.Plan{business, pro}, before: 2, cost: 5},
		{name: "the customer's own plan is never offered", limits: []tiers.Limit{hard(tiers.Day, 10)},
			own: true, plans: []tiers.Plan{business, pro}, before: 8, cost: 5, want: "pro"},
		{name: "soft overage admitted", limits: []tiers.Limit{soft(tiers.Day, 10, 100)},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 5},
		{name: "soft limit's bound denies", limits: []tiers.Limit{soft(tiers.Day, 10, 50)},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 10},
		{name: "elastic admitted on spare capacity", limits: []tiers.Limit{elastic(tiers.Day, 10, nil)},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 5},
		{name: "elastic ceiling denies", limits: []tiers.Limit{elastic(tiers.Day, 10, ptr(int64(12)))},
			plans: []tiers.Plan{business, pro}, before: 8, cost: 5},
		{name: "hard and elastic windows, the hard one denies", want: "pro",
			limits: []tiers.Limit{hard(tiers.Day, 10), elastic(tiers.Month, 1000, nil)},
			plans:  []tiers.Plan{business, pro}, before: 8, cost: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, now, false, false)
			f.catalog.PutMetric("api_calls", map[tiers.Window]int64{tiers.Day: 1_000_000, tiers.Month: 1_000_000})
			f.catalog.PutCustomer("acme", tiers.Anchor{}, tc.limits)
			acct := f.catalog.Accounts["acme"]
			acct.Plan.Price = usd(900)
			plans := tc.plans
			if tc.own {
				acct.Plan.Public = true
				acct.Plan.Limits = append(acct.Plan.Limits, hard(tiers.Week, 1_000_000))
				// As the store lists it: its latest version, which
				// admits everything for nothing.
				own := acct.Plan
				own.Price.AmountCents, own.Limits = 0, nil
				plans = append([]tiers.Plan{own}, plans...)
			}
			f.catalog.Accounts["acme"] = acct
			f.catalog.Plans = plans
			ctx := context.Background()
			if tc.before > 0 {
				d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: tc.before})
				if err != nil || !d.Allowed {
					t.Fatalf("first check: %+v, %v", d, err)
				}
			}
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: tc.cost})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && d.Upgrade != nil:
				t.Fatalf("upgrade %+v (allowed %v, limits %+v), want none", *d.Upgrade, d.Allowed, d.Limits)
			case tc.want != "" && d.Upgrade == nil:
				t.Fatalf("no upgrade (allowed %v, limits %+v), want %s", d.Allowed, d.Limits, tc.want)
			case tc.want != "" && d.Upgrade.Plan != tc.want:
				t.Fatalf("upgrade %+v, want %s", *d.Upgrade, tc.want)
			}
		})
	}
}
