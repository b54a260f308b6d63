package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// versionsOf is what these tests look at in a plan's versions: each
// version's day limit, price and customers.
type versionSpan struct {
	Version, DayLimit, Price, Customers int64
}

func mustVersions(t *testing.T, db *store.DB, key string) []versionSpan {
	t.Helper()
	list, more, err := db.Catalog.FindPlanVersions(context.Background(), key, tiers.Page{Limit: 100})
	if err != nil || more {
		t.Fatalf("FindPlanVersions = %v, more %v", err, more)
	}
	out := []versionSpan{}
	for _, v := range list {
		out = append(out, versionSpan{Version: v.Version, DayLimit: v.Limits[0].Limit, Price: v.Price.AmountCents, Customers: v.Customers})
	}
	return out
}

// planOf is the version, day limit and price the customer's account
// carries, as the check path reads it (FindAccounts) and as FindAccount
// does.
func mustPlanOf(t *testing.T, db *store.DB, id string) [3]int64 {
	t.Helper()
	ctx := context.Background()
	a, err := db.Catalog.FindAccount(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := db.Catalog.FindAccounts(ctx, []string{id, "zz-other"})
	if err != nil {
		t.Fatal(err)
	}
	b := batch[id]
	got := [3]int64{a.Customer.PlanVersion, a.Plan.Limits[0].Limit, a.Plan.Price.AmountCents}
	if other := [3]int64{b.Customer.PlanVersion, b.Plan.Limits[0].Limit, b.Plan.Price.AmountCents}; other != got {
		t.Fatalf("FindAccounts(%s) = %v, FindAccount = %v", id, other, got)
	}
	return got
}

// A change of price, limits or features makes a version; a grandfathered
// change keeps the customers where they are, one that is not takes the
// customers of the latest along; a migration moves the rest, audited, and
// billing follows each customer's version.
func TestPlanVersionsAndGrandfathering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	at := func(d time.Duration) tiers.Write { return tiers.Write{Actor: "ops", At: t0.Add(d)} }
	day := 24 * time.Hour
	plan := func(name string, limit, cents int64, sso bool) tiers.Plan {
		p := usd
		p.AmountCents = cents
		return tiers.Plan{Key: "pro", Name: name, Price: p,
			Limits:   []tiers.Limit{{Metric: "api_calls", Window: tiers.Day, Limit: limit, Mode: tiers.Hard}},
			Features: map[string]tiers.FeatureValue{"sso": tiers.FeatureBool(sso)}}
	}
	customer := func(d time.Duration, id string) {
		t.Helper()
		mustPut(t, second(db.Catalog.PutCustomer(ctx, at(d), tiers.Customer{ID: id, Plan: "pro", Metadata: json.RawMessage(`{}`)})))
	}
	mustPut(t, second(db.Catalog.PutMetric(ctx, at(0), tiers.Metric{Key: "api_calls"})))
	saved, _, err := db.Catalog.PutPlan(ctx, at(0), plan("Pro", 10, 1000, true), false)
	if err != nil || saved.LatestVersion != 1 {
		t.Fatalf("created plan: latest_version %d, %v; want 1", saved.LatestVersion, err)
	}
	customer(0, "a")
	// A new description alone, grandfathered or not, makes no version.
	for _, gf := range []bool{false, true} {
		p := plan("Pro", 10, 1000, true)
		p.Description = "For teams"
		if saved, _, err = db.Catalog.PutPlan(ctx, at(0), p, gf); err != nil || saved.LatestVersion != 1 {
			t.Fatalf("described plan: latest_version %d, %v; want 1", saved.LatestVersion, err)
		}
	}
	// Grandfathered: a stays on 1, b joins 2.
	if saved, _, err = db.Catalog.PutPlan(ctx, at(day), plan("Pro", 5, 2000, false), true); err != nil || saved.LatestVersion != 2 {
		t.Fatalf("grandfathered change: latest_version %d, %v; want 2", saved.LatestVersion, err)
	}
	customer(day, "b")
	// Not grandfathered: b, on the latest, follows to 3; a stays on 1. A
	// change of features alone is a version too (4).
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(2*day), plan("Pro", 7, 3000, false), false)))
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(2*day), plan("Pro", 7, 3000, true), false)))
	if got, want := mustPlanOf(t, db, "a"), [3]int64{1, 10, 1000}; got != want {
		t.Errorf("a: version, limit, price = %v, want %v", got, want)
	}
	if got, want := mustPlanOf(t, db, "b"), [3]int64{4, 7, 3000}; got != want {
		t.Errorf("b: version, limit, price = %v, want %v", got, want)
	}
	if a, _ := db.Catalog.FindAccount(ctx, "a"); !a.Plan.Features["sso"].Allowed() || a.Plan.Name != "Pro" {
		t.Errorf("a's plan = %+v, want version 1's features (sso) under the plan's name", a.Plan)
	}
	if c, _ := db.Catalog.FindCustomer(ctx, "a"); c.PlanVersion != 1 {
		t.Errorf("customer a: plan_version %d, want 1", c.PlanVersion)
	}
	// A customer replaced on the same plan keeps its version.
	customer(2*day, "a")
	wantVersions := []versionSpan{{1, 10, 1000, 1}, {2, 5, 2000, 0}, {3, 7, 3000, 0}, {4, 7, 3000, 1}}
	if got := mustVersions(t, db, "pro"); !reflect.DeepEqual(got, wantVersions) {
		t.Errorf("versions\n%+v\nwant\n%+v", got, wantVersions)
	}
	v1, err := db.Catalog.FindPlanVersion(ctx, "pro", 1)
	if err != nil || v1.Plan != "pro" || !v1.CreatedAt.Equal(t0) || !v1.Features["sso"].Allowed() {
		t.Errorf("version 1 = %+v, %v", v1, err)
	}
	if _, err := db.Catalog.FindPlanVersion(ctx, "pro", 5); !errors.Is(err, tiers.ErrPlanVersionNotFound) {
		t.Errorf("version 5: %v, want ErrPlanVersionNotFound", err)
	}
	if _, err := db.Catalog.FindPlanVersion(ctx, "nope", 1); !errors.Is(err, tiers.ErrPlanNotFound) {
		t.Errorf("version 1 of no plan: %v, want ErrPlanNotFound", err)
	}

	// The migration: to the latest by default, from every older version.
	m, err := db.Catalog.FindPlanMigration(ctx, "pro", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.ToVersion != 4 || m.To.Limits[0].Limit != 7 || !reflect.DeepEqual(m.From, []int64{1}) ||
		!reflect.DeepEqual(m.Customers, []tiers.VersionedCustomer{{ID: "a", Version: 1}}) {
		t.Fatalf("migration = %+v", m)
	}
	two, three := int64(2), int64(3)
	if m, err := db.Catalog.FindPlanMigration(ctx, "pro", &two, &three); err != nil || len(m.Customers) != 0 {
		t.Errorf("migration from 2 to 3 = %+v, %v; want nobody", m, err)
	}
	if _, err := db.Catalog.FindPlanMigration(ctx, "pro", &three, &two); !errorsAsValidation(err) {
		t.Errorf("migration from 3 to 2: %v, want a validation error", err)
	}
	moved, err := db.Catalog.MigratePlan(ctx, at(3*day), "pro", nil, 4)
	if err != nil || !reflect.DeepEqual(moved, []tiers.VersionedCustomer{{ID: "a", Version: 1}}) {
		t.Fatalf("MigratePlan = %+v, %v", moved, err)
	}
	if got, want := mustPlanOf(t, db, "a"), [3]int64{4, 7, 3000}; got != want {
		t.Errorf("a after the migration: version, limit, price = %v, want %v", got, want)
	}
	// Moved with its group: a change not grandfathered takes a along.
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(3*day), plan("Pro", 8, 3000, true), false)))
	if got, want := mustPlanOf(t, db, "a"), [3]int64{5, 8, 3000}; got != want {
		t.Errorf("a after a later change: version, limit, price = %v, want %v", got, want)
	}
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "a", Limit: 1})
	if err != nil || len(events) != 1 || events[0].Action != tiers.ActionUpdate || events[0].Resource != "customers/a" ||
		string(events[0].After) != `{"plan": "pro", "plan_version": 4}` || string(events[0].Before) != `{"plan": "pro", "plan_version": 1}` {
		t.Errorf("a's newest audit event = %+v, %v", events, err)
	}

	// Billing: a at version 1's price until the migration, then 3000; b
	// at 2000 until the change it followed.
	wantTerms := map[string][]termsSpan{
		"a": {{From: "2026-11-22T10:00:00Z", To: "2026-11-25T10:00:00Z", Plan: "pro", Price: 1000, Overage: map[string]int64{}},
			{From: "2026-11-25T10:00:00Z", Plan: "pro", Price: 3000, Overage: map[string]int64{}}},
		"b": {{From: "2026-11-23T10:00:00Z", To: "2026-11-24T10:00:00Z", Plan: "pro", Price: 2000, Overage: map[string]int64{}},
			{From: "2026-11-24T10:00:00Z", Plan: "pro", Price: 3000, Overage: map[string]int64{}}},
	}
	for id, want := range wantTerms {
		if got := MustTerms(t, db.Billing, id); !reflect.DeepEqual(got, want) {
			t.Errorf("terms of %s\n%+v\nwant\n%+v", id, got, want)
		}
	}
	// November: 30 days, 2592000 s. a: 3 days at 1000 (259200 s: 100
	// cents), then 5 days 14 hours at 3000 (482400 s: 558.33, 558 cents).
	st, err := billing.NewService(db.Billing, func() time.Time { return t0.Add(4 * day) }).Statement(ctx, "a", "2026-11")
	if err != nil {
		t.Fatal(err)
	}
	var amounts [][2]int64
	for _, l := range st.Lines {
		amounts = append(amounts, [2]int64{l.Quantity, l.AmountCents})
	}
	if want := [][2]int64{{259200, 100}, {482400, 558}}; !reflect.DeepEqual(amounts, want) {
		t.Errorf("a's statement lines (seconds, cents) = %v, want %v\n%+v", amounts, want, st.Lines)
	}
}

