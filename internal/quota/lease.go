package quota

import (
	"cmp"
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Leases serve long windows at memory speed. A process reserves a block of
// a counter's units in the shared store with one conditional update (the
// counter counts them as used from then on), then admits checks from the
// block in memory until it is spent. The rules that keep this exact:
//
//   - Never over-granted: units are admitted only from a block the store
//     granted under the window's threshold, so the units admitted in a
//     window never exceed it, with any number of processes.
//   - A block held for one counter is at most max(1, 1% of the limit)
//     once the check that asked for it took its cost.
//   - Nothing stranded: when a check needs units the counter no longer has
//     but other live processes hold unused, the store asks them to give
//     theirs back (a recall) and the check tries again for a few
//     milliseconds.
//   - Unused units go back when a lease is idle (IdleAfter), on shutdown,
//     when the window's limit changes and when recalled. A process that
//     dies keeps its unused units counted until the window ends.
//   - Every process reports what its leases hold unused once they are idle
//     for a flush interval (FlushEvery), so usage reads, which count
//     admitted units, are exact once traffic stops for that long. (A
//     process alone on the store reads its own leases from memory and
//     reports nothing until another one runs.)
//   - While the store cannot be reached, checks go on being admitted from
//     the blocks already held; only a check that needs more fails.
//   - A store call that changes what leases hold runs to its end, even when
//     the check that made it goes away. A settlement that fails, perhaps
//     after the store committed it, leaves its units unspent until one
//     succeeds; a grant that fails so leaves its units counted, as a
//     crash would.
//
// Leases hold units up to a window's limit. Beyond it, a soft window's
// overage (billed, so counted exactly, in the order checks reach the
// store) and an elastic window's spare capacity are decided by the ledger
// directly, after other processes' units were recalled.

// Lease timing.
const (
	// FlushEvery is how often the pool reports idle leases' unused units,
	// writes the global usage it counted and settles idle leases: usage
	// reads are exact at most 2 × FlushEvery after traffic stops.
	FlushEvery = 500 * time.Millisecond
	// IdleAfter is how long a lease goes unused before its units are
	// given back. Other processes need not wait for it (they recall
	// units), nor do usage reads (leases report their unused units once
	// idle for FlushEvery); a customer who checks less often than this
	// reserves a block, a commit, on every check.
	IdleAfter = 30 * time.Second
	// recallAttempts bounds how long a check waits for other processes to
	// give back the units it needs: with backoff, about half a second.
	recallAttempts = 20
)

// Leaser is the store side of leases; the PostgreSQL ledger implements it.
// A process is named in the store as a holder, alive while it runs.
type Leaser interface {
	// Lease asks for r.Need units of r.Key, and up to r.Extra more to hold,
	// if r.Need fits within r.Threshold, and fills in r's results. When it
	// does not fit but other live processes hold units unused and r.Recall
	// is set, the store asks them to give them back.
	Lease(ctx context.Context, r *LeaseRequest) error
	// Settle ends this process's leases s: their unused units are given
	// back. A lease the store no longer holds (a reset ended it) gives
	// nothing back.
	Settle(ctx context.Context, s []Settlement) error
	// Report records how many units this process holds unused in leases
	// s, and marks those the store no longer holds as Lost.
	Report(ctx context.Context, s []Settlement) error
	// Recall asks the other live processes holding leases of k to settle
	// them, and returns how many such leases there are.
	Recall(ctx context.Context, k CounterKey) (int, error)
	// Alone reports whether no other process runs on the store: then no
	// one but this process reads what its leases report.
	Alone(ctx context.Context) (bool, error)
}

// LeaseRequest is a Lease call: what is asked, then what was granted.
type LeaseRequest struct {
	Key       CounterKey
	Threshold int64
	Need      int64 // units the asking check needs now: all or none
	Extra     int64 // units to hold beyond Need, at most
	// InFlight is how many units, besides what the grant leaves over,
	// this process may yet hold unused in the lease: units checks in
	// progress took from it (the asking one included), which they put
	// back if they are denied in another window. The lease reports them
	// as unused, so that what it reports never falls short.
	InFlight int64
	Held     bool // this process believes it holds a lease of Key
	Recall   bool // recall other processes' units if Need does not fit
	// Global, where the metric declares a capacity for the window (else
	// its Metric is ""), counts the granted units at once.
	Global GlobalKey

	Granted int64 // 0, or between Need and Need+Extra
	Used    int64 // the counter after the grant: admitted and leased units
	Others  int64 // units other live processes report holding unused
	Lost    bool  // Held, but the store has no such lease: nothing granted
}

// Settlement is one of this process's leases as it stands.
type Settlement struct {
	Key    CounterKey
	Unused int64
	Global GlobalKey // as granted: settling gives the units back there too
	Lost   bool      // Report: the store no longer holds this lease
}

// block is the most units a lease holds for a window of threshold t.
func block(t int64) int64 { return max(1, t/100) }

// LeaseStats are the lease pool's counters for monitoring.
type LeaseStats struct {
	Refills  uint64 // leases granted or topped up
	Recalls  uint64 // checks that asked other processes for units
	Recalled uint64 // leases this process gave back when asked
	Leases   int64  // leases held
	Units    int64  // units held unused in them
}

// LeasePool is a Counter of long windows that answers from leases over a
// Ledger. It is safe for concurrent use. Run its background work with Run.
type LeasePool struct {
	ledger Ledger
	clock  Clock
	seed   maphash.Seed
	shards [leaseShards]leaseShard
	tick   atomic.Int64

	globalMu sync.Mutex
	globals  map[GlobalKey]int64 // units admitted from leases, not yet written

	refills, recalls, recalled atomic.Uint64
	leases                     atomic.Int64

	// Wait is how a check waits between attempts to get units recalled
	// from other processes: backoff from 1 to 32 ms by default. Tests may
	// replace it before the pool is used.
	Wait func(ctx context.Context, attempt int) error
	// IdleAfter is how long a lease goes unused before Flush settles it:
	// the package's IdleAfter by default.
	IdleAfter time.Duration
}

const leaseShards = 64

// leaseShard holds leases by their key's hash (the one that chose the
// shard), each hash's few leases compared by key: one hash per lookup.
type leaseShard struct {
	mu sync.Mutex
	m  map[uint64][]*lease
	_  [48]byte // 64 bytes: a cache line
}

// get returns the lease of k, hashed h, or nil. sh.mu must be held.
func (sh *leaseShard) get(h uint64, k CounterKey) *lease {
	for _, l := range sh.m[h] {
		if l.key == k {
			return l
		}
	}
	return nil
}

// remove drops l, hashed h. sh.mu must be held.
func (sh *leaseShard) remove(h uint64, l *lease) {
	ls := sh.m[h]
	for i, x := range ls {
		if x == l {
			ls[i] = ls[len(ls)-1]
			ls = ls[:len(ls)-1]
			break
		}
	}
	if len(ls) == 0 {
		delete(sh.m, h)
	} else {
		sh.m[h] = ls
	}
}

// all returns every lease; sh.mu must not be held.
func (sh *leaseShard) all() []*lease {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := make([]*lease, 0, len(sh.m))
	for _, ls := range sh.m {
		out = append(out, ls...)
	}
	return out
}

// lease is this process's lease of one counter.
type lease struct {
	mu        sync.Mutex
	key       CounterKey
	end       time.Time // the window's end: the lease is dropped then
	threshold int64     // the limit it was granted under
	global    GlobalKey // where its units count as global usage, if anywhere
	// base is the counter's admitted units as last read from the store,
	// with this process's unused units counted: admitted units as this
	// process knows them are base - unused.
	base   int64
	unused int64
	// inflight: units checks in progress took and have not yet kept or
	// put back. unused + inflight never exceeds reported, what the store
	// last heard this process holds unused.
	inflight int64
	reported int64
	held     bool          // the store holds a lease of this process here
	busy     chan struct{} // non-nil while a store call on it is in flight
	touched  int64         // the tick of the last take
	// gone: dropped from the pool (look it up again). Its units went with
	// it (a reset, a deletion, the window's end) unless settled: then the
	// store gave back what it held unused, and still counts the units
	// checks in progress took from it, which they give back there.
	gone    bool
	settled bool
	// unsettled: a settlement of it failed, perhaps after the store
	// committed it. Its units are not spent until a settlement succeeds.
	unsettled bool
}

// NewLeasePool returns a pool of leases over ledger, timed by clock.
func NewLeasePool(ledger Ledger, clock Clock) *LeasePool {
	p := &LeasePool{ledger: ledger, clock: clock, seed: maphash.MakeSeed(),
		globals: map[GlobalKey]int64{}, Wait: backoff, IdleAfter: IdleAfter}
	for i := range p.shards {
		p.shards[i].m = map[uint64][]*lease{}
	}
	return p
}

// backoff waits 1, 2, 4 ... 32 ms, then 32 ms each time.
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Millisecond << min(attempt, 5))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stats returns the pool's counters. It visits every lease.
func (p *LeasePool) Stats() LeaseStats {
	s := LeaseStats{Refills: p.refills.Load(), Recalls: p.recalls.Load(), Recalled: p.recalled.Load(),
		Leases: p.leases.Load()}
	for i := range p.shards {
		for _, l := range p.shards[i].all() {
			s.Units += l.spendable()
		}
	}
	return s
}

