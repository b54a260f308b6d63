package quota

import (
	"context"

	"github.com/quotad/quotad/internal/tiers"
)

// slidingCounters implements Counter for short windows, in this process.
// Every span of a charge is decided under the customer's shard lock, and
// the metric's global windows under their shard's lock taken after it, so
// a charge is all or nothing. It never fails.
var _ Counter = (*slidingCounters)(nil)

// NewSliding returns an in-process Counter of short windows: the sliding
// window counter each Engine keeps.
func NewSliding() Counter { return newSlidingCounters() }

// Take implements Counter.
func (s *slidingCounters) Take(_ context.Context, c *Charge, out []Outcome) (bool, error) {
	return s.decide(c, out, true), nil
}

// Peek implements Counter.
func (s *slidingCounters) Peek(_ context.Context, c *Charge, out []Outcome) error {
	s.decide(c, out, false)
	return nil
}

// decide evaluates every span of c at once and, when all admit the cost
// and charge is set, counts it in each span and each global window.
func (s *slidingCounters) decide(c *Charge, out []Outcome, charge bool) bool {
	var k, g lookup
	s.lock(c, &k, &g)
	defer s.unlock(&k, &g)
	return s.decideLocked(c, out, charge, c.At.UnixMilli(), &k, &g)
}

// decideLocked is decide at nowMs, with c's shards locked (see lock).
func (s *slidingCounters) decideLocked(c *Charge, out []Outcome, charge bool, nowMs int64, k, g *lookup) bool {
	// Sliding and fixed windows are read and counted here without a meter
	// (a call and a struct per span): the default's is the hot path.
	var buckets [maxShort]*bucket
	var meters [maxShort]meter // of the other algorithms' spans
	var scratch [maxShort]bucket
	allowed := true
	for i := range c.Spans {
		sp := &c.Spans[i]
		b := s.state(k, sp, nowMs, charge, &scratch[i])
		buckets[i] = b
		var u int64
		switch sp.Rule.Algorithm {
		case tiers.SlidingWindow:
			u = b.weighted(nowMs, sp.Key.Window.Length().Milliseconds())
		case tiers.FixedWindow:
			u = b.cur
		default:
			meters[i] = meterOf(sp, b, k.sh.logs, nowMs)
			u = meters[i].count()
		}
		var gu int64
		if sp.Rule.Spare && u+c.Cost > sp.Rule.Threshold {
			var gs bucket
			gu = s.get(g, sp.Key.Window, nowMs, false, &gs).weighted(nowMs, sp.Key.Window.Length().Milliseconds())
		}
		ok, elastic := sp.Rule.Admits(u, gu, c.Cost)
		out[i] = Outcome{Used: u, Passed: ok, Elastic: elastic}
		if sp.Rule.Algorithm > tiers.FixedWindow {
			m := &meters[i]
			var fits bool
			out[i].ResetMs = m.resetMs()
			out[i].ResetAfterMs, fits = m.resetAfter(c.Cost)
			if ok && !fits {
				// A debt too far to keep exactly (see maxPayoffMs): denied.
				ok, out[i].Passed, out[i].Wait = false, false, -1
				allowed = false
				continue
			}
		}
		if !ok {
			allowed = false
			if sp.Rule.Algorithm <= tiers.FixedWindow {
				meters[i] = meterOf(sp, b, k.sh.logs, nowMs)
			}
			out[i].Wait = s.wait(g, c, sp, &meters[i])
		}
	}
	if allowed && charge {
		for i := range c.Spans {
			if sp := &c.Spans[i]; sp.Rule.Algorithm <= tiers.FixedWindow {
				buckets[i].cur = addCap(buckets[i].cur, c.Cost)
			} else {
				m := &meters[i]
				m.add(c.Cost)
				switch m.alg {
				case tiers.TokenBucket:
					c.tookDebt[i] = m.next // the debt add stored: what an undo may give back
				case tiers.SlidingLog:
					c.tookLogMs[i] = m.b.start // the entry add counted in: where an undo finds them
				}
			}
		}
		for _, gk := range c.Globals {
			b := s.get(g, gk.Window, nowMs, true, nil)
			b.cur = addCap(b.cur, c.Cost)
		}
	}
	return allowed
}

// wait returns the milliseconds until span sp, whose meter is m, admits
// c.Cost, or -1 for never. The global shard must be locked when the span
// may borrow spare capacity.
func (s *slidingCounters) wait(g *lookup, c *Charge, sp *Span, m *meter) int64 {
	toThreshold := m.wait(c.Cost, sp.Rule.Threshold)
	toCeiling, toCapacity := int64(-1), int64(-1)
	if sp.Rule.Spare {
		var scratch bucket
		gb := *s.get(g, sp.Key.Window, m.now, false, &scratch)
		toCeiling = m.wait(c.Cost, sp.Rule.Ceiling)
		toCapacity = shortWait(gb, m.now, m.length, c.Cost, sp.Rule.Capacity)
	}
	return sp.Rule.Retry(toThreshold, toCeiling, toCapacity)
}

