package quota

import (
	"context"
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
	nowMs := c.At.UnixMilli()
	sh, gsh := s.lock(c)
	defer s.unlock(sh, gsh)
	var buckets [maxShort]*bucket
	allowed := true
	for i := range c.Spans {
		sp := &c.Spans[i]
		length := sp.Key.Window.Length().Milliseconds()
		b := s.get(sh, slidingKey{c.Customer, c.Metric, sp.Key.Window}, nowMs, charge)
		buckets[i] = b
		u := b.weighted(nowMs, length)
		var g int64
		if sp.Rule.Spare && u+c.Cost > sp.Rule.Threshold {
			g = s.get(gsh, slidingKey{"", c.Metric, sp.Key.Window}, nowMs, false).weighted(nowMs, length)
		}
		ok, elastic := sp.Rule.Admits(u, g, c.Cost)
		out[i] = Outcome{Used: u, Passed: ok, Elastic: elastic}
		if !ok {
			allowed = false
			out[i].Wait = s.wait(gsh, c, sp, *b, nowMs)
		}
	}
	if !allowed || !charge {
		return allowed
	}
	for _, b := range buckets[:len(c.Spans)] {
		b.cur = addCap(b.cur, c.Cost)
	}
	for _, g := range c.Globals {
		b := s.get(gsh, slidingKey{"", c.Metric, g.Window}, nowMs, true)
		b.cur = addCap(b.cur, c.Cost)
	}
	return true
}

// wait returns the milliseconds until span sp, whose customer bucket is b,
// admits c.Cost, or -1 for never. The global shard must be locked when
// the span may borrow spare capacity.
func (s *slidingCounters) wait(gsh *shard, c *Charge, sp *Span, b bucket, nowMs int64) int64 {
	length := sp.Key.Window.Length().Milliseconds()
	toThreshold := shortWait(b, nowMs, length, c.Cost, sp.Rule.Threshold)
	toCeiling, toCapacity := int64(-1), int64(-1)
	if sp.Rule.Spare {
		g := *s.get(gsh, slidingKey{"", c.Metric, sp.Key.Window}, nowMs, false)
		toCeiling = shortWait(b, nowMs, length, c.Cost, sp.Rule.Ceiling)
		toCapacity = shortWait(g, nowMs, length, c.Cost, sp.Rule.Capacity)
	}
	return sp.Rule.Retry(toThreshold, toCeiling, toCapacity)
}

// GiveBack implements Counter: each span gives back up to c.Cost units,
// never below zero, from the bucket that contains c.At first, then from
// the one before it. A take being undone passes the take's time, so its
// units leave the bucket they were counted in; a refund passes now.
func (s *slidingCounters) GiveBack(_ context.Context, c *Charge, out []Outcome) error {
	nowMs := c.At.UnixMilli()
	sh, gsh := s.lock(c)
	defer s.unlock(sh, gsh)
	var given [maxShort]struct{ cur, prev int64 }
	for i := range c.Spans {
		sp := &c.Spans[i]
		length := sp.Key.Window.Length().Milliseconds()
		b := s.get(sh, slidingKey{c.Customer, c.Metric, sp.Key.Window}, nowMs, false)
		out[i] = Outcome{Used: b.weighted(nowMs, length), Passed: true}
		given[i].cur, given[i].prev = b.giveBack(nowMs-mod(nowMs, length), length, c.Cost)
	}
	for _, g := range c.Globals {
		length := g.Window.Length().Milliseconds()
		b := s.get(gsh, slidingKey{"", c.Metric, g.Window}, nowMs, false)
		i := spanOf(c.Spans, g)
		if i < 0 {
			b.giveBack(nowMs-mod(nowMs, length), length, c.Cost)
			continue
		}
		b.cur -= min(b.cur, given[i].cur)
		b.prev -= min(b.prev, given[i].prev)
	}
	return nil
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

// lock takes the shard locks c needs: the customer's, then the metric's
// global one. Either may be nil.
func (s *slidingCounters) lock(c *Charge) (sh, gsh *shard) {
	if len(c.Spans) > 0 {
		sh = s.shardOf(c.Customer, c.Metric)
		sh.mu.Lock()
	}
	if len(c.Globals) > 0 || spare(c.Spans) {
		gsh = s.globalShardOf(c.Metric)
		gsh.mu.Lock()
	}
	return sh, gsh
}

func (s *slidingCounters) unlock(sh, gsh *shard) {
	if gsh != nil {
		gsh.mu.Unlock()
	}
	if sh != nil {
		sh.mu.Unlock()
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
