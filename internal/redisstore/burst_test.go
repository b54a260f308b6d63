package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// TestBurstAcrossProcesses sends a burst of 400 checks at a limit of 100,
// spread over 2 and 4 engines (each with its own Redis connections, as
// separate quotad processes have) at one moment of a manual clock: they
// admit exactly what one engine alone admits, for every algorithm, second
// and minute windows. Engines counting in process admit up to 100 each:
// the test tells the two apart.
func TestBurstAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, alg := range []tiers.Algorithm{tiers.SlidingWindow, tiers.FixedWindow, tiers.SlidingLog, tiers.TokenBucket} {
		for _, w := range []tiers.Window{tiers.Second, tiers.Minute} {
			for _, n := range []int{2, 4} {
				t.Run(fmt.Sprintf("%s/%s/%d", alg, w, n), func(t *testing.T) {
					t.Parallel()
					limits := []tiers.Limit{{Metric: "api_calls", Window: w, Limit: 100, Algorithm: alg}}
					want := admitted(t, engines(t, 1, limits, nil), 400)
					if want != 100 {
						t.Fatalf("one engine admitted %d of 400 at a limit of 100", want)
					}
					prefix := redistest.Prefix(t) // one key space for the n engines
					got := admitted(t, engines(t, n, limits, func(t *testing.T) quota.SharedStore { return open(t, prefix) }), 400)
					if got != want {
						t.Errorf("%d engines on one Redis admitted %d; one engine admits %d", n, got, want)
					}
					if alone := admitted(t, engines(t, n, limits, nil), 400); alone <= want {
						t.Errorf("%d engines counting in process admitted %d, not more than one engine: the test cannot tell", n, alone)
					}
				})
			}
		}
	}
}

// engines returns n engines on one catalog, clock and (when store is not
// nil) shared store, each engine its own store from store.
func engines(t *testing.T, n int, limits []tiers.Limit, store func(*testing.T) quota.SharedStore) []*quota.Engine {
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("acme", tiers.Anchor{}, limits)
	clock := quotafake.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 500_000_000, time.UTC))
	out := make([]*quota.Engine, n)
	for i := range out {
		// A burst of 400 checks on a busy machine may wait long for
		// Redis without it being down: a degraded answer must mean an
		// error, not the default quarter second running out.
		ledger := quotafake.NewLedger()
		o := quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
			Clock: clock, StoreTimeout: time.Minute}
		if store != nil {
			o.Shared = store(t)
		}
		out[i] = quota.New(o)
	}
	return out
}

// admitted sends count checks of cost 1, all at once, taking the engines
// in turn, and returns how many were allowed. A degraded answer fails.
func admitted(t *testing.T, engines []*quota.Engine, count int) int {
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range count {
		wg.Go(func() {
			d, err := engines[i%len(engines)].Check(context.Background(),
				quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
			switch {
			case err != nil:
				t.Error(err)
			case d.Degraded:
				t.Errorf("a degraded answer: %+v", d)
			case d.Allowed:
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}
