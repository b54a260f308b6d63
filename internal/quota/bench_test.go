package quota

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

var benchNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// benchCharge returns a charge of one unit in a second and a minute window
// with limits high enough that every take passes.
func benchCharge(customer string, at time.Time) Charge {
	c := Charge{Customer: customer, Metric: "api_calls", Cost: 1, At: at, Out: make([]Outcome, 2)}
	for _, w := range []tiers.Window{tiers.Second, tiers.Minute} {
		start, end := Bounds(w, at, tiers.Anchor{})
		c.Spans = append(c.Spans, Span{
			Key:  CounterKey{Customer: customer, Metric: "api_calls", Window: w, Start: start},
			End:  end,
			Rule: Rule{Mode: tiers.Hard, Limit: 1 << 40, Size: 1 << 40, Threshold: 1 << 40, Ceiling: tiers.MaxLimit},
		})
	}
	return c
}

// BenchmarkSlidingTake measures one check of a second and a minute window
// on the in-process counter, one goroutine, over 10,000 customers: the
// charge is rebuilt for each customer in the same memory, as the engine
// does, so what is cold is the counters' own state.
func BenchmarkSlidingTake(b *testing.B) { benchTake(b, tiers.SlidingWindow) }

// benchTake is BenchmarkSlidingTake with both windows counted by alg. Each
// customer is checked every 10 ms.
func benchTake(b *testing.B, alg tiers.Algorithm) {
	s := newLocalCounters()
	ids := benchIDs(10_000)
	cs := []Charge{benchCharge(ids[0], benchNow)}
	c := &cs[0]
	withAlgorithm(c, alg)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		setCustomer(c, ids[i%len(ids)])
		c.At = benchNow.Add(time.Duration(i/1000) * time.Millisecond)
		if ok, _ := s.Take(ctx, cs); !ok {
			b.Fatal("denied")
		}
	}
}

// BenchmarkSlidingTakeParallel is BenchmarkSlidingTake from GOMAXPROCS
// goroutines at once.
func BenchmarkSlidingTakeParallel(b *testing.B) {
	s := newLocalCounters()
	ids := benchIDs(10_000)
	ctx := context.Background()
	var seq atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		cs := []Charge{benchCharge(ids[0], benchNow)}
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			i++
			setCustomer(&cs[0], ids[i%len(ids)])
			if ok, _ := s.Take(ctx, cs); !ok {
				b.Error("denied")
				return
			}
		}
	})
}

func setCustomer(c *Charge, id string) {
	c.Customer = id
	for i := range c.Spans {
		c.Spans[i].Key.Customer = id
	}
}

// benchCatalog serves every customer the same account from memory.
type benchCatalog struct {
	metric tiers.Metric
	acct   tiers.Account
}

func (*benchCatalog) PublicPlans(context.Context) ([]tiers.Plan, error) { return nil, nil }

