package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// Leases are granted, settled, reported, resolved and recalled by the
// functions of the migrations (see "Leases" among them, and "Where the
// functions live" in docs/operations.md), each one round trip that takes the counters'
// row locks first. A process is a holder, named by a random key; it holds
// the advisory lock of that key on its listening session (see Listener),
// so that the others know it runs and hears their recalls. Every call that changes a lease carries the pool's number for
// it (see lease.Leaser), which the functions compare with the lease row's.

// Lease implements lease.Leaser: leaseBatch grants per statement, each
// statement a transaction of its own.
func (l *Ledger) Lease(ctx context.Context, r []lease.Request) error {
	const q = `SELECT o_i, o_granted, o_used, o_others, o_lost, o_gone
		FROM quotad_lease_all($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`
	for len(r) > 0 {
		batch := r[:min(len(r), leaseBatch)]
		r = r[len(batch):]
		var a leaseArrays
		n := len(batch)
		bounds, needs, extras, inflights := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		// leased goes to p_helds: the SQL keeps the column's name, held.
		leased, payloads := make([]bool, n), make([]string, n)
		recall := false
		for i, x := range batch {
			a.add(x.Key, x.Seq, 0, x.Global)
			bounds[i], needs[i], extras[i], inflights[i], leased[i] = x.Bound, x.Need, x.Extra, x.InFlight, x.Leased
			payloads[i] = l.core.payload(NotifyRecall, CounterKeyString(x.Key))
			recall = recall || x.Recall
		}
		var channel *string
		if recall { // one asks for recalls, every one of the batch does (see the pool)
			channel = &l.core.channel
		}
		err := retry(func() error {
			rows, err := l.core.pool.Query(ctx, q, a.customers, a.metrics, a.subjects, a.windows, a.starts, l.core.holderID(),
				a.seqs, bounds, needs, extras, inflights, leased, a.globals, channel, payloads)
			if err != nil {
				return err
			}
			var i int32
			var g lease.Request
			_, err = pgx.ForEachRow(rows, []any{&i, &g.Granted, &g.Used, &g.Others, &g.Lost, &g.Gone}, func() error {
				x := &batch[i-1]
				x.Granted, x.Used, x.Others, x.Lost, x.Gone = g.Granted, g.Used, g.Others, g.Lost, g.Gone
				return nil
			})
			return err
		})
		switch {
		case isCode(err, "23503") && len(batch) > 1:
			// A customer (or metric) went while the batch ran: each
			// grant again alone, so that only its own check learns it.
			for i := range batch {
				if err := l.Lease(ctx, batch[i:i+1]); err != nil && !errors.Is(err, tiers.ErrCustomerNotFound) {
					return err
				} else if err != nil {
					batch[i].Gone = true
				}
			}
		case isCode(err, "23503"):
			return tiers.ErrCustomerNotFound
		case err != nil:
			return fmt.Errorf("lease %d counters: %w", len(batch), mapErr(err))
		}
	}
	return nil
}