func errorsAsValidation(err error) bool {
	var ve *tiers.ValidationError
	return errors.As(err, &ve)
}

// A metric that only an older version limits cannot be deleted while
// customers are on that version.
func TestPlanVersionKeepsItsMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustPut(t, second(db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls"})))
	mustPut(t, second(db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "exports"})))
	limit := func(metric string) tiers.Limit {
		return tiers.Limit{Metric: metric, Window: tiers.Day, Limit: 10, Mode: tiers.Hard}
	}
	mustPut(t, second(db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd,
		Limits: []tiers.Limit{limit("api_calls"), limit("exports")}}, false)))
	mustPut(t, second(db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "a", Plan: "pro", Metadata: json.RawMessage(`{}`)})))
	mustPut(t, second(db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd,
		Limits: []tiers.Limit{limit("api_calls")}}, true)))
	if err := db.Catalog.DeleteMetric(ctx, write("ops"), "exports"); !errors.Is(err, tiers.ErrMetricInUse) {
		t.Fatalf("DeleteMetric while a is on version 1: %v, want ErrMetricInUse", err)
	}
	if _, err := db.Catalog.MigratePlan(ctx, write("ops"), "pro", nil, 2); err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog.DeleteMetric(ctx, write("ops"), "exports"); err != nil {
		t.Errorf("DeleteMetric once nobody is on version 1: %v", err)
	}
}

