package quotafake

import (
	"context"
	"fmt"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// LeaseOp names a Leaser call, for Faults.
type LeaseOp string

// The Leaser calls that change the store.
const (
	OpLease   LeaseOp = "lease"
	OpSettle  LeaseOp = "settle"
	OpReport  LeaseOp = "report"
	OpResolve LeaseOp = "resolve"
)

// Fault is what becomes of one store call.
type Fault int

// The faults a call may meet.
const (
	// NoFault: the store applies the call and answers.
	NoFault Fault = iota
	// FailBefore: the call never reaches the store; it fails.
	FailBefore
	// LoseAnswer: the store applies the call, then the answer is lost; it
	// fails.
	LoseAnswer
	// Delay: the call fails at once, and reaches the store later (see
	// Store.DeliverLate), as a copy retransmitted on a connection its
	// sender gave up on.
	Delay
)

// errLost is how a call whose fault is not NoFault fails.
var errLost = fmt.Errorf("%w: the store's answer was lost", tiers.ErrUnavailable)

// OnFreed has f told (outside any lock) of counters whose units came back
// after this process was refused a grant of them with nothing to recall;
// only a live process hears it.
func (l *Ledger) OnFreed(f func(quota.CounterKey)) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.alive[l.holder] {
		l.s.freed[l.holder] = f
	}
}

// DeliverLate applies, in order, the calls a Delay fault held back, and
// returns how many there were.
func (s *Store) DeliverLate() int {
	s.mu.Lock()
	late := s.late
	s.late = nil
	s.mu.Unlock()
	for _, f := range late {
		f()
	}
	return len(late)
}

// free clears k's watched mark, telling every live process when it was
// set; s.mu is held, and the notifications go out at unlock.
func (s *Store) free(k quota.CounterKey) {
	if !s.watched[k] {
		return
	}
	delete(s.watched, k)
	for h, f := range s.freed {
		if s.alive[h] {
			s.notes = append(s.notes, func() { f(k) })
		}
	}
}

// unlock unlocks s.mu, then sends the notifications queued meanwhile.
func (s *Store) unlock() {
	notes := s.notes
	s.notes = nil
	s.mu.Unlock()
	for _, f := range notes {
		f()
	}
}

// call runs apply for op as its fault decides. apply runs with s.mu held
// on what it is given; for a lost answer or a late copy it is given a
// copy, so that the caller sees nothing of the result.
func call[T any](l *Ledger, op LeaseOp, arg T, clone func(T) T, apply func(T)) error {
	fault := NoFault
	if l.Faults != nil {
		fault = l.Faults(op)
	}
	if fault == FailBefore {
		return errLost
	}
	if err := l.lock(); err != nil {
		return err
	}
	switch fault {
	case LoseAnswer:
		apply(clone(arg))
		l.s.unlock()
		return errLost
	case Delay:
		c := clone(arg)
		l.s.late = append(l.s.late, func() {
			l.s.mu.Lock()
			apply(c)
			l.s.unlock()
		})
		l.s.unlock()
		return errLost
	}
	apply(arg)
	l.s.unlock()
	return nil
}

func cloneSlice[T any](s []T) []T { return append([]T(nil), s...) }

// Lease implements lease.Leaser: the grants of r are one call, which meets
// one fault.
func (l *Ledger) Lease(_ context.Context, r []lease.Request) error {
	return call(l, OpLease, r, cloneSlice, func(r []lease.Request) {
		for i := range r {
			l.s.lease(l.holder, &r[i])
		}
	})
}

// lease applies holder's Lease call; s.mu is held.
func (s *Store) lease(holder int64, r *lease.Request) {
	r.Granted, r.Used, r.Others, r.Lost = 0, 0, 0, false
	used, exists := s.counters[r.Key]
	if !exists && r.Need <= r.Bound {
		s.counters[r.Key], exists = 0, true
	}
	if !exists { // the need alone is above the bound
		r.Lost = r.Leased
		return
	}
	mine := leaseKey{r.Key, holder}
	row, ok := s.leases[mine]
	switch {
	case ok && row.seq >= r.Seq: // a late copy of a call already decided
		return
	case r.Leased && !row.leased:
		r.Used, r.Lost = used, true
		return
	}
	if used+r.Need <= r.Bound {
		r.Granted = min(r.Need+r.Extra, r.Bound-used)
		used += r.Granted
		s.counters[r.Key] = used
		s.setLease(mine, leaseRow{leased: true, unused: r.Granted - r.Need + r.InFlight, seq: r.Seq, granted: r.Granted})
		if r.Global.Metric != "" {
			s.global[r.Global] += r.Granted
		}
	}
	r.Used = used
	r.Others, _ = s.leased(r.Key, holder)
	switch {
	case r.Granted > 0:
	case r.Others > 0 && r.Recall:
		for h, f := range s.recall {
			if h != holder && s.alive[h] {
				s.notes = append(s.notes, func() { f(r.Key) })
			}
		}
	case r.Others == 0:
		s.watched[r.Key] = true
	}
}

