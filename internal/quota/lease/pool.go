package lease

import (
	"context"
	"fmt"
	"github.com/quotad/quotad/internal/batch"
	"github.com/quotad/quotad/internal/quota"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Pool is a quota.Counter of long windows that answers from leases over a
// Store (see the rules at the top of lease.go). It is safe for
// concurrent use. Run its periodic work with Flush. Its work is split by
// job: the leases themselves (state.go), checks (take.go), decisions
// beyond a limit (direct.go), calls that end, report and resolve leases
// (settle.go), and the periodic flush (flush.go).
type Pool struct {
	store  Store
	clock  quota.Clock
	leases index
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
	grants *batch.Group[Request]

	refills, recalls, yielded, fromMemory atomic.Uint64

	// Wait is how a check waits between attempts to get units recalled
	// from other processes: backoff from 1 to 32 ms by default. Tests may
	// replace it before the pool is used.
	Wait func(ctx context.Context, attempt int) error
	// IdleAfter is how long a lease goes unused before Flush settles it:
	// quota.IdleAfter by default.
	IdleAfter time.Duration
}

const leaseShards = 64

// index holds a pool's leases by their counter's key, over shards.
type index struct {
	seed   maphash.Seed
	shards [leaseShards]leaseShard
}

// leaseShard holds leases by their key's hash (the one that chose the
// shard), each hash's few leases compared by key: one hash per lookup.
type leaseShard struct {
	mu sync.Mutex
	m  map[uint64][]*lease
	n  int64    // leases in m
	_  [40]byte // 64 bytes: a cache line
}

// get returns the lease of k, hashed h, or nil. sh.mu must be held.
func (sh *leaseShard) get(h uint64, k quota.CounterKey) *lease {
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

// NewPool returns a pool of leases over store, timed by clock.
func NewPool(store Store, clock quota.Clock) *Pool {
	p := &Pool{store: store, clock: clock, leases: index{seed: maphash.MakeSeed()},
		globals: globalBuffer{m: map[quota.GlobalKey]int64{}}, Wait: backoff, IdleAfter: quota.IdleAfter}
	p.seq.Store(time.Now().UnixNano())
	p.grants = batch.New(store.Lease, grantBatch, grantsInFlight, callTimeout)
	for i := range p.leases.shards {
		p.leases.shards[i].m = map[uint64][]*lease{}
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

// nextSeq numbers a store call on a lease. A call draws it once it has
// claimed the lease (set busy), never before: the store ignores a call
// whose seq is not above the last one it applied there, as a late copy,
// so a seq drawn before a refill on the same lease landed would have the
// call ignored while this process takes it as applied.
func (p *Pool) nextSeq() int64 { return p.seq.Add(1) }

// each calls f for every lease.
func (x *index) each(f func(*lease)) {
	for i := range x.shards {
		for _, l := range x.shards[i].all() {
			f(l)
		}
	}
}

// Stats returns the pool's counters. It visits every lease.
func (p *Pool) Stats() quota.LeaseStats {
	s := quota.LeaseStats{Refills: p.refills.Load(), Recalls: p.recalls.Load(), Yielded: p.yielded.Load(),
		DeniedFromMemory: p.fromMemory.Load(), Grants: p.grants.Stats()}
	p.leases.each(func(l *lease) {
		s.Leases++
		s.Units += l.spendable()
		s.Unreturned += l.unreturned()
		if l.inDoubt() {
			s.InDoubt++
		}
	})
	return s
}

// Unused returns the units this process holds unused in its lease of k,
// that checks may take.
func (p *Pool) Unused(k quota.CounterKey) int64 {
	l := p.leases.existing(k)
	if l == nil {
		return 0
	}
	return l.spendable()
}

// hash hashes a counter key; its low bits choose the shard.
func (x *index) hash(k quota.CounterKey) uint64 {
	h := maphash.String(x.seed, k.Customer) ^ maphash.String(x.seed, k.Metric)*0x9e3779b97f4a7c15
	if k.Subject != "" {
		h ^= maphash.String(x.seed, k.Subject) * 0x94d049bb133111eb
	}
	h ^= (uint64(k.Window) + uint64(k.Start.Unix())<<8) * 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

func (x *index) shard(h uint64) *leaseShard { return &x.shards[h%leaseShards] }

// existing returns the lease of k, or nil.
func (x *index) existing(k quota.CounterKey) *lease {
	h := x.hash(k)
	sh := x.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.get(h, k)
}

// lookup returns the lease of sp's counter, new and empty (touched at
// tick) if there is none.
func (x *index) lookup(sp *quota.Span, tick int64) *lease {
	h := x.hash(sp.Key)
	sh := x.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	l := sh.get(h, sp.Key)
	if l == nil {
		l = newLease(sp, sh, h, tick)
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
func (p *Pool) Forget(customer, metric string) {
	p.leases.each(func(l *lease) {
		if l.key.Customer == customer && (metric == "" || l.key.Metric == metric) {
			l.suspect()
		}
	})
}

// Freed tells the pool that units came back to counter k (a settlement,
// a report of more unused units, a refund): a lease that knew it full
// asks the store again.
func (p *Pool) Freed(k quota.CounterKey) {
	p.freed.Add(1)
	if l := p.leases.existing(k); l != nil {
		l.clearFull()
	}
}

// ClearMarks forgets every counter known full: the process may have
// missed that units came back (its notifications were interrupted).
func (p *Pool) ClearMarks() {
	p.freed.Add(1)
	p.leases.each(func(l *lease) { l.clearFull() })
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

var _ quota.Counter = (*Pool)(nil)
