// Package lease serves quotad's long windows (hour, day, week, month, total) at
// memory speed, exactly across processes: a Pool holds blocks of each
// counter's units, leased from the PostgreSQL ledger (a Leaser), and
// admits checks from them in memory. To the quota engine it is the
// counter of long windows (quota.Leases); the rules that keep it exact
// are in docs/design.md.
package lease

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// Leases serve long windows at memory speed: a process (a holder) admits
// checks in memory from blocks of a counter's units it leased from the
// store. docs/design.md, "Leases: long windows at memory speed", states
// once the rules that keep this exact (never over-granted, nothing
// stranded, unused units given back and reported, numbered calls resolved
// when their answer is lost, denials from memory, beyond a limit the
// ledger decides); this package implements them.

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
	Leased   bool // this process believes it holds a lease of Key
	Recall   bool // recall other processes' units if nothing is granted
	// Global, where the metric declares a capacity for the window (else
	// its Metric is ""), counts the granted units at once.
	Global quota.GlobalKey

	Granted int64 // 0, or between Need and Need+Extra
	Used    int64 // the counter after the grant: admitted and leased units
	Others  int64 // units other live processes report holding unused
	Lost    bool  // Leased, but the store has no such lease: nothing granted
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
	Leased  bool  // the store holds a lease of this process's here now
	Unused  int64 // what it counts that lease to hold unused
	Granted int64 // Applied, and the call a grant: what it granted
}

// block is the most units a lease holds for a window whose bound is b.
func block(b int64) int64 { return max(1, b/100) }
