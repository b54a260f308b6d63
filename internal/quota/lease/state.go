package lease

import (
	"github.com/quotad/quotad/internal/quota"
	"sync"
	"time"
)

// lease is this process's lease of one counter. Its fields are guarded by
// mu and changed only by its methods, which keep these invariants:
//
//   - unused + inflight <= reported while the store holds the lease: the
//     store never hears of fewer units held unused than this process may
//     still admit or put back, so no unit it holds is granted twice.
//     (Units put back by a check that was not kept may break it until the
//     next report, which is due at once: see putBack.)
//   - One store call at a time: busy is non-nil while one is in flight,
//     and a call whose answer was lost (doubt) is resolved before any
//     other. A call's seq is drawn once it set busy, so that each call's
//     is above the one before it (see Pool.nextSeq).
//   - Units a settlement in doubt carried (limbo) are not spent: the store
//     may have given them back, and another process may hold them now.
//   - A lease dropped from the pool (gone) is never used again.
type lease struct {
	mu  sync.Mutex
	key quota.CounterKey
	end time.Time // the window's end: the lease is dropped then
	// bound is the limit it was granted under: leases hold units up to
	// it, never beyond.
	bound  int64
	global quota.GlobalKey // where its units count as global usage, if anywhere
	// sh and h place the lease in its pool, for drop.
	sh *leaseShard
	h  uint64
	// base is the counter's admitted units as last read from the store,
	// with this process's unused units counted: admitted units as this
	// process knows them are base - unused - inflight.
	base   int64
	unused int64
	// inflight: units checks in progress took and have not yet kept or
	// put back.
	inflight int64
	// reported: what the store counts this lease to hold unused.
	reported int64
	leased   bool          // the store holds a lease of this process here
	busy     chan struct{} // non-nil while a store call on it is in flight
	touched  int64         // the pool's tick of the last take
	// doubt is a call whose answer was lost; limbo the units a settlement
	// in doubt carried.
	doubt doubt
	limbo int64
	// full: the store last refused a grant here with no other live process
	// holding units unused, its counter at fullAt. Checks that need more
	// than the lease holds are denied from memory until Freed.
	full   bool
	fullAt int64
	// verify: a reset or a deletion may have ended the lease (see
	// suspect): ask the store before spending its units.
	verify bool
	// gone: dropped from the pool (look it up again). Its units went with
	// it (a reset, a deletion, the window's end) unless settled: then the
	// store gave back what it held unused, and still counts the units
	// checks in progress took from it, which they give back there.
	gone    bool
	settled bool
}

// callKind is what a store call on a lease does.
type callKind uint8

const (
	noCall callKind = iota
	grantCall
	reportCall
	settleCall
)

// doubt is a call on a lease whose answer was lost.
type doubt struct {
	kind callKind
	seq  int64
}

// newLease returns an empty lease of sp's counter, placed in sh under h.
func newLease(sp *quota.Span, sh *leaseShard, h uint64, tick int64) *lease {
	return &lease{key: sp.Key, end: sp.End, bound: sp.Rule.Limit, global: sp.Global, sh: sh, h: h, touched: tick}
}

// dropLocked removes l from its pool; l.mu is held. Its unused units, if
// any, are the caller's to account for.
func (l *lease) dropLocked() {
	if l.gone {
		return
	}
	l.gone = true
	l.sh.remove(l.h, l)
}

// suspect marks l as possibly ended by a reset or a deletion: none of its
// units is spent until the store says it still holds the lease (a report,
// or a refill, which finds a lease it no longer holds lost). A lease
// granted after the reset, before this process heard of it, is kept so.
func (l *lease) suspect() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return
	}
	l.verify = l.leased
	l.full = false
}

// changed reports whether l was granted under other terms than span sp's.
func (l *lease) changed(sp *quota.Span) bool {
	return l.bound != sp.Rule.Limit || l.global != sp.Global
}

// spendableLocked returns the units checks may take from l; l.mu is held.
func (l *lease) spendableLocked() int64 {
	if l.gone || !l.leased || l.verify || l.doubt.kind == settleCall {
		return 0
	}
	return l.unused
}

// spendable returns the units checks may take from l.
func (l *lease) spendable() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spendableLocked()
}

