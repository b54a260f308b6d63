package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/refundtest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// Refunds' contract, over PostgreSQL: engines of several processes share
// one database (see refundtest).
func TestRefunds(t *testing.T) {
	t.Parallel()
	refundtest.Run(t, refundtest.Harness{New: func(t *testing.T) refundtest.Store {
		db := MustOpen(t)
		ctx := context.Background()
		var limits []tiers.Limit
		for _, m := range []string{"api_calls", "images"} {
			mustPut(t, second(db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: m})))
			limits = append(limits, tiers.Limit{Metric: m, Window: tiers.Day, Limit: refundtest.Limit, Mode: tiers.Hard})
		}
		mustPut(t, second(db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: limits}, false)))
		for _, id := range []string{"acme", "globex"} {
			mustPut(t, second(db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: id, Plan: "p", Metadata: []byte(`{}`)})))
		}
		return refundDB{db}
	}})
}

type refundDB struct{ db *store.DB }

func (r refundDB) Engine(t *testing.T, clock quota.Clock, leases bool) *quota.Engine {
	e := quota.New(quota.Options{Catalog: tiers.NewCache(r.db.Catalog, 0), Counts: r.db.Ledger, Requests: r.db.Ledger, Maintenance: r.db.Ledger, Audits: r.db.Audit,
		History: r.db.History, Clock: clock,
		Leases: leasesOf(leases, r.db.Ledger, clock), StoreTimeout: 30 * time.Second})
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (r refundDB) Refunds(t *testing.T, customer string) []quota.RefundEvent {
	events, _, err := r.db.Audit.FindAuditEvents(context.Background(), tiers.AuditFilter{Customer: customer, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []quota.RefundEvent
	for _, e := range slices.Backward(events) {
		if e.Action != tiers.ActionRefund {
			continue
		}
		var after struct {
			Metric    string `json:"metric"`
			Subject   string `json:"subject"`
			RequestID string `json:"request_id"`
			Cost      int64  `json:"cost"`
			Refunded  int64  `json:"refunded"`
		}
		if err := json.Unmarshal(e.After, &after); err != nil {
			t.Fatal(err)
		}
		if want := "customers/" + customer + "/usage/" + after.Metric; e.Resource != want {
			t.Errorf("refund's resource = %q, want %q", e.Resource, want)
		}
		out = append(out, quota.RefundEvent{At: e.At, Actor: e.Actor, Customer: e.Customer, Metric: after.Metric,
			Subject: after.Subject, RequestID: after.RequestID, Cost: after.Cost, Refunded: after.Refunded})
	}
	return out
}