// Settle implements lease.Leaser: one call settles them all; their
// counters are locked first, then global usage.
func (l *Ledger) Settle(ctx context.Context, s []lease.Settlement) error {
	return l.leaseBatches(ctx, "settle", s, func(ctx context.Context, s []lease.Settlement, a leaseArrays) error {
		_, err := l.core.pool.Exec(ctx, `SELECT quotad_settle_all($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			a.customers, a.metrics, a.subjects, a.windows, a.starts, l.core.holderID(), a.seqs, a.unused, a.globals,
			l.core.channel, l.freedPayloads(s))
		return err
	})
}

// Report implements lease.Leaser, in one statement.
func (l *Ledger) Report(ctx context.Context, s []lease.Settlement) error {
	return l.leaseBatches(ctx, "report", s, func(ctx context.Context, s []lease.Settlement, a leaseArrays) error {
		rows, err := l.core.pool.Query(ctx, `SELECT quotad_report($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			a.customers, a.metrics, a.subjects, a.windows, a.starts, l.core.holderID(), a.seqs, a.unused,
			l.core.channel, l.freedPayloads(s))
		if err != nil {
			return err
		}
		lost, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		for _, i := range lost {
			s[i-1].Lost = true
		}
		return nil
	})
}

// Resolve implements lease.Leaser, in one statement per leaseBatch calls.
func (l *Ledger) Resolve(ctx context.Context, d []lease.Resolution) error {
	const q = `SELECT o_i, o_applied, o_held, o_unused, o_granted FROM quotad_resolve($1, $2, $3, $4, $5, $6, $7)`
	for len(d) > 0 {
		batch := d[:min(len(d), leaseBatch)]
		d = d[len(batch):]
		a := leaseArrays{}
		for _, x := range batch {
			a.add(x.Key, x.Seq, 0, quota.GlobalKey{})
		}
		err := retry(func() error {
			rows, err := l.core.pool.Query(ctx, q, a.customers, a.metrics, a.subjects, a.windows, a.starts, l.core.holderID(), a.seqs)
			if err != nil {
				return err
			}
			var i int32
			var r lease.Resolution // o_held is r.Leased
			_, err = pgx.ForEachRow(rows, []any{&i, &r.Applied, &r.Leased, &r.Unused, &r.Granted}, func() error {
				x := &batch[i-1]
				x.Applied, x.Leased, x.Unused, x.Granted = r.Applied, r.Leased, r.Unused, r.Granted
				return nil
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("resolve lease calls: %w", mapErr(err))
		}
	}
	return nil
}

// freedPayloads returns, for each of s, the notification that units came
// back to its counter.
func (l *Ledger) freedPayloads(s []lease.Settlement) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = l.freedPayload(x.Key)
	}
	return out
}

// freedPayload is the notification that units came back to counter k.
func (l *Ledger) freedPayload(k quota.CounterKey) string {
	return l.core.payload(NotifyFreed, CounterKeyString(k))
}

// leaseBatches runs fn on s, leaseBatch settlements at a time, each batch
// one statement in a transaction of its own (tried again after a
// deadlock), one round trip. quotad_settle_all and quotad_report have
// their transactions commit without waiting for the disk: a settlement or
// a report lost in a crash of PostgreSQL only leaves units counted, or
// reported unused, that were not, never the other way round.
func (l *Ledger) leaseBatches(ctx context.Context, op string, s []lease.Settlement,
	fn func(ctx context.Context, s []lease.Settlement, a leaseArrays) error) error {
	for len(s) > 0 {
		n := min(len(s), leaseBatch)
		batch := s[:n]
		s = s[n:]
		a := toLeaseArrays(batch)
		if err := retry(func() error { return fn(ctx, batch, a) }); err != nil {
			return fmt.Errorf("%s leases: %w", op, mapErr(err))
		}
	}
	return nil
}

// leaseBatch is how many leases one transaction settles or reports: the
// counters a settlement locks stay locked until it commits.
const leaseBatch = 1000

// leaseArrays are lease calls as columns, for the functions that take
// many at once.
type leaseArrays struct {
	customers, metrics, subjects, windows []string
	starts                                []time.Time
	seqs, unused                          []int64
	globals                               []*time.Time
}

func (a *leaseArrays) add(k quota.CounterKey, seq, unused int64, g quota.GlobalKey) {
	a.customers = append(a.customers, k.Customer)
	a.metrics = append(a.metrics, k.Metric)
	a.subjects = append(a.subjects, k.Subject)
	a.windows = append(a.windows, k.Window.String())
	a.starts = append(a.starts, k.Start)
	a.seqs = append(a.seqs, seq)
	a.unused = append(a.unused, unused)
	a.globals = append(a.globals, globalStart(g))
}

func toLeaseArrays(s []lease.Settlement) leaseArrays {
	var a leaseArrays
	for _, x := range s {
		a.add(x.Key, x.Seq, x.Unused, x.Global)
	}
	return a
}

// Alone implements lease.Leaser.
func (l *Ledger) Alone(ctx context.Context) (bool, error) {
	var others bool
	if err := l.core.pool.QueryRow(ctx, `SELECT quotad_others_alive($1)`, l.core.holderID()).Scan(&others); err != nil {
		return false, fmt.Errorf("look for other processes: %w", mapErr(err))
	}
	return !others, nil
}

// Recall implements lease.Leaser.
func (l *Ledger) Recall(ctx context.Context, k quota.CounterKey) (int, error) {
	const q = `SELECT quotad_recall($1, $2, $3, $4, $5, $6, $7, $8)`
	var n int
	err := l.core.pool.QueryRow(ctx, q, k.Customer, k.Metric, k.Subject, k.Window.String(), k.Start, l.core.holderID(),
		l.core.channel, l.core.payload(NotifyRecall, CounterKeyString(k))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("recall %s: %w", CounterKeyString(k), mapErr(err))
	}
	return n, nil
}

// globalStart is the start of a lease's global window, or NULL where the
// metric declares no capacity for it.
func globalStart(g quota.GlobalKey) *time.Time {
	if g.Metric == "" {
		return nil
	}
	return &g.Start
}
