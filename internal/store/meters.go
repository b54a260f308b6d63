package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotad/quotad/internal/meters"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/webhooks"
)

var (
	_ meters.Outbox = (*Meters)(nil)
	_ meters.Outbox = (*Outbox)(nil)
)

// CutMeterEvents is Meters.CutMeterEvents over the outbox's own pool.
func (o *Outbox) CutMeterEvents(ctx context.Context, minute time.Time, metrics []string) (meters.Cut, error) {
	return cutMeterEvents(ctx, o.pool, minute, metrics)
}

// DeliverMeterEvent is Meters.DeliverMeterEvent over the outbox's own pool: an
// event keeps its connection while Stripe answers, and those connections
// must never be the ones checks wait for.
func (o *Outbox) DeliverMeterEvent(ctx context.Context, now time.Time, send func(context.Context, meters.Event) webhooks.Outcome) (bool, error) {
	return deliverMeterEvent(ctx, o.pool, now, send)
}

// MeterStats is Meters.MeterStats over the outbox's own pool.
func (o *Outbox) MeterStats(ctx context.Context) (meters.Stats, error) {
	return meterStats(ctx, o.pool)
}

// SetStripeMetrics names the metrics whose usage goes to Stripe: AddHistory
// sums their admitted units into stripe_usage_pending, in the statement
// batch (one transaction) that writes the history. Call it before the DB
// is used.
func (db *DB) SetStripeMetrics(metrics []string) {
	db.History.stripeMetrics = map[string]bool{}
	for _, m := range metrics {
		db.History.stripeMetrics[m] = true
	}
}

// queueStripeUsage queues, on b, the sums of deltas' used units per
// customer and metric of the Stripe metrics, in key order.
func (h *History) queueStripeUsage(b *pgx.Batch, deltas []quota.HistoryDelta) {
	if len(h.stripeMetrics) == 0 {
		return
	}
	type key struct{ customer, metric string }
	sums := map[key]int64{}
	for _, d := range deltas {
		if h.stripeMetrics[d.Metric] && d.Used != 0 {
			sums[key{d.Customer, d.Metric}] += d.Used
		}
	}
	keys := slices.SortedFunc(maps.Keys(sums), func(a, b key) int {
		if a.customer != b.customer {
			return cmp.Compare(a.customer, b.customer)
		}
		return cmp.Compare(a.metric, b.metric)
	})
	var customers, metrics []string
	var values []int64
	for _, k := range keys {
		customers, metrics, values = append(customers, k.customer), append(metrics, k.metric), append(values, sums[k])
	}
	if len(keys) == 0 {
		return
	}
	b.Queue(`
		INSERT INTO stripe_usage_pending AS p (customer_id, metric, value)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
		ON CONFLICT (customer_id, metric) DO UPDATE SET value = p.value + EXCLUDED.value`,
		customers, metrics, values)
}

// CutMeterEvents implements meters.Outbox. Cuts are serialized across
// processes (a transaction-scoped advisory lock per schema); a customer
// and metric that already has an event at minute keeps its sum for the
// next cut, so that an event's value never changes once it is written.
// Sums of customers without metadata.stripe_customer_id are dropped and
// counted; sums of metrics not in metrics are dropped; negative sums (refunds beyond the interval's usage) wait to be
// netted against later usage.
func (ms *Meters) CutMeterEvents(ctx context.Context, minute time.Time, metrics []string) (meters.Cut, error) {
	return cutMeterEvents(ctx, ms.core.pool, minute, metrics)
}