// Settle implements lease.Leaser.
func (l *Ledger) Settle(_ context.Context, set []lease.Settlement) error {
	return call(l, OpSettle, set, cloneSlice, func(set []lease.Settlement) { l.s.settle(l.holder, set) })
}

// settle applies holder's Settle call; s.mu is held.
func (s *Store) settle(holder int64, set []lease.Settlement) {
	for _, x := range set {
		k := leaseKey{x.Key, holder}
		row, ok := s.leases[k]
		if !ok || !row.leased || row.seq >= x.Seq {
			continue
		}
		s.setLease(k, leaseRow{seq: x.Seq})
		back := min(x.Unused, s.counters[x.Key])
		s.counters[x.Key] -= back
		if x.Global.Metric != "" {
			s.global[x.Global] -= min(back, s.global[x.Global])
		}
		if back > 0 {
			s.free(x.Key)
		}
	}
}

// Report implements lease.Leaser.
func (l *Ledger) Report(_ context.Context, set []lease.Settlement) error {
	return call(l, OpReport, set, cloneSlice, func(set []lease.Settlement) { l.s.report(l.holder, set) })
}

// report applies holder's Report call; s.mu is held.
func (s *Store) report(holder int64, set []lease.Settlement) {
	for i, x := range set {
		k := leaseKey{x.Key, holder}
		row, ok := s.leases[k]
		switch {
		case !ok || !row.leased:
			set[i].Lost = true
			continue
		case row.seq >= x.Seq:
			continue
		}
		if x.Unused > row.unused {
			s.free(x.Key)
		}
		row.unused, row.seq, row.fenced = x.Unused, x.Seq, false
		s.setLease(k, row)
	}
}

// Resolve implements lease.Leaser.
func (l *Ledger) Resolve(_ context.Context, d []lease.Resolution) error {
	return call(l, OpResolve, d, cloneSlice, func(d []lease.Resolution) { l.s.resolve(l.holder, d) })
}

// resolve applies holder's Resolve call; s.mu is held.
func (s *Store) resolve(holder int64, d []lease.Resolution) {
	for i := range d {
		x := &d[i]
		k := leaseKey{x.Key, holder}
		row, ok := s.leases[k]
		x.Applied, x.Leased, x.Unused, x.Granted = false, row.leased, row.unused, 0
		switch {
		case ok && row.seq == x.Seq && !row.fenced:
			x.Applied, x.Granted = true, row.granted
		case ok && row.seq >= x.Seq:
			// Fenced off before (this resolution's answer was lost too).
		default:
			// Fenced off: a copy arriving later finds its number taken.
			// The store keeps the fence with the counter, which it
			// creates.
			if _, ok := s.counters[x.Key]; !ok {
				s.counters[x.Key] = 0
			}
			row.seq, row.fenced = x.Seq, true
			s.setLease(k, row)
		}
	}
}

// Alone implements lease.Leaser.
func (l *Ledger) Alone(context.Context) (bool, error) {
	if err := l.lock(); err != nil {
		return false, err
	}
	defer l.s.mu.Unlock()
	for h := range l.s.alive {
		if h != l.holder {
			return false, nil
		}
	}
	return true, nil
}

// Recall implements lease.Leaser.
func (l *Ledger) Recall(_ context.Context, k quota.CounterKey) (int, error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	_, n := l.s.leased(k, l.holder)
	if n > 0 {
		for h, f := range l.s.recall {
			if h != l.holder && l.s.alive[h] {
				l.s.notes = append(l.s.notes, func() { f(k) })
			}
		}
	}
	l.s.unlock()
	return n, nil
}

// Lease returns what holder h's lease of k is, as the store keeps it:
// whether the store holds it and the units it is reported to hold unused.
func (s *Store) Lease(l *Ledger, k quota.CounterKey) (leased bool, unused int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	row := s.leases[leaseKey{k, l.holder}]
	return row.leased, row.unused
}
