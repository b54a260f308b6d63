package quota

import (
	"slices"

	"github.com/quotad/quotad/internal/tiers"
)

// shortSlot is a short window of a check, with what decides it.
type shortSlot struct {
	window    tiers.Window
	threshold int64
	spare     bool // elastic with declared capacity in this window
	capacity  int64
	ceiling   int64
}

// maxShort is how many short windows a check can have: second and minute.
const maxShort = 2

// shortResult is what take found and did, per slot. Fixed-size arrays keep
// the hot path free of allocations.
type shortResult struct {
	allowed bool
	used    [maxShort]int64 // weighted count before the check
	passed  [maxShort]bool
	elastic [maxShort]bool
	starts  [maxShort]int64 // bucket start charged, per slot, for giveBack
	gstarts [maxShort]int64 // bucket start charged, per global window
}

// take evaluates every short slot of a check at once under the customer's
// shard lock and, when all admit the cost and charge is set, counts it in
// each slot and in each of the metric's global windows (those with declared
// capacity). Denials and dry runs change nothing.
func (s *slidingCounters) take(customer, metric string, slots []shortSlot, globals []tiers.Window,
	cost, nowMs int64, charge bool) shortResult {
	n := len(slots)
	r := shortResult{allowed: true}
	var sh, gsh *shard
	if n > 0 {
		sh = s.shardOf(customer, metric)
		sh.mu.Lock()
		defer sh.mu.Unlock()
	}
	if len(globals) > 0 {
		gsh = s.globalShardOf(metric)
		gsh.mu.Lock()
		defer gsh.mu.Unlock()
	}
	var buckets [maxShort]*bucket
	for i, sl := range slots {
		length := sl.window.Length().Milliseconds()
		b := s.get(sh, slidingKey{customer, metric, sl.window}, nowMs, charge)
		buckets[i] = b
		u := b.weighted(nowMs, length)
		r.used[i] = u
		if u+cost <= sl.threshold {
			r.passed[i] = true
			continue
		}
		if sl.spare {
			g := s.get(gsh, slidingKey{"", metric, sl.window}, nowMs, false).weighted(nowMs, length)
			if g+cost <= sl.capacity && u+cost <= sl.ceiling {
				r.passed[i], r.elastic[i] = true, true
				continue
			}
		}
		r.allowed = false
	}
	if !r.allowed || !charge {
		return r
	}
	for i, b := range buckets[:n] {
		b.cur = addCap(b.cur, cost)
		r.starts[i] = b.start
	}
	for i, w := range globals {
		b := s.get(gsh, slidingKey{"", metric, w}, nowMs, true)
		b.cur = addCap(b.cur, cost)
		r.gstarts[i] = b.start
	}
	return r
}

// giveBack undoes a take that charged: each unit goes back to the bucket it
// was counted in, if that bucket still counts.
func (s *slidingCounters) giveBack(customer, metric string, slots []shortSlot, globals []tiers.Window,
	cost int64, r shortResult) {
	if len(slots) > 0 {
		sh := s.shardOf(customer, metric)
		sh.mu.Lock()
		for i, sl := range slots {
			if b := sh.m[slidingKey{customer, metric, sl.window}]; b != nil {
				b.uncount(r.starts[i], sl.window.Length().Milliseconds(), cost)
			}
		}
		sh.mu.Unlock()
	}
	if len(globals) > 0 {
		gsh := s.globalShardOf(metric)
		gsh.mu.Lock()
		for i, w := range globals {
			if b := gsh.m[slidingKey{"", metric, w}]; b != nil {
				b.uncount(r.gstarts[i], w.Length().Milliseconds(), cost)
			}
		}
		gsh.mu.Unlock()
	}
}

// uncount removes n units counted in the bucket that started at start.
func (b *bucket) uncount(start, length, n int64) {
	switch start {
	case b.start:
		b.cur = max(0, b.cur-n)
	case b.start - length:
		b.prev = max(0, b.prev-n)
	}
}

