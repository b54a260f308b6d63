package quota

import (
	"context"
	"sync/atomic"

	"github.com/quotad/quotad/internal/tiers"
)

// SharedStore keeps short-window state where every quotad process sees it
// (Redis: internal/redisstore), so that a burst spread over processes
// admits what one process would. A call applies one SharedOp to every
// short window of a charge, and to the metric's global windows, at once:
// it decides and counts (or gives back) as the in-process counter does,
// algorithm for algorithm, and answers with the state it found, from which
// SharedCounters reports each window with the in-process arithmetic.
type SharedStore interface {
	// Run applies op and fills in its answer. Errors wrap
	// tiers.ErrUnavailable: the store cannot be reached, or did not answer
	// in time, and nothing is known to have been counted.
	Run(ctx context.Context, op *SharedOp) error
	// Clear deletes the customer's short-window state of each metric named.
	Clear(ctx context.Context, customer string, metrics []string) error
	// Shard names the part of the store that holds c's state, a number
	// from 0: calls of one shard reach the same server, so they fail
	// together when it is out of reach, while calls of other shards may go
	// on (see Failover). A store of one server has one shard, 0; a Redis
	// Cluster's shards are its hash slots. Shard does no I/O, and its
	// answer for a charge may change when the store learns its topology.
	Shard(c *Charge) int
}

// SharedKind is what a SharedOp does.
type SharedKind uint8

// The operations of a shared store, as Counter's.
const (
	SharedPeek   SharedKind = iota // report, count nothing
	SharedTake                     // count the cost in every window if every window admits it
	SharedRefund                   // give the cost back, as Counter.GiveBack does for a refund
	SharedUndo                     // give back a take's own units (see Charge.undoNow)
)

// SharedOp is one call to a SharedStore: what to do to which windows, and
// what the store found.
type SharedOp struct {
	Kind   SharedKind
	Charge *Charge
	// NowMs is the time of the call, Unix ms, or -1: the store's own
	// clock, so that every process agrees on window boundaries. AtMs is,
	// for an undo, when the take counted its units (the store's time it
	// answered the take with); otherwise -1 (now).
	NowMs, AtMs int64
	// Took is, for an undo, each token bucket span's debt right after the
	// take, in 1/T tokens.
	Took [maxShort]Debt

	// The answer: the time the store used, whether a take (or a peek)
	// found every window admitting the cost, and each window's state as
	// found, before the operation changed it. Spans hold, by algorithm:
	// sliding or fixed window: the current bucket's start, the previous
	// bucket's count, the current one's; sliding log: its newest
	// millisecond, its units, and, for a span that did not admit the cost,
	// the milliseconds until it admits it within the threshold and within
	// the ceiling (-1: never); token bucket: its debt (Debt.Hi, Debt.Lo).
	// Globals hold the metric's global windows of Charge.Globals: start,
	// previous and current count.
	AnsweredMs int64
	Allowed    bool
	Spans      [maxShort][4]int64
	Globals    [maxShort][3]int64
}

// Debt is a token bucket's debt, in 1/T tokens (T: the window's length in
// milliseconds), as two limbs: Hi*2^24 + Lo. A store whose numbers are
// exact only below 2^53 (Redis's Lua) carries it so.
type Debt struct{ Hi, Lo int64 }

func debtOf(d u128) Debt {
	return Debt{Hi: int64(d.hi<<40 | d.lo>>24), Lo: int64(d.lo & (1<<24 - 1))}
}

func (d Debt) u128() u128 {
	return mul128(uint64(d.Hi), 1<<24).add(u128{lo: uint64(d.Lo)})
}

// GlobalOf returns the index in c.Globals of the global window span i
// borrows spare capacity from, or -1.
func (c *Charge) GlobalOf(i int) int {
	for j, g := range c.Globals {
		if g.Window == c.Spans[i].Key.Window {
			return j
		}
	}
	return -1
}

// SharedCounters implements Counter for short windows over a SharedStore:
// one round trip per check, whatever the number of windows.
type SharedCounters struct {
	store SharedStore
	// storeClock: the store's clock decides windows; otherwise the
	// charge's At (the engine's clock, which tests set).
	storeClock bool
	// mismatches counts answers whose decision the in-process arithmetic
	// did not reproduce from the state the store found: a defect, which
	// tests look for.
	mismatches atomic.Uint64
}

var _ Counter = (*SharedCounters)(nil)

// NewShared returns a Counter of short windows kept in store. With
// storeClock, windows follow the store's clock; otherwise each charge's
// At.
func NewShared(store SharedStore, storeClock bool) *SharedCounters {
	return &SharedCounters{store: store, storeClock: storeClock}
}

// Mismatches returns how many answers the store and the in-process
// arithmetic decided differently (0 unless something is wrong).
func (s *SharedCounters) Mismatches() uint64 { return s.mismatches.Load() }

func (s *SharedCounters) now(ms int64) int64 {
	if s.storeClock {
		return -1
	}
	return ms
}

// Take implements Counter.
func (s *SharedCounters) Take(ctx context.Context, c *Charge, out []Outcome) (bool, error) {
	op := SharedOp{Kind: SharedTake, Charge: c, NowMs: s.now(c.At.UnixMilli()), AtMs: -1}
	if err := s.run(ctx, &op); err != nil {
		return false, err
	}
	s.judge(&op, out)
	if op.Allowed {
		c.tookMs = op.AnsweredMs
	}
	return op.Allowed, nil
}