// GiveBack implements Counter: each span gives back up to c.Cost units,
// never below zero: a window's buckets from the bucket that contains c.At
// first, then from the one before it; a sliding log from c.At's
// millisecond first, then its newest; a token bucket pays its debt down.
// A take being undone passes the take's time, so its units leave where
// they were counted; a refund passes now.
func (s *slidingCounters) GiveBack(_ context.Context, c *Charge, out []Outcome) error {
	var k, g lookup
	s.lock(c, &k, &g)
	defer s.unlock(&k, &g)
	s.giveBackLocked(c, out, c.At.UnixMilli(), c.undoNow, &k, &g)
	return nil
}

// giveBackLocked is GiveBack with c's shards locked (see lock): at nowMs
// (a take being undone: the take's time), and for an undo at undoNow (the
// time of the undo; 0 for a refund) instead of c.undoNow.
func (s *slidingCounters) giveBackLocked(c *Charge, out []Outcome, nowMs, undoNow int64, k, g *lookup) {
	// What each span gave back, from the buckets that start at start and
	// at start - length.
	var given [maxShort]struct{ start, cur, prev int64 }
	var scratch bucket
	for i := range c.Spans {
		sp := &c.Spans[i]
		at := nowMs
		if undoNow != 0 && sp.Rule.Algorithm == tiers.TokenBucket {
			at = undoNow // a bucket's debt is read now, not when the take was
		}
		m := meterOf(sp, s.state(k, sp, at, false, &scratch), k.sh.logs, at)
		out[i] = Outcome{Used: m.count(), Passed: true}
		if m.buckets() {
			given[i].start = m.b.start
			given[i].cur, given[i].prev = m.giveBack(nowMs, c.Cost)
		} else {
			given[i].start = bucketStart(nowMs, m.length)
			given[i].cur = m.giveBackOther(c, i, nowMs, undoNow != 0)
		}
		out[i].ResetMs = m.resetMs()
	}
	for _, gk := range c.Globals {
		length := gk.Window.Length().Milliseconds()
		b := s.get(g, gk.Window, nowMs, false, &scratch)
		i := spanOf(c.Spans, gk)
		if i < 0 {
			b.giveBack(nowMs-mod(nowMs, length), length, c.Cost)
			continue
		}
		// The same buckets as the span's, by their start: the customer's
		// counter may have rolled on where the global one has not. Units a
		// log or a token bucket gives back leave the global counter from
		// the bucket of c.At first.
		if m := c.Spans[i].Rule.Algorithm; m > tiers.FixedWindow {
			if undoNow != 0 {
				given[i].cur = c.Cost // a take undone: the metric counted all of it
			}
			b.giveBack(given[i].start, length, given[i].cur)
			continue
		}
		b.takeFrom(given[i].start, length, given[i].cur)
		b.takeFrom(given[i].start-length, length, given[i].prev)
	}
}

// spanOf returns the index of the span counting in global window g's
// window, or -1.
func spanOf(spans []Span, g GlobalKey) int {
	for i := range spans {
		if spans[i].Key.Window == g.Window && spans[i].Key.Start.Equal(g.Start) {
			return i
		}
	}
	return -1
}

// giveBack takes up to n units off the bucket that starts at start first,
// then off the one before it, never below zero, and returns how many it
// took from the current and the previous bucket.
func (b *bucket) giveBack(start, length, n int64) (fromCur, fromPrev int64) {
	switch start {
	case b.start:
		fromCur = min(n, b.cur)
		fromPrev = min(n-fromCur, b.prev)
	case b.start - length:
		fromPrev = min(n, b.prev)
	}
	b.cur -= fromCur
	b.prev -= fromPrev
	return fromCur, fromPrev
}

// takeFrom takes up to n units off the bucket that starts at start, if b
// still holds it (as its current or its previous bucket), never below
// zero.
func (b *bucket) takeFrom(start, length, n int64) {
	switch start {
	case b.start:
		b.cur -= min(b.cur, n)
	case b.start - length:
		b.prev -= min(b.prev, n)
	}
}

// lock sets k and g to c's customer and global lookups and takes the
// shard locks c needs: the customer's, then the metric's global one.
func (s *slidingCounters) lock(c *Charge, k, g *lookup) {
	if len(c.Spans) > 0 {
		*k = s.lookupOf(&s.shards, c.Customer, c.Metric)
		k.sh.mu.Lock()
	}
	if len(c.Globals) > 0 || spare(c.Spans) {
		*g = s.lookupOf(&s.global, "", c.Metric)
		g.sh.mu.Lock()
	}
}

func (s *slidingCounters) unlock(k, g *lookup) {
	if g.sh != nil {
		g.sh.mu.Unlock()
	}
	if k.sh != nil {
		k.sh.mu.Unlock()
	}
}

func spare(spans []Span) bool {
	for i := range spans {
		if spans[i].Rule.Spare {
			return true
		}
	}
	return false
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
