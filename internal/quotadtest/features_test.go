package quotadtest_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// TestClientFeatures drives the client's feature calls against quotad:
// plan features read back in Go types, a feature check by customer and by
// API key, an override set (with expiry and reason) and deleted.
func TestClientFeatures(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	c := quotad.New(s.URL, quotad.WithToken(s.CheckToken))
	ctx := t.Context()

	want := quotad.Features{"sso": true, "max_projects": int64(10), "support": "priority"}
	p, created, err := admin.Plans.Put(ctx, "business", quotad.PlanSpec{Name: "Business",
		Features: quotad.Features{"sso": true, "max_projects": 10, "support": "priority"}})
	mustCreated(t, "Plans.Put business", created, err, true)
	if !reflect.DeepEqual(p.Features, want) {
		t.Errorf("plan features = %#v, want %#v", p.Features, want)
	}
	if got, err := admin.Plans.Get(ctx, "business"); err != nil || !reflect.DeepEqual(got.Features, want) {
		t.Errorf("Plan: features = %#v, %v; want %#v", got.Features, err, want)
	}
	if _, _, err := admin.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "business"}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.Keys.Create(ctx, "acme", quotad.KeySpec{})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		req  quotad.FeatureCheckRequest
		want quotad.FeatureCheckResult
	}{
		{"integer", quotad.FeatureCheckRequest{Customer: "acme", Feature: "max_projects"},
			quotad.FeatureCheckResult{Customer: "acme", Feature: "max_projects", Allowed: true, Value: int64(10)}},
		{"string by key", quotad.FeatureCheckRequest{APIKey: key.Key, Feature: "support"},
			quotad.FeatureCheckResult{Customer: "acme", Feature: "support", Allowed: true, Value: "priority"}},
		{"granted by no one", quotad.FeatureCheckRequest{Customer: "acme", Feature: "sandbox"},
			quotad.FeatureCheckResult{Customer: "acme", Feature: "sandbox", Allowed: false, Value: false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.CheckFeature(ctx, tt.req)
			if err != nil || !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("CheckFeature = %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
	if _, err := c.CheckFeature(ctx, quotad.FeatureCheckRequest{Customer: "ghost", Feature: "sso"}); !errors.Is(err, quotad.ErrCustomerNotFound) {
		t.Errorf("CheckFeature of no customer: %v, want ErrCustomerNotFound", err)
	}

	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	o, created, err := admin.Features.Put(ctx, "acme", "max_projects", quotad.FeatureOverrideSpec{Value: 0, ExpiresAt: &expires, Reason: "unpaid"})
	mustCreated(t, "PutFeature", created, err, true)
	if o.Value != int64(0) || o.Reason != "unpaid" || !o.ExpiresAt.Equal(expires) || o.ETag != `"1"` {
		t.Errorf("override = %+v", o)
	}
	if got, err := c.CheckFeature(ctx, quotad.FeatureCheckRequest{Customer: "acme", Feature: "max_projects"}); err != nil || got.Allowed {
		t.Errorf("max_projects overridden to 0 = %+v, %v; want not allowed", got, err)
	}
	f, err := admin.Features.Get(ctx, "acme")
	if err != nil || f.Features["max_projects"] != int64(0) || len(f.Overrides) != 1 || f.Overrides[0].Value != int64(0) {
		t.Errorf("Features = %+v, %v", f, err)
	}
	if _, _, err := admin.Features.Put(ctx, "acme", "max_projects", quotad.FeatureOverrideSpec{Value: 5}, quotad.IfMatch(`"7"`)); !errors.Is(err, quotad.ErrPreconditionFailed) {
		t.Errorf("Features.Put with a stale If-Match: %v, want ErrPreconditionFailed", err)
	}
	if err := admin.Features.Delete(ctx, "acme", "max_projects", quotad.IfMatch(o.ETag)); err != nil {
		t.Fatalf("Features.Delete: %v", err)
	}
	if err := admin.Features.Delete(ctx, "acme", "max_projects"); !errors.Is(err, quotad.ErrFeatureOverrideNotFound) {
		t.Errorf("Features.Delete again: %v, want ErrFeatureOverrideNotFound", err)
	}
	if _, _, err := admin.Features.Put(ctx, "acme", "sso", quotad.FeatureOverrideSpec{Value: 1.5}); !errors.Is(err, quotad.ErrValidation) {
		t.Errorf("Features.Put of 1.5: %v, want ErrValidation", err)
	}
}
