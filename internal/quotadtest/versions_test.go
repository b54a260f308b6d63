package quotadtest_test

import (
	"errors"
	"reflect"
	"testing"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// TestClientPlanVersions drives the client's version calls against
// quotad: a grandfathered change, the versions listed and read, a
// migration's dry run and the migration.
func TestClientPlanVersions(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	c := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()
	if _, _, err := c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{}); err != nil {
		t.Fatal(err)
	}
	plan := func(limit int64) quotad.PlanSpec {
		return quotad.PlanSpec{Name: "Pro", Limits: []quotad.Limit{{Metric: "api_calls", Window: quotad.Day, Limit: limit}}}
	}
	if _, _, err := c.Plans.Put(ctx, "pro", plan(10)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls", Cost: 6}); err != nil {
		t.Fatal(err)
	}
	p, _, err := c.Plans.PutGrandfathered(ctx, "pro", plan(5))
	if err != nil || p.LatestVersion != 2 {
		t.Fatalf("Plans.PutGrandfathered: latest version %v, %v; want 2", p, err)
	}
	if cu, err := c.Customers.Get(ctx, "acme"); err != nil || cu.PlanVersion != 1 {
		t.Fatalf("Customer: %+v, %v; want plan version 1", cu, err)
	}
	var versions []int64
	for v, err := range c.Plans.Versions(ctx, "pro") {
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v.Version)
	}
	if !reflect.DeepEqual(versions, []int64{1, 2}) {
		t.Errorf("Plans.Versions = %v, want [1 2]", versions)
	}
	if v, err := c.Plans.Version(ctx, "pro", 1); err != nil || v.Limits[0].Limit != 10 || v.Customers != 1 {
		t.Errorf("Plans.Version 1 = %+v, %v; want limit 10, 1 customer", v, err)
	}
	if _, err := c.Plans.Version(ctx, "pro", 3); !errors.Is(err, quotad.ErrPlanVersionNotFound) {
		t.Errorf("Plans.Version 3: %v, want ErrPlanVersionNotFound", err)
	}
	want := &quotad.Migration{Plan: "pro", FromVersions: []int64{1}, ToVersion: 2, DryRun: true,
		Customers: []quotad.MigratedCustomer{{Customer: "acme", FromVersion: 1,
			OverLimit: []quotad.OverLimit{{Metric: "api_calls", Window: quotad.Day, Used: 6, Limit: 5}}}}}
	if m, err := c.Plans.Migrate(ctx, "pro", quotad.MigrationSpec{DryRun: true}); err != nil || !reflect.DeepEqual(m, want) {
		t.Errorf("Plans.Migrate dry run = %+v, %v\nwant %+v", m, err, want)
	}
	want.DryRun = false
	if m, err := c.Plans.Migrate(ctx, "pro", quotad.MigrationSpec{}); err != nil || !reflect.DeepEqual(m, want) {
		t.Errorf("Plans.Migrate = %+v, %v\nwant %+v", m, err, want)
	}
	if cu, err := c.Customers.Get(ctx, "acme"); err != nil || cu.PlanVersion != 2 {
		t.Errorf("Customer after the migration: %+v, %v; want plan version 2", cu, err)
	}
}
