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
	// on (see Failover); one call's charges are all of one shard. A store
	// of one server has one shard, 0; a Redis Cluster's shards are its
	// hash slots. Shard does no I/O, and its answer for a charge may change
	// when the store learns its topology.
	Shard(c *Charge) int
}

// SharedOp is one call to a SharedStore, on the keys of a set of charges
// of one shard, charge after charge (see Charge.SharedKeys): the
// customer's metric (or its subject's), if the charge has spans, then the
// metric's global windows, if it has Globals; no key twice. Each key
// holds the short windows' states as the in-process counter keeps them,
// written as text ("" for a key that does not exist; see sharedstate.go).
type SharedOp struct {
	Charges []Charge
	// Write: if every key of every charge holds its Expect, set each to
	// its Set (delete those set to ""), expiring TTLMs later (0: never);
	// otherwise, and without Write, change nothing.
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
	mirror     *localCounters
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
		return fmt.Errorf("%w: %v", errOutOfTurn, ctx.Err())
	}
}

// errOutOfTurn: a check's time ran out while it waited for another check
// of its customer's to decide. It is answered as when the store cannot be
// reached, but the store is not taken for down: it may be answering that
// other check, slowly (a busy machine is not an outage).
var errOutOfTurn = fmt.Errorf("%w: waiting for another check of the customer's", tiers.ErrUnavailable)

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
	s := &SharedCounters{store: store, storeClock: storeClock, mirror: newLocalCounters()}
	for i := range s.turns {
		s.turns[i].held = make(chan struct{}, 1)
	}
	return s
}

// now returns the time to decide c (and the charges of its set) at, Unix
// ms.
func (s *SharedCounters) now(c *Charge) int64 {
	if !s.storeClock {
		return c.At.UnixMilli()
	}
	return time.Now().UnixMilli() + s.offset.Load()
}

// Take implements Counter. The charges of a set kept in one shard of the
// store (all of them, on a single server) are decided in one call, all
// or nothing; a set spread over shards is taken shard by shard, what was
// taken given back when one denies or fails.
func (s *SharedCounters) Take(ctx context.Context, cs []Charge) (bool, error) {
	if len(cs) == 0 {
		return true, nil
	}
	if groups := s.groups(cs); groups != nil {
		return s.takeGroups(ctx, cs, groups)
	}
	var allowed bool
	var at int64
	err := s.run(ctx, cs, func(k, g []lookup, now int64) {
		allowed, at = s.mirror.takeLocked(cs, now, k, g), now
	})
	if err != nil {
		return false, err
	}
	if allowed {
		for i := range cs {
			cs[i].tookMs = at
		}
	}
	return allowed, nil
}