// Peek implements Counter.
func (s *SharedCounters) Peek(ctx context.Context, c *Charge, out []Outcome) error {
	op := SharedOp{Kind: SharedPeek, Charge: c, NowMs: s.now(c.At.UnixMilli()), AtMs: -1}
	if err := s.run(ctx, &op); err != nil {
		return err
	}
	s.judge(&op, out)
	return nil
}

// GiveBack implements Counter. An undone take gives back where and when
// it counted: at the store's time of the take.
func (s *SharedCounters) GiveBack(ctx context.Context, c *Charge, out []Outcome) error {
	op := SharedOp{Kind: SharedRefund, Charge: c, NowMs: s.now(c.At.UnixMilli()), AtMs: -1}
	if c.undoNow != 0 {
		op.Kind, op.NowMs, op.AtMs = SharedUndo, s.now(c.undoNow), c.At.UnixMilli()
		if c.tookMs != 0 {
			op.AtMs = c.tookMs
		}
		for i := range c.Spans {
			op.Took[i] = debtOf(c.tookDebt[i])
		}
	}
	if err := s.run(ctx, &op); err != nil {
		return err
	}
	at := op.AtMs
	if at < 0 {
		at = op.AnsweredMs
	}
	for i := range c.Spans {
		sp := &c.Spans[i]
		ms := at
		if sp.Rule.Algorithm == tiers.TokenBucket {
			ms = op.AnsweredMs // a bucket's debt is read now
		}
		var b bucket
		m := s.meter(&op, i, &b, ms)
		out[i] = Outcome{Used: m.count(), Passed: true}
	}
	return nil
}

func (s *SharedCounters) run(ctx context.Context, op *SharedOp) error {
	c := op.Charge
	if len(c.Spans)+len(c.Globals) == 0 {
		op.AnsweredMs, op.Allowed = c.At.UnixMilli(), true
		return nil
	}
	c.Trips++
	return s.store.Run(ctx, op)
}

// meter returns span i's meter over the state op found, in b, at ms.
func (s *SharedCounters) meter(op *SharedOp, i int, b *bucket, ms int64) meter {
	sp := &op.Charge.Spans[i]
	f := &op.Spans[i]
	m := meterOf(sp, b, nil, ms)
	switch sp.Rule.Algorithm {
	case tiers.SlidingWindow, tiers.FixedWindow:
		*b = bucket{start: f[0], prev: f[1], cur: f[2]}
	case tiers.SlidingLog:
		// Its newest entry and its units: what count and the resets
		// read. The waits come from the store, which holds the entries.
		*b = bucket{start: f[0], cur: f[1]}
	case tiers.TokenBucket:
		m.setDebt(Debt{Hi: f[0], Lo: f[1]}.u128())
	}
	return m
}

// judge reports every span of a peek or take from the state the store
// found, as the in-process counter decides (see slidingCounters.decide).
func (s *SharedCounters) judge(op *SharedOp, out []Outcome) {
	c := op.Charge
	now := op.AnsweredMs
	allowed := true
	for i := range c.Spans {
		sp := &c.Spans[i]
		length := sp.Key.Window.Length().Milliseconds()
		var b bucket
		m := s.meter(op, i, &b, now)
		u := m.count()
		var gb bucket
		if j := c.GlobalOf(i); sp.Rule.Spare && j >= 0 {
			g := &op.Globals[j]
			gb = bucket{start: g[0], prev: g[1], cur: g[2]}
		}
		var gu int64
		if sp.Rule.Spare && u+c.Cost > sp.Rule.Threshold {
			gu = gb.weighted(now, length)
		}
		ok, elastic := sp.Rule.Admits(u, gu, c.Cost)
		o := Outcome{Used: u, Passed: ok, Elastic: elastic}
		fits := true
		if m.buckets() {
			o.ResetMs = b.start + length // the store's bucket, by its clock
			o.ResetAfterMs = o.ResetMs
		} else {
			o.ResetMs = m.resetMs()
			o.ResetAfterMs, fits = m.resetAfter(c.Cost)
		}
		switch {
		case ok && !fits:
			// A debt too far to keep exactly (see maxPayoffMs): denied.
			ok, o.Passed, o.Wait = false, false, -1
		case !ok:
			o.Wait = s.wait(op, i, &m, gb)
		}
		if m.alg == tiers.TokenBucket {
			c.tookDebt[i] = m.next
		}
		allowed = allowed && ok
		out[i] = o
	}
	if allowed != op.Allowed {
		s.mismatches.Add(1)
	}
}

// wait returns the milliseconds until span i of op's charge, whose meter
// is m, admits the cost, given the metric's global usage gb where the span
// may borrow spare capacity; -1 for never (see slidingCounters.wait).
func (s *SharedCounters) wait(op *SharedOp, i int, m *meter, gb bucket) int64 {
	c := op.Charge
	sp := &c.Spans[i]
	toThreshold, toCeiling, toCapacity := int64(-1), int64(-1), int64(-1)
	if m.alg == tiers.SlidingLog { // the store walked the entries
		toThreshold, toCeiling = op.Spans[i][2], op.Spans[i][3]
	} else {
		toThreshold = m.wait(c.Cost, sp.Rule.Threshold)
		if sp.Rule.Spare {
			toCeiling = m.wait(c.Cost, sp.Rule.Ceiling)
		}
	}
	if sp.Rule.Spare {
		toCapacity = shortWait(gb, m.now, m.length, c.Cost, sp.Rule.Capacity)
	}
	return sp.Rule.Retry(toThreshold, toCeiling, toCapacity)
}
