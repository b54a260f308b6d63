package quota

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// LeasePool is a Counter of long windows that answers from leases over a
// LeaseStore (see the rules at the top of lease.go). It is safe for
// concurrent use. Run its periodic work with Flush. Its work is split by
// job: the leases themselves (leasestate.go), checks (leasetake.go),
// decisions beyond a limit (leasedirect.go), calls that end, report and
// resolve leases (leasesettle.go), and the periodic flush (leaseflush.go).
type LeasePool struct {
	store  LeaseStore
	clock  Clock
	seed   maphash.Seed
	shards [leaseShards]leaseShard
	tick   atomic.Int64
	// seq numbers store calls on leases: it starts at the wall clock in
	// nanoseconds, so that calls of a process that restarted under the
	// same holder name still come after its earlier ones.
	seq atomic.Int64
	// freed counts notifications that units came back to some counter: a
	// refusal marks a counter full only if none came while it was asked.
	freed   atomic.Uint64
	globals globalBuffer
	// grants gathers the grants checks ask for while others are in flight.
	grants batcher[LeaseRequest]

	refills, recalls, released, fromMemory atomic.Uint64

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
	n  int64    // leases in m
	_  [40]byte // 64 bytes: a cache line
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

// remove drops l, hashed h.
func (sh *leaseShard) remove(h uint64, l *lease) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ls := sh.m[h]
	for i, x := range ls {
		if x == l {
			ls[i] = ls[len(ls)-1]
			ls = ls[:len(ls)-1]
			sh.n--
			break
		}
	}
	if len(ls) == 0 {
		delete(sh.m, h)
	} else {
		sh.m[h] = ls
	}
}

// all returns every lease.
func (sh *leaseShard) all() []*lease {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := make([]*lease, 0, sh.n)
	for _, ls := range sh.m {
		out = append(out, ls...)
	}
	return out
}

// NewLeasePool returns a pool of leases over store, timed by clock.
func NewLeasePool(store LeaseStore, clock Clock) *LeasePool {
	p := &LeasePool{store: store, clock: clock, seed: maphash.MakeSeed(),
		globals: globalBuffer{m: map[GlobalKey]int64{}}, Wait: backoff, IdleAfter: IdleAfter}
	p.seq.Store(time.Now().UnixNano())
	p.grants = batcher[LeaseRequest]{send: store.Lease, max: grantBatch, inFlight: grantsInFlight, timeout: backgroundTimeout}
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

// nextSeq numbers a store call on a lease.
func (p *LeasePool) nextSeq() int64 { return p.seq.Add(1) }

// each calls f for every lease.
func (p *LeasePool) each(f func(*lease)) {
	for i := range p.shards {
		for _, l := range p.shards[i].all() {
			f(l)
		}
	}
}

// Stats returns the pool's counters. It visits every lease.
func (p *LeasePool) Stats() LeaseStats {
	s := LeaseStats{Refills: p.refills.Load(), Recalls: p.recalls.Load(), Released: p.released.Load(),
		DeniedFromMemory: p.fromMemory.Load(), Grants: p.grants.stats()}
	p.each(func(l *lease) {
		s.Leases++
		s.Units += l.spendable()
		if l.inDoubt() {
			s.InDoubt++
		}
	})
	return s
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
	if k.Subject != "" {
		h ^= maphash.String(p.seed, k.Subject) * 0x94d049bb133111eb
	}
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
		l = newLease(sp, sh, h, p.tick.Load())
		sh.m[h] = append(sh.m[h], l)
		sh.n++
	}
	return l
}

// Forget is told that a reset or a deletion ended this process's leases
// of a customer's metric (of all its metrics when metric is "") in the
// store, with their units: none of their units is spent until the store
// says which still hold (those granted after it, before this process
// heard of it).
func (p *LeasePool) Forget(customer, metric string) {
	p.each(func(l *lease) {
		if l.key.Customer == customer && (metric == "" || l.key.Metric == metric) {
			l.suspect()
		}
	})
}

// Freed tells the pool that units came back to counter k (a settlement,
// a report of more unused units, a refund): a lease that knew it full
// asks the store again.
func (p *LeasePool) Freed(k CounterKey) {
	p.freed.Add(1)
	if l := p.existing(k); l != nil {
		l.clearFull()
	}
}

// ClearMarks forgets every counter known full: the process may have
// missed that units came back (its notifications were interrupted).
func (p *LeasePool) ClearMarks() {
	p.freed.Add(1)
	p.each(func(l *lease) { l.clearFull() })
}

// waitFor waits until busy is closed, or ctx ends: then the store could
// not be had within the check's time.
func waitFor(ctx context.Context, busy chan struct{}) error {
	select {
	case <-busy:
		return nil
	case <-ctx.Done():
		return outOfTime(ctx.Err())
	}
}

// outOfTime reports a wait that ctx cut short as the store being
// unreachable in time: the check then fails as an outage would have it.
func outOfTime(err error) error {
	return fmt.Errorf("%w: waiting for the store: %w", tiers.ErrUnavailable, err)
}

var _ Counter = (*LeasePool)(nil)