// groups returns the charges of cs by the shard of the store they are
// kept in, or nil when they are all kept in one.
func (s *SharedCounters) groups(cs []Charge) [][]int {
	if len(cs) < 2 {
		return nil
	}
	first := s.store.Shard(&cs[0])
	spread := false
	for i := 1; i < len(cs) && !spread; i++ {
		spread = s.store.Shard(&cs[i]) != first
	}
	if !spread {
		return nil
	}
	at := map[int]int{}
	var groups [][]int
	for i := range cs {
		sh := s.store.Shard(&cs[i])
		j, ok := at[sh]
		if !ok {
			j = len(groups)
			at[sh] = j
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	return groups
}

// takeGroups takes cs one group of charges (one shard) after the other:
// when one denies, or fails, the groups taken before are given back.
func (s *SharedCounters) takeGroups(ctx context.Context, cs []Charge, groups [][]int) (bool, error) {
	var taken [][]Charge
	undo := func() {
		for _, sub := range taken {
			for i := range sub {
				sub[i].Undoing(time.UnixMilli(sub[i].tookMs))
			}
			_ = s.GiveBack(ctx, sub) // a failure leaves units counted: never the other way
		}
	}
	for _, idx := range groups {
		sub := make([]Charge, len(idx))
		for j, i := range idx {
			sub[j] = cs[i]
		}
		ok, err := s.Take(ctx, sub)
		for j, i := range idx {
			cs[i] = sub[j]
		}
		if err != nil || !ok {
			undo()
			// The groups not reached are only looked at.
			for _, later := range groups[len(taken)+1:] {
				look := make([]Charge, len(later))
				for j, i := range later {
					look[j] = cs[i]
				}
				if perr := s.Peek(ctx, look); perr == nil {
					for j, i := range later {
						cs[i] = look[j]
					}
				}
			}
			return false, err
		}
		taken = append(taken, sub)
	}
	return true, nil
}

// Peek implements Counter.
func (s *SharedCounters) Peek(ctx context.Context, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	if groups := s.groups(cs); groups != nil {
		return s.eachGroup(cs, groups, func(sub []Charge) error { return s.Peek(ctx, sub) })
	}
	return s.run(ctx, cs, func(k, g []lookup, now int64) {
		s.mirror.peekLocked(cs, now, k, g)
	})
}

// GiveBack implements Counter. An undone take gives back where and when
// it counted: at the time the take was decided at.
func (s *SharedCounters) GiveBack(ctx context.Context, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	if groups := s.groups(cs); groups != nil {
		return s.eachGroup(cs, groups, func(sub []Charge) error { return s.GiveBack(ctx, sub) })
	}
	return s.run(ctx, cs, func(k, g []lookup, now int64) {
		for i := range cs {
			c := &cs[i]
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
			s.mirror.giveBackLocked(c, at, undoNow, &k[i], &g[i])
		}
	})
}

// eachGroup runs f on each group of charges of cs, copies of them whose
// outcomes it copies back, and returns the first error.
func (s *SharedCounters) eachGroup(cs []Charge, groups [][]int, f func(sub []Charge) error) error {
	var first error
	for _, idx := range groups {
		sub := make([]Charge, len(idx))
		for j, i := range idx {
			sub[j] = cs[i]
		}
		if err := f(sub); err != nil && first == nil {
			first = err
		}
		for j, i := range idx {
			cs[i] = sub[j]
		}
	}
	return first
}

// keys returns how many keys of the store cs is kept in (see
// SharedOp).
func keysOf(cs []Charge) int {
	n := 0
	for i := range cs {
		customer, global := cs[i].SharedKeys()
		n += btoi(customer) + btoi(global)
	}
	return n
}

// run decides cs, charges of one shard of the store, with decide, on the
// mirror, and has the store write the states the decision left, or
// confirm those it saw when it changed nothing, until the store holds what
// the decision saw. A denial or a peek usually changes nothing; one that
// does (a bucket rolled on, or a key converted to the algorithm its limit
// has now: conversions keep the count as of when they happen) is written
// like a take.
func (s *SharedCounters) run(ctx context.Context, cs []Charge, decide func(k, g []lookup, now int64)) error {
	n := keysOf(cs)
	if n == 0 {
		s.mirror.locked(cs, func(k, g []lookup) { decide(k, g, s.now(&cs[0])) })
		return nil
	}
	// (cs is not empty: every caller returns first on an empty set.)
	turns, failures, err := s.takeTurns(ctx, cs)
	if err != nil {
		return err
	}
	defer s.leaveTurns(turns)
	for j, t := range turns {
		if t.failures.Load() != failures[j] {
			return fmt.Errorf("%w: the shared store failed a call of %s's %s while this check waited its turn",
				tiers.ErrUnavailable, cs[0].Customer, cs[0].Metric)
		}
	}
	keys := make([]string, 3*n) // Expect, Set, Found
	op := SharedOp{Charges: cs, Expect: keys[:n:n], Set: keys[n : 2*n : 2*n], TTLMs: make([]int64, n)}
	var fresh bool // the mirror holds what the store answered last
	for attempt := 1; ; attempt++ {
		now := s.now(&cs[0])
		s.mirror.locked(cs, func(k, g []lookup) {
			if s.storeClock && !fresh {
				for i := range cs {
					customer, global := cs[i].SharedKeys()
					if customer {
						s.mirror.dropExpired(&k[i], now)
					}
					if global {
						s.mirror.dropExpired(&g[i], now)
					}
				}
			}
			s.states(cs, k, g, op.Expect)
			decide(k, g, now)
			s.states(cs, k, g, op.Set)
			op.Write = !slices.Equal(op.Set, op.Expect)
			if op.Write {
				s.expiries(cs, k, g, now, op.TTLMs)
			}
		})
		if fresh && !op.Write {
			return nil // decided on what the store just held: nothing to write
		}
		op.Found = keys[2*n : 2*n : 3*n]
		cs[0].Trips++
		sent := time.Now()
		err := s.store.Run(ctx, &op)
		if err != nil {
			s.forget(cs) // the store may or may not have written
			for _, t := range turns {
				t.failures.Add(1)
			}
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
		if err := s.load(cs, op.Found); err != nil {
			return fmt.Errorf("%w: %v", tiers.ErrUnavailable, err)
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%w: the shared store's keys of %s's %s changed under %d decisions in a row",
				tiers.ErrUnavailable, cs[0].Customer, cs[0].Metric, attempt)
		}
		fresh = true
	}
}

// takeTurns takes the turns of the customers' metrics of cs, each once,
// in the order of their numbers (so that sets never wait for each other
// in a circle), and returns them with the failures each had counted.
func (s *SharedCounters) takeTurns(ctx context.Context, cs []Charge) ([]*turn, []uint64, error) {
	var idx [8]int
	ids := idx[:0]
	for i := range cs {
		if customer, _ := cs[i].SharedKeys(); customer || len(cs[i].Globals) > 0 {
			ids = append(ids, int(s.mirror.pairHash(cs[i].Customer, cs[i].Metric, cs[i].Subject)%numTurns))
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	turns := make([]*turn, 0, len(ids))
	failures := make([]uint64, 0, len(ids))
	for _, id := range ids {
		t := &s.turns[id]
		failures = append(failures, t.failures.Load())
		if err := t.take(ctx); err != nil {
			s.leaveTurns(turns)
			return nil, nil, err
		}
		turns = append(turns, t)
	}
	return turns, failures, nil
}

// leaveTurns gives the turns back.
func (s *SharedCounters) leaveTurns(turns []*turn) {
	for _, t := range turns {
		<-t.held
	}
}

// expiries sets ttl, per key of cs (see SharedOp), to how long the store
// may keep it. The shards must be locked.
func (s *SharedCounters) expiries(cs []Charge, k, g []lookup, now int64, ttl []int64) {
	j := 0
	for i := range cs {
		customer, global := cs[i].SharedKeys()
		if customer {
			ttl[j] = expiresMs(&k[i], now)
			j++
		}
		if global {
			ttl[j] = expiresMs(&g[i], now)
			j++
		}
	}
	for i, t := range ttl {
		if !s.storeClock && t != 0 {
			// Decided by another clock than the store's, which expires
			// keys: give them time by the store's too.
			ttl[i] = max(t, keepUnderOtherClockMs)
		}
	}
}

// states writes the mirror's state of cs's keys into dst (see SharedOp).
// The shards must be locked.
func (s *SharedCounters) states(cs []Charge, k, g []lookup, dst []string) {
	j := 0
	for i := range cs {
		customer, global := cs[i].SharedKeys()
		if customer {
			dst[j] = encodeState(&k[i])
			j++
		}
		if global {
			dst[j] = encodeState(&g[i])
			j++
		}
	}
}

// load makes the mirror hold states for cs's keys.
func (s *SharedCounters) load(cs []Charge, states []string) error {
	var err error
	s.mirror.locked(cs, func(k, g []lookup) {
		j := 0
		for i := range cs {
			customer, global := cs[i].SharedKeys()
			if customer {
				if e := s.mirror.loadState(&k[i], states[j]); e != nil && err == nil {
					err = e
				}
				j++
			}
			if global {
				if e := s.mirror.loadState(&g[i], states[j]); e != nil && err == nil {
					err = e
				}
				j++
			}
		}
	})
	return err
}

// forget drops the mirror's state of cs's keys: after a call whose
// outcome is not known, the next decision reads them from the store.
func (s *SharedCounters) forget(cs []Charge) {
	_ = s.load(cs, make([]string, keysOf(cs))) // "" never fails
}

// Evict drops the mirror's keys that count nothing any more.
func (s *SharedCounters) Evict(nowMs int64) int { return s.mirror.evict(nowMs) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
