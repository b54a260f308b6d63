package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// TestAgreesWithInProcess runs the same random checks, dry runs, refunds,
// clock steps and limit changes through two engines over one catalog and
// one manual clock: one counting short windows in process, one in Redis.
// Every answer must be the same, field for field: the script keeps the
// in-process algorithms and their exact arithmetic, extreme limits,
// bursts, soft and elastic limits, conversions between algorithms and the
// undo of a take a long window denied included.
func TestAgreesWithInProcess(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			agree(t, newStore(t), seed, 150) // a prefix each: the metric's global keys are the seed's
		})
	}
}

// The same through a Redis Cluster of three masters, for fewer seeds:
// each seed's customer's keys live on the node of its hash slot, those of
// the metric's global windows on another's, maybe.
func TestAgreesWithInProcessInCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, err := redisstore.New(cluster.URL(), redisstore.Options{Prefix: fmt.Sprintf("s%d:", seed), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			agree(t, s, seed, 150)
		})
	}
}

func agree(t *testing.T, store quota.SharedStore, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	start := time.UnixMilli(1_790_000_000_000 + rng.Int64N(1_000_000_000))
	// Each engine has its clock, and each clock moves on by tick whenever
	// it is read, so that time passes within a check (between a take and
	// its undo, say) the same way for both.
	tick := time.Duration(rng.Int64N(3)) * time.Duration(rng.Int64N(400)) * time.Millisecond
	clockA, clockB := &tickClock{now: start, tick: tick}, &tickClock{now: start, tick: tick}
	catalog := quotafake.NewCatalog()
	customer := fmt.Sprintf("c%d", seed)
	capacity := map[tiers.Window]int64{}
	if rng.IntN(3) == 0 {
		capacity[tiers.Second] = randLimit(rng)
		capacity[tiers.Minute] = randLimit(rng)
	}
	catalog.PutMetric("api_calls", capacity)
	limits := randLimits(rng)
	catalog.PutCustomer(customer, tiers.Anchor{}, limits)

	ledgerA, ledgerB := quotafake.NewLedger(), quotafake.NewLedger()
	local := quota.New(quota.Options{Catalog: catalog, Counts: ledgerA, Requests: ledgerA, Maintenance: ledgerA,
		Audits: ledgerA, Clock: clockA})
	shared := quota.New(quota.Options{Catalog: catalog, Counts: ledgerB, Requests: ledgerB, Maintenance: ledgerB,
		Audits: ledgerB, Clock: clockB, Shared: store})
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nlimits: %+v\nsteps:\n%v", fmt.Sprintf(format, args...), limits, log)
	}
	for step := range steps {
		cost := randCost(rng)
		switch k := rng.IntN(20); {
		case k < 10:
			r := quota.Request{Customer: customer, Metric: "api_calls", Cost: cost, DryRun: k == 9}
			log = append(log, fmt.Sprintf("%d check %+v at %d", step, r, clockA.now.UnixMilli()))
			a, errA := local.Check(ctx, r)
			b, errB := shared.Check(ctx, r)
			if errA != nil || errB != nil {
				fail("check: %v, %v", errA, errB)
			}
			a.StoreTrips, b.StoreTrips = 0, 0
			if !reflect.DeepEqual(a, b) {
				fail("check %+v:\n in process %+v\n in Redis   %+v", r, a, b)
			}
		case k < 13:
			r := quota.RefundRequest{Customer: customer, Metric: "api_calls", Cost: cost}
			log = append(log, fmt.Sprintf("%d refund %d at %d", step, cost, clockA.now.UnixMilli()))
			a, errA := local.Refund(ctx, r)
			b, errB := shared.Refund(ctx, r)
			if errA != nil || errB != nil {
				fail("refund: %v, %v", errA, errB)
			}
			if !reflect.DeepEqual(a, b) {
				fail("refund %d:\n in process %+v\n in Redis   %+v", cost, a, b)
			}
		case k < 19:
			d := randStep(rng)
			log = append(log, fmt.Sprintf("%d advance %v", step, d))
			clockA.now, clockB.now = clockA.now.Add(d), clockB.now.Add(d)
		default:
			limits = changeAlgorithm(rng, limits)
			log = append(log, fmt.Sprintf("%d limits %+v", step, limits))
			catalog.PutCustomer(customer, tiers.Anchor{}, limits)
		}
	}
}

