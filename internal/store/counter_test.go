package store_test

import (
	"context"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/countertest"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// The counter contract, run against PostgreSQL: the ledger charging
// directly, and the lease pool over it, subjects' counters apart from
// their customers'. Both lock a set's counters in one order, whatever the
// set's (see lockOrder): concurrent sets of the same counters in other
// orders never deadlock.
func TestCounterContract(t *testing.T) {
	t.Parallel()
	long, at := countertest.Long()
	for name, leases := range map[string]bool{"ledger": false, "lease pool": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			countertest.Run(t, countertest.Harness{Windows: long, At: at, HoldsInGlobals: leases, Subjects: true,
				New: func(t *testing.T, customers ...string) quota.Counter {
					db := MustOpen(t)
					MustSeed(t, db, nil, customers...)
					for _, m := range countertest.Metrics() { // api_calls, and those sets charge besides
						if _, _, err := db.Catalog.PutMetric(context.Background(), write("ops"), tiers.Metric{Key: m}); err != nil {
							t.Fatal(err)
						}
					}
					if leases {
						return lease.NewPool(db.Ledger, quotafake.NewClock(at))
					}
					return db.Ledger
				}})
		})
	}
}
