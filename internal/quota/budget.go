package quota

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// budget is the context of one check's calls to the stores: the values of
// the check's context without its cancellation (a client that hangs up
// does not cut short a grant the store may be committing), bounded by a
// deadline. context.WithTimeout would do, but it arms a timer for every
// check; a budget arms one only when a call first waits on it, so that a
// check answered from memory, most of them, pays for none.
//
// A budget no one looked at (nothing called its methods: a check answered
// from memory) may serve the next check of its scope (see scope.budgetFor);
// one that was looked at may be held on to by what looked (a connection
// being made for it, say), and is never used again.
//
// A budget may also end before its deadline: when alive (see Liveness)
// ends, the store having been judged silent.
type budget struct {
	parent   context.Context
	deadline time.Time
	alive    context.Context // nil: only the deadline ends the budget

	seen   atomic.Bool // a method was called: it must not serve another check
	armed  atomic.Bool // a timer was started: stop has one to stop
	mu     sync.Mutex
	values context.Context // parent without its cancellation, made on the first Value
	done   chan struct{}   // made on the first Done or AfterFunc
	timer  *time.Timer
	unhook func() bool    // stops watching alive, once armed
	err    error          // set once the deadline passed, or alive ended
	after  map[int]func() // AfterFunc's functions not yet run or stopped
	next   int
}

// newBudget returns the budget of a check of ctx that may wait d for the
// stores, or until alive ends (when not nil). Call stop once the check is
// answered.
func newBudget(ctx context.Context, d time.Duration, alive context.Context) *budget {
	return &budget{parent: ctx, deadline: time.Now().Add(d), alive: alive}
}

// Deadline implements context.Context.
func (b *budget) Deadline() (time.Time, bool) {
	b.seen.Store(true)
	return b.deadline, true
}

// Value implements context.Context: the check's values (not its
// cancellation, which the context package also finds through Value).
func (b *budget) Value(key any) any {
	b.seen.Store(true)
	b.mu.Lock()
	if b.values == nil {
		b.values = context.WithoutCancel(b.parent)
	}
	v := b.values
	b.mu.Unlock()
	return v.Value(key)
}

// Done implements context.Context.
func (b *budget) Done() <-chan struct{} {
	b.seen.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armLocked()
	return b.done
}

// Err implements context.Context.
func (b *budget) Err() error {
	b.seen.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil && b.done == nil && (!time.Now().Before(b.deadline) || b.alive != nil && b.alive.Err() != nil) {
		// Nothing waits yet, but the time is up all the same.
		b.armLocked()
	}
	return b.err
}

// AfterFunc arranges for f to run in a goroutine of its own once the
// deadline passes, and returns a function that stops that; the context
// package uses it to end contexts derived from the budget without a
// goroutine of its own each.
func (b *budget) AfterFunc(f func()) (stop func() bool) {
	b.seen.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armLocked()
	if b.err != nil {
		go f()
		return func() bool { return false }
	}
	id := b.next
	b.next++
	if b.after == nil {
		b.after = map[int]func(){}
	}
	b.after[id] = f
	return func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		_, waiting := b.after[id]
		delete(b.after, id)
		return waiting
	}
}

// armLocked makes the done channel and starts the timer that closes it
// (and watches alive), or closes it now if the deadline passed or alive
// ended; b.mu is held.
func (b *budget) armLocked() {
	if b.done != nil {
		return
	}
	b.done = make(chan struct{})
	if d := time.Until(b.deadline); d > 0 && (b.alive == nil || b.alive.Err() == nil) {
		b.timer = time.AfterFunc(d, b.expire)
		if b.alive != nil {
			b.unhook = context.AfterFunc(b.alive, b.expire)
		}
		b.armed.Store(true)
		return
	}
	b.expireLocked()
}

func (b *budget) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked()
}

// expireLocked ends the budget; b.mu is held.
func (b *budget) expireLocked() {
	if b.err != nil {
		return
	}
	b.err = context.DeadlineExceeded
	close(b.done)
	for id, f := range b.after {
		delete(b.after, id)
		go f()
	}
}

// stop releases the budget's timer, if one was started: the check is
// answered. Contexts derived from it end as it would have.
func (b *budget) stop() {
	if !b.armed.Load() {
		return // the common case: no call waited
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.unhook != nil {
		b.unhook()
	}
}

var _ context.Context = (*budget)(nil)