// A scheduled change applied at its instant puts the customer on the new
// plan's latest version, priced so; a trial's end puts a grandfathered
// customer back on the version it was on.
func TestPlanChangesJoinVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	day := 24 * time.Hour
	at := func(d time.Duration) tiers.Write { return tiers.Write{Actor: "ops", At: t0.Add(d)} }
	plan := func(key string, limit, cents int64) tiers.Plan {
		p := usd
		p.AmountCents = cents
		return tiers.Plan{Key: key, Name: key, Price: p,
			Limits: []tiers.Limit{{Metric: "api_calls", Window: tiers.Day, Limit: limit, Mode: tiers.Hard}}}
	}
	mustPut(t, second(db.Catalog.PutMetric(ctx, at(0), tiers.Metric{Key: "api_calls"})))
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(0), plan("pro", 10, 1000), false)))
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(0), plan("team", 50, 5000), false)))
	// team's version 2, grandfathered: its version 1 stays as it was.
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(0), plan("team", 60, 6000), true)))
	mustPut(t, second(db.Catalog.PutCustomer(ctx, at(0), tiers.Customer{ID: "a", Plan: "pro", Metadata: json.RawMessage(`{}`),
		ScheduledChange: &tiers.ScheduledChange{Plan: "team", At: t0.Add(day)}})))
	mustPut(t, second(db.Catalog.PutCustomer(ctx, at(0), tiers.Customer{ID: "b", Plan: "pro", Metadata: json.RawMessage(`{}`),
		Trial: &tiers.Trial{Plan: "team", EndsAt: t0.Add(day)}})))
	// pro changes, grandfathered: a and b stay on its version 1.
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(time.Hour), plan("pro", 20, 2000), true)))

	changed, err := db.Catalog.ApplyPlanChanges(ctx, t0.Add(day+time.Second))
	if err != nil || len(changed) != 2 {
		t.Fatalf("ApplyPlanChanges = %v, %v; want a and b changed", changed, err)
	}
	if got, want := mustPlanOf(t, db, "a"), [3]int64{2, 60, 6000}; got != want {
		t.Errorf("a after its scheduled change: version, limit, price = %v, want team's latest %v", got, want)
	}
	if got, want := mustPlanOf(t, db, "b"), [3]int64{1, 10, 1000}; got != want {
		t.Errorf("b after its trial: version, limit, price = %v, want pro's version 1 %v", got, want)
	}
}
