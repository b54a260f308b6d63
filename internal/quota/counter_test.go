package quota_test

import (
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/countertest"
	"github.com/quotad/quotad/internal/quota/quotatest"
)

// The counter contract, run against the in-process implementations: the
// short windows (every algorithm), the in-memory ledger engine tests use,
// and the lease pool over it.
func TestCounterContract(t *testing.T) {
	t.Parallel()
	short, at := countertest.Short()
	long, _ := countertest.Long()
	harnesses := map[string]countertest.Harness{
		"in-memory ledger": {Windows: long, At: at,
			New: func(*testing.T, ...string) quota.Counter { return quotatest.NewLedger() }},
		"lease pool": {Windows: long, At: at, HoldsInGlobals: true,
			New: func(*testing.T, ...string) quota.Counter {
				return quota.NewLeasePool(quotatest.NewLedger(), quotatest.NewClock(at))
			}},
		"short windows": {Windows: short, At: at, ShortWindows: true,
			New: func(*testing.T, ...string) quota.Counter { return quota.NewSliding() }},
	}
	for name, h := range harnesses {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			countertest.Run(t, h)
		})
	}
}
