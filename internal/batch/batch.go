// Package batch sends calls to a store in batches, so that the calls made
// while round trips are in flight share the next one: a group commit. The
// quota engine's request-id claims and reservation writes, and the lease
// pool's grants, go through it.
package batch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Group sends calls to a store in batches, so that the calls checks make
// while round trips are in flight share the next one: a group commit. No
// timer holds a call back: a call made while fewer than inFlight batches
// are in flight goes at once; one made while they all are waits for one of
// them to return, then goes with every call that waited meanwhile (at most
// max in one batch). So an idle store costs a call one round trip, and a
// busy one gathers more calls into each.
// It is safe for concurrent use.
type Group[T any] struct {
	// send makes one batch's calls, in one round trip, and fills in their
	// results; an error fails them all.
	send     func(ctx context.Context, calls []T) error
	max      int
	inFlight int
	// timeout bounds a batch whose callers have no deadline.
	timeout time.Duration

	mu      sync.Mutex
	queue   []*call[T]
	sending int // batches in flight, or about to be

	// batches and calls count what was sent, for monitoring.
	batches, calls atomic.Uint64
}

// New returns a Group that makes its calls with send, one round trip per
// batch of at most max calls, inFlight batches at most at once, a batch
// whose callers have no deadline bounded by timeout.
func New[T any](send func(ctx context.Context, calls []T) error, max, inFlight int, timeout time.Duration) *Group[T] {
	return &Group[T]{send: send, max: max, inFlight: inFlight, timeout: timeout}
}

// Stats count a Group's round trips and the calls they carried.
type Stats struct {
	Batches uint64
	Calls   uint64
}

// Stats returns what b sent (zero for a nil Group).
func (b *Group[T]) Stats() Stats {
	if b == nil {
		return Stats{}
	}
	return Stats{Batches: b.batches.Load(), Calls: b.calls.Load()}
}

// call is one call waiting in a Group.
type call[T any] struct {
	call     T
	deadline time.Time // the caller's, or zero
	done     chan struct{}
	err      error
	// sent: in a batch on its way (guarded by the batcher's mu); gaveUp:
	// its caller left, no one reads its results.
	sent, gaveUp bool
}

// Do makes c in the next batch and returns it with its results, or the
// batch's error. If ctx ends first it returns ctx's error, wrapping
// tiers.ErrUnavailable (the store out of reach in time), and whether the
// call was sent: a call sent may have been applied, one not sent never
// will be.
func (b *Group[T]) Do(ctx context.Context, c0 T) (result T, sent bool, err error) {
	c := &call[T]{call: c0, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.sending < b.inFlight {
		b.sending++
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.call, true, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-c.done: // it came back meanwhile
		return c.call, true, c.err
	default:
	}
	c.gaveUp = true
	if !c.sent {
		for i, x := range b.queue {
			if x == c {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
	}
	return c0, c.sent, fmt.Errorf("%w: waiting for the store: %w", tiers.ErrUnavailable, ctx.Err())
}

// run sends batches until no call waits.
func (b *Group[T]) run() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.max)
		if n == 0 {
			b.sending--
			b.mu.Unlock()
			return
		}
		batch := make([]*call[T], n)
		copy(batch, b.queue)
		b.queue = b.queue[:copy(b.queue, b.queue[n:])]
		var deadline time.Time
		for _, c := range batch {
			c.sent = true
			if c.deadline.IsZero() {
				c.deadline = time.Now().Add(b.timeout)
			}
			if c.deadline.After(deadline) {
				deadline = c.deadline
			}
		}
		b.mu.Unlock()
		calls := make([]T, n)
		for i, c := range batch {
			calls[i] = c.call
		}
		// The batch serves every caller in it, so no one caller's context
		// governs it: it lasts as long as the last of them waits.
		b.batches.Add(1)
		b.calls.Add(uint64(n))
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := b.send(ctx, calls)
		cancel()
		b.mu.Lock()
		for i, c := range batch {
			c.call, c.err = calls[i], err
			close(c.done)
		}
		b.mu.Unlock()
	}
}
