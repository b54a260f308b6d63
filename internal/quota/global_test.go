package quota_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// mapStore is a SharedStore in memory: each key holds a state, written
// only when every key of the call still holds what the caller expects.
type mapStore struct {
	mu   sync.Mutex
	keys map[string]string
}

func (s *mapStore) names(cs []quota.Charge) []string {
	var out []string
	for i := range cs {
		c := &cs[i]
		customer, global := c.SharedKeys()
		if customer {
			out = append(out, c.Metric+"/"+c.Customer+"/"+c.Subject)
		}
		if global {
			out = append(out, c.Metric)
		}
	}
	return out
}

func (s *mapStore) Run(_ context.Context, op *quota.SharedOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.names(op.Charges)
	found := make([]string, len(names))
	for i, n := range names {
		found[i] = s.keys[n]
	}
	op.AnsweredMs, op.Found = op.Charges[0].At.UnixMilli(), append(op.Found, found...)
	op.Written = op.Write && slices.Equal(found, op.Expect)
	if op.Written {
		for i, n := range names {
			s.keys[n] = op.Set[i]
		}
	}
	return nil
}

func (s *mapStore) Clear(context.Context, string, []string) error { return nil }
func (s *mapStore) Shard(*quota.Charge) int                       { return 0 }

// A metric's global usage: every customer's admitted units (limited or
// not) in each window with a capacity, ordered by window; short windows
// slide; a metric without capacity lists nothing.
func TestMetricUsage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	capacity := map[tiers.Window]int64{tiers.Second: 100, tiers.Minute: 1000, tiers.Day: 10000}
	seed := func(c *quotafake.Catalog) {
		c.PutMetric("api_calls", capacity)
		c.PutMetric("tokens", nil)
		c.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 50), hard(tiers.Day, 100)})
		c.PutCustomer("bob", tiers.Anchor{}, nil)
	}
	check := func(t *testing.T, e *quota.Engine, customer string, cost int64) {
		t.Helper()
		d, err := e.Check(context.Background(), quota.Request{Customer: customer, Metric: "api_calls", Cost: cost})
		if err != nil || !d.Allowed {
			t.Fatalf("check of %s: %+v, %v", customer, d, err)
		}
	}
	read := func(t *testing.T, e *quota.Engine) []quota.GlobalUsage {
		t.Helper()
		m, u, err := e.MetricUsage(context.Background(), "api_calls")
		if err != nil || m.Key != "api_calls" {
			t.Fatalf("MetricUsage: %+v, %v", m, err)
		}
		return u
	}
	want := func(now time.Time, second, minute, day int64, shortShared bool) []quota.GlobalUsage {
		var out []quota.GlobalUsage
		for _, w := range []tiers.Window{tiers.Second, tiers.Minute, tiers.Day} {
			used := map[tiers.Window]int64{tiers.Second: second, tiers.Minute: minute, tiers.Day: day}[w]
			_, end := quota.Bounds(w, now, tiers.Anchor{})
			out = append(out, quota.GlobalUsage{Window: w, Capacity: capacity[w], Used: used,
				Remaining: max(0, capacity[w]-used), ResetAt: end, Shared: w == tiers.Day || shortShared})
		}
		return out
	}

	// With leases, the day counts the units acme's lease reserved from
	// when it reserved them: at least what was admitted.
	leased := func(got, w []quota.GlobalUsage, leases bool) {
		if d := len(w) - 1; leases && len(got) == len(w) && got[d].Used >= w[d].Used {
			w[d].Used, w[d].Remaining = got[d].Used, max(0, w[d].Capacity-got[d].Used)
		}
	}
	eachMode(t, func(t *testing.T, leases bool) {
		f := newFixture(t, at, false, leases)
		seed(f.catalog)
		check(t, f.engine, "acme", 3)
		check(t, f.engine, "bob", 4)
		got, w := read(t, f.engine), want(at, 7, 7, 7, false)
		leased(got, w, leases)
		if !slices.Equal(got, w) {
			t.Errorf("after two customers' checks:\n got %+v\nwant %+v", got, w)
		}
		// Two seconds on, the second window has slid past both checks.
		f.clock.Advance(2 * time.Second)
		got, w = read(t, f.engine), want(at.Add(2*time.Second), 0, 7, 7, false)
		leased(got, w, leases)
		if !slices.Equal(got, w) {
			t.Errorf("two seconds on:\n got %+v\nwant %+v", got, w)
		}
		m, u, err := f.engine.MetricUsage(context.Background(), "tokens")
		if err != nil || m.Key != "tokens" || u == nil || len(u) != 0 {
			t.Errorf("metric without capacity: %+v, %+v, %v; want no window", m, u, err)
		}
		if _, _, err := f.engine.MetricUsage(context.Background(), "ghost"); !errors.Is(err, tiers.ErrMetricNotFound) {
			t.Errorf("undeclared metric: %v, want ErrMetricNotFound", err)
		}
		var ve *tiers.ValidationError
		if _, _, err := f.engine.MetricUsage(context.Background(), "Bad Key"); !errors.As(err, &ve) {
			t.Errorf("bad key: %v, want a validation error", err)
		}
	})

	t.Run("shared store, two engines", func(t *testing.T) {
		t.Parallel()
		clock, catalog, store := quotafake.NewClock(at), quotafake.NewCatalog(), &mapStore{keys: map[string]string{}}
		seed(catalog)
		ledger := quotafake.NewStore()
		engines := make([]*quota.Engine, 2)
		for i := range engines {
			ledger := ledger.Process()
			engines[i] = quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
				History: quotafake.NewHistory(), Clock: clock, Shared: store, StoreTimeout: testStoreTimeout})
		}
		check(t, engines[0], "acme", 3)
		check(t, engines[1], "bob", 4)
		for i, e := range engines {
			if got, w := read(t, e), want(at, 7, 7, 7, true); !slices.Equal(got, w) {
				t.Errorf("engine %d:\n got %+v\nwant %+v", i, got, w)
			}
		}
	})

	t.Run("shared store down", func(t *testing.T) {
		t.Parallel()
		clock, catalog := quotafake.NewClock(at), quotafake.NewCatalog()
		seed(catalog)
		ledger := quotafake.NewLedger()
		e := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
			History: quotafake.NewHistory(), Clock: clock, Shared: downStore{}, StoreTimeout: testStoreTimeout})
		check(t, e, "acme", 3)
		check(t, e, "bob", 4)
		// The checks were counted in process; so is the usage read.
		if got, w := read(t, e), want(at, 7, 7, 7, false); !slices.Equal(got, w) {
			t.Errorf("store down:\n got %+v\nwant %+v", got, w)
		}
	})
}
