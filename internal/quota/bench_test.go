package quota

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

var benchNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// BenchmarkSlidingTake measures one check of a second and a minute window
// on the in-process counter, one goroutine, over 10,000 customers.
func BenchmarkSlidingTake(b *testing.B) {
	s := newSlidingCounters()
	slots := []shortSlot{
		{window: tiers.Second, threshold: 1 << 40, ceiling: tiers.MaxLimit},
		{window: tiers.Minute, threshold: 1 << 40, ceiling: tiers.MaxLimit},
	}
	ids := benchIDs(10_000)
	nowMs := benchNow.UnixMilli()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.take(ids[i%len(ids)], "api_calls", slots, nil, 1, nowMs+int64(i/1000), true)
	}
}

// BenchmarkSlidingTakeParallel is BenchmarkSlidingTake from GOMAXPROCS
// goroutines at once.
func BenchmarkSlidingTakeParallel(b *testing.B) {
	s := newSlidingCounters()
	slots := []shortSlot{
		{window: tiers.Second, threshold: 1 << 40, ceiling: tiers.MaxLimit},
		{window: tiers.Minute, threshold: 1 << 40, ceiling: tiers.MaxLimit},
	}
	ids := benchIDs(10_000)
	nowMs := benchNow.UnixMilli()
	var seq atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			i++
			s.take(ids[i%len(ids)], "api_calls", slots, nil, 1, nowMs, true)
		}
	})
}

// benchCatalog serves every customer the same account from memory.
type benchCatalog struct {
	metric tiers.Metric
	acct   tiers.Account
}

func (c *benchCatalog) Metric(context.Context, string) (tiers.Metric, error) { return c.metric, nil }
func (c *benchCatalog) Account(_ context.Context, id string) (tiers.Account, error) {
	a := c.acct
	a.Customer.ID = id
	return a, nil
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func benchEngine() *Engine {
	cat := &benchCatalog{
		metric: tiers.Metric{Key: "api_calls"},
		acct: tiers.Account{
			Customer: tiers.Customer{Plan: "pro"},
			Plan: tiers.Plan{Key: "pro", Limits: []tiers.Limit{
				{Metric: "api_calls", Window: tiers.Second, Limit: 1 << 40, Mode: tiers.Hard},
				{Metric: "api_calls", Window: tiers.Minute, Limit: 1 << 40, Mode: tiers.Soft, OveragePercent: 10},
			}},
		},
	}
	return New(Options{Catalog: cat, Clock: fixedClock(benchNow)})
}

// BenchmarkEngineCheck measures a whole decision from cached limits:
// lookup, window resolution, both short windows, the Decision and its
// history entry.
func BenchmarkEngineCheck(b *testing.B) {
	e := benchEngine()
	ids := benchIDs(10_000)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Check(ctx, Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1}); err != nil {
			b.Fatal(err)
		}
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
