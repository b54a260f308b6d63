package quota_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Entitlements lists every effective limit of the customer with its usage
// as checks left it (the subject's windows with a subject), its features,
// and counts nothing; with leases, a customer this process checked is
// answered from memory: with the store out of reach, it still answers,
// where usage (a read of the store) cannot.
func TestEntitlements(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
		f := newFixture(t, now, true, leases)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutMetric("seats", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{
			lim("api_calls", tiers.Minute, 50),
			lim("api_calls", tiers.Day, 100),
			perSubject(lim("api_calls", tiers.Day, 30)),
			{Metric: "seats", Window: tiers.Total, Limit: 5, Mode: tiers.Soft, OveragePercent: 20},
		})
		acct := f.catalog.Accounts["acme"]
		acct.Plan.Features = map[string]tiers.FeatureValue{"sso": tiers.FeatureBool(true), "projects": tiers.FeatureInt(10)}
		f.catalog.Accounts["acme"] = acct
		ctx := context.Background()
		for _, r := range []quota.Request{
			{Customer: "acme", Metric: "api_calls", Cost: 7, Subject: "u1"},
			{Customer: "acme", Metric: "api_calls", Cost: 4, Subject: "u2"},
			{Customer: "acme", Metric: "seats", Cost: 3},
		} {
			if d, err := f.engine.Check(ctx, r); err != nil || !d.Allowed {
				t.Fatalf("check %+v: %+v, %v", r, d, err)
			}
		}
		day := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
		want := []string{
			fmt.Sprintf("api_calls  minute hard 50 used 11 remaining 39 reset %s", now.Add(time.Minute).Format(time.RFC3339)),
			fmt.Sprintf("api_calls  day hard 100 used 11 remaining 89 reset %s", day.Format(time.RFC3339)),
			fmt.Sprintf("api_calls u1 day hard 30 used 7 remaining 23 reset %s", day.Format(time.RFC3339)),
			"seats  total soft 5 used 3 remaining 2 reset 0001-01-01T00:00:00Z",
		}
		check := func(t *testing.T) {
			t.Helper()
			e, err := f.engine.Entitlements(ctx, "acme", "u1")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range e.Usage {
				got = append(got, fmt.Sprintf("%s %s %s %s %d used %d remaining %d reset %s", u.Metric, u.Subject, u.Window,
					u.Mode, u.Limit, u.Used, u.Remaining, u.ResetAt.Format(time.RFC3339)))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("usage:\n got %q\nwant %q", got, want)
			}
			if e.Account.Customer.ID != "acme" || !e.At.Equal(now) || len(e.Features) != 2 || !e.Features["sso"].Allowed() {
				t.Errorf("entitlements: %+v", e)
			}
		}
		check(t)
		check(t) // a look counts nothing
		if e, err := f.engine.Entitlements(ctx, "acme", ""); err != nil || len(e.Usage) != 3 {
			t.Errorf("without a subject: %+v, %v; want the customer's 3 windows", e.Usage, err)
		}
		f.ledger.Err = fmt.Errorf("%w: connection refused", tiers.ErrUnavailable)
		_, _, err := f.engine.Usage(ctx, "acme", "u1")
		if !errors.Is(err, tiers.ErrUnavailable) {
			t.Fatalf("usage with the store down: %v; want it unavailable (a read of the store)", err)
		}
		if !leases {
			if _, err := f.engine.Entitlements(ctx, "acme", "u1"); !errors.Is(err, tiers.ErrUnavailable) {
				t.Fatalf("entitlements without leases, the store down: %v; want it unavailable", err)
			}
			return
		}
		check(t) // from the leases
	})
}

// Entitlements refuses what usage refuses, as usage does.
func TestEntitlementsErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), false, true)
	f.catalog.PutMetric("api_calls", nil)
	f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{lim("api_calls", tiers.Day, 10)})
	ctx := context.Background()
	for _, tc := range []struct {
		customer, subject string
		want              error
	}{
		{"ghost", "", tiers.ErrCustomerNotFound},
		{"", "", &tiers.ValidationError{}},
		{"acme", "a b", &tiers.ValidationError{}},
	} {
		_, err := f.engine.Entitlements(ctx, tc.customer, tc.subject)
		var ve *tiers.ValidationError
		if wantVE := errors.As(tc.want, &ve); wantVE && !errors.As(err, &ve) || !wantVE && !errors.Is(err, tc.want) {
			t.Errorf("Entitlements(%q, %q) = %v; want %v", tc.customer, tc.subject, err, tc.want)
		}
	}
}
