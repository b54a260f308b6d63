package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/tiers"
)

// termsSpan is the part of billing.Terms these tests look at.
type termsSpan struct {
	From, To string // "" for an open row
	Plan     string
	Price    int64
	Overage  map[string]int64
	Anchor   int
}

func MustTerms(t testing.TB, db interface {
	FindTerms(context.Context, string) ([]billing.Terms, error)
}, customer string) []termsSpan {
	t.Helper()
	list, err := db.FindTerms(context.Background(), customer)
	if err != nil {
		t.Fatal(err)
	}
	out := []termsSpan{}
	for _, r := range list {
		s := termsSpan{From: r.From.Format(time.RFC3339), Plan: r.Plan, Price: r.PriceCents, Overage: r.OveragePrices, Anchor: r.AnchorDay}
		if !r.To.IsZero() {
			s.To = r.To.Format(time.RFC3339)
		}
		out = append(out, s)
	}
	return out
}

// Every catalog write that changes what a customer is billed records it in
// its own transaction; a write that fails records nothing.
func TestTermsFollowCatalogWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	at := func(d time.Duration) tiers.Write { return tiers.Write{Actor: "ops", At: t0.Add(d)} }
	ifMatch := func(d time.Duration, v int64) tiers.Write {
		w := at(d)
		w.IfMatch = tiers.Precondition{Set: true, Versions: []int64{v}}
		return w
	}
	price := func(cents int64) tiers.Price { p := usd; p.AmountCents = cents; return p }
	mustPut(t, second(db.Catalog.PutMetric(ctx, at(0), tiers.Metric{Key: "api_calls"})))
	soft := func(window tiers.Window, micros int64) tiers.Limit {
		return tiers.Limit{Metric: "api_calls", Window: window, Limit: 10, Mode: tiers.Soft, OveragePriceMicros: ptr(micros)}
	}
	// Two priced windows: the longer one's price is the metric's.
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(0), tiers.Plan{Key: "pro", Name: "Pro", Price: price(4900),
		Limits: []tiers.Limit{soft(tiers.Month, 500), soft(tiers.Hour, 2000), soft(tiers.Day, 1000)}}, false)))
	mustPut(t, second(db.Catalog.PutPlan(ctx, at(0), tiers.Plan{Key: "free", Name: "Free", Price: usd}, false)))

	meta := json.RawMessage(`{}`)
	ts := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	steps := []struct {
		name  string
		write func() error
		err   error
		want  []termsSpan
	}{
		{"create opens terms", func() error {
			return second(db.Catalog.PutCustomer(ctx, at(time.Second+300*time.Millisecond), tiers.Customer{ID: "acme", Plan: "pro", Metadata: meta}))
		}, nil, []termsSpan{{From: ts(time.Second), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}}}},
		{"a write billing the same changes nothing", func() error {
			return second(db.Catalog.PutCustomer(ctx, at(2*time.Second), tiers.Customer{ID: "acme", Plan: "pro", Name: "Acme", Metadata: meta}))
		}, nil, []termsSpan{{From: ts(time.Second), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}}}},
		{"a plan change closes and opens", func() error {
			return second(db.Catalog.PutCustomer(ctx, at(time.Hour), tiers.Customer{ID: "acme", Plan: "free", Metadata: meta}))
		}, nil, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), Plan: "free", Overage: map[string]int64{}}}},
		{"a failed If-Match records nothing", func() error {
			return second(db.Catalog.PutCustomer(ctx, ifMatch(2*time.Hour, 1), tiers.Customer{ID: "acme", Plan: "pro", Metadata: meta}))
		}, tiers.ErrPreconditionFailed, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), Plan: "free", Overage: map[string]int64{}}}},
		{"an anchor day change opens terms with it", func() error {
			return second(db.Catalog.PutCustomer(ctx, at(3*time.Hour), tiers.Customer{ID: "acme", Plan: "free", Anchor: tiers.Anchor{Day: 15}, Metadata: meta}))
		}, nil, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), To: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}},
			{From: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}, Anchor: 15}}},
		{"a plan's new price splits its customers' terms", func() error {
			return second(db.Catalog.PutPlan(ctx, at(4*time.Hour), tiers.Plan{Key: "free", Name: "Free", Price: price(100)}, false))
		}, nil, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), To: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}},
			{From: ts(3 * time.Hour), To: ts(4 * time.Hour), Plan: "free", Overage: map[string]int64{}, Anchor: 15},
			{From: ts(4 * time.Hour), Plan: "free", Price: 100, Overage: map[string]int64{}, Anchor: 15}}},
		{"a plan write billing the same splits nothing", func() error {
			return second(db.Catalog.PutPlan(ctx, at(5*time.Hour), tiers.Plan{Key: "free", Name: "Free", Description: "new", Price: price(100)}, false))
		}, nil, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), To: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}},
			{From: ts(3 * time.Hour), To: ts(4 * time.Hour), Plan: "free", Overage: map[string]int64{}, Anchor: 15},
			{From: ts(4 * time.Hour), Plan: "free", Price: 100, Overage: map[string]int64{}, Anchor: 15}}},
		{"a failed plan write splits nothing", func() error {
			return second(db.Catalog.PutPlan(ctx, ifMatch(6*time.Hour, 1), tiers.Plan{Key: "free", Name: "Free", Price: price(200)}, false))
		}, tiers.ErrPreconditionFailed, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), To: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}},
			{From: ts(3 * time.Hour), To: ts(4 * time.Hour), Plan: "free", Overage: map[string]int64{}, Anchor: 15},
			{From: ts(4 * time.Hour), Plan: "free", Price: 100, Overage: map[string]int64{}, Anchor: 15}}},
		{"a failed delete closes nothing", func() error {
			return db.Catalog.DeleteCustomer(ctx, ifMatch(7*time.Hour, 1), "acme")
		}, tiers.ErrPreconditionFailed, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), To: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}},
			{From: ts(3 * time.Hour), To: ts(4 * time.Hour), Plan: "free", Overage: map[string]int64{}, Anchor: 15},
			{From: ts(4 * time.Hour), Plan: "free", Price: 100, Overage: map[string]int64{}, Anchor: 15}}},
		{"delete closes the terms, which stay", func() error {
			return db.Catalog.DeleteCustomer(ctx, at(8*time.Hour), "acme")
		}, nil, []termsSpan{
			{From: ts(time.Second), To: ts(time.Hour), Plan: "pro", Price: 4900, Overage: map[string]int64{"api_calls": 500}},
			{From: ts(time.Hour), To: ts(3 * time.Hour), Plan: "free", Overage: map[string]int64{}},
			{From: ts(3 * time.Hour), To: ts(4 * time.Hour), Plan: "free", Overage: map[string]int64{}, Anchor: 15},
			{From: ts(4 * time.Hour), To: ts(8 * time.Hour), Plan: "free", Price: 100, Overage: map[string]int64{}, Anchor: 15}}},
	}
	for _, step := range steps {
		err := step.write()
		if !errors.Is(err, step.err) || (step.err == nil && err != nil) {
			t.Fatalf("%s: err = %v, want %v", step.name, err, step.err)
		}
		if got := MustTerms(t, db.Billing, "acme"); !reflect.DeepEqual(got, step.want) {
			t.Fatalf("%s: terms\n%+v\nwant\n%+v", step.name, got, step.want)
		}
	}

	ids, more, err := db.Billing.FindBilledCustomers(ctx, t0.Add(2*time.Hour), t0.Add(3*time.Hour), tiers.Page{Limit: 10})
	if err != nil || more || !reflect.DeepEqual(ids, []string{"acme"}) {
		t.Errorf("billed customers = %v, %v, %v; want [acme] (deleted, billed then)", ids, more, err)
	}
	ids, _, err = db.Billing.FindBilledCustomers(ctx, t0.Add(8*time.Hour), t0.Add(9*time.Hour), tiers.Page{Limit: 10})
	if err != nil || len(ids) != 0 {
		t.Errorf("billed customers after the delete = %v, %v; want none", ids, err)
	}
}

func second[T any](_ T, _ bool, err error) error { return err }
