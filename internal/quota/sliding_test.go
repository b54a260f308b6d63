package quota

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/tiers"
)

// TestShardIndex holds a shard's hash index to a map over random adds,
// lookups and removals: every key added and not removed is found, with
// its own bucket, and nothing else is.
func TestShardIndex(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		s := newLocalCounters()
		var sh shard
		type key struct {
			customer string
			w        tiers.Window
		}
		model := map[key]int64{}
		customers := rapid.IntRange(1, 300).Draw(rt, "customers")
		for i := range rapid.IntRange(1, 2000).Draw(rt, "steps") {
			k := key{fmt.Sprintf("c%d", rapid.IntRange(0, customers-1).Draw(rt, "customer")),
				rapid.SampledFrom([]tiers.Window{tiers.Second, tiers.Minute}).Draw(rt, "window")}
			pair := s.pairHash(k.customer, "m", "")
			l := lookup{customer: k.customer, metric: "m"}
			h := windowHash(pair, k.w)
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 6: // look up, adding when missing
				e := sh.find(h, &l, k.w)
				want, ok := model[k]
				if (e != nil) != ok {
					rt.Fatalf("step %d: %v found %v, want %v", i, k, e != nil, ok)
				}
				if e == nil {
					e = sh.add(h, &l, k.w)
					want = int64(i)
					e.cur = want
					model[k] = want
				}
				if e.cur != want || e.customer != k.customer || e.window != k.w {
					rt.Fatalf("step %d: %v holds %+v, want count %d", i, k, *e, want)
				}
			default: // remove one customer's keys
				n := sh.scan(func(e *entry) bool { return e.customer == k.customer })
				removed := 0
				for mk := range model {
					if mk.customer == k.customer {
						delete(model, mk)
						removed++
					}
				}
				if n != removed {
					rt.Fatalf("step %d: scan removed %d, want %d", i, n, removed)
				}
			}
			if sh.live != len(model) {
				rt.Fatalf("step %d: %d live entries, want %d", i, sh.live, len(model))
			}
		}
	})
}

// Undoing a take gives the metric's global usage back in the bucket the
// take counted it in, also when the customer's counter rolled on to the
// next bucket meanwhile (a dry run a second later) and the global one did
// not.
func TestUndoGivesGlobalUsageBackWhereCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newLocalCounters()
	at := time.Date(2026, 11, 10, 10, 30, 0, 500_000_000, time.UTC)
	charge := func(at time.Time) *Charge {
		start, end := Bounds(tiers.Second, at, tiers.Anchor{})
		g := GlobalKey{Metric: "m", Window: tiers.Second, Start: start}
		return &Charge{Customer: "c", Metric: "m", Cost: 5, At: at, Globals: []GlobalKey{g},
			Spans: []Span{{Key: CounterKey{Customer: "c", Metric: "m", Window: tiers.Second, Start: start}, End: end, Global: g,
				Rule: Rule{Mode: tiers.Elastic, Limit: 10, Size: 10, Threshold: 10, Spare: true, Capacity: 100, Ceiling: tiers.MaxLimit}}}}
	}
	out := make([]Outcome, 1)
	take := charge(at)
	if ok, err := s.Take(ctx, one(take, out)); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	if err := s.Peek(ctx, one(charge(at.Add(time.Second)), out)); err != nil {
		t.Fatal(err)
	}
	if err := s.GiveBack(ctx, one(take, out)); err != nil {
		t.Fatal(err)
	}
	g := s.lookupOf(&s.global, "", "m", "")
	g.sh.mu.Lock()
	var scratch bucket
	b := *s.get(&g, tiers.Second, at.UnixMilli(), false, &scratch)
	g.sh.mu.Unlock()
	if b.cur != 0 || b.prev != 0 {
		t.Errorf("the global bucket after the undo: %+v, want nothing counted", b)
	}
}

// Shards are padded to whole cache lines, so that locking one does not
// slow its neighbours.
func TestShardsFillCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n != 128 {
		t.Errorf("a sliding-window shard takes %d bytes, want 128", n)
	}
}

// Undoing a take whose units a token bucket already refilled, or a log
// already let go, gives back none of a later take's units (the key would
// then admit more than its size), and gives the metric's global usage back
// all of the undone take's.
func TestUndoGivesBackOnlyTheTakesOwnUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		alg tiers.Algorithm
		gap int64 // ms from the undone take to the later one
	}{
		{tiers.TokenBucket, 200}, // one token refills in 100 ms at 10 a second
		{tiers.SlidingLog, 1000}, // a unit leaves the log after 1 s
	} {
		t.Run(tt.alg.String(), func(t *testing.T) {
			t.Parallel()
			s := newLocalCounters()
			rule := RuleFor(tiers.Limit{Metric: "m", Window: tiers.Second, Limit: 10, Mode: tiers.Hard, Algorithm: tt.alg},
				tiers.Metric{Key: "m"})
			base := time.Date(2026, 11, 10, 10, 30, 0, 0, time.UTC).UnixMilli()
			charge := func(ms, cost int64) *Charge {
				at := time.UnixMilli(base + ms).UTC()
				gStart, _ := Bounds(tiers.Minute, at, tiers.Anchor{})
				g := GlobalKey{Metric: "m", Window: tiers.Minute, Start: gStart}
				sStart, sEnd := Bounds(tiers.Second, at, tiers.Anchor{})
				return &Charge{Customer: "c", Metric: "m", Cost: cost, At: at, Globals: []GlobalKey{g}, Spans: []Span{{
					Key: CounterKey{Customer: "c", Metric: "m", Window: tiers.Second, Start: sStart}, End: sEnd, Rule: rule}}}
			}
			out := make([]Outcome, 1)
			a := charge(0, 1)
			if ok, _ := s.Take(ctx, one(a, out)); !ok {
				t.Fatal("take A denied")
			}
			if ok, _ := s.Take(ctx, one(charge(tt.gap, 10), out)); !ok {
				t.Fatal("take B, 10 of 10, denied")
			}
			a.undoNow = base + tt.gap // A's long window denied only now
			if err := s.GiveBack(ctx, one(a, out)); err != nil {
				t.Fatal(err)
			}
			if err := s.Peek(ctx, one(charge(tt.gap, 1), out)); err != nil || out[0].Used != 10 {
				t.Errorf("after undoing A, the key counts %d (%v), want B's 10", out[0].Used, err)
			}
			g := s.lookupOf(&s.global, "", "m", "")
			g.sh.mu.Lock()
			var scratch bucket
			gb := *s.get(&g, tiers.Minute, base+tt.gap, false, &scratch)
			g.sh.mu.Unlock()
			if gb.cur != 10 {
				t.Errorf("the metric's global usage counts %d after the undo, want B's 10", gb.cur)
			}
		})
	}
}
