package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// MustOpen returns a store over a fresh schema.
func MustOpen(t testing.TB) *store.DB {
	t.Helper()
	s := dbtest.New(t)
	db, err := store.New(context.Background(), s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func ptr[T any](v T) *T { return &v }

var usd = tiers.Price{Currency: "USD", Interval: "month"}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func write(actor string) tiers.Write { return tiers.Write{Actor: actor, At: t0} }

func TestMetricLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)

	m, created, err := db.PutMetric(ctx, write("ops"), tiers.Metric{
		Key: "api_calls", Description: "calls", Capacity: map[tiers.Window]int64{tiers.Day: 1000},
	})
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	if m.Version != 1 || m.Capacity[tiers.Day] != 1000 || !m.CreatedAt.Equal(t0) {
		t.Errorf("created metric = %+v", m)
	}

	m2, created, err := db.PutMetric(ctx, tiers.Write{Actor: "ops", At: t0.Add(time.Minute),
		IfMatch: tiers.Precondition{Set: true, Versions: []int64{1}}}, tiers.Metric{Key: "api_calls"})
	if err != nil || created {
		t.Fatalf("replace: created=%v err=%v", created, err)
	}
	if m2.Version != 2 || len(m2.Capacity) != 0 || m2.Description != "" {
		t.Errorf("replaced metric = %+v, want version 2 with defaults", m2)
	}

	_, _, err = db.PutMetric(ctx, tiers.Write{At: t0, IfMatch: tiers.Precondition{Set: true, Versions: []int64{1}}},
		tiers.Metric{Key: "api_calls"})
	if !errors.Is(err, tiers.ErrPreconditionFailed) {
		t.Errorf("stale If-Match: err = %v, want ErrPreconditionFailed", err)
	}

	if _, _, err := db.PutPlan(ctx, write("ops"), tiers.Plan{Key: "free", Name: "Free", Price: usd,
		Limits: []tiers.Limit{{Metric: "api_calls", Window: tiers.Day, Limit: 10, Mode: tiers.Hard}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteMetric(ctx, write("ops"), "api_calls"); !errors.Is(err, tiers.ErrMetricInUse) {
		t.Errorf("delete used metric: err = %v, want ErrMetricInUse", err)
	}
	if err := db.DeletePlan(ctx, write("ops"), "free"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteMetric(ctx, write("ops"), "api_calls"); err != nil {
		t.Fatalf("delete unused metric: %v", err)
	}
	if _, err := db.FindMetric(ctx, "api_calls"); !errors.Is(err, tiers.ErrMetricNotFound) {
		t.Errorf("find deleted: err = %v", err)
	}

	events, _, err := db.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action+" "+e.Resource)
	}
	want := []string{"delete metrics/api_calls", "delete plans/free", "create plans/free",
		"update metrics/api_calls", "create metrics/api_calls"}
	if len(actions) != len(want) {
		t.Fatalf("audit = %q, want %q", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Errorf("audit[%d] = %q, want %q", i, actions[i], want[i])
		}
	}
}

func TestPlanRejectsUndeclaredMetric(t *testing.T) {
	t.Parallel()
	db := MustOpen(t)
	_, _, err := db.PutPlan(context.Background(), write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd,
		Limits: []tiers.Limit{{Metric: "nope", Window: tiers.Day, Limit: 1, Mode: tiers.Hard}}})
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "limits[0].metric" {
		t.Fatalf("err = %v, want validation error on limits[0].metric", err)
	}
}

func TestCustomerAccountAndOverrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustPut := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := db.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls"})
	mustPut(err)
	_, _, err = db.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd, Limits: []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Day, Limit: 100, Mode: tiers.Soft, OveragePercent: 20, OveragePriceMicros: ptr(int64(5))},
		{Metric: "api_calls", Window: tiers.Second, Limit: 5, Mode: tiers.Hard},
	}})
	mustPut(err)

	_, _, err = db.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "nope", Metadata: []byte(`{}`)})
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "plan" {
		t.Fatalf("unknown plan: err = %v", err)
	}
	c, created, err := db.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "pro",
		Metadata: []byte(`{"tier":"gold"}`), Anchor: tiers.Anchor{Day: 15}})
	mustPut(err)
	if !created || c.BillingAnchorDay == nil || *c.BillingAnchorDay != 15 || string(c.Metadata) != `{"tier": "gold"}` {
		t.Errorf("customer = %+v (metadata %s)", c, c.Metadata)
	}

	_, _, err = db.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme",
		Limit: tiers.Limit{Metric: "nope", Window: tiers.Day, Limit: 1, Mode: tiers.Hard}})
	if !errors.Is(err, tiers.ErrMetricNotFound) {
		t.Errorf("override on undeclared metric: err = %v", err)
	}
	_, _, err = db.PutOverride(ctx, write("ops"), tiers.Override{Customer: "ghost",
		Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 1, Mode: tiers.Hard}})
	if !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("override on missing customer: err = %v", err)
	}
	exp := t0.Add(24 * time.Hour)
	o, created, err := db.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", ExpiresAt: &exp, Reason: "launch",
		Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 500, Mode: tiers.Elastic, Ceiling: ptr(int64(900))}})
	mustPut(err)
	if !created || o.Limit.Limit != 500 || *o.Ceiling != 900 || !o.ExpiresAt.Equal(exp) {
		t.Errorf("override = %+v", o)
	}

	a, err := db.FindAccount(ctx, "acme")
	mustPut(err)
	if a.Plan.Key != "pro" || len(a.Plan.Limits) != 2 || len(a.Overrides) != 1 {
		t.Fatalf("account = %+v", a)
	}
	if l := a.Plan.Limits[0]; l.Mode != tiers.Soft || l.OveragePercent != 20 || *l.OveragePriceMicros != 5 {
		t.Errorf("plan limit read back = %+v", l)
	}
	eff := tiers.Effective(a.Plan, a.Overrides, t0)
	if len(eff) != 2 || eff[1].Source != tiers.FromOverride || eff[1].Limit.Limit != 500 {
		t.Errorf("effective = %+v", eff)
	}

	if err := db.DeletePlan(ctx, write("ops"), "pro"); !errors.Is(err, tiers.ErrPlanInUse) {
		t.Errorf("delete plan in use: err = %v", err)
	}
	mustPut(db.DeleteCustomer(ctx, write("ops"), "acme"))
	if _, err := db.FindAccount(ctx, "acme"); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("find deleted account: err = %v", err)
	}
	events, _, err := db.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 10})
	mustPut(err)
	if len(events) != 3 || events[0].Action != "delete" || events[2].Resource != "customers/acme" {
		t.Errorf("customer audit = %+v", events)
	}
}
