package store_test

import (
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/countertest"
	"github.com/quotad/quotad/internal/quota/quotatest"
)

// The counter contract, run against PostgreSQL: the ledger charging
// directly, and the lease pool over it.
func TestCounterContract(t *testing.T) {
	t.Parallel()
	long, at := countertest.Long()
	for name, leases := range map[string]bool{"ledger": false, "lease pool": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			countertest.Run(t, countertest.Harness{Windows: long, At: at, HoldsInGlobals: leases,
				New: func(t *testing.T, customers ...string) quota.Counter {
					db := MustOpen(t)
					MustSeed(t, db, nil, customers...)
					if leases {
						return quota.NewLeasePool(db, quotatest.NewClock(at))
					}
					return db
				}})
		})
	}
}