// unreturned returns at most the units the store counts l to hold unused,
// or may: those of a settlement in doubt, or, while the store holds l,
// what it was last told or what l holds, the larger (a settlement in
// flight still counts).
func (l *lease) unreturned() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.gone:
		return 0
	case l.doubt.kind == settleCall:
		return l.limbo
	case l.leased:
		return max(l.reported, l.unused+l.inflight)
	}
	return 0
}

// inDoubt reports whether a call on l is in doubt.
func (l *lease) inDoubt() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.gone && l.doubt.kind != noCall
}

// admitted returns the counter's admitted units as l knows them; l.mu is
// held.
func (l *lease) admittedLocked() int64 { return l.base - l.unused - l.inflight }

// stepKind is what a check does next with a lease (see lease.next).
type stepKind uint8

const (
	stepAgain   stepKind = iota // look the lease up again
	stepWait                    // wait for the call in flight, then look again
	stepResolve                 // resolve the call in doubt (l is busy with it)
	stepSettle                  // settle the lease, then look again
	stepTaken                   // the cost was taken
	stepFull                    // denied from memory
	stepRefill                  // ask the store for units (l is busy with it)
	stepVerify                  // report the lease, to learn whether the store still holds it (l is busy with it)
	stepDenied                  // the store granted nothing
	stepFailed                  // the call failed (its outcome in doubt if it was sent)
	stepGone                    // the customer or the metric was deleted
)

// step is the outcome of lease.next or lease.landGrant.
type step struct {
	kind stepKind
	busy chan struct{} // stepWait; stepResolve, stepRefill: the call's
	res  Resolution    // stepResolve: the call to make
	rep  Settlement    // stepVerify: the report to make (without its Seq)
	used int64         // stepTaken, stepFull, stepDenied: admitted units before the check
	had  int64         // stepRefill: units the check took from the lease
	req  Request       // stepRefill: the call to make (without its Seq)
}

// next decides what a check of cost units in span sp does with l, at the
// pool's tick: take the units, or the store call to make first.
func (l *lease) next(sp *quota.Span, cost, tick int64) step {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := l.changed(sp)
	switch {
	case l.gone:
		return step{kind: stepAgain}
	case !changed && l.spendableLocked() >= cost:
		l.unused -= cost
		l.inflight += cost
		l.touched = tick
		return step{kind: stepTaken, used: l.admittedLocked()}
	case l.busy != nil:
		// Another check is refilling it, or it is being reported,
		// settled or resolved: wait for that, then look again.
		return step{kind: stepWait, busy: l.busy}
	case l.doubt.kind != noCall:
		l.busy = make(chan struct{})
		return step{kind: stepResolve, busy: l.busy, res: Resolution{Key: l.key, Seq: l.doubt.seq}}
	case l.verify:
		l.busy = make(chan struct{})
		return step{kind: stepVerify, busy: l.busy, rep: Settlement{Key: l.key, Unused: l.unused + l.inflight}}
	case changed:
		// The window's limit (or the metric's capacity) changed: its units
		// go back before any is taken under the new one.
		return step{kind: stepSettle}
	case l.full && l.fullAt+cost-l.unused > l.bound:
		return step{kind: stepFull, used: l.admittedLocked()}
	}
	// Refill: this check takes what the lease holds and asks the store for
	// the rest, and for a block more to hold.
	had := l.unused
	l.unused = 0
	l.busy = make(chan struct{})
	return step{kind: stepRefill, had: had, req: Request{Key: sp.Key, Bound: sp.Rule.Limit,
		Need: cost - had, Extra: block(sp.Rule.Limit), InFlight: l.inflight + cost, Leased: l.leased,
		Recall: true, Global: l.global}}
}

