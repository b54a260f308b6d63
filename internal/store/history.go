package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/whatif"
)

// AddHistory implements quota.HistoryStore. Deltas are applied in key
// order, so that concurrent flushes from several processes cannot
// deadlock; days never go below zero. Deltas that only add (all but
// refunds') go in one statement.
func (h *History) AddHistory(ctx context.Context, deltas []quota.HistoryDelta) error {
	sorted := make([]quota.HistoryDelta, len(deltas))
	copy(sorted, deltas)
	sortDeltas(sorted)
	var add columns
	var refunds []quota.HistoryDelta
	for _, d := range sorted {
		if d.Used < 0 || d.Overage < 0 || d.Denied < 0 {
			refunds = append(refunds, d)
			continue
		}
		add.append(d)
	}
	const addQ = `
		INSERT INTO usage_history AS h (customer_id, metric, day, used, overage, denied)
		SELECT * FROM unnest($1::text[], $2::text[], $3::date[], $4::bigint[], $5::bigint[], $6::bigint[])
		ON CONFLICT (customer_id, day, metric) DO UPDATE
		SET used    = h.used + EXCLUDED.used,
		    overage = h.overage + EXCLUDED.overage,
		    denied  = h.denied + EXCLUDED.denied`
	const refundQ = `
		INSERT INTO usage_history AS h (customer_id, metric, day, used, overage, denied)
		VALUES ($1, $2, $3, GREATEST($4::bigint, 0), GREATEST($5::bigint, 0), GREATEST($6::bigint, 0))
		ON CONFLICT (customer_id, day, metric) DO UPDATE
		SET used    = GREATEST(h.used + $4::bigint, 0),
		    overage = GREATEST(h.overage + $5::bigint, 0),
		    denied  = GREATEST(h.denied + $6::bigint, 0)`
	b := &pgx.Batch{}
	if len(add.customers) > 0 {
		b.Queue(addQ, add.customers, add.metrics, add.days, add.used, add.overage, add.denied)
	}
	for _, d := range refunds {
		b.Queue(refundQ, d.Customer, d.Metric, d.Date, d.Used, d.Overage, d.Denied)
	}
	// A batch outside a transaction runs in one implicit transaction:
	// Stripe's sums are written with the history, or neither is.
	h.queueStripeUsage(b, sorted)
	if err := h.core.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("add history: %w", mapErr(err))
	}
	return nil
}

// columns are history deltas as arrays, for one statement.
type columns struct {
	customers, metrics    []string
	days                  []time.Time
	used, overage, denied []int64
}

func (c *columns) append(d quota.HistoryDelta) {
	c.customers = append(c.customers, d.Customer)
	c.metrics = append(c.metrics, d.Metric)
	c.days = append(c.days, d.Date)
	c.used = append(c.used, d.Used)
	c.overage = append(c.overage, d.Overage)
	c.denied = append(c.denied, d.Denied)
}

// FindHistory implements quota.HistoryStore.
func (h *History) FindHistory(ctx context.Context, customer, metric string, from, to time.Time) ([]quota.Day, error) {
	const q = `
		SELECT day, metric, used, overage, denied FROM usage_history
		WHERE customer_id = $1 AND ($2 = '' OR metric = $2) AND day BETWEEN $3 AND $4
		ORDER BY day, metric`
	rows, err := h.core.pool.Query(ctx, q, customer, metric, from, to)
	if err != nil {
		return nil, fmt.Errorf("find history: %w", mapErr(err))
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quota.Day, error) {
		var d quota.Day
		err := row.Scan(&d.Date, &d.Metric, &d.Used, &d.Overage, &d.Denied)
		d.Date = time.Date(d.Date.Year(), d.Date.Month(), d.Date.Day(), 0, 0, 0, 0, time.UTC)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan history: %w", mapErr(err))
	}
	return days, nil
}

func sortDeltas(d []quota.HistoryDelta) {
	slices.SortFunc(d, func(a, b quota.HistoryDelta) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), a.Date.Compare(b.Date), cmp.Compare(a.Metric, b.Metric))
	})
}

var _ quota.HistoryStore = (*History)(nil)

// FindActiveCustomers returns up to limit customers with usage history on
// or after day since, most recently active first, then the most used (units
// admitted and denied over those days); the history of customers deleted
// since is left out. quotad warms its cache with them at start-up.
func (h *History) FindActiveCustomers(ctx context.Context, since time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	// usage_history has no index on day, and grows every day: rather than
	// scan it, look up each customer's recent days through the primary key
	// (customer_id, day, metric), which costs one index probe per customer
	// however long the history.
	const q = `
		SELECT c.id
		FROM customers c
		CROSS JOIN LATERAL (
			SELECT max(h.day) AS latest, sum(h.used) + sum(h.denied) AS used
			FROM usage_history h
			WHERE h.customer_id = c.id AND h.day >= $1
		) a
		WHERE a.latest IS NOT NULL
		ORDER BY a.latest DESC, a.used DESC, c.id
		LIMIT $2`
	rows, err := h.core.pool.Query(ctx, q, since, limit)
	if err != nil {
		return nil, fmt.Errorf("find active customers since %s: %w", since.Format(time.DateOnly), mapErr(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("scan active customers: %w", mapErr(err))
	}
	return ids, nil
}

// StreamDay implements whatif.HistoryStore: the day's rows through
// usage_history_day (history is written a day at a time, so a day's rows
// lie together), its customers kept by a semi-join with theirs. A
// replay of many days reads one pass of the table for those days however
// many customers the plan has, where reading customer by customer through
// the primary key would visit a page per row.
func (h *History) StreamDay(ctx context.Context, q whatif.Query, day time.Time, fn func(whatif.Row)) error {
	const sql = `
		SELECT h.customer_id, h.metric, h.used, h.overage, h.denied
		FROM usage_history h
		WHERE h.day = $1 AND h.metric = ANY($2)
		  AND EXISTS (SELECT FROM customers c WHERE c.id = h.customer_id
		      AND (CASE WHEN cardinality($3::text[]) > 0 THEN c.id = ANY($3) ELSE c.plan_key = $4 END))`
	customers := q.Customers
	if customers == nil {
		customers = []string{}
	}
	rows, err := h.core.pool.Query(ctx, sql, day, q.Metrics, customers, q.Plan)
	if err != nil {
		return fmt.Errorf("stream history: %w", mapErr(err))
	}
	defer rows.Close()
	r := whatif.Row{Date: day}
	// The driver's own bytes, valid until the next row: nothing is
	// allocated per row.
	var customer, metric pgtype.DriverBytes
	for rows.Next() {
		if err := rows.Scan(&customer, &metric, &r.Used, &r.Overage, &r.Denied); err != nil {
			return fmt.Errorf("scan history: %w", mapErr(err))
		}
		r.Customer, r.Metric = customer, metric
		fn(r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stream history: %w", mapErr(err))
	}
	return nil
}

var _ whatif.HistoryStore = (*History)(nil)
