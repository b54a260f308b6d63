// Package lease serves quotad's long windows (hour, day, week, month, total) at
// memory speed, exactly across processes: a Pool holds blocks of each
// counter's units, leased from the PostgreSQL ledger (a Leaser), and
// admits checks from them in memory. To the quota engine it is the
// counter of long windows (quota.Leases); the rules that keep it exact
// follow.
package lease

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// Leases serve long windows at memory speed. A process (a holder) reserves
// a block of a counter's units in the shared store with one conditional
// update (the counter counts them as used from then on), then admits
// checks from the block in memory until it is spent. The rules that keep
// this exact:
//
//   - Never over-granted: units are admitted only from a block the store
//     granted within the window's bound (its limit), so the units admitted
//     in a window never exceed it, with any number of processes.
//   - A block held for one counter is at most max(1, 1% of the limit)
//     once the check that asked for it took its cost.
//   - Nothing stranded: when a check needs units the counter no longer has
//     but other live processes hold unused, the store asks them to give
//     theirs back (a recall), and the check tries again for a few
//     milliseconds.
//   - Unused units go back (a settlement) when a lease is idle (quota.IdleAfter),
//     on shutdown, when the window's limit changes and when recalled. A
//     process that dies keeps its unused units counted until the window
//     ends.
//   - Every process reports what its leases hold unused once they are idle
//     for a flush interval (quota.FlushEvery), so usage reads, which count
//     admitted units, are exact once traffic stops for that long. (A
//     process alone on the store reads its own leases from memory and
//     reports nothing until another one runs.)
//   - No call is lost with its answer. Every call on a lease (a grant, a
//     report, a settlement) carries a number, increasing within the
//     process, and the store applies a call only if its number is above
//     the last one applied to that lease: a late copy changes nothing.
//     When a call fails, the pool cannot tell whether the store applied
//     it, so the lease holds the call in doubt until the store tells
//     (Leaser.Resolve, which also fences the call off), before any other
//     call on it, and at every flush. So units a grant took in the store
//     come to the lease even when its answer was lost, and units a
//     settlement gave back are never spent again.
//   - No check waits for the store longer than its context allows: every
//     call, and every wait for another check's call, ends with it, and the
//     check then fails (tiers.ErrUnavailable). Other checks of the lease
//     go on being admitted from the units it holds.
//   - Denials from memory: when the store refuses a grant and no other
//     live process holds units of the counter unused, the lease remembers
//     the counter full, and denies checks that need more than it holds
//     without asking, until the store says units came back (Freed: a
//     settlement, a report of more unused units, a refund or a reset of
//     that counter) or the process may have missed that (ClearMarks).
//   - While the store cannot be reached, checks go on being admitted from
//     the blocks already held; only a check that needs more fails.
//
// Leases hold units up to a window's limit. Beyond it, a soft window's
// overage (billed, so counted exactly, in the order checks reach the
// store) and an elastic window's spare capacity are decided by the ledger
// directly, after other processes' units were recalled.

// Limits of the pool's calls.
const (
	// recallAttempts bounds how long a check waits for other processes to
	// give back the units it needs: with backoff, about half a second, or
	// less if the check's context ends first.
	recallAttempts = 20
	// grantBatch bounds the grants of one round trip, grantsInFlight the
	// round trips of grants at once (see package batch).
	grantBatch     = 256
	grantsInFlight = 2
	// callTimeout bounds a batch of calls whose callers have no deadline.
	callTimeout = 5 * time.Second
)

// Leaser is the store side of leases; the PostgreSQL ledger implements it.
// A process is named in the store as a holder, alive while it runs. Every
// call that changes a lease carries a number (Seq) above those of the
// holder's earlier calls on it; the store applies it only if it is above
// the last one applied there.
type Leaser interface {
	// Lease makes every grant of r (at most one per counter), in as few
	// round trips as it can: each asks for Need units of Key, and up to
	// Extra more to hold, if Need fits within Bound, and its results are
	// filled in. When nothing is granted and other live processes hold
	// units unused, the store asks them to give them back if Recall is set;
	// when none does, it remembers that this process may deny checks from
	// memory, and tells it (a freed notification) once units come back. An
	// error fails every grant of r, each perhaps applied.
	Lease(ctx context.Context, r []Request) error
	// Settle ends this process's leases s: their unused units are given
	// back. A lease the store no longer holds (a reset ended it) gives
	// nothing back.
	Settle(ctx context.Context, s []Settlement) error
	// Report records how many units this process holds unused in leases
	// s, and marks those the store no longer holds as Lost.
	Report(ctx context.Context, s []Settlement) error
	// Resolve tells, for each of d, whether this process's call d.Seq on
	// its lease of d.Key was applied, fences it off if it was not (a copy
	// arriving later changes nothing), and fills in the lease as the store
	// holds it now. It changes no counter.
	Resolve(ctx context.Context, d []Resolution) error
	// Recall asks the other live processes holding units of k unused to
	// settle their leases, and returns how many such leases there are.
	Recall(ctx context.Context, k quota.CounterKey) (int, error)
	// Alone reports whether no other process runs on the store: then no
	// one but this process reads what its leases report.
	Alone(ctx context.Context) (bool, error)
}

// Store is what a Pool needs of the store: counting, and leases.
type Store interface {
	quota.Counts
	Leaser
}

// Request is a Lease call: what is asked, then what was granted.
type Request struct {
	Key   quota.CounterKey
	Seq   int64 // the call's number
	Bound int64 // the counter never goes above it: the window's limit
	Need  int64 // units the asking check needs now: all or none
	Extra int64 // units to hold beyond Need, at most
	// InFlight is how many units, besides what the grant leaves over,
	// this process may yet hold unused in the lease: units checks in
	// progress took from it (the asking one included), which they put
	// back if they are denied in another window. The lease reports them
	// as unused, so that what it reports never falls short.
	InFlight int64
	Held     bool // this process believes it holds a lease of Key
	Recall   bool // recall other processes' units if nothing is granted
	// Global, where the metric declares a capacity for the window (else
	// its Metric is ""), counts the granted units at once.
	Global quota.GlobalKey

	Granted int64 // 0, or between Need and Need+Extra
	Used    int64 // the counter after the grant: admitted and leased units
	Others  int64 // units other live processes report holding unused
	Lost    bool  // Held, but the store has no such lease: nothing granted
	Gone    bool  // the customer (or the metric) was deleted: nothing granted
}

// RecallHelps reports whether a grant that gave nothing would pass once
// other live processes give back the units they hold unused: worth
// waiting for, after the store recalled them.
func (r *Request) RecallHelps() bool {
	return r.Granted == 0 && !r.Lost && !r.Gone && r.Others > 0 && r.Need <= r.Bound-r.Used+r.Others
}

// Settlement is one of this process's leases as it stands, in a Settle or
// a Report call.
type Settlement struct {
	Key    quota.CounterKey
	Seq    int64 // the call's number for this lease
	Unused int64
	Global quota.GlobalKey // as granted: settling gives the units back there too
	Lost   bool            // Report: the store no longer holds this lease
}

// Resolution asks about one call whose answer was lost, then tells.
type Resolution struct {
	Key quota.CounterKey
	Seq int64 // the call in doubt

	Applied bool  // the store applied the call
	Held    bool  // the store holds a lease of this process's here now
	Unused  int64 // what it counts that lease to hold unused
	Granted int64 // Applied, and the call a grant: what it granted
}

// block is the most units a lease holds for a window whose bound is b.
func block(b int64) int64 { return max(1, b/100) }