// landGrant applies the answer to a refill (r, or err) that a check of
// cost units asked for, having taken had units from l, at tick. sent: the
// call reached the store, or may have (a failed call that was never sent
// leaves no doubt). quiet: no freed notification was heard while the call
// was in flight, so a refusal may mark the counter full.
func (l *lease) landGrant(r *Request, had, cost, tick int64, err error, sent, quiet bool) step {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.busy)
	l.busy = nil
	switch {
	case err != nil:
		l.unused += had
		if sent {
			l.doubt = doubt{kind: grantCall, seq: r.Seq}
		}
		return step{kind: stepFailed}
	case r.Gone:
		l.unused += had
		return step{kind: stepGone}
	case l.gone:
		// A reset ended the lease while the store was asked (see Forget),
		// and its units with it: a grant made after the reset is the
		// caller's to give back, and the check starts again.
		return step{kind: stepAgain}
	case r.Lost:
		// A reset or deletion ended the lease, and its units with it: it
		// goes, so that units checks in progress took from it are not put
		// back, and a new one starts.
		l.leased = false
		l.dropLocked()
		return step{kind: stepAgain}
	case r.Granted > 0:
		l.leased, l.verify = true, false
		// += : checks in progress may have put units back meanwhile.
		l.unused += r.Granted - r.Need
		l.inflight += cost
		l.reported = r.Granted - r.Need + r.InFlight
		l.base = r.Used - r.Others
		l.touched = tick
		l.full = false
		return step{kind: stepTaken, used: l.admittedLocked()}
	}
	l.unused += had
	l.base = r.Used - r.Others
	if r.Others == 0 && quiet && r.Need <= r.Bound {
		l.full, l.fullAt = true, r.Used
	}
	return step{kind: stepDenied, used: l.admittedLocked()}
}

// endTake ends a take of n units from l: the check keeps them, or puts
// them back. It reports whether they must go back to the store instead:
// l was settled meanwhile, and the store still counts them.
func (l *lease) endTake(n int64, keep bool) (toStore bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight -= n
	switch {
	case keep || l.gone && !l.settled:
		// Kept; or the lease ended, and its units with it.
		return false
	case l.gone:
		return true
	}
	l.unused += n
	return false
}

// putBack returns n units a check kept to l, because its answer was not
// kept after all. It reports whether they must go back to the store
// instead (l was settled), and, when l now holds more than the store
// heard and no call is in flight or in doubt, the report to make at once
// (l is then busy with it, under busy, its seq drawn from next), so that
// other processes may recall them.
func (l *lease) putBack(n int64, next func() int64, busy chan struct{}) (toStore bool, report *Settlement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.gone && !l.settled:
		return false, nil // the lease ended meanwhile (reset, deletion): so did its units
	case l.gone:
		return true, nil
	}
	l.unused += n
	if l.unused+l.inflight <= l.reported || l.busy != nil || l.doubt.kind != noCall {
		return false, nil // the store heard enough, or the next call will tell it
	}
	l.busy = busy
	return false, &Settlement{Key: l.key, Seq: next(), Unused: l.unused + l.inflight}
}

// known returns the admitted units of span sp's counter as l knows them,
// when it knows them well enough to judge a check of cost there without
// the store: how a check already denied reports its other spans.
func (l *lease) known(sp *quota.Span, cost int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || !l.leased || l.changed(sp) {
		return 0, false
	}
	used := l.admittedLocked()
	if sp.Rule.Spare && used+cost > sp.Rule.Threshold {
		return 0, false // spare capacity needs the metric's global usage
	}
	return used, true
}

// unusedHeld returns the units l holds unused that the store counts as
// this process's: what a read of the counter must not count as admitted.
func (l *lease) unusedHeld() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leased {
		return 0
	}
	return l.unused
}

// clearFull forgets that l's counter was full.
func (l *lease) clearFull() {
	l.mu.Lock()
	l.full = false
	l.mu.Unlock()
}

// settleStep is what beginSettle decided.
type settleStep uint8

const (
	settleNothing settleStep = iota // gone, or never held: nothing to give back
	settleWait                      // a call is in flight: wait for it, then try again
	settleResolve                   // a call is in doubt: resolve it first
	settleSend                      // l is busy with the settlement returned
)

// beginSettle prepares l's settlement, under busy, its seq drawn from
// next: it gives its unused units back and ends. A lease the store never
// held is dropped at once.
func (l *lease) beginSettle(next func() int64, busy chan struct{}) (settleStep, chan struct{}, Settlement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.busy != nil:
		return settleWait, l.busy, Settlement{}
	case l.gone:
		return settleNothing, nil, Settlement{}
	case l.doubt.kind != noCall:
		return settleResolve, nil, Settlement{}
	case !l.leased:
		l.dropLocked()
		return settleNothing, nil, Settlement{}
	}
	s := Settlement{Key: l.key, Seq: next(), Unused: l.unused, Global: l.global}
	l.unused = 0
	l.busy = busy
	return settleSend, nil, s
}

