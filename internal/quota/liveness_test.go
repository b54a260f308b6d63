package quota_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// fakeLiveness judges the store alive until silence is called.
type fakeLiveness struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

func newFakeLiveness() *fakeLiveness {
	l := &fakeLiveness{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

func (l *fakeLiveness) Alive() (context.Context, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx, l.ctx.Err() == nil
}

func (l *fakeLiveness) silence() { l.cancel() }

// With a Liveness, a check waits for a store judged alive beyond the store
// timeout (a slow store is not an outage), ends its wait as soon as the
// store is judged silent, and, while it is, waits the store timeout only.
func TestLivenessTellsSlowFromSilent(t *testing.T) {
	t.Parallel()
	const storeTimeout = 20 * time.Millisecond
	// bound is how long a test waits for an answer that must come: a
	// bound on a wait on a busy machine, not a measurement.
	const bound = 30 * time.Second
	eachMode(t, func(t *testing.T, leases bool) {
		setup := func(t *testing.T, slow time.Duration) (*quota.Engine, *silentLedger, *fakeLiveness) {
			ledger := &silentLedger{Ledger: quotafake.NewLedger(), slow: slow, entered: make(chan struct{}, 1)}
			catalog := quotafake.NewCatalog()
			catalog.PutMetric("api_calls", nil)
			catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 100)})
			clock := quotafake.NewClock(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
			live := newFakeLiveness()
			engine := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger,
				Audits: ledger, Clock: clock, Leases: leasesOf(leases, ledger, clock), StoreTimeout: storeTimeout,
				Liveness: live, WaitTimeout: time.Hour})
			ledger.silent.Store(true)
			return engine, ledger, live
		}
		check := func(t *testing.T, e *quota.Engine) <-chan quota.Decision {
			out := make(chan quota.Decision, 1)
			go func() {
				d, err := e.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
				if err != nil {
					t.Error(err)
				}
				out <- d
			}()
			return out
		}
		answer := func(t *testing.T, c <-chan quota.Decision) quota.Decision {
			t.Helper()
			select {
			case d := <-c:
				return d
			case <-time.After(bound):
				t.Fatalf("no answer within %s", bound)
				return quota.Decision{}
			}
		}

		t.Run("slow", func(t *testing.T) {
			// The store answers after ten store timeouts: the check waits.
			engine, _, _ := setup(t, 10*storeTimeout)
			d := answer(t, check(t, engine))
			if !d.Allowed || d.Degraded || len(d.Limits) != 1 || d.Limits[0].Used != 1 {
				t.Errorf("a slow store: %+v, want allowed from the store, not degraded", d)
			}
		})
		t.Run("silent while waiting", func(t *testing.T) {
			engine, ledger, live := setup(t, 0)
			c := check(t, engine)
			<-ledger.entered
			live.silence()
			if d := answer(t, c); !d.Allowed || !d.Degraded {
				t.Errorf("the store judged silent: %+v, want allowed, degraded", d)
			}
		})
		t.Run("silent already", func(t *testing.T) {
			engine, _, live := setup(t, 0)
			live.silence()
			// The wait timeout is an hour: only the store timeout ends it.
			if d := answer(t, check(t, engine)); !d.Allowed || !d.Degraded {
				t.Errorf("the store judged silent: %+v, want allowed, degraded", d)
			}
		})
	})
}
