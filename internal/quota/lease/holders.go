package lease

import (
	"context"
	"errors"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// A process that dies holding leases leaves their unused units counted as
// used: no one holds them, and no one may grant them again while the
// process could still be admitting from them. The others reclaim them
// once the process has been gone for the reclaim bound, or at once when
// an admin releases it as known dead. A process that may have been taken
// for dead (its lock session was lost) spends nothing from its leases
// until the store says it still holds them (see Pool.SuspectAll).

// Holder is a process that holds, or held, leases.
type Holder struct {
	// ID is the holder's key, as logs, the list and the release name it.
	ID uint32
	// Running: its lock session is there. Self: it is this process.
	Running, Self bool
	// StartedAt is when it first took its lock; GoneSince when a process
	// first found it gone (nil while it runs, or before any noticed).
	StartedAt time.Time
	GoneSince *time.Time
	// Leases and Unused are the leases it holds and the units they held
	// unused when it last reported.
	Leases int64
	Unused int64
}

// Reclaimed is what a reclaim or a release took back.
type Reclaimed struct {
	Holders int   // holders whose every lease was taken back
	Leases  int64 // leases taken back
	Units   int64 // units no longer counted as used
}

// Errors of a release.
var (
	// ErrHolderRunning: the holder's lock session is there (or came back):
	// it runs, and keeps what it holds.
	ErrHolderRunning = errors.New("the holder is running")
	// ErrHolderSelf: the holder is the process asked.
	ErrHolderSelf = errors.New("the holder is this process")
	// ErrHolderUnknown: no holder has this key, and no lease names it.
	ErrHolderUnknown = errors.New("no holder has this key")
)

// Holders is the store's side of reclaiming.
type Holders interface {
	// List lists the holders that hold leases or are registered.
	List(ctx context.Context) ([]Holder, error)
	// ReclaimDead marks the holders found gone at now, and takes back
	// the leases of those gone since after or longer.
	ReclaimDead(ctx context.Context, now time.Time, after time.Duration) (Reclaimed, error)
	// Reclaim ends holder's lock session if it is still there, and
	// takes back its leases at once, recording actor's release at now.
	Reclaim(ctx context.Context, holder uint32, actor string, now time.Time) (Reclaimed, error)
}

// DefaultReclaimAfter is how long a holder must have been gone before the
// others reclaim its leases, unless configured.
const DefaultReclaimAfter = 30 * time.Second

// Reclaimer takes back the leases of holders gone for After, every
// ReclaimEvery(After).
type Reclaimer struct {
	Store Holders
	Clock quota.Clock
	After time.Duration
	// Reclaimed is told of every round that took something back.
	Reclaimed func(Reclaimed)
}

// ReclaimEvery is how often a process looks for dead holders: a quarter
// of the bound, between 100 ms and 5 s.
func ReclaimEvery(after time.Duration) time.Duration {
	return min(max(after/4, 100*time.Millisecond), 5*time.Second)
}

// Run reclaims until ctx ends; each round is bounded by timeout, and its
// failure passed to report.
func (r *Reclaimer) Run(ctx context.Context, timeout time.Duration, report func(error)) {
	t := time.NewTicker(ReclaimEvery(r.After))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		round, cancel := context.WithTimeout(ctx, timeout)
		got, err := r.Store.ReclaimDead(round, r.Clock.Now(), r.After)
		cancel()
		if err != nil && ctx.Err() == nil {
			report(err)
		}
		if got.Leases > 0 && r.Reclaimed != nil {
			r.Reclaimed(got)
		}
	}
}

// SuspectAll marks every lease of the pool as possibly taken back: none
// of their units is spent until the store says the lease still holds
// (see lease.suspect). The listener calls it when this process may have
// been taken for dead: its lock session was gone for a while, or it had
// to take its lock anew.
func (p *Pool) SuspectAll() {
	p.leases.each(func(l *lease) { l.suspect() })
}
