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

// Leases are granted, settled and recalled by the functions of migrations
// 000003 and 000004, each one round trip that takes the counter's row
// lock first. A
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
	err := db.pool.QueryRow(ctx, q, k.Customer, k.Metric, k.Window.String(), k.Start, db.holderID(),
		r.Threshold, r.Need, r.Extra, r.InFlight, r.Held, globalStart(r.Global), channel, payload).Scan(&r.Granted, &r.Used, &r.Others, &r.Lost)
	switch {
	case isCode(err, "23503"): // the customer (or metric) is gone
		return tiers.ErrCustomerNotFound
	case err != nil:
		return fmt.Errorf("lease %s: %w", CounterKeyString(k), mapErr(err))
	}
	return nil
}

// Settle implements quota.Leaser: one call settles them all, each as
// quotad_settle; their counters are locked first, then global usage.
func (db *DB) Settle(ctx context.Context, s []quota.Settlement) error {
	return db.leaseBatches(ctx, "settle", s, func(ctx context.Context, s []quota.Settlement, a leaseArrays) error {
		_, err := db.pool.Exec(ctx, `SELECT quotad_settle_all($1, $2, $3, $4, $5, $6, $7)`,
			a.customers, a.metrics, a.windows, a.starts, db.holderID(), a.unused, a.globals)
		return err
	})
}

// Report implements quota.Leaser, in one statement.
func (db *DB) Report(ctx context.Context, s []quota.Settlement) error {
	return db.leaseBatches(ctx, "report", s, func(ctx context.Context, s []quota.Settlement, a leaseArrays) error {
		rows, err := db.pool.Query(ctx, `SELECT quotad_report($1, $2, $3, $4, $5, $6)`,
			a.customers, a.metrics, a.windows, a.starts, db.holderID(), a.unused)
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

// leaseBatches runs fn on s, leaseBatch settlements at a time, each batch
// one statement in a transaction of its own (tried again after a
// deadlock), one round trip. quotad_settle_all and quotad_report have
// their transactions commit without waiting for the disk: a settlement or
// a report lost in a crash of PostgreSQL only leaves units counted, or
// reported unused, that were not, never the other way round.
func (db *DB) leaseBatches(ctx context.Context, op string, s []quota.Settlement,
	fn func(ctx context.Context, s []quota.Settlement, a leaseArrays) error) error {
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

// leaseArrays are settlements as columns, for the functions that take
// many at once.
type leaseArrays struct {
	customers, metrics, windows []string
	starts                      []time.Time
	unused                      []int64
	globals                     []*time.Time
}

func toLeaseArrays(s []quota.Settlement) leaseArrays {
	a := leaseArrays{
		customers: make([]string, len(s)), metrics: make([]string, len(s)), windows: make([]string, len(s)),
		starts: make([]time.Time, len(s)), unused: make([]int64, len(s)), globals: make([]*time.Time, len(s)),
	}
	for i, x := range s {
		a.customers[i], a.metrics[i], a.windows[i] = x.Key.Customer, x.Key.Metric, x.Key.Window.String()
		a.starts[i], a.unused[i], a.globals[i] = x.Key.Start, x.Unused, globalStart(x.Global)
	}
	return a
}

// Alone implements quota.Leaser.
func (db *DB) Alone(ctx context.Context) (bool, error) {
	var others bool
	if err := db.pool.QueryRow(ctx, `SELECT quotad_others_alive($1)`, db.holderID()).Scan(&others); err != nil {
		return false, fmt.Errorf("look for other processes: %w", mapErr(err))
	}
	return !others, nil
}

// Recall implements quota.Leaser.
func (db *DB) Recall(ctx context.Context, k quota.CounterKey) (int, error) {
	const q = `SELECT quotad_recall($1, $2, $3, $4, $5, $6, $7)`
	var n int
	err := db.pool.QueryRow(ctx, q, k.Customer, k.Metric, k.Window.String(), k.Start, db.holderID(),
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

// globalStart is the start of a lease's global window, or NULL where the
// metric declares no capacity for it.
func globalStart(g quota.GlobalKey) *time.Time {
	if g.Metric == "" {
		return nil
	}
	return &g.Start
}