// spendable returns the units l holds that checks may take.
func (l *lease) spendable() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || !l.held || l.unsettled {
		return 0
	}
	return l.unused
}

// Held returns the units this process holds unused in its lease of k,
// that checks may take.
func (p *LeasePool) Held(k CounterKey) int64 {
	l := p.existing(k)
	if l == nil {
		return 0
	}
	return l.spendable()
}

// hash hashes a counter key; its low bits choose the shard.
func (p *LeasePool) hash(k CounterKey) uint64 {
	h := maphash.String(p.seed, k.Customer) ^ maphash.String(p.seed, k.Metric)*0x9e3779b97f4a7c15
	h ^= (uint64(k.Window) + uint64(k.Start.Unix())<<8) * 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

func (p *LeasePool) shard(h uint64) *leaseShard { return &p.shards[h%leaseShards] }

// existing returns the lease of k, or nil.
func (p *LeasePool) existing(k CounterKey) *lease {
	h := p.hash(k)
	sh := p.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.get(h, k)
}

// lookup returns the lease of sp's counter, new and empty if there is none.
func (p *LeasePool) lookup(sp *Span) *lease {
	h := p.hash(sp.Key)
	sh := p.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.get(h, sp.Key)
	if l == nil {
		l = &lease{key: sp.Key, end: sp.End, threshold: sp.Rule.Limit, global: sp.Global, touched: p.tick.Load()}
		sh.m[h] = append(sh.m[h], l)
		p.leases.Add(1)
	}
	return l
}

// drop removes l from the pool; l.mu must be held. Its unused units, if
// any, are the caller's to account for.
func (p *LeasePool) drop(l *lease) {
	if l.gone {
		return
	}
	l.gone = true
	p.leases.Add(-1)
	h := p.hash(l.key)
	sh := p.shard(h)
	sh.mu.Lock()
	sh.remove(h, l)
	sh.mu.Unlock()
}

// Take implements Counter: every span takes its cost from this process's
// lease, refilled from the store when short. Beyond a limit, the ledger
// decides, directly. Once a span denied the check, the others are only
// reported: from what this process's leases know where they can.
func (p *LeasePool) Take(ctx context.Context, c *Charge, out []Outcome) (bool, error) {
	c.took = [maxLong]*lease{}
	var direct [maxLong]int // spans beyond their limit
	nd := 0
	allowed := true
	var err error
	for i := range c.Spans {
		if !allowed {
			if o, ok := p.known(c, i); ok {
				out[i] = o
				continue
			}
		}
		var l *lease
		if l, out[i], err = p.acquire(ctx, c, i); err != nil {
			break
		}
		switch {
		case out[i].Passed:
			c.took[i] = l
		case c.Spans[i].Rule.Beyond():
			direct[nd] = i
			nd++
		default:
			allowed = false
		}
	}
	switch {
	case err != nil || nd == 0:
	case allowed:
		allowed, err = p.takeDirect(ctx, c, direct[:nd], out)
	default:
		p.judge(ctx, c, direct[:nd], out)
	}
	keep := err == nil && allowed
	for _, l := range c.took[:len(c.Spans)] {
		if l != nil {
			p.settleTake(ctx, l, c.Cost, keep)
		}
	}
	if !keep {
		c.took = [maxLong]*lease{}
		return false, err
	}
	if nd == 0 {
		p.addGlobals(c, c.Cost)
	}
	return true, nil
}

// settleTake ends a take of n units from l: the check keeps them, or
// puts them back.
func (p *LeasePool) settleTake(ctx context.Context, l *lease, n int64, keep bool) {
	l.mu.Lock()
	l.inflight -= n
	switch {
	case keep || l.gone && !l.settled:
		// Kept; or the lease ended, and its units with it.
		l.mu.Unlock()
	case l.gone:
		l.mu.Unlock()
		p.returnToStore(ctx, l, n)
	default:
		l.unused += n
		l.mu.Unlock()
	}
}

// returnToStore gives back to the store n units a check took from l and
// did not keep, after l was settled: a settlement gives back what the
// lease held unused, so the store still counts them. If the store cannot
// be told, they stay counted: fewer units admitted, never more.
func (p *LeasePool) returnToStore(ctx context.Context, l *lease, n int64) {
	c := Charge{Customer: l.key.Customer, Metric: l.key.Metric, Cost: n, At: l.key.Start, Spans: []Span{{Key: l.key}}}
	if l.global.Metric != "" {
		c.Globals = []GlobalKey{l.global}
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	var o [1]Outcome
	_ = p.ledger.GiveBack(ctx, &c, o[:])
}

// known returns the outcome of span i of c, counting nothing, when this
// process's lease of it knows its count and the outcome needs no global
// usage: how a check already denied reports its other spans.
func (p *LeasePool) known(c *Charge, i int) (Outcome, bool) {
	sp := &c.Spans[i]
	l := p.existing(sp.Key)
	if l == nil {
		return Outcome{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || !l.held || l.changed(sp) {
		return Outcome{}, false
	}
	used := l.base - l.unused - l.inflight
	if sp.Rule.Spare && used+c.Cost > sp.Rule.Threshold {
		return Outcome{}, false
	}
	return c.Judge(i, used, 0), true
}

// judge reports spans idx of c, which their leases denied but which may
// admit beyond their limits, in a check another span denied: as the
// ledger would decide them (a soft window's overage, spare capacity),
// counting nothing. Spare capacity needs the metric's global usage; if it
// cannot be read, those spans stay reported as their leases denied them.
func (p *LeasePool) judge(ctx context.Context, c *Charge, idx []int, out []Outcome) {
	var globals []GlobalKey
	for _, i := range idx {
		if c.Spans[i].Rule.Spare {
			globals = append(globals, c.Spans[i].Global)
		}
	}
	var global []int64
	if len(globals) > 0 {
		var err error
		_, global, err = p.Read(ctx, nil, globals)
		c.Trips++
		if err != nil {
			return
		}
	}
	for _, i := range idx {
		var g int64
		if c.Spans[i].Rule.Spare {
			g, global = global[0], global[1:]
		}
		out[i] = c.Judge(i, out[i].Used, g)
	}
}

// acquire takes c.Cost units of span i from this process's lease, asking
// the store for more when the lease holds too few, and recalling other
// processes' units when the store has none left. The outcome reports the
// units admitted before the check as this process knows them.
func (p *LeasePool) acquire(ctx context.Context, c *Charge, i int) (*lease, Outcome, error) {
	sp := &c.Spans[i]
	for attempt := 0; ; {
		l := p.lookup(sp)
		l.mu.Lock()
		switch {
		case l.gone:
			l.mu.Unlock()
			continue
		case l.busy != nil && (l.unused < c.Cost || l.changed(sp) || l.unsettled):
			// Another check is refilling it, or it is being reported or
			// settled: wait for that, then look again.
			busy := l.busy
			l.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return nil, Outcome{}, ctx.Err()
			}
			continue
		case l.changed(sp) || l.unsettled:
			// The window's limit (or the metric's capacity) changed: its
			// units go back before any is taken under the new one. Or a
			// settlement failed: it is tried again first.
			trips, err := p.settleNow(ctx, l)
			c.Trips += trips
			if err != nil {
				return nil, Outcome{}, err
			}
			continue
		case l.unused >= c.Cost:
			l.unused -= c.Cost
			l.inflight += c.Cost
			l.touched = p.tick.Load()
			used := l.base - l.unused - l.inflight
			l.mu.Unlock()
			return l, Outcome{Used: used, Passed: true}, nil
		}
		// Refill: this check takes what the lease holds and asks the store
		// for the rest, and for a block more to hold.
		had := l.unused
		r := LeaseRequest{Key: sp.Key, Threshold: sp.Rule.Limit, Need: c.Cost - had,
			Extra: block(sp.Rule.Limit), InFlight: l.inflight + c.Cost, Held: l.held, Recall: true, Global: l.global}
		l.unused = 0
		l.busy = make(chan struct{})
		l.mu.Unlock()

		err := p.lease(ctx, &r)
		c.Trips++

		l.mu.Lock()
		close(l.busy)
		l.busy = nil
		switch {
		case err != nil:
			l.unused += had
			l.mu.Unlock()
			return nil, Outcome{}, err
		case l.gone:
			// A reset ended the lease while the store was asked (see
			// Forget), and its units with it: a grant made after the reset
			// goes back whole, and the check starts again.
			l.mu.Unlock()
			if r.Granted > 0 {
				if err := p.settleGrant(ctx, &r, l.global); err != nil {
					return nil, Outcome{}, err
				}
				c.Trips++
			}
			continue
		case r.Lost:
			// A reset or deletion ended the lease, and its units with it:
			// it goes, so that units checks in progress took from it are
			// not put back, and a new one starts.
			l.held = false
			p.drop(l)
			l.mu.Unlock()
			continue
		case r.Granted > 0:
			p.refills.Add(1)
			l.held = true
			// += : checks in progress may have put units back meanwhile.
			l.unused += r.Granted - r.Need
			l.inflight += c.Cost
			l.reported = r.Granted - r.Need + r.InFlight
			l.base = r.Used - r.Others
			l.touched = p.tick.Load()
			used := l.base - l.unused - l.inflight
			l.mu.Unlock()
			return l, Outcome{Used: used, Passed: true}, nil
		}
		l.unused += had
		l.base = r.Used - r.Others
		used := l.base - l.unused - l.inflight
		l.mu.Unlock()
		// The counter has no room for what this check needs. If other
		// processes hold enough unused, they were asked for it: try again
		// while they give it back.
		if r.Others > 0 && r.Need <= sp.Rule.Limit-r.Used+r.Others && attempt < recallAttempts {
			if attempt == 0 {
				p.recalls.Add(1)
			}
			if err := p.Wait(ctx, attempt); err != nil {
				return nil, Outcome{}, err
			}
			attempt++
			continue
		}
		// Denied by the lease; beyond its limit a span may still pass (soft
		// overage, spare capacity), which the ledger decides.
		return nil, Outcome{Used: used, Wait: sp.CalendarWait(used, c.Cost, c.At)}, nil
	}
}

// lease asks the store for a grant. The call is not cut short with the
// check that made it: a grant the store committed must be known.
func (p *LeasePool) lease(ctx context.Context, r *LeaseRequest) error {
	ctx, cancel := detach(ctx)
	defer cancel()
	return p.ledger.Lease(ctx, r)
}

// settleGrant settles at once, whole, a lease the store granted in r.
func (p *LeasePool) settleGrant(ctx context.Context, r *LeaseRequest, global GlobalKey) error {
	ctx, cancel := detach(ctx)
	defer cancel()
	return p.ledger.Settle(ctx, []Settlement{{Key: r.Key, Unused: r.Granted, Global: global}})
}

// storeTimeout bounds a store call that changes what leases hold. Such a
// call is not cut short with the check that made it (its client gone, say):
// a call cut short after the store committed it would leave the pool not
// knowing what it holds.
const storeTimeout = 10 * time.Second

// detach returns a context for a store call that changes what leases
// hold: ctx's values, without its cancellation, bounded by storeTimeout.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
}

// changed reports whether l was granted under other terms than span sp's.
func (l *lease) changed(sp *Span) bool { return l.threshold != sp.Rule.Limit || l.global != sp.Global }

// putBack returns n units a check kept to l, because its answer was not
// kept after all (see Undo), and has the store told at once if l now
// holds more than it reported, so that other processes recall them.
func (p *LeasePool) putBack(ctx context.Context, l *lease, n int64) error {
	l.mu.Lock()
	switch {
	case l.gone && !l.settled:
		l.mu.Unlock()
		return nil // the lease ended meanwhile (reset, deletion): so did its units
	case l.gone:
		l.mu.Unlock()
		p.returnToStore(ctx, l, n)
		return nil
	}
	l.unused += n
	if l.unused+l.inflight <= l.reported || l.busy != nil {
		l.mu.Unlock()
		return nil // the store heard enough, or a call in flight will tell it
	}
	b := newBatch()
	b.set = append(b.set, Settlement{Key: l.key, Unused: l.unused + l.inflight})
	b.leases = append(b.leases, l)
	l.busy = b.busy
	l.mu.Unlock()
	return p.report(ctx, b)
}

// takeDirect has the ledger decide spans idx of c, beyond their limit,
// with the global windows of c that leases did not count in, after
// writing the global usage this process counted so that the ledger sees
// all of it.
func (p *LeasePool) takeDirect(ctx context.Context, c *Charge, idx []int, out []Outcome) (bool, error) {
	var spans [maxLong]Span
	for j, i := range idx {
		spans[j] = c.Spans[i]
		// The ledger counts the units this process holds unused as
		// admitted: they go back first (other processes' were recalled).
		if l := p.existing(spans[j].Key); l != nil {
			l.mu.Lock()
			trips, err := p.settleNow(ctx, l)
			c.Trips += trips
			if err != nil {
				return false, err
			}
		}
	}
	if err := p.FlushGlobals(ctx); err != nil {
		return false, err
	}
	d := Charge{Customer: c.Customer, Metric: c.Metric, Cost: c.Cost, At: c.At, Spans: spans[:len(idx)],
		Globals: p.unleasedGlobals(c)}
	var o [maxLong]Outcome
	ok, err := p.ledger.Take(ctx, &d, o[:len(idx)])
	c.Trips += d.Trips
	if err != nil {
		return false, err
	}
	for j, i := range idx {
		out[i] = o[j]
	}
	return ok, nil
}

// leased reports whether a span of c took its units from a lease that
// counts in global window g: a lease counts the units it is granted in
// its span's global window, at once.
func leased(c *Charge, g GlobalKey) bool {
	for _, l := range c.took[:len(c.Spans)] {
		if l != nil && l.global == g {
			return true
		}
	}
	return false
}

// unleasedGlobals returns the global windows of c that no lease c took
// units from counts in: where the ledger counts a direct take.
func (p *LeasePool) unleasedGlobals(c *Charge) []GlobalKey {
	var out []GlobalKey
	for _, g := range c.Globals {
		if !leased(c, g) {
			out = append(out, g)
		}
	}
	return out
}

// Undo gives back the units of a take whose answer was not kept (the
// call that was to keep it failed): to the leases they came from, and,
// for spans the ledger decided directly (beyond their limit), to the
// ledger.
func (p *LeasePool) Undo(ctx context.Context, c *Charge) error {
	var direct [maxLong]Span
	nd := 0
	for i := range c.Spans {
		if l := c.took[i]; l != nil {
			if err := p.putBack(ctx, l, c.Cost); err != nil {
				return err
			}
			continue
		}
		direct[nd] = c.Spans[i]
		nd++
	}
	if nd == 0 {
		p.addGlobals(c, -c.Cost)
		return nil
	}
	d := Charge{Customer: c.Customer, Metric: c.Metric, Cost: c.Cost, At: c.At, Spans: direct[:nd], Globals: p.unleasedGlobals(c)}
	var o [maxLong]Outcome
	return p.ledger.GiveBack(ctx, &d, o[:nd])
}

// Peek implements Counter: each span as this process's lease of it knows
// it, as Take would report it; spans without one (or that need global
// usage) from the counts in the store, less what this process holds
// unused, with the global usage it has not written yet. So a check the
// short windows denied, or a dry run, of a customer with leases costs no
// round trip.
func (p *LeasePool) Peek(ctx context.Context, c *Charge, out []Outcome) error {
	var rest [maxLong]Span
	var at [maxLong]int
	n := 0
	for i := range c.Spans {
		if o, ok := p.known(c, i); ok {
			out[i] = o
			continue
		}
		rest[n], at[n] = c.Spans[i], i
		n++
	}
	if n == 0 {
		return nil
	}
	d := Charge{Customer: c.Customer, Metric: c.Metric, Cost: c.Cost, At: c.At, Spans: rest[:n]}
	var o [maxLong]Outcome
	err := d.PeekWith(func(counters []CounterKey, globals []GlobalKey) ([]int64, []int64, error) {
		return p.Read(ctx, counters, globals)
	}, o[:n])
	c.Trips += d.Trips
	if err != nil {
		return err
	}
	for j, i := range at[:n] {
		out[i] = o[j]
	}
	return nil
}

// Read returns the admitted units of counters and the global usage of
// globals, as Ledger.Read does, counting this process's leases too.
func (p *LeasePool) Read(ctx context.Context, counters []CounterKey, globals []GlobalKey) ([]int64, []int64, error) {
	used, global, err := p.ledger.Read(ctx, counters, globals)
	if err != nil {
		return nil, nil, err
	}
	for i, k := range counters {
		if l := p.existing(k); l != nil {
			l.mu.Lock()
			if l.held {
				used[i] = max(0, used[i]-l.unused)
			}
			l.mu.Unlock()
		}
	}
	p.globalMu.Lock()
	for i, g := range globals {
		global[i] += p.globals[g]
	}
	p.globalMu.Unlock()
	return used, global, nil
}

// GiveBack implements Counter: the counters' leases come home first (see
// Reclaim), then the ledger gives the units back.
func (p *LeasePool) GiveBack(ctx context.Context, c *Charge, out []Outcome) error {
	if err := p.Reclaim(ctx, c); err != nil {
		return err
	}
	return p.ledger.GiveBack(ctx, c, out)
}

// Reclaim prepares c's counters for a give-back in the ledger, which must
// know how many units are admitted: this process settles its leases of
// them and writes the global usage it counted, and the other processes are
// asked to settle theirs (it waits a little for them; units of processes
// that do not answer stay counted, so a refund gives back too few rather
// than too many).
func (p *LeasePool) Reclaim(ctx context.Context, c *Charge) error {
	for i := range c.Spans {
		l := p.existing(c.Spans[i].Key)
		if l == nil {
			continue
		}
		l.mu.Lock()
		if _, err := p.settleNow(ctx, l); err != nil {
			return err
		}
	}
	if err := p.FlushGlobals(ctx); err != nil {
		return err
	}
	for i := range c.Spans {
		for attempt := 0; ; attempt++ {
			n, err := p.ledger.Recall(ctx, c.Spans[i].Key)
			c.Trips++
			if err != nil {
				return err
			}
			if n == 0 || attempt == recallAttempts {
				break
			}
			if err := p.Wait(ctx, attempt); err != nil {
				return err
			}
		}
	}
	return nil
}

// settleNow gives l's unused units back and drops it; l.mu is held and
// released. It waits for a store call in flight on l first. It returns
// how many store calls it made.
func (p *LeasePool) settleNow(ctx context.Context, l *lease) (int, error) {
	for l.busy != nil {
		busy := l.busy
		l.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		l.mu.Lock()
	}
	if l.gone {
		l.mu.Unlock()
		return 0, nil
	}
	if !l.held {
		p.drop(l)
		l.mu.Unlock()
		return 0, nil
	}
	b := newBatch()
	p.enlist(b, l)
	l.mu.Unlock()
	return 1, p.settle(ctx, b)
}

// batch is leases gathered for one store call: they are busy until it
// ends.
type batch struct {
	leases []*lease
	set    []Settlement
	busy   chan struct{}
}

func newBatch() *batch { return &batch{busy: make(chan struct{})} }

// enlist moves l, held, into b to be settled, with its unused units; l.mu
// is held.
func (p *LeasePool) enlist(b *batch, l *lease) {
	b.set = append(b.set, Settlement{Key: l.key, Unused: l.unused, Global: l.global})
	b.leases = append(b.leases, l)
	l.unused = 0
	l.busy = b.busy
}

// settle settles b's leases: they go. If the store cannot be told, they
// stay with their units, unsettled: not to be spent, for the store may
// have committed the settlement before failing, until a settlement
// succeeds.
func (p *LeasePool) settle(ctx context.Context, b *batch) error {
	defer close(b.busy) // once every lease is free again
	if len(b.leases) == 0 {
		return nil
	}
	sortSettlements(b.set, b.leases)
	sctx, cancel := detach(ctx)
	err := p.ledger.Settle(sctx, b.set)
	cancel()
	for j, l := range b.leases {
		l.mu.Lock()
		l.busy = nil
		if err != nil {
			l.unused += b.set[j].Unused
			l.unsettled = true
			l.mu.Unlock()
			continue
		}
		l.settled = true
		p.drop(l)
		// Units checks in progress put back during the call: the store
		// still counts them.
		back := l.unused
		l.unused = 0
		l.mu.Unlock()
		if back > 0 {
			p.returnToStore(ctx, l, back)
		}
	}
	return err
}

// Recall settles this process's lease of k, because another process needs
// its units. On failure the lease stays, to be settled later.
func (p *LeasePool) Recall(ctx context.Context, k CounterKey) error {
	l := p.existing(k)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.gone && l.held {
		p.recalled.Add(1)
	}
	_, err := p.settleNow(ctx, l)
	return err
}

// Forget drops this process's leases of a customer's metric (of all its
// metrics when metric is "") without settling them: a reset or a deletion
// ended them in the store, with their units.
func (p *LeasePool) Forget(customer, metric string) {
	for i := range p.shards {
		for _, l := range p.shards[i].all() {
			if l.key.Customer == customer && (metric == "" || l.key.Metric == metric) {
				l.mu.Lock()
				p.drop(l)
				l.mu.Unlock()
			}
		}
	}
}

// addGlobals counts n units (negative: gives back) in the global windows
// of c that no lease c took units from counts in, to be written by
// FlushGlobals.
func (p *LeasePool) addGlobals(c *Charge, n int64) {
	if len(c.Globals) == 0 {
		return
	}
	p.globalMu.Lock()
	for _, g := range c.Globals {
		if !leased(c, g) {
			p.globals[g] += n
		}
	}
	p.globalMu.Unlock()
}

// FlushGlobals writes the global usage counted since the last flush.
func (p *LeasePool) FlushGlobals(ctx context.Context) error {
	p.globalMu.Lock()
	if len(p.globals) == 0 {
		p.globalMu.Unlock()
		return nil
	}
	deltas := make([]GlobalDelta, 0, len(p.globals))
	for k, n := range p.globals {
		if n != 0 {
			deltas = append(deltas, GlobalDelta{Key: k, Units: n})
		}
	}
	clear(p.globals)
	p.globalMu.Unlock()
	ctx, cancel := detach(ctx)
	defer cancel()
	if err := p.ledger.AddGlobal(ctx, deltas); err != nil {
		p.globalMu.Lock()
		for _, d := range deltas {
			p.globals[d.Key] += d.Units
		}
		p.globalMu.Unlock()
		return err
	}
	return nil
}

// Flush does the pool's periodic work at now: it drops leases of windows
// that ended, settles leases idle for IdleAfter (or holding more than a
// block, after units were put back, or whose settlement failed), reports
// the unused units of leases idle since the last flush, and writes the
// global usage it counted. Run calls it every FlushEvery; on failure it
// tries again the next time.
func (p *LeasePool) Flush(ctx context.Context, now time.Time) error {
	tick := p.tick.Add(1)
	idle := max(1, int64(p.IdleAfter/FlushEvery))
	settling, reporting := newBatch(), newBatch()
	// Reports are for other processes' reads: none when there is none.
	alone, err := p.ledger.Alone(ctx)
	reports := err != nil || !alone
	for i := range p.shards {
		for _, l := range p.shards[i].all() {
			l.mu.Lock()
			switch {
			case l.gone || l.busy != nil:
			case !now.Before(l.end):
				p.drop(l) // the window ended: nothing of it counts any more
			case !l.held:
				if tick-l.touched >= idle {
					p.drop(l)
				}
			case tick-l.touched >= idle || l.unused > block(l.threshold) || l.unsettled:
				p.enlist(settling, l)
			case reports && tick-l.touched >= 1 && l.unused+l.inflight != l.reported:
				reporting.set = append(reporting.set, Settlement{Key: l.key, Unused: l.unused + l.inflight})
				reporting.leases = append(reporting.leases, l)
				l.busy = reporting.busy
			}
			l.mu.Unlock()
		}
	}
	return errors.Join(err, p.report(ctx, reporting), p.settle(ctx, settling), p.FlushGlobals(ctx))
}

// report tells the store what b's leases hold unused (reports change only
// this process's own leases: no order needed).
func (p *LeasePool) report(ctx context.Context, b *batch) error {
	defer close(b.busy)
	if len(b.leases) == 0 {
		return nil
	}
	ctx, cancel := detach(ctx)
	err := p.ledger.Report(ctx, b.set)
	cancel()
	for j, l := range b.leases {
		l.mu.Lock()
		l.busy = nil
		switch {
		case err != nil:
		case b.set[j].Lost:
			l.held = false
			p.drop(l)
		default:
			l.reported = b.set[j].Unused
		}
		l.mu.Unlock()
	}
	return err
}

// sortSettlements orders s (and ls alongside) as the store's counters are
// ordered, so that processes settling many leases at once lock counters in
// the same order.
func sortSettlements(s []Settlement, ls []*lease) {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		x, y := s[a].Key, s[b].Key
		return cmp.Or(cmp.Compare(x.Customer, y.Customer), cmp.Compare(x.Metric, y.Metric),
			cmp.Compare(x.Window, y.Window), x.Start.Compare(y.Start))
	})
	s2, ls2 := make([]Settlement, len(s)), make([]*lease, len(ls))
	for i, j := range idx {
		s2[i], ls2[i] = s[j], ls[j]
	}
	copy(s, s2)
	copy(ls, ls2)
}

// Close settles every lease and writes the global usage counted: on
// shutdown, units held unused go back.
func (p *LeasePool) Close(ctx context.Context) error {
	b := newBatch()
	for i := range p.shards {
		for _, l := range p.shards[i].all() {
			l.mu.Lock()
			if !l.gone && l.busy == nil && l.held {
				p.enlist(b, l)
			}
			l.mu.Unlock()
		}
	}
	return errors.Join(p.settle(ctx, b), p.FlushGlobals(ctx))
}

var _ Counter = (*LeasePool)(nil)
