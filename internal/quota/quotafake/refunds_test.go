package quotafake_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/quota/refundtest"
	"github.com/quotad/quotad/internal/tiers"
)

// Refunds over the test double mean what they mean over PostgreSQL.
func TestRefunds(t *testing.T) {
	t.Parallel()
	refundtest.Run(t, refundtest.Harness{New: func(*testing.T) refundtest.Store {
		c := quotafake.NewCatalog()
		var limits []tiers.Limit
		for _, m := range []string{"api_calls", "images"} {
			c.PutMetric(m, nil)
			limits = append(limits, tiers.Limit{Metric: m, Window: tiers.Day, Limit: refundtest.Limit, Mode: tiers.Hard})
		}
		for _, id := range []string{"acme", "globex"} {
			c.PutCustomer(id, tiers.Anchor{}, limits)
		}
		return refundStore{s: quotafake.NewStore(), catalog: c, history: quotafake.NewHistory()}
	}})
}

type refundStore struct {
	s       *quotafake.Store
	catalog *quotafake.Catalog
	history *quotafake.History
}

func (f refundStore) Engine(t *testing.T, clock quota.Clock, leases bool) *quota.Engine {
	l := f.s.Process()
	o := quota.Options{Catalog: f.catalog, Counts: l, Requests: l, Maintenance: l, Audits: l,
		History: f.history, Clock: clock, StoreTimeout: 30 * time.Second}
	if leases {
		o.Leases = lease.NewPool(l, clock)
	}
	e := quota.New(o)
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (f refundStore) Refunds(_ *testing.T, customer string) []quota.RefundEvent {
	var out []quota.RefundEvent
	for _, ev := range f.s.Refunds() {
		if ev.Customer == customer {
			out = append(out, ev)
		}
	}
	return out
}
