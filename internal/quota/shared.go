package quota

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// SharedStore keeps short-window state where every quotad process sees it
// (Redis: internal/redisstore), so that a burst spread over processes
// admits what one process would. It decides nothing: SharedCounters
// decides with the in-process counter's code, and the store writes what a
// decision left only if every key of the charge still holds what the
// decision saw, all keys at once or none.
type SharedStore interface {
	// Run applies op and fills in its answer. Errors wrap
	// tiers.ErrUnavailable: the store cannot be reached, or did not answer
	// in time, and nothing is known to have been written.
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

// SharedOp is one call to a SharedStore, on the keys of one charge (see
// Charge.SharedKeys): the customer's metric, if the charge has spans, then
// the metric's global windows, if it has Globals. Each key holds the
// short windows' states as the in-process counter keeps them, written as
// text ("" for a key that does not exist; see sharedstate.go).
type SharedOp struct {
	Charge *Charge
	// Write: if every key holds its Expect, set each to its Set (delete
	// those set to ""), expiring TTLMs later (0: never); otherwise, and
	// without Write, change nothing.
	Write  bool
	Expect []string
	Set    []string
	TTLMs  []int64

	// The answer: the store's clock when it answered (Unix ms), whether
	// it wrote, and what each key held before.
	AnsweredMs int64
	Written    bool
	Found      []string
}

// SharedKeys reports which keys a shared store holds c's state in: the
// customer's metric's (when c has spans) and the metric's global one (when
// it has Globals), in that order in a SharedOp.
func (c *Charge) SharedKeys() (customer, global bool) {
	return len(c.Spans) > 0, len(c.Globals) > 0
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

// SharedCounters implements Counter for short windows over a SharedStore.
// It keeps a mirror of the keys it has seen, an in-process counter of its
// own, and decides each charge on the mirror with the in-process code;
// the store then writes the states the decision left if its keys still
// hold what the mirror did. If not (another process counted meanwhile),
// the mirror takes what the store holds and the charge is decided again.
// A check whose keys this process wrote last costs one round trip; a
// denial is written nowhere, only confirmed (or decided again).
type SharedCounters struct {
	store SharedStore
	// storeClock: the store's clock decides windows (as this process last
	// learned it, see offset); otherwise the charge's At (the engine's
	// clock, which tests set).
	storeClock bool
	offset     atomic.Int64 // the store's clock less this process's, ms
	mirror     *slidingCounters
	// turns: one decision at a time per customer's metric in this process,
	// so that checks of one customer do not undo each other's mirror.
	turns [numTurns]turn
}

// turn is the right to decide for the customers' metrics it stands for,
// held by whoever put a value in held. failures counts the calls to the
// store made in it that failed: a check that waited while one did fails
// at once, as that call did, rather than wait for the store again (see
// Failover: a failed shard is tried again by one check a second). So a
// check waits for an unreachable store at most the time of one call.
type turn struct {
	held     chan struct{}
	failures atomic.Uint64
}

// take waits for the turn, or for ctx to end.
func (t *turn) take(ctx context.Context) error {
	select {
	case t.held <- struct{}{}:
		return nil
	default: // taken: wait (a budget arms its timer only now)
	}
	select {
	case t.held <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for another check of the customer's: %v", tiers.ErrUnavailable, ctx.Err())
	}
}

const numTurns = 1024

// keepUnderOtherClockMs is the least a key is kept when windows follow
// the charges' clock, not the store's (tests).
const keepUnderOtherClockMs = 3_600_000

// maxAttempts bounds the decisions of one charge whose keys other
// processes keep changing; after that the store counts as unavailable for
// the charge (Failover counts it in process).
const maxAttempts = 256

var _ Counter = (*SharedCounters)(nil)

// NewShared returns a Counter of short windows kept in store. With
// storeClock, windows follow the store's clock; otherwise each charge's
// At.
func NewShared(store SharedStore, storeClock bool) *SharedCounters {
	s := &SharedCounters{store: store, storeClock: storeClock, mirror: newSlidingCounters()}
	for i := range s.turns {
		s.turns[i].held = make(chan struct{}, 1)
	}
	return s
}

// now returns the time to decide c at, Unix ms.
func (s *SharedCounters) now(c *Charge) int64 {
	if !s.storeClock {
		return c.At.UnixMilli()
	}
	return time.Now().UnixMilli() + s.offset.Load()
}

// Take implements Counter.
func (s *SharedCounters) Take(ctx context.Context, c *Charge, out []Outcome) (bool, error) {
	var allowed bool
	var at int64
	err := s.run(ctx, c, func(k, g *lookup, now int64) {
		allowed, at = s.mirror.decideLocked(c, out, true, now, k, g), now
	})
	if err != nil {
		return false, err
	}
	if allowed {
		c.tookMs = at
	}
	return allowed, nil
}

// Peek implements Counter.
func (s *SharedCounters) Peek(ctx context.Context, c *Charge, out []Outcome) error {
	return s.run(ctx, c, func(k, g *lookup, now int64) {
		s.mirror.decideLocked(c, out, false, now, k, g)
	})
}

// GiveBack implements Counter. An undone take gives back where and when
// it counted: at the time the take was decided at.
func (s *SharedCounters) GiveBack(ctx context.Context, c *Charge, out []Outcome) error {
	return s.run(ctx, c, func(k, g *lookup, now int64) {
		at, undoNow := now, int64(0)
		if c.undoNow != 0 {
			at, undoNow = c.At.UnixMilli(), c.undoNow
			if s.storeClock {
				undoNow = now
				if c.tookMs != 0 {
					at = c.tookMs
				}
			}
		}
		s.mirror.giveBackLocked(c, out, at, undoNow, k, g)
	})
}

// run decides c with decide, on the mirror, and has the store write the
// states the decision left, or confirm those it saw when it changed
// nothing, until the store holds what the decision saw. A denial or a
// peek usually changes nothing; one that does (a bucket rolled on, or a
// key converted to the algorithm its limit has now: conversions keep the
// count as of when they happen) is written like a take.
func (s *SharedCounters) run(ctx context.Context, c *Charge, decide func(k, g *lookup, now int64)) error {
	customer, global := c.SharedKeys()
	n := btoi(customer) + btoi(global)
	if n == 0 {
		var k, g lookup
		decide(&k, &g, s.now(c))
		return nil
	}
	turn := &s.turns[s.mirror.pairHash(c.Customer, c.Metric)%numTurns]
	failures := turn.failures.Load()
	if err := turn.take(ctx); err != nil {
		return err
	}
	defer func() { <-turn.held }()
	if turn.failures.Load() != failures {
		return fmt.Errorf("%w: the shared store failed a call of %s's %s while this check waited its turn", tiers.ErrUnavailable, c.Customer, c.Metric)
	}
	keys := make([]string, 3*n) // Expect, Set, Found
	op := SharedOp{Charge: c, Expect: keys[:n:n], Set: keys[n : 2*n : 2*n], TTLMs: make([]int64, n)}
	var fresh bool // the mirror holds what the store answered last
	for attempt := 1; ; attempt++ {
		now := s.now(c)
		var k, g lookup
		s.mirror.lock(c, &k, &g)
		if s.storeClock && !fresh {
			if customer {
				s.mirror.dropExpired(&k, now)
			}
			if global {
				s.mirror.dropExpired(&g, now)
			}
		}
		s.states(c, &k, &g, op.Expect)
		decide(&k, &g, now)
		s.states(c, &k, &g, op.Set)
		op.Write = !slices.Equal(op.Set, op.Expect)
		if op.Write {
			if customer {
				op.TTLMs[0] = expiresMs(&k, now)
			}
			if global {
				op.TTLMs[n-1] = expiresMs(&g, now)
			}
			for i, ttl := range op.TTLMs {
				if !s.storeClock && ttl != 0 {
					// Decided by another clock than the store's, which
					// expires keys: give them time by the store's too.
					op.TTLMs[i] = max(ttl, keepUnderOtherClockMs)
				}
			}
		}
		s.mirror.unlock(&k, &g)
		if fresh && !op.Write {
			return nil // decided on what the store just held: nothing to write
		}
		op.Found = keys[2*n : 2*n : 3*n]
		c.Trips++
		sent := time.Now()
		err := s.store.Run(ctx, &op)
		if err != nil {
			s.forget(c) // the store may or may not have written
			turn.failures.Add(1)
			return err
		}
		if s.storeClock {
			// The store read its clock between sending and receiving: say
			// half way.
			s.offset.Store(op.AnsweredMs - (sent.UnixMilli()+time.Now().UnixMilli())/2)
		}
		if op.Written || !op.Write && slices.Equal(op.Found, op.Expect) {
			return nil
		}
		if err := s.load(c, op.Found); err != nil {
			return fmt.Errorf("%w: %v", tiers.ErrUnavailable, err)
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%w: the shared store's keys of %s's %s changed under %d decisions in a row",
				tiers.ErrUnavailable, c.Customer, c.Metric, attempt)
		}
		fresh = true
	}
}

// states writes the mirror's state of c's keys into dst. The shards must
// be locked.
func (s *SharedCounters) states(c *Charge, k, g *lookup, dst []string) {
	if len(c.Spans) > 0 {
		dst[0] = encodeState(k)
	}
	if len(c.Globals) > 0 {
		dst[len(dst)-1] = encodeState(g)
	}
}

// load makes the mirror hold states for c's keys.
func (s *SharedCounters) load(c *Charge, states []string) error {
	var k, g lookup
	s.mirror.lock(c, &k, &g)
	defer s.mirror.unlock(&k, &g)
	if len(c.Spans) > 0 {
		if err := s.mirror.loadState(&k, states[0]); err != nil {
			return err
		}
	}
	if len(c.Globals) > 0 {
		return s.mirror.loadState(&g, states[len(states)-1])
	}
	return nil
}

// forget drops the mirror's state of c's keys: after a call whose outcome
// is not known, the next decision reads them from the store.
func (s *SharedCounters) forget(c *Charge) {
	customer, global := c.SharedKeys()
	_ = s.load(c, make([]string, btoi(customer)+btoi(global))) // "" never fails
}

// Evict drops the mirror's keys that count nothing any more.
func (s *SharedCounters) Evict(nowMs int64) int { return s.mirror.evict(nowMs) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
