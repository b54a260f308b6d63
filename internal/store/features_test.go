package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// TestFeatures stores a plan's features and a customer's overrides of
// them, one expiring, and reads the account back both ways the service
// does (FindAccount for admin reads, FindAccounts for the cache): what it
// is granted, at times before and after the expiry, comes from the rows.
func TestFeatures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	plan := tiers.Plan{Key: "pro", Name: "Pro", Price: usd, Features: map[string]tiers.FeatureValue{
		"sso": tiers.FeatureBool(true), "max_projects": tiers.FeatureInt(10), "support": tiers.FeatureString("priority"),
	}}
	saved, _, err := db.Catalog.PutPlan(ctx, write("ops"), plan, false)
	mustPut(t, err)
	if !reflect.DeepEqual(saved.Features, plan.Features) {
		t.Fatalf("saved features = %v, want %v", saved.Features, plan.Features)
	}
	_, _, err = db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "pro", Metadata: []byte(`{}`)})
	mustPut(t, err)

	expiry := t0.Add(time.Hour)
	for _, o := range []tiers.FeatureOverride{
		{Customer: "acme", Feature: "max_projects", Value: tiers.FeatureInt(50), ExpiresAt: &expiry, Reason: "launch week"},
		{Customer: "acme", Feature: "sso", Value: tiers.FeatureBool(false)},
		{Customer: "acme", Feature: "sandbox", Value: tiers.FeatureString("large"), ExpiresAt: &expiry},
	} {
		got, created, err := db.Catalog.PutFeatureOverride(ctx, write("ops"), o)
		mustPut(t, err)
		if !created || got.Version != 1 || got.Value != o.Value || got.Reason != o.Reason {
			t.Fatalf("PutFeatureOverride(%s) = %+v, created %v", o.Feature, got, created)
		}
	}

	one, err := db.Catalog.FindAccount(ctx, "acme")
	mustPut(t, err)
	batch, err := db.Catalog.FindAccounts(ctx, []string{"acme"})
	mustPut(t, err)
	for name, a := range map[string]tiers.Account{"FindAccount": one, "FindAccounts": batch["acme"]} {
		tests := []struct {
			key  string
			at   time.Time
			want tiers.FeatureValue
		}{
			{"max_projects", t0, tiers.FeatureInt(50)},
			{"max_projects", expiry, tiers.FeatureInt(10)},
			{"sso", t0, tiers.FeatureBool(false)},
			{"sso", expiry, tiers.FeatureBool(false)},
			{"support", t0, tiers.FeatureString("priority")},
			{"sandbox", expiry.Add(-time.Nanosecond), tiers.FeatureString("large")},
			{"sandbox", expiry, tiers.FeatureBool(false)},
			{"nothing", t0, tiers.FeatureBool(false)},
		}
		for _, tt := range tests {
			if got := a.Feature(tt.key, tt.at); got != tt.want {
				t.Errorf("%s: Feature(%s) at %s = %v, want %v", name, tt.key, tt.at.Format(time.TimeOnly), got, tt.want)
			}
		}
	}

	// Replacing keeps the row and counts its version; the audit log has
	// both writes, with the reason.
	o, created, err := db.Catalog.PutFeatureOverride(ctx, write("ops"),
		tiers.FeatureOverride{Customer: "acme", Feature: "sso", Value: tiers.FeatureBool(true), Reason: "pilot"})
	mustPut(t, err)
	if created || o.Version != 2 {
		t.Fatalf("replace: created %v, version %d", created, o.Version)
	}
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 10})
	mustPut(t, err)
	var after struct {
		Value  any    `json:"value"`
		Reason string `json:"reason"`
	}
	if len(events) == 0 || events[0].Resource != "customers/acme/features/sso" || events[0].Action != tiers.ActionUpdate ||
		json.Unmarshal(events[0].After, &after) != nil || after.Value != true || after.Reason != "pilot" {
		t.Fatalf("newest audit event = %+v", events[0])
	}

	mustPut(t, db.Catalog.DeleteFeatureOverride(ctx, write("ops"), "acme", "sso"))
	if err := db.Catalog.DeleteFeatureOverride(ctx, write("ops"), "acme", "sso"); !errors.Is(err, tiers.ErrFeatureOverrideNotFound) {
		t.Fatalf("second delete: %v, want ErrFeatureOverrideNotFound", err)
	}
	if _, _, err := db.Catalog.PutFeatureOverride(ctx, write("ops"),
		tiers.FeatureOverride{Customer: "nobody", Feature: "sso", Value: tiers.FeatureBool(true)}); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Fatalf("override of a missing customer: %v, want ErrCustomerNotFound", err)
	}
	a, err := db.Catalog.FindAccount(ctx, "acme")
	mustPut(t, err)
	if got := a.Feature("sso", t0); got != tiers.FeatureBool(true) {
		t.Fatalf("sso after its override's deletion = %v, want the plan's true", got)
	}

	// A plan replaced without features has none.
	saved, _, err = db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd}, false)
	mustPut(t, err)
	if saved.Features == nil || len(saved.Features) != 0 {
		t.Fatalf("features after a replace without them = %#v, want empty", saved.Features)
	}
}