// settleLanded applies the answer to l's settlement s (err, if it
// failed). It returns the units to give back to the store now: units
// checks put back during the call, which the store still counts.
func (l *lease) settleLanded(s Settlement, err error) (toStore int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy = nil
	if err != nil {
		// The store may have given the units back: they wait in limbo
		// until it tells (see resolved).
		l.limbo = s.Unused
		l.doubt = doubt{kind: settleCall, seq: s.Seq}
		return 0
	}
	return l.endSettled()
}

// endSettled drops l, settled; l.mu is held. It returns the units checks
// put back since the settlement was sent: the store still counts them.
func (l *lease) endSettled() int64 {
	l.settled = true
	l.dropLocked()
	back := l.unused
	l.unused, l.limbo = 0, 0
	return back
}

// beginReport prepares a report of l under busy, its seq drawn from next,
// if the store should hear what l holds unused now.
func (l *lease) beginReport(next func() int64, busy chan struct{}) (Settlement, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || !l.leased || l.busy != nil || l.doubt.kind != noCall || !l.verify && l.unused+l.inflight == l.reported {
		return Settlement{}, false
	}
	l.busy = busy
	return Settlement{Key: l.key, Seq: next(), Unused: l.unused + l.inflight}, true
}

// reportLanded applies the answer to l's report s (err, if it failed).
func (l *lease) reportLanded(s Settlement, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy = nil
	switch {
	case err != nil:
		// The store holds the report or the one before: count the
		// smaller, so that reported never exceeds what the store has.
		l.reported = min(l.reported, s.Unused)
		l.doubt = doubt{kind: reportCall, seq: s.Seq}
	case s.Lost:
		l.leased = false
		l.dropLocked()
	default:
		l.reported = s.Unused
		l.verify = false
	}
}

// beginResolve prepares the resolution of l's call in doubt under busy.
func (l *lease) beginResolve(busy chan struct{}) (Resolution, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone || l.busy != nil || l.doubt.kind == noCall {
		return Resolution{}, false
	}
	l.busy = busy
	return Resolution{Key: l.key, Seq: l.doubt.seq}, true
}

// resolved applies what the store told of l's call in doubt, d (err, if
// it could not be asked; l stays in doubt). It returns the units to give
// back to the store now (see settleLanded).
func (l *lease) resolved(d Resolution, err error) (toStore int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy = nil
	if err != nil || l.gone {
		return 0
	}
	kind := l.doubt.kind
	l.doubt = doubt{}
	switch {
	case kind == settleCall && d.Applied:
		return l.endSettled()
	case kind == settleCall:
		l.unused += l.limbo
		l.limbo = 0
	case kind == grantCall && d.Applied:
		// The grant's units are this lease's: the check that asked for
		// them was answered without them.
		l.unused += d.Granted
		l.base += d.Granted
		l.full = false
	}
	switch {
	case d.Leased:
		l.leased, l.verify = true, false
		l.reported = d.Unused
	case l.leased:
		// The store holds no lease here any more: a reset or deletion
		// ended it, with its units.
		l.leased = false
		l.dropLocked()
	}
	return 0
}

// flushDuty is what the periodic flush does with a lease.
type flushDuty uint8

const (
	dutyNone flushDuty = iota
	dutyResolve
	dutySettle
	dutyReport
)

// duty decides what the flush at now, tick, does with l: leases idle for
// idle ticks are settled (or dropped, if never held), and, when reports
// is set, leases idle since the last tick are reported.
func (l *lease) duty(now time.Time, tick, idle int64, reports bool) flushDuty {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.gone || l.busy != nil:
		return dutyNone
	case !now.Before(l.end):
		l.dropLocked() // the window ended: nothing of it counts any more
		return dutyNone
	case l.doubt.kind != noCall:
		return dutyResolve
	case !l.leased:
		if tick-l.touched >= idle {
			l.dropLocked()
		}
		return dutyNone
	case tick-l.touched >= idle || l.unused > block(l.bound):
		return dutySettle
	case l.verify || reports && tick-l.touched >= 1 && l.unused+l.inflight != l.reported:
		return dutyReport
	}
	return dutyNone
}
