package quotadtest_test

import (
	"testing"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// TestClientEntitlements reads a customer's entitlements through the
// client with a check token: features in Go types, limits with usage (the
// subject's with a subject), live grants.
func TestClientEntitlements(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	c := quotad.New(s.URL, quotad.WithToken(s.CheckToken))
	ctx := t.Context()
	if _, _, err := admin.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Plans.Put(ctx, "pro", quotad.PlanSpec{Name: "Pro", Features: quotad.Features{"sso": true},
		Limits: []quotad.Limit{{Metric: "api_calls", Window: "month", Limit: 100},
			{Metric: "api_calls", Window: "day", Limit: 10, Per: "subject"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Grants.Create(ctx, "acme", quotad.GrantSpec{Metric: "api_calls", Amount: 50}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls", Cost: 3, Subject: "u1"}); err != nil || !res.Allowed {
		t.Fatalf("check: %+v, %v", res, err)
	}
	e, err := c.Entitlements(ctx, "acme", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Customer != "acme" || e.Plan != "pro" || e.Status != "active" || e.Features["sso"] != true {
		t.Errorf("entitlements = %+v", e)
	}
	if len(e.Limits) != 2 || e.Limits[0].Window != "month" || e.Limits[0].Used != 3 || e.Limits[0].Remaining != 97 ||
		e.Limits[0].ResetAt.IsZero() || e.Limits[1].Per != "subject" || e.Limits[1].Subject != "u1" || e.Limits[1].Used != 3 {
		t.Errorf("limits = %+v", e.Limits)
	}
	if len(e.Grants) != 1 || e.Grants[0].Amount != 50 || e.Grants[0].Remaining != 50 {
		t.Errorf("grants = %+v", e.Grants)
	}
	if e, err := c.Entitlements(ctx, "acme", ""); err != nil || len(e.Limits) != 1 {
		t.Errorf("without a subject: %+v, %v; want the month alone", e, err)
	}
}
