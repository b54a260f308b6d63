package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/countertest"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// The counter contract, run against the in-process implementations: the
// short windows (every algorithm), the in-memory ledger engine tests use,
// and the lease pool over it; and against the failover an engine with a
// shared store counts short windows with, over Redis while it answers,
// and in process while the store is down. Every one of them names
// subjects' counters apart (the in-memory ledger by their keys, as the
// PostgreSQL one does not yet: see internal/store's contract).
func TestCounterContract(t *testing.T) {
	t.Parallel()
	short, at := countertest.Short()
	long, _ := countertest.Long()
	harnesses := map[string]countertest.Harness{
		"in-memory ledger": {Windows: long, At: at, Subjects: true,
			New: func(*testing.T, ...string) quota.Counter { return quotafake.NewLedger() }},
		"lease pool": {Windows: long, At: at, HoldsInGlobals: true, Subjects: true,
			New: func(*testing.T, ...string) quota.Counter {
				return lease.NewPool(quotafake.NewLedger(), quotafake.NewClock(at))
			}},
		"short windows": {Windows: short, At: at, ShortWindows: true, Subjects: true,
			New: func(*testing.T, ...string) quota.Counter { return quota.NewSliding() }},
		"failover, Redis up": {Windows: short, At: at, ShortWindows: true, Subjects: true,
			New: func(t *testing.T, _ ...string) quota.Counter {
				// A call has seconds to answer: a busy machine is no outage.
				s, err := redisstore.New(redistest.ServerURL(t),
					redisstore.Options{Prefix: redistest.Prefix(t), Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				return mustFailover(t, s, 0)
			}},
		"failover, store down": {Windows: short, At: at, ShortWindows: true, Subjects: true,
			New: func(t *testing.T, _ ...string) quota.Counter { return mustFailover(t, downStore{}, 1) }},
	}
	for name, h := range harnesses {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			countertest.Run(t, h)
		})
	}
}

// mustFailover returns a failover over store, with the process's own
// counters to fall back on, and checks when t ends that down of the
// store's shards are down: 0, the case ran in the store; 1 (a store of one
// shard), in process.
func mustFailover(t *testing.T, store quota.SharedStore, down int64) *quota.Failover {
	f := quota.NewFailover(quota.NewShared(store, false), quota.NewSliding())
	t.Cleanup(func() {
		if got := f.ShardsDown(); got != down {
			t.Errorf("%d shards of the store down, want %d", got, down)
		}
	})
	return f
}

// downStore is a SharedStore that cannot be reached.
type downStore struct{}

var errDown = fmt.Errorf("%w: the store is down", tiers.ErrUnavailable)

func (downStore) Run(context.Context, *quota.SharedOp) error    { return errDown }
func (downStore) Clear(context.Context, string, []string) error { return errDown }
func (downStore) Shard(*quota.Charge) int                       { return 0 }
