package quota_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotatest"
	"github.com/quotad/quotad/internal/tiers"
)

// usedOf returns what usage reports of customer's window of metric.
func usedOf(t testing.TB, e *quota.Engine, customer, metric string, w tiers.Window) int64 {
	t.Helper()
	_, usage, err := e.Usage(context.Background(), customer)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if u.Metric == metric && u.Window == w {
			return u.Used
		}
	}
	t.Fatalf("no usage of %s's %s window of %s in %+v", customer, w, metric, usage)
	return 0
}

func req(customer, metric string, cost int64) quota.Request {
	return quota.Request{Customer: customer, Metric: metric, Cost: cost}
}

// CheckAll charges every request of a batch or none: a request its own
// windows deny (short or long, first or last) leaves every other
// request's windows as they were.
func TestCheckAll(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, tc := range []struct {
			name      string
			batch     []quota.Request
			allowed   bool
			decisions []bool // each request's Allowed
			// used is what each customer's windows count afterwards:
			// "a" on api_calls (second, day), "b" on api_calls (day) and
			// "a" on exports (second).
			aSecond, aDay, bDay, aExports int64
		}{
			{name: "all within", batch: []quota.Request{req("a", "api_calls", 2), req("b", "api_calls", 3), req("a", "exports", 1)},
				allowed: true, decisions: []bool{true, true, true}, aSecond: 2, aDay: 2, bDay: 3, aExports: 1},
			{name: "last denied by a long window", batch: []quota.Request{req("a", "api_calls", 2), req("a", "exports", 1), req("b", "api_calls", 11)},
				decisions: []bool{true, true, false}},
			{name: "first denied by a short window", batch: []quota.Request{req("a", "exports", 4), req("a", "api_calls", 1), req("b", "api_calls", 1)},
				decisions: []bool{false, true, true}},
			{name: "middle denied by a short window", batch: []quota.Request{req("b", "api_calls", 10), req("a", "api_calls", 6), req("a", "exports", 1)},
				decisions: []bool{true, false, true}},
			{name: "a dry run denies too", batch: []quota.Request{req("a", "api_calls", 1),
				{Customer: "b", Metric: "api_calls", Cost: 11, DryRun: true}}, decisions: []bool{true, false}},
			{name: "a dry run counts nothing", batch: []quota.Request{req("a", "api_calls", 1),
				{Customer: "b", Metric: "api_calls", Cost: 4, DryRun: true}}, allowed: true, decisions: []bool{true, true}, aSecond: 1, aDay: 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, leases)
				f.catalog.PutMetric("api_calls", nil)
				f.catalog.PutMetric("exports", nil)
				f.catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 5), hard(tiers.Day, 100),
					{Metric: "exports", Window: tiers.Second, Limit: 3, Mode: tiers.Hard}})
				f.catalog.PutCustomer("b", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 10)})
				ds, err := f.engine.CheckAll(context.Background(), tc.batch)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != len(tc.batch) {
					t.Fatalf("%d decisions for %d requests", len(ds), len(tc.batch))
				}
				all := true
				for i, d := range ds {
					all = all && d.Allowed
					if d.Allowed != tc.decisions[i] {
						t.Errorf("decision %d: allowed = %v, want %v (%+v)", i, d.Allowed, tc.decisions[i], d)
					}
					if d.Customer != tc.batch[i].Customer || d.Metric != tc.batch[i].Metric {
						t.Errorf("decision %d is of %s/%s, want %s/%s", i, d.Customer, d.Metric, tc.batch[i].Customer, tc.batch[i].Metric)
					}
				}
				if all != tc.allowed {
					t.Errorf("every decision allowed = %v, want %v", all, tc.allowed)
				}
				for _, u := range []struct {
					customer, metric string
					w                tiers.Window
					want             int64
				}{
					{"a", "api_calls", tiers.Second, tc.aSecond}, {"a", "api_calls", tiers.Day, tc.aDay},
					{"b", "api_calls", tiers.Day, tc.bDay}, {"a", "exports", tiers.Second, tc.aExports},
				} {
					if got := usedOf(t, f.engine, u.customer, u.metric, u.w); got != u.want {
						t.Errorf("%s's %s/%s used %d, want %d", u.customer, u.metric, u.w, got, u.want)
					}
				}
				// History: admitted units when the batch passed, one denied
				// check per request its own windows denied otherwise.
				if err := f.engine.FlushHistory(context.Background()); err != nil {
					t.Fatal(err)
				}
				var used, denied int64
				for _, c := range []string{"a", "b"} {
					for _, m := range []string{"api_calls", "exports"} {
						days, err := f.history.FindHistory(context.Background(), c, m, time.Time{}, time.Now().AddDate(10, 0, 0))
						if err != nil {
							t.Fatal(err)
						}
						for _, d := range days {
							used += d.Used
							denied += d.Denied
						}
					}
				}
				var wantUsed, wantDenied int64
				for i, r := range tc.batch {
					switch {
					case r.DryRun:
					case tc.allowed:
						wantUsed += r.Cost
					case !ds[i].Allowed:
						wantDenied++
					}
				}
				if used != wantUsed || denied != wantDenied {
					t.Errorf("history: used %d, denied %d; want %d, %d", used, denied, wantUsed, wantDenied)
				}
			})
		}
	})
}

func TestCheckAllErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, false)
	f.catalog.PutMetric("api_calls", nil)
	f.catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 100)})
	ctx := context.Background()

	_, err := f.engine.CheckAll(ctx, []quota.Request{req("a", "api_calls", 1), req("ghost", "api_calls", 1), req("a", "nope", 1)})
	var be *quota.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("unknown customer and metric: err = %v, want a *BatchError", err)
	}
	if be.Errs[0] != nil || !errors.Is(be.Errs[1], tiers.ErrCustomerNotFound) || !errors.Is(be.Errs[2], tiers.ErrMetricNotFound) {
		t.Errorf("errors %v, want nil, customer not found, metric not found", be.Errs)
	}
	if got := usedOf(t, f.engine, "a", "api_calls", tiers.Day); got != 0 {
		t.Errorf("a batch with unknown names charged %d units, want none", got)
	}

	_, err = f.engine.CheckAll(ctx, []quota.Request{req("a", "api_calls", 0)})
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("cost 0: err = %v, want a validation error", err)
	}
	_, err = f.engine.CheckAll(ctx, []quota.Request{{Customer: "a", Metric: "api_calls", Cost: 1, RequestID: "x"}})
	if !errors.As(err, &be) {
		t.Errorf("request id: err = %v, want a *BatchError", err)
	}
	for _, n := range []int{0, quota.MaxBatch + 1} {
		rs := make([]quota.Request, n)
		for i := range rs {
			rs[i] = req("a", "api_calls", 1)
		}
		if _, err := f.engine.CheckAll(ctx, rs); !errors.As(err, &ve) {
			t.Errorf("%d requests: err = %v, want a validation error", n, err)
		}
	}
}

// The store unreachable: a batch fails open (allowed, degraded) or
// closed (ErrUnavailable, and what its short windows took given back).
func TestCheckAllStoreDown(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, closed := range []bool{false, true} {
			f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), closed, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 3)})
			f.catalog.PutCustomer("b", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 3), hard(tiers.Day, 100)})
			f.ledger.Err = errors.Join(tiers.ErrUnavailable)
			ds, err := f.engine.CheckAll(context.Background(), []quota.Request{req("a", "api_calls", 2), req("b", "api_calls", 2)})
			switch {
			case closed && !errors.Is(err, tiers.ErrUnavailable):
				t.Errorf("closed: %+v, %v; want ErrUnavailable", ds, err)
			case !closed && (err != nil || !ds[0].Allowed || !ds[1].Allowed || !ds[1].Degraded):
				t.Errorf("open: %+v, %v; want both allowed, b degraded", ds, err)
			}
			f.ledger.Err = nil
			want := map[bool]int64{false: 2, true: 0}[closed]
			if got := usedOf(t, f.engine, "a", "api_calls", tiers.Second); got != want {
				t.Errorf("closed=%v: a's second window counts %d, want %d", closed, got, want)
			}
		}
	})
}

// Batches of two checks from many clients, through two processes sharing
// one ledger with leases: "b" has room for 20, "a" for far more. Exactly
// 20 batches pass, and "a" is charged for those 20 only.
func TestCheckAllConcurrentAcrossProcesses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := quotatest.NewClock(now)
	catalog := quotatest.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 10_000), hard(tiers.Day, 10_000)})
	catalog.PutCustomer("b", tiers.Anchor{}, []tiers.Limit{hard(tiers.Hour, 20)})
	store := quotatest.NewStore()
	engines := make([]*quota.Engine, 2)
	for i := range engines {
		engines[i] = quota.New(quota.Options{Catalog: catalog, Ledger: store.Process(), History: quotatest.NewHistory(),
			Clock: clock, Leases: true, StoreTimeout: testStoreTimeout})
	}
	const workers, each = 8, 10
	var passed, denied atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ds, err := engines[(w+i)%2].CheckAll(context.Background(), []quota.Request{req("a", "api_calls", 1), req("b", "api_calls", 1)})
				if err != nil {
					t.Error(err)
					return
				}
				if ds[0].Allowed && ds[1].Allowed {
					passed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 20 || denied.Load() != workers*each-20 {
		t.Errorf("%d batches passed, %d denied; want 20 and %d", passed.Load(), denied.Load(), workers*each-20)
	}
	for _, e := range engines {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	day, _ := quota.Bounds(tiers.Day, now, tiers.Anchor{})
	hour, _ := quota.Bounds(tiers.Hour, now, tiers.Anchor{})
	if got := store.Count(quota.CounterKey{Customer: "a", Metric: "api_calls", Window: tiers.Day, Start: day}); got != passed.Load() {
		t.Errorf("a's day counts %d, want the %d batches that passed", got, passed.Load())
	}
	if got := store.Count(quota.CounterKey{Customer: "b", Metric: "api_calls", Window: tiers.Hour, Start: hour}); got != 20 {
		t.Errorf("b's hour counts %d, want 20", got)
	}
	// Short windows are per process here: the minute counts of both
	// processes add up to the batches that passed.
	var minute int64
	for _, e := range engines {
		minute += usedOf(t, e, "a", "api_calls", tiers.Minute)
	}
	if minute != passed.Load() {
		t.Errorf("a's minute windows count %d in all, want %d", minute, passed.Load())
	}
}
