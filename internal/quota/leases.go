package quota

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/batch"
)

// Leases serve long windows at memory speed: package lease's Pool, over
// the ledger, holds blocks of each counter's units and admits checks from
// them in memory (see its rules). To the engine it is the counter of long
// windows, with what only leases need besides: reading counters as
// admitted units (its own unused units left out), bringing leases home
// before a settlement's give-back in a ledger transaction, its periodic
// upkeep, giving every unit back on shutdown, and dropping leases a reset
// or a deletion ended. Implementations are safe for concurrent use.
type Leases interface {
	Counter
	// Read returns the admitted units of counters and the global usage of
	// globals, as Counts.Read does, counting this process's leases too.
	Read(ctx context.Context, counters []CounterKey, globals []GlobalKey) (used, global []int64, err error)
	// Reclaim brings home the leases of cs's counters (this process's and
	// other processes'), so that the ledger counts admitted units only.
	Reclaim(ctx context.Context, cs []Charge) error
	// Flush does the periodic work at now; Run calls it every FlushEvery.
	Flush(ctx context.Context, now time.Time) error
	// Close gives every unit held unused back: on shutdown.
	Close(ctx context.Context) error
	// Forget is told that a reset or a deletion ended this process's
	// leases of a customer's metric (of all its metrics when metric is "").
	Forget(customer, metric string)
	Stats() LeaseStats
}

// Lease timing.
const (
	// FlushEvery is how often leases are kept (Leases.Flush): calls in
	// doubt resolved, idle leases' unused units reported, the global usage
	// counted written, idle leases settled. Usage reads are exact at most
	// 2 × FlushEvery after traffic stops.
	FlushEvery = 500 * time.Millisecond
	// IdleAfter is how long a lease goes unused before its units are
	// given back. Other processes need not wait for it (they recall
	// units), nor do usage reads (leases report their unused units once
	// idle for FlushEvery); a customer who checks less often than this
	// reserves a block, a commit, on every check.
	IdleAfter = 30 * time.Second
)

// LeaseStats are the lease pool's counters for monitoring.
type LeaseStats struct {
	Refills uint64 // leases granted or topped up
	Recalls uint64 // checks that asked other processes for units
	Yielded uint64 // leases this process gave back when other processes recalled them
	// DeniedFromMemory counts spans denied without a store call: their
	// counter was full and no other process held units of it.
	DeniedFromMemory uint64
	Leases           int64 // leases held
	Units            int64 // units held unused in them
	InDoubt          int64 // leases with a call whose answer was lost
	// Unreturned is at most what the store counts this process's leases
	// to hold unused, or may (a give-back in doubt): units a process that
	// ends now leaves counted until their windows end.
	Unreturned int64
	// Grants counts the statements grants went in, and the grants.
	Grants batch.Stats
}
