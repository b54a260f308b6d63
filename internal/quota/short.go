package quota

import (
	"context"
	"math/bits"

	"github.com/quotad/quotad/internal/tiers"
)

// localCounters implements Counter for short windows, in this process.
// Every span of a set of charges is decided under its charges' shard
// locks (see lockSet), and the metrics' global windows under their shards'
// locks taken after them, so a set is all or nothing. It never fails.
var _ Counter = (*localCounters)(nil)

// NewSliding returns an in-process Counter of short windows: the sliding
// window counter each Engine keeps.
func NewSliding() Counter { return newLocalCounters() }

// Take implements Counter.
func (s *localCounters) Take(_ context.Context, cs []Charge) (bool, error) {
	if len(cs) == 0 {
		return true, nil
	}
	var kb, gb [4]lookup
	k, g := lookups(len(cs), &kb, &gb)
	km, gm := s.lockSet(cs, k, g)
	allowed := s.takeLocked(cs, cs[0].At.UnixMilli(), k, g)
	s.unlockSet(km, gm)
	return allowed, nil
}

// Peek implements Counter.
func (s *localCounters) Peek(_ context.Context, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	s.locked(cs, func(k, g []lookup) { s.peekLocked(cs, cs[0].At.UnixMilli(), k, g) })
	return nil
}

// locked runs f with the shards of cs locked, each charge's lookups in k
// and g (see lockSet).
func (s *localCounters) locked(cs []Charge, f func(k, g []lookup)) {
	var kb, gb [4]lookup
	k, g := lookups(len(cs), &kb, &gb)
	km, gm := s.lockSet(cs, k, g)
	defer s.unlockSet(km, gm)
	f(k, g)
}

// lookups returns room for the lookups of n charges: kb and gb, or, for
// more than they hold, slices of their own.
func lookups(n int, kb, gb *[4]lookup) (k, g []lookup) {
	if n > len(kb) {
		return make([]lookup, n), make([]lookup, n)
	}
	return kb[:n], gb[:n]
}

// takeLocked decides every charge of cs at nowMs, with their shards
// locked, and counts them all when every span of every charge admits its
// cost.
func (s *localCounters) takeLocked(cs []Charge, nowMs int64, k, g []lookup) bool {
	if len(cs) == 1 {
		return s.decideLocked(&cs[0], true, nowMs, &k[0], &g[0])
	}
	// Every charge is judged before any is counted: a charge's units
	// counted in a global window must not be seen by another's judgement.
	allowed := true
	for i := range cs {
		if !s.decideLocked(&cs[i], false, nowMs, &k[i], &g[i]) {
			allowed = false
		}
	}
	if allowed {
		for i := range cs {
			s.countLocked(&cs[i], nowMs, &k[i], &g[i])
		}
	}
	return allowed
}

// peekLocked judges every charge of cs at nowMs, counting nothing.
func (s *localCounters) peekLocked(cs []Charge, nowMs int64, k, g []lookup) {
	for i := range cs {
		s.decideLocked(&cs[i], false, nowMs, &k[i], &g[i])
	}
}

// decideLocked evaluates every span of c at once and, when all admit the
// cost and charge is set, counts it in each span and each global window.
func (s *localCounters) decideLocked(c *Charge, charge bool, nowMs int64, k, g *lookup) bool {
	// Sliding and fixed windows are read and counted here without a meter
	// (a call and a struct per span): the default's is the hot path.
	var buckets [maxShort]*bucket
	var meters [maxShort]meter // of the other algorithms' spans
	var scratch [maxShort]bucket
	allowed := true
	out := c.Out
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
				s.record(c, i, &meters[i])
			}
		}
		s.countGlobals(c, nowMs, g)
	}
	return allowed
}

// countLocked counts c, which decideLocked admitted at nowMs with its
// shards locked since, in each span and each global window.
func (s *localCounters) countLocked(c *Charge, nowMs int64, k, g *lookup) {
	for i := range c.Spans {
		sp := &c.Spans[i]
		b := s.state(k, sp, nowMs, true, nil)
		if sp.Rule.Algorithm <= tiers.FixedWindow {
			b.cur = addCap(b.cur, c.Cost)
			continue
		}
		m := meterOf(sp, b, k.sh.logs, nowMs)
		m.resetAfter(c.Cost) // what add stores, for a token bucket
		s.record(c, i, &m)
	}
	s.countGlobals(c, nowMs, g)
}

// record adds c.Cost to span i's meter m (a sliding log or a token
// bucket), keeping in c what an undo of it needs.
func (s *localCounters) record(c *Charge, i int, m *meter) {
	m.add(c.Cost)
	switch m.alg {
	case tiers.TokenBucket:
		c.tookDebt[i] = m.next // the debt add stored: what an undo may give back
	case tiers.SlidingLog:
		c.tookLogMs[i] = m.b.start // the entry add counted in: where an undo finds them
	}
}

// countGlobals counts c.Cost in c's global windows at nowMs; their shard
// is locked.
func (s *localCounters) countGlobals(c *Charge, nowMs int64, g *lookup) {
	for _, gk := range c.Globals {
		b := s.get(g, gk.Window, nowMs, true, nil)
		b.cur = addCap(b.cur, c.Cost)
	}
}

// wait returns the milliseconds until span sp, whose meter is m, admits
// c.Cost, or -1 for never. The global shard must be locked when the span
// may borrow spare capacity.
func (s *localCounters) wait(g *lookup, c *Charge, sp *Span, m *meter) int64 {
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
func (s *localCounters) GiveBack(_ context.Context, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	s.locked(cs, func(k, g []lookup) {
		for i := range cs {
			c := &cs[i]
			s.giveBackLocked(c, c.At.UnixMilli(), c.undoNow, &k[i], &g[i])
		}
	})
	return nil
}

// giveBackLocked is GiveBack with c's shards locked (see lock): at nowMs
// (a take being undone: the take's time), and for an undo at undoNow (the
// time of the undo; 0 for a refund) instead of c.undoNow.
func (s *localCounters) giveBackLocked(c *Charge, nowMs, undoNow int64, k, g *lookup) {
	out := c.Out
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

// lockSet sets k[i] and g[i] to the customer's and the metric's global
// lookups of charge cs[i] (g[i] only where the charge counts or reads
// global usage) and locks their shards, each once, in the one order every
// set takes them: customers' shards by number, then global shards by
// number. It returns the shards it locked, as bit masks, for unlockSet.
func (s *localCounters) lockSet(cs []Charge, k, g []lookup) (km, gm uint64) {
	for i := range cs {
		c := &cs[i]
		if len(c.Spans) > 0 {
			k[i] = s.lookupOf(&s.shards, c.Customer, c.Metric, c.Subject)
			km |= 1 << k[i].shard
		}
		if len(c.Globals) > 0 || spare(c.Spans) {
			g[i] = s.lookupOf(&s.global, "", c.Metric, "")
			gm |= 1 << g[i].shard
		}
	}
	for m := km; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Lock()
	}
	for m := gm; m != 0; m &= m - 1 {
		s.global[bits.TrailingZeros64(m)].mu.Lock()
	}
	return km, gm
}

// unlockSet unlocks the shards lockSet locked.
func (s *localCounters) unlockSet(km, gm uint64) {
	for m := gm; m != 0; m &= m - 1 {
		s.global[bits.TrailingZeros64(m)].mu.Unlock()
	}
	for m := km; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Unlock()
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