func (c *benchCatalog) Metric(context.Context, string) (tiers.Metric, error) { return c.metric, nil }
func (c *benchCatalog) Account(_ context.Context, id string) (tiers.Account, error) {
	a := c.acct
	a.Customer.ID = id
	return a, nil
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func benchEngine() *Engine { return benchEngineOf(tiers.SlidingWindow) }

// benchEngineOf returns an engine whose customers have a second and a
// minute limit counted by alg (a sliding log's limits are its largest).
func benchEngineOf(alg tiers.Algorithm) *Engine {
	limit := int64(1 << 40)
	if alg == tiers.SlidingLog {
		limit = tiers.MaxLogLimit
	}
	cat := &benchCatalog{
		metric: tiers.Metric{Key: "api_calls"},
		acct: tiers.Account{
			Customer: tiers.Customer{Plan: "pro"},
			Plan: tiers.Plan{Key: "pro", Limits: []tiers.Limit{
				{Metric: "api_calls", Window: tiers.Second, Limit: limit, Mode: tiers.Hard, Algorithm: alg},
				{Metric: "api_calls", Window: tiers.Minute, Limit: limit, Mode: tiers.Soft, OveragePercent: 10, Algorithm: alg},
			}},
		},
	}
	return New(Options{Catalog: cat, Clock: fixedClock(benchNow)})
}

// BenchmarkEngineCheck measures a whole decision from cached limits:
// lookup, window resolution, both short windows, the Decision and its
// history entry.
func BenchmarkEngineCheck(b *testing.B) { benchChecks(b, benchEngine()) }

// benchChecks runs checks of one unit through e, over 10,000 customers in
// turn, each of which must be allowed.
func benchChecks(b *testing.B, e *Engine) {
	ids := benchIDs(10_000)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d, err := e.Check(ctx, Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkEngineCheckAlgorithms is BenchmarkEngineCheck with each
// algorithm counting both windows.
func BenchmarkEngineCheckAlgorithms(b *testing.B) {
	for _, alg := range tiers.Algorithms {
		b.Run(alg.String(), func(b *testing.B) { benchChecks(b, benchEngineOf(alg)) })
	}
}

// BenchmarkEngineCheckParallel is BenchmarkEngineCheck from GOMAXPROCS
// goroutines at once.
func BenchmarkEngineCheckParallel(b *testing.B) {
	e := benchEngine()
	ids := benchIDs(10_000)
	ctx := context.Background()
	var seq atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			i++
			if _, err := e.Check(ctx, Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
	}
	return ids
}

// BenchmarkShortKeysMemory counts 1,000,000 active short-window keys
// (500,000 customers with a second and a minute window) and reports the
// heap they take, per key. Customer ids are allocated before measuring:
// the catalog holds them anyway.
func BenchmarkShortKeysMemory(b *testing.B) {
	benchKeysMemory(b, 500_000, 1, tiers.SlidingWindow, 1<<40, 2)
}

// withAlgorithm sets every span of c to count by alg. A sliding log's
// limit is bounded, so it gets the largest it may have.
func withAlgorithm(c *Charge, alg tiers.Algorithm) {
	for i := range c.Spans {
		r := &c.Spans[i].Rule
		r.Algorithm = alg
		if alg == tiers.SlidingLog {
			r.Limit, r.Size, r.Threshold = tiers.MaxLogLimit, tiers.MaxLogLimit, tiers.MaxLogLimit
		}
	}
}

// BenchmarkAlgorithmTake is BenchmarkSlidingTake for each algorithm. A
// sliding log holds 100 entries of the second window and up to 6,000 of
// the minute one.
func BenchmarkAlgorithmTake(b *testing.B) {
	for _, alg := range tiers.Algorithms {
		b.Run(alg.String(), func(b *testing.B) { benchTake(b, alg) })
	}
}

// BenchmarkAlgorithmKeysMemory reports the heap each algorithm takes per
// active key: 1,000,000 keys (500,000 customers with a second and a
// minute window) after one check each, and, for the sliding log, 10,000
// keys of a second window whose log is full: 100 units admitted in 100
// different milliseconds, its limit. A log's memory grows with its limit,
// up to one 16-byte entry per unit or per millisecond of the window.
func BenchmarkAlgorithmKeysMemory(b *testing.B) {
	for _, alg := range tiers.Algorithms {
		b.Run(alg.String(), func(b *testing.B) { benchKeysMemory(b, 500_000, 1, alg, 1<<40, 2) })
	}
	b.Run("sliding_log_full_100", func(b *testing.B) { benchKeysMemory(b, 10_000, 100, tiers.SlidingLog, 100, 1) })
}

// benchKeysMemory reports the heap per key of customers' keys after checks
// checks of each, in windows windows (second, then minute) counted by alg
// at limit, the checks a millisecond apart. Customer ids are allocated
// before measuring: the catalog holds them anyway.
func benchKeysMemory(b *testing.B, customers, checks int, alg tiers.Algorithm, limit int64, windows int) {
	ids := benchIDs(customers)
	ctx := context.Background()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := newLocalCounters()
		for n := range checks {
			for _, id := range ids {
				c := benchCharge(id, benchNow.Add(time.Duration(n)*time.Millisecond))
				c.Spans, c.Out = c.Spans[:windows], c.Out[:windows]
				withAlgorithm(&c, alg)
				for i := range c.Spans {
					r := &c.Spans[i].Rule
					r.Limit, r.Size, r.Threshold = limit, limit, limit
				}
				if ok, _ := s.Take(ctx, []Charge{c}); !ok {
					b.Fatal("denied")
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		keys := s.Keys()
		if keys != int64(windows*customers) {
			b.Fatalf("%d keys, want %d", keys, windows*customers)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(keys), "bytes/key")
		runtime.KeepAlive(s)
	}
}

// mapCatalog is a catalog of several metrics, every customer on one plan.
type mapCatalog struct {
	metrics map[string]tiers.Metric
	plan    tiers.Plan
}

func (*mapCatalog) PublicPlans(context.Context) ([]tiers.Plan, error) { return nil, nil }

func (c *mapCatalog) Metric(_ context.Context, key string) (tiers.Metric, error) {
	m, ok := c.metrics[key]
	if !ok {
		return tiers.Metric{}, tiers.ErrMetricNotFound
	}
	return m, nil
}

func (c *mapCatalog) Account(_ context.Context, id string) (tiers.Account, error) {
	return tiers.Account{Customer: tiers.Customer{ID: id, Plan: c.plan.Key}, Plan: c.plan}, nil
}

// benchCharges returns an engine whose customers' plan has, per metric of
// metrics, a second and a minute limit (for the customer, or per subject
// where perSubject names the metric), with pool drawn on as credits say.
func benchCharges(metrics []string, perSubject map[string]bool, pool *tiers.Draw) *Engine {
	cat := &mapCatalog{metrics: map[string]tiers.Metric{}, plan: tiers.Plan{Key: "pro"}}
	for _, m := range metrics {
		cat.metrics[m] = tiers.Metric{Key: m}
		per := tiers.PerCustomer
		if perSubject[m] {
			per = tiers.PerSubject
		}
		for _, w := range []tiers.Window{tiers.Second, tiers.Minute} {
			cat.plan.Limits = append(cat.plan.Limits, tiers.Limit{Metric: m, Window: w, Limit: 1 << 40, Mode: tiers.Hard, Per: per})
		}
	}
	if pool != nil {
		m := cat.metrics[metrics[0]]
		m.Draws = pool
		cat.metrics[metrics[0]] = m
	}
	return New(Options{Catalog: cat, Clock: fixedClock(benchNow)})
}

// BenchmarkEngineCheckItems measures a check of two metrics, each with a
// second and a minute window, all or nothing.
func BenchmarkEngineCheckItems(b *testing.B) {
	e := benchCharges([]string{"api_calls", "exports"}, nil, nil)
	ids := benchIDs(10_000)
	ctx := context.Background()
	items := []Item{{Metric: "api_calls", Cost: 1}, {Metric: "exports", Cost: 1}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d, err := e.Check(ctx, Request{Customer: ids[i%len(ids)], Items: items})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkEngineCheckCredits measures a check of a metric that draws on a
// credit pool: its windows and the pool's, all or nothing.
func BenchmarkEngineCheckCredits(b *testing.B) {
	e := benchCharges([]string{"tokens", "credits"}, nil, &tiers.Draw{Pool: "credits", Credits: 1, Per: 100})
	ids := benchIDs(10_000)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d, err := e.Check(ctx, Request{Customer: ids[i%len(ids)], Metric: "tokens", Cost: 100})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkEngineCheckSubject measures a check of a metric with limits
// for the customer and per subject, over 100,000 subjects of 1,000
// customers.
func BenchmarkEngineCheckSubject(b *testing.B) {
	e := benchCharges([]string{"api_calls", "calls_per_user"}, map[string]bool{"calls_per_user": true}, nil)
	// One metric limited both ways: the per-subject limits of
	// calls_per_user are api_calls'.
	cat := e.catalog.(*mapCatalog)
	for i := range cat.plan.Limits {
		if cat.plan.Limits[i].Metric == "calls_per_user" {
			cat.plan.Limits[i].Metric = "api_calls"
		}
	}
	ids := benchIDs(1_000)
	subjects := make([]string, 100_000)
	for i := range subjects {
		subjects[i] = "u" + strconv.Itoa(i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := i % len(subjects)
		d, err := e.Check(ctx, Request{Customer: ids[s/100], Metric: "api_calls", Cost: 1, Subject: subjects[s]})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}