func cutMeterEvents(ctx context.Context, pool *pgxpool.Pool, minute time.Time, metrics []string) (meters.Cut, error) {
	var cut meters.Cut
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('quotad.stripe_cut.' || current_schema(), 0))`); err != nil {
			return err
		}
		// Sums of metrics no longer sent to Stripe go too.
		if _, err := tx.Exec(ctx, `DELETE FROM stripe_usage_pending WHERE value = 0 OR metric <> ALL($1::text[])`, metrics); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			DELETE FROM stripe_usage_pending p
			WHERE p.value > 0 AND NOT EXISTS (
			    SELECT 1 FROM customers c
			    WHERE c.id = p.customer_id AND coalesce(c.metadata->>'stripe_customer_id', '') <> '')`)
		if err != nil {
			return err
		}
		cut.Skipped = int(tag.RowsAffected())
		tag, err = tx.Exec(ctx, `
			WITH moved AS (
			    DELETE FROM stripe_usage_pending p
			    USING customers c
			    WHERE c.id = p.customer_id AND p.value > 0
			      AND coalesce(c.metadata->>'stripe_customer_id', '') <> ''
			      AND NOT EXISTS (SELECT 1 FROM stripe_meter_events e
			                      WHERE e.customer_id = p.customer_id AND e.metric = p.metric AND e.minute = $1)
			    RETURNING p.customer_id, p.metric, p.value, c.metadata->>'stripe_customer_id' AS stripe_customer)
			INSERT INTO stripe_meter_events (customer_id, metric, minute, stripe_customer, value, identifier,
			                                 next_attempt_at, created_at)
			SELECT customer_id, metric, $1, stripe_customer, value,
			       'quotad-' || md5(customer_id || chr(1) || metric || chr(1) || extract(epoch FROM $1::timestamptz)::bigint),
			       $1, $1
			FROM moved`, minute)
		if err != nil {
			return err
		}
		cut.Events = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return meters.Cut{}, fmt.Errorf("cut meter events at %s: %w", minute.Format(time.RFC3339), mapErr(err))
	}
	return cut, nil
}

type meterEventRow struct {
	CustomerID     string
	Metric         string
	StripeCustomer string
	Minute         time.Time
	Value          int64
	Identifier     string
	Attempts       int32
	CreatedAt      time.Time
}

// DeliverMeterEvent implements meters.Outbox: the event's row stays locked
// (FOR UPDATE SKIP LOCKED) while Stripe answers, and is deleted once Stripe
// acknowledges it; a process that dies before leaves it for the next.
func (ms *Meters) DeliverMeterEvent(ctx context.Context, now time.Time, send func(context.Context, meters.Event) webhooks.Outcome) (bool, error) {
	return deliverMeterEvent(ctx, ms.core.pool, now, send)
}

func deliverMeterEvent(ctx context.Context, pool *pgxpool.Pool, now time.Time, send func(context.Context, meters.Event) webhooks.Outcome) (bool, error) {
	const claim = `
			SELECT customer_id, metric, stripe_customer, minute, value, identifier, attempts, created_at
			FROM stripe_meter_events
			WHERE status = 'pending' AND next_attempt_at <= $1
			ORDER BY next_attempt_at, minute, customer_id, metric
			LIMIT 1
			FOR UPDATE SKIP LOCKED`
	return deliverOne(ctx, pool, "deliver meter event", claim, now, func(tx pgx.Tx, r meterEventRow) error {
		o := send(ctx, meters.Event{
			Customer: r.CustomerID, Metric: r.Metric, StripeCustomer: r.StripeCustomer, Minute: utc(r.Minute),
			Value: r.Value, Identifier: r.Identifier, Attempts: int(r.Attempts), CreatedAt: utc(r.CreatedAt),
		})
		if o.Status == webhooks.Delivered {
			_, err := tx.Exec(ctx, `DELETE FROM stripe_meter_events WHERE identifier = $1`, r.Identifier)
			return err
		}
		next, lastStatus := outcomeColumns(o)
		_, err := tx.Exec(ctx, `
			UPDATE stripe_meter_events
			SET status = $2, attempts = attempts + 1, next_attempt_at = $3, last_status = $4, last_error = $5
			WHERE identifier = $1`, r.Identifier, string(o.Status), next, lastStatus, o.Error)
		return err
	})
}

// MeterStats implements meters.Outbox.
func (ms *Meters) MeterStats(ctx context.Context) (meters.Stats, error) {
	return meterStats(ctx, ms.core.pool)
}

func meterStats(ctx context.Context, pool *pgxpool.Pool) (meters.Stats, error) {
	var s meters.Stats
	var oldest *time.Time
	err := pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'failed'),
		       min(created_at) FILTER (WHERE status = 'pending')
		FROM stripe_meter_events`).Scan(&s.Pending, &s.Failed, &oldest)
	if err != nil {
		return meters.Stats{}, fmt.Errorf("meter stats: %w", mapErr(err))
	}
	if oldest != nil {
		s.Oldest = utc(*oldest)
	}
	return s, nil
}
