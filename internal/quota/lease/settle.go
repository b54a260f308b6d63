package lease

import (
	"context"
	"errors"
	"github.com/quotad/quotad/internal/quota"
)

// Calls that end leases (settle), tell the store what they hold (report)
// and ask what happened to a call whose answer was lost (resolve), for
// one lease or many at once.

// gather is leases gathered for one store call, each with its part of the
// call: they are busy until it ends.
type gather[T any] struct {
	busy   chan struct{}
	leases []*lease
	calls  []T
}

func newGather[T any]() *gather[T] { return &gather[T]{busy: make(chan struct{})} }

func (b *gather[T]) add(l *lease, call T) {
	b.leases = append(b.leases, l)
	b.calls = append(b.calls, call)
}

// settleNow gives l's unused units back and drops it, after resolving a
// call of it in doubt, and waiting for a call in flight. It returns how
// many store calls it made.
func (p *Pool) settleNow(ctx context.Context, l *lease) (int, error) {
	trips := 0
	for {
		b := newGather[Settlement]()
		st, busy, s := l.beginSettle(p.nextSeq, b.busy)
		switch st {
		case settleNothing:
			return trips, nil
		case settleWait:
			if err := waitFor(ctx, busy); err != nil {
				return trips, err
			}
			continue
		case settleResolve:
			r := newGather[Resolution]()
			if res, ok := l.beginResolve(r.busy); ok {
				r.add(l, res)
				trips++
				if err := p.resolve(ctx, r); err != nil {
					return trips, err
				}
			}
			continue
		}
		b.add(l, s)
		return trips + 1, p.settle(ctx, b)
	}
}

// settle settles b's leases: they go. If the store cannot be told, they
// stay with their units in limbo, not to be spent (the store may have
// applied the settlement before failing), until a resolution tells.
func (p *Pool) settle(ctx context.Context, b *gather[Settlement]) error {
	defer close(b.busy) // once every lease is free again
	if len(b.leases) == 0 {
		return nil
	}
	err := p.store.Settle(ctx, b.calls)
	for j, l := range b.leases {
		if back := l.settleLanded(b.calls[j], err); back > 0 {
			p.returnToStore(ctx, l, back)
		}
	}
	return err
}

// report tells the store what b's leases hold unused (reports change only
// this process's own leases: no order needed).
func (p *Pool) report(ctx context.Context, b *gather[Settlement]) error {
	defer close(b.busy)
	if len(b.leases) == 0 {
		return nil
	}
	err := p.store.Report(ctx, b.calls)
	for j, l := range b.leases {
		l.reportLanded(b.calls[j], err)
	}
	return err
}

// resolve asks the store what became of b's calls in doubt, and applies
// what it tells.
func (p *Pool) resolve(ctx context.Context, b *gather[Resolution]) error {
	defer close(b.busy)
	if len(b.leases) == 0 {
		return nil
	}
	err := p.store.Resolve(ctx, b.calls)
	for j, l := range b.leases {
		if back := l.resolved(b.calls[j], err); back > 0 {
			p.returnToStore(ctx, l, back)
		}
	}
	return err
}

// Yield settles this process's lease of k, because another process
// recalled its units. On failure the lease stays, to be resolved and
// settled later.
func (p *Pool) Yield(ctx context.Context, k quota.CounterKey) error {
	l := p.leases.existing(k)
	if l == nil {
		return nil
	}
	if l.spendable() > 0 {
		p.yielded.Add(1)
	}
	_, err := p.settleNow(ctx, l)
	return err
}

// Close resolves every call in doubt, settles every lease and writes the
// global usage counted: on shutdown, units held unused go back.
func (p *Pool) Close(ctx context.Context) error {
	resolving := newGather[Resolution]()
	p.leases.each(func(l *lease) {
		if r, ok := l.beginResolve(resolving.busy); ok {
			resolving.add(l, r)
		}
	})
	err := p.resolve(ctx, resolving)
	settling := newGather[Settlement]()
	p.leases.each(func(l *lease) {
		if st, _, s := l.beginSettle(p.nextSeq, settling.busy); st == settleSend {
			settling.add(l, s)
		}
	})
	return errors.Join(err, p.settle(ctx, settling), p.FlushGlobals(ctx))
}