// refund gives up to n units back to a customer's current windows of
// metric, never below zero: from the current bucket first, then from the
// previous one. It returns the weighted counts before.
//
// A global window (one with declared capacity) gets back exactly what the
// customer's bucket of the same window gave back, from the same buckets:
// those units were counted there when they were taken. A global window the
// customer has no limit in gets nothing back, as its share there is not
// known; counting too much there only makes elastic limits more cautious,
// where counting too little would let them pass the capacity.
func (s *slidingCounters) refund(customer, metric string, windows []tiers.Window, globals []tiers.Window,
	n, nowMs int64) []int64 {
	before := make([]int64, len(windows))
	type givenBack struct{ cur, prev int64 }
	given := make([]givenBack, len(windows))
	if len(windows) > 0 {
		sh := s.shardOf(customer, metric)
		sh.mu.Lock()
		for i, w := range windows {
			b := s.get(sh, slidingKey{customer, metric, w}, nowMs, false)
			before[i] = b.weighted(nowMs, w.Length().Milliseconds())
			given[i].cur, given[i].prev = b.refund(n)
		}
		sh.mu.Unlock()
	}
	if len(globals) > 0 {
		gsh := s.globalShardOf(metric)
		gsh.mu.Lock()
		for _, w := range globals {
			if i := slices.Index(windows, w); i >= 0 {
				g, b := given[i], s.get(gsh, slidingKey{"", metric, w}, nowMs, false)
				b.cur -= min(b.cur, g.cur)
				b.prev -= min(b.prev, g.prev)
			}
		}
		gsh.mu.Unlock()
	}
	return before
}

// refund takes up to n units off the bucket, current ones first, never
// below zero, and returns how many it took from each.
func (b *bucket) refund(n int64) (fromCur, fromPrev int64) {
	fromCur = min(n, b.cur)
	fromPrev = min(n-fromCur, b.prev)
	b.cur -= fromCur
	b.prev -= fromPrev
	return fromCur, fromPrev
}

// peek returns the weighted counts of a customer's windows of metric and,
// per window, of the metric's global usage.
func (s *slidingCounters) peek(customer, metric string, windows []tiers.Window, nowMs int64) (used, global []int64) {
	used = make([]int64, len(windows))
	global = make([]int64, len(windows))
	if len(windows) == 0 {
		return used, global
	}
	sh := s.shardOf(customer, metric)
	sh.mu.Lock()
	for i, w := range windows {
		used[i] = s.get(sh, slidingKey{customer, metric, w}, nowMs, false).weighted(nowMs, w.Length().Milliseconds())
	}
	sh.mu.Unlock()
	gsh := s.globalShardOf(metric)
	gsh.mu.Lock()
	for i, w := range windows {
		global[i] = s.get(gsh, slidingKey{"", metric, w}, nowMs, false).weighted(nowMs, w.Length().Milliseconds())
	}
	gsh.mu.Unlock()
	return used, global
}

// state returns a key's raw bucket state at nowMs (for retry_after).
func (s *slidingCounters) state(customer, metric string, w tiers.Window, nowMs int64) bucket {
	var sh *shard
	if customer == "" {
		sh = s.globalShardOf(metric)
	} else {
		sh = s.shardOf(customer, metric)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return *s.get(sh, slidingKey{customer, metric, w}, nowMs, false)
}

// shortWait returns how many milliseconds from nowMs pass before a key in
// state b admits cost k against threshold t, or -1 if it never will. The
// weighted count never grows while no unit is added, so the first moment
// it admits, it admits from then on.
//
// Within the current bucket the check passes at elapsed e' once
// floor(p*(T-e')/T) <= t-k-c, that is p*(T-e') <= (t-k-c+1)*T - 1. In the
// next bucket p becomes c and c becomes 0.
func shortWait(b bucket, nowMs, length, k, t int64) int64 {
	if k > t {
		return -1
	}
	e := min(max(nowMs-b.start, 0), length-1)
	if r := t - k - b.cur; r >= 0 {
		if b.prev == 0 {
			return 0
		}
		need := length - mulSubDiv(r+1, length, b.prev)
		if need <= e {
			return 0
		}
		if need < length {
			return need - e
		}
	}
	// Next bucket: previous = c, current = 0, elapsed counted from its start.
	toNext := length - e
	if b.cur == 0 {
		return toNext
	}
	need := max(length-mulSubDiv(t-k+1, length, b.cur), 0)
	return toNext + need
}