// tickClock is a quota.Clock that moves on by tick whenever it is read.
type tickClock struct {
	now  time.Time
	tick time.Duration
}

func (c *tickClock) Now() time.Time {
	t := c.now
	c.now = c.now.Add(c.tick)
	return t
}

// randLimit returns a limit: mostly small, sometimes at the edges of what
// a limit may be.
func randLimit(rng *rand.Rand) int64 {
	switch rng.IntN(8) {
	case 0:
		return tiers.MaxLimit - rng.Int64N(3)
	case 1:
		return rng.Int64N(1 << 40)
	case 2:
		return rng.Int64N(3) // 0, 1, 2
	}
	return 1 + rng.Int64N(60)
}

func randCost(rng *rand.Rand) int64 {
	switch rng.IntN(8) {
	case 0:
		return quota.MaxCost
	case 1:
		return 1 + rng.Int64N(1<<20)
	}
	return 1 + rng.Int64N(12)
}

func randStep(rng *rand.Rand) time.Duration {
	switch rng.IntN(8) {
	case 0:
		return time.Duration(rng.Int64N(90_000)) * time.Millisecond
	case 1:
		return time.Duration(rng.Int64N(48)) * time.Hour
	}
	return time.Duration(rng.Int64N(700)) * time.Millisecond
}

// randLimits returns a plan's limits of one metric: short windows of any
// algorithm and mode, and sometimes an hour that denies, so that a take
// of the short windows is undone.
func randLimits(rng *rand.Rand) []tiers.Limit {
	var out []tiers.Limit
	for _, w := range []tiers.Window{tiers.Second, tiers.Minute} {
		if rng.IntN(4) == 0 {
			continue
		}
		out = append(out, randShort(rng, w))
	}
	if rng.IntN(3) == 0 {
		out = append(out, tiers.Limit{Metric: "api_calls", Window: tiers.Hour, Limit: 1 + rng.Int64N(40), Mode: tiers.Hard})
	}
	return out
}

func randShort(rng *rand.Rand, w tiers.Window) tiers.Limit {
	l := tiers.Limit{Metric: "api_calls", Window: w, Limit: randLimit(rng), Algorithm: tiers.Algorithm(rng.IntN(4))}
	switch rng.IntN(4) {
	case 1:
		l.Mode, l.OveragePercent = tiers.Soft, rng.Int64N(tiers.MaxOveragePercent+1)
	case 2:
		l.Mode = tiers.Elastic
		if rng.IntN(2) == 0 {
			c := l.Limit + rng.Int64N(100)
			l.Ceiling = &c
		}
	}
	setAlgorithm(rng, &l, l.Algorithm)
	return l
}

// setAlgorithm gives l algorithm a, with what the algorithm allows: a
// sliding log's limit is at most 10000; a token bucket may have a burst.
func setAlgorithm(rng *rand.Rand, l *tiers.Limit, a tiers.Algorithm) {
	l.Algorithm, l.Burst = a, nil
	switch a {
	case tiers.SlidingLog:
		l.Limit = min(l.Limit, tiers.MaxLogLimit)
	case tiers.TokenBucket:
		if rng.IntN(2) == 0 {
			b := max(l.Limit, randLimit(rng))
			l.Burst = &b
		}
	}
	if l.Ceiling != nil && *l.Ceiling < l.Size() {
		c := l.Size()
		l.Ceiling = &c
	}
}

// changeAlgorithm switches one short limit to another algorithm or, for
// a token bucket, another rate: the counts carry over.
func changeAlgorithm(rng *rand.Rand, limits []tiers.Limit) []tiers.Limit {
	out := append([]tiers.Limit(nil), limits...)
	for i := range out {
		if out[i].Window.Short() && rng.IntN(2) == 0 {
			if rng.IntN(3) == 0 {
				out[i].Limit = randLimit(rng)
			}
			setAlgorithm(rng, &out[i], tiers.Algorithm(rng.IntN(4)))
		}
	}
	return out
}

// FuzzAgreesWithInProcess is TestAgreesWithInProcess from any seed.
func FuzzAgreesWithInProcess(f *testing.F) {
	for _, seed := range []uint64{0, 17, 19, 50, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		agree(t, newStore(t), seed, 80)
	})
}
