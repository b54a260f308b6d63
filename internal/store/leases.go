package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Leases are granted, settled and recalled by the functions of migration
// 000003, each one round trip that takes the counter's row lock first. A
// process is a holder, named by a random key; it holds the advisory lock of
// that key on its listening session (see Listener), so that the others
// know it runs and hears their recalls.

// Lease implements quota.Leaser.
func (db *DB) Lease(ctx context.Context, r *quota.LeaseRequest) error {
	const q = `SELECT o_granted, o_used, o_others, o_lost
		FROM quotad_lease($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	var channel, payload *string
	if r.Recall {
		ch, pl := db.channel, NotifyRecall+":"+db.instance+":"+CounterKeyString(r.Key)
		channel, payload = &ch, &pl
	}
	k := r.Key
	err := db.pool.QueryRow(ctx, q, k.Customer, k.Metric, k.Window.String(), k.Start, db.holder,
		r.Threshold, r.Need, r.Extra, r.InFlight, r.Held, globalStart(r.Global), channel, payload).Scan(&r.Granted, &r.Used, &r.Others, &r.Lost)
	switch {
	case isCode(err, "23503"): // the customer (or metric) is gone
		return tiers.ErrCustomerNotFound
	case err != nil:
		return fmt.Errorf("lease %s: %w", CounterKeyString(k), mapErr(err))
	}
	return nil
}

// Settle implements quota.Leaser, in batches, committed without waiting
// for the disk: a settlement lost in a crash of PostgreSQL only leaves
// units counted that were not used, never the other way round.
func (db *DB) Settle(ctx context.Context, s []quota.Settlement) error {
	const q = `SELECT quotad_settle($1, $2, $3, $4, $5, $6, $7)`
	return db.leaseBatches(ctx, s, func(b *pgx.Batch, x quota.Settlement) {
		b.Queue(q, x.Key.Customer, x.Key.Metric, x.Key.Window.String(), x.Key.Start, db.holder, x.Unused,
			globalStart(x.Global))
	}, func(res pgx.BatchResults, _ *quota.Settlement) error {
		_, err := res.Exec()
		return err
	})
}

// Report implements quota.Leaser, as Settle does.
func (db *DB) Report(ctx context.Context, s []quota.Settlement) error {
	const q = `
		UPDATE counter_leases SET unused = $6
		WHERE customer_id = $1 AND metric = $2 AND quota_window = $3 AND window_start = $4 AND holder = $5`
	return db.leaseBatches(ctx, s, func(b *pgx.Batch, x quota.Settlement) {
		b.Queue(q, x.Key.Customer, x.Key.Metric, x.Key.Window.String(), x.Key.Start, db.holder, x.Unused)
	}, func(res pgx.BatchResults, x *quota.Settlement) error {
		tag, err := res.Exec()
		x.Lost = err == nil && tag.RowsAffected() == 0
		return err
	})
}

// leaseBatch is how many settlements one transaction carries: the counter
// rows it locks stay locked until it commits.
const leaseBatch = 256

// leaseBatches runs one statement per settlement, leaseBatch of them per
// transaction, in the order given (callers sort them as the counters are
// ordered, so that concurrent batches lock in the same order).
func (db *DB) leaseBatches(ctx context.Context, s []quota.Settlement,
	queue func(*pgx.Batch, quota.Settlement), read func(pgx.BatchResults, *quota.Settlement) error) error {
	for len(s) > 0 {
		n := min(len(s), leaseBatch)
		chunk := s[:n]
		s = s[n:]
		err := db.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
				return err
			}
			b := &pgx.Batch{}
			for _, x := range chunk {
				queue(b, x)
			}
			res := tx.SendBatch(ctx, b)
			for i := range chunk {
				if err := read(res, &chunk[i]); err != nil {
					res.Close()
					return err
				}
			}
			return res.Close()
		})
		if err != nil {
			return fmt.Errorf("settle leases: %w", mapErr(err))
		}
	}
	return nil
}

// globalStart is the start of a lease's global window, or NULL where the
// metric declares no capacity for it.
func globalStart(g quota.GlobalKey) *time.Time {
	if g.Metric == "" {
		return nil
	}
	return &g.Start
}

// Recall implements quota.Leaser.
func (db *DB) Recall(ctx context.Context, k quota.CounterKey) (int, error) {
	const q = `SELECT quotad_recall($1, $2, $3, $4, $5, $6, $7)`
	var n int
	err := db.pool.QueryRow(ctx, q, k.Customer, k.Metric, k.Window.String(), k.Start, db.holder,
		db.channel, NotifyRecall+":"+db.instance+":"+CounterKeyString(k)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("recall %s: %w", CounterKeyString(k), mapErr(err))
	}
	return n, nil
}

// CounterKeyString names a counter in a notification:
// customer/metric/window/start, start in Unix seconds (window starts are
// whole seconds; customer ids and metric keys hold no slash).
func CounterKeyString(k quota.CounterKey) string {
	return k.Customer + "/" + k.Metric + "/" + k.Window.String() + "/" + strconv.FormatInt(k.Start.Unix(), 10)
}

// ParseCounterKey reads what CounterKeyString wrote.
func ParseCounterKey(s string) (quota.CounterKey, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return quota.CounterKey{}, false
	}
	w, ok := tiers.ParseWindow(parts[2])
	start, err := strconv.ParseInt(parts[3], 10, 64)
	if !ok || err != nil || w.Short() {
		return quota.CounterKey{}, false
	}
	return quota.CounterKey{Customer: parts[0], Metric: parts[1], Window: w, Start: time.Unix(start, 0).UTC()}, true
}
