package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

var (
	_ webhooks.Store  = (*Webhooks)(nil)
	_ webhooks.Outbox = (*Webhooks)(nil)
	_ webhooks.Outbox = (*Outbox)(nil)
)

// Outbox delivers from the outbox over a pool of its own: a delivery keeps
// its connection while the receiver answers (up to the client's timeout),
// and those connections must never be the ones checks wait for.
type Outbox struct{ pool *pgxpool.Pool }

// OpenOutbox returns an Outbox over a new pool of at most conns
// connections (one per delivery worker) to db's database and schema. It
// connects lazily. Close it after the workers stop.
func (db *DB) OpenOutbox(ctx context.Context, conns int) (*Outbox, error) {
	cfg := db.pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = int32(max(conns, 1)), 0
	cfg.ConnConfig.RuntimeParams["application_name"] = "quotad webhooks"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create webhook outbox pool: %w", err)
	}
	return &Outbox{pool: pool}, nil
}

// Close closes the outbox's pool.
func (o *Outbox) Close() { o.pool.Close() }

// Deliver is Webhooks.Deliver over the outbox's own pool.
func (o *Outbox) Deliver(ctx context.Context, now time.Time, send func(context.Context, webhooks.Message) webhooks.Outcome) (bool, error) {
	return deliver(ctx, o.pool, now, send)
}

type webhookRow struct {
	ID         string
	URL        string
	Events     []string
	Thresholds []int32
	Secret     string
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func toWebhook(r webhookRow) webhooks.Webhook {
	w := webhooks.Webhook{
		ID: r.ID, URL: r.URL, Secret: r.Secret, SecretHint: webhooks.SecretHint(r.Secret),
		Events: make([]webhooks.EventType, len(r.Events)), Thresholds: make([]int, len(r.Thresholds)),
		Version: r.Version, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
	for i, e := range r.Events {
		w.Events[i] = webhooks.EventType(e)
	}
	for i, t := range r.Thresholds {
		w.Thresholds[i] = int(t)
	}
	return w
}

func findWebhook(ctx context.Context, q querier, id string, lock bool) (webhooks.Webhook, error) {
	sql := `SELECT id, url, events, thresholds, secret, version, created_at, updated_at FROM webhooks WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	return findOne(ctx, q, sql, webhooks.ErrWebhookNotFound, toWebhook, id)
}

// FindWebhook returns the webhook id, secret included.
func (hooks *Webhooks) FindWebhook(ctx context.Context, id string) (webhooks.Webhook, error) {
	w, err := findWebhook(ctx, hooks.core.pool, id, false)
	if err != nil {
		return webhooks.Webhook{}, fmt.Errorf("find webhook[%s]: %w", id, mapErr(err))
	}
	return w, nil
}

// FindWebhooks returns one page of webhooks ordered by id, secrets
// included (answers show only their hints).
func (hooks *Webhooks) FindWebhooks(ctx context.Context, page tiers.Page) ([]webhooks.Webhook, bool, error) {
	const q = `SELECT id, url, events, thresholds, secret, version, created_at, updated_at FROM webhooks
		WHERE id > $1 ORDER BY id LIMIT $2`
	return findPage(ctx, hooks.core.pool, "webhooks", page.Limit, toWebhook, q, page.After)
}

// PutWebhook creates or replaces a webhook; keepSecret keeps an existing
// one's secret. The audit log shows the secret's hint, never the secret.
// A creation beyond the webhooks' cap (SetCaps) is a *tiers.CapError.
func (hooks *Webhooks) PutWebhook(ctx context.Context, w tiers.Write, wh webhooks.Webhook, keepSecret bool) (webhooks.Webhook, bool, error) {
	events := make([]string, len(wh.Events))
	for i, e := range wh.Events {
		events[i] = string(e)
	}
	thresholds := make([]int32, len(wh.Thresholds))
	for i, t := range wh.Thresholds {
		thresholds[i] = int32(t)
	}
	saved, created, err := put(ctx, hooks.core, w, putSteps[webhooks.Webhook]{
		find: func(ctx context.Context, tx pgx.Tx, lock bool) (webhooks.Webhook, error) {
			return findWebhook(ctx, tx, wh.ID, lock)
		},
		notFound: webhooks.ErrWebhookNotFound,
		version:  func(wh webhooks.Webhook) int64 { return wh.Version },
		write: func(ctx context.Context, tx pgx.Tx, old webhooks.Webhook, exists bool) error {
			secret := wh.Secret
			if exists && keepSecret {
				secret = old.Secret
			}
			const update = `
				UPDATE webhooks SET url = $2, events = $3, thresholds = $4, secret = $5,
				       version = version + 1, updated_at = $6
				WHERE id = $1`
			const insert = `
				INSERT INTO webhooks (id, url, events, thresholds, secret, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $6)
				ON CONFLICT (id) DO NOTHING`
			if err := upsert(ctx, tx, exists, update, insert, wh.ID, wh.URL, events, thresholds, secret, w.At); err != nil || exists {
				return err
			}
			return hooks.core.checkCount(ctx, tx, tiers.CapWebhooks, "webhooks")
		},
		// Webhook marshals without its secret, with its hint: the audit
		// entry never holds the secret.
		resource: "webhooks/" + wh.ID,
		notify:   NotifyWebhook,
		key:      wh.ID,
	})
	if err != nil {
		return webhooks.Webhook{}, false, fmt.Errorf("put webhook[%s]: %w", wh.ID, err)
	}
	return saved, created, nil
}

// DeleteWebhook deletes a webhook and its deliveries (the events stay).
func (hooks *Webhooks) DeleteWebhook(ctx context.Context, w tiers.Write, id string) error {
	err := hooks.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		old, err := findWebhook(ctx, tx, id, true)
		if err := checkDelete(w, err, webhooks.ErrWebhookNotFound, old.Version); err != nil {
			return err
		}
		// A delivery in flight holds its row: the cascade waits for it.
		if _, err := tx.Exec(ctx, `DELETE FROM webhooks WHERE id = $1`, id); err != nil {
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: "webhooks/" + id, before: old}
		return hooks.core.auditAndNotify(ctx, tx, w.At, e, NotifyWebhook, id)
	})
	if err != nil {
		return fmt.Errorf("delete webhook[%s]: %w", id, err)
	}
	return nil
}

type deliveryRow struct {
	ID            int64
	Type          string
	CustomerID    string
	Metric        string
	QuotaWindow   *string
	WindowStart   *time.Time
	GrantID       *string
	PlanKey       *string
	NextPlanKey   *string
	Threshold     int32
	Status        string
	Attempts      int32
	NextAttemptAt time.Time
	LastAttemptAt *time.Time
	LastStatus    *int32
	LastError     string
	DeliveredAt   *time.Time
	CreatedAt     time.Time
}

func toDelivery(r deliveryRow) webhooks.Delivery {
	d := webhooks.Delivery{
		ID: webhooks.MessageID(r.ID),
		Event: webhooks.DeliveryEvent{
			Type: webhooks.EventType(r.Type), Customer: r.CustomerID, Metric: r.Metric,
			WindowStart: utcPtr(r.WindowStart), Threshold: int(r.Threshold),
		},
		Status: webhooks.Status(r.Status), Attempts: int(r.Attempts),
		LastAttemptAt: utcPtr(r.LastAttemptAt), LastError: r.LastError,
		DeliveredAt: utcPtr(r.DeliveredAt), CreatedAt: utc(r.CreatedAt),
	}
	if r.QuotaWindow != nil {
		window, _ := tiers.ParseWindow(*r.QuotaWindow)
		d.Event.Window = &window
	}
	if r.GrantID != nil {
		d.Event.Grant = *r.GrantID
	}
	if r.PlanKey != nil && r.NextPlanKey != nil {
		d.Event.Plan, d.Event.NextPlan = *r.PlanKey, *r.NextPlanKey
	}
	if d.Status == webhooks.Pending {
		d.NextAttemptAt = utcPtr(&r.NextAttemptAt)
	}
	if r.LastStatus != nil {
		d.LastStatus = int(*r.LastStatus)
	}
	return d
}

// FindDeliveries returns one webhook's deliveries, newest first.
func (hooks *Webhooks) FindDeliveries(ctx context.Context, f webhooks.DeliveryFilter) ([]webhooks.Delivery, bool, error) {
	var (
		out  []webhooks.Delivery
		more bool
	)
	err := pgx.BeginTxFunc(ctx, hooks.core.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			if _, err := findWebhook(ctx, tx, f.Webhook, false); err != nil {
				return err
			}
			const q = `
				SELECT d.id, e.type, e.customer_id, e.metric, e.quota_window, e.window_start, e.grant_id, e.plan_key,
				       e.next_plan_key, e.threshold, d.status, d.attempts, d.next_attempt_at, d.last_attempt_at, d.last_status,
				       d.last_error, d.delivered_at, d.created_at
				FROM webhook_deliveries d JOIN usage_events e ON e.id = d.event_id
				WHERE d.webhook_id = $1 AND ($2 = 0 OR d.id < $2)
				ORDER BY d.id DESC
				LIMIT $3`
			rows, err := tx.Query(ctx, q, f.Webhook, f.Before, f.Limit+1)
			if err != nil {
				return err
			}
			list, err := pgx.CollectRows(rows, pgx.RowToStructByName[deliveryRow])
			if err != nil {
				return err
			}
			if more = len(list) > f.Limit; more {
				list = list[:f.Limit]
			}
			out = make([]webhooks.Delivery, len(list))
			for i, r := range list {
				out[i] = toDelivery(r)
			}
			return nil
		})
	if err != nil {
		return nil, false, fmt.Errorf("find deliveries[%s]: %w", f.Webhook, mapErr(err))
	}
	return out, more, nil
}

// Watches returns what the webhooks listen to: every event type one of
// them subscribes to, and the thresholds of those subscribed to
// usage.threshold.
func (hooks *Webhooks) Watches(ctx context.Context) (webhooks.Watch, error) {
	const q = `
		SELECT coalesce((SELECT array_agg(DISTINCT e ORDER BY e) FROM webhooks, unnest(events) e), '{}'),
		       coalesce((SELECT array_agg(DISTINCT t ORDER BY t) FROM webhooks, unnest(thresholds) t
		                 WHERE 'usage.threshold' = ANY (events)), '{}')`
	var (
		types      []string
		thresholds []int32
	)
	if err := hooks.core.pool.QueryRow(ctx, q).Scan(&types, &thresholds); err != nil {
		return webhooks.Watch{}, fmt.Errorf("read webhook watches: %w", mapErr(err))
	}
	w := webhooks.Watch{Types: map[webhooks.EventType]bool{}}
	for _, t := range types {
		w.Types[webhooks.EventType(t)] = true
	}
	for _, t := range thresholds {
		w.Thresholds = append(w.Thresholds, int(t))
	}
	return w, nil
}

// RecordEvents records events that happened, each once (an event already
// recorded, by this process or another, is skipped), and queues one
// delivery of each new one to every webhook subscribed to its type (for
// usage.threshold, to those naming its threshold), due at the event's
// time. It wakes the delivery workers and returns how many events were
// new. One transaction.
func (hooks *Webhooks) RecordEvents(ctx context.Context, events []webhooks.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	var added int
	err := hooks.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		added, err = hooks.core.recordEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		return 0, mapErr(err)
	}
	return added, nil
}

// recordEvents is RecordEvents within tx.
func (c *core) recordEvents(ctx context.Context, tx pgx.Tx, events []webhooks.Event) (added int, err error) {
	queued := int64(0)
	for _, e := range events {
		threshold := 0
		if e.Type == webhooks.Threshold {
			threshold = e.Threshold
		}
		// A usage event names its window; grant.exhausted its grant
		// instead. Each happens once (usage_events_once,
		// usage_events_grant_once).
		var window, grant, plan, nextPlan *string
		var start, end *time.Time
		switch e.Type {
		case webhooks.GrantExhausted:
			grant = &e.Grant
		case webhooks.TrialEnded:
			plan, nextPlan = &e.Plan, &e.NextPlan
		default:
			w := e.Window.String()
			window, start, end = &w, &e.Start, &e.End
		}
		const insertEvent = `
			INSERT INTO usage_events (type, customer_id, metric, quota_window, window_start, window_end,
			                          threshold, limit_value, used, occurred_at, grant_id, plan_key, next_plan_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT DO NOTHING
			RETURNING id`
		var id int64
		err := tx.QueryRow(ctx, insertEvent, string(e.Type), e.Customer, e.Metric, window,
			start, end, threshold, e.Limit, e.Used, e.At, grant, plan, nextPlan).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // recorded before
		}
		if err != nil {
			return added, fmt.Errorf("record event %s %s/%s: %w", e.Type, e.Customer, e.Metric, err)
		}
		added++
		const queue = `
			INSERT INTO webhook_deliveries (webhook_id, event_id, next_attempt_at, created_at)
			SELECT w.id, $1, $2, $2
			FROM webhooks w
			WHERE $3 = ANY (w.events)
			  AND ($3 <> 'usage.threshold' OR $4::integer = ANY (w.thresholds))`
		tag, err := tx.Exec(ctx, queue, id, e.At, string(e.Type), threshold)
		if err != nil {
			return added, fmt.Errorf("queue deliveries: %w", err)
		}
		queued += tag.RowsAffected()
	}
	if queued == 0 {
		return added, nil
	}
	return added, c.notify(ctx, tx, NotifyDelivery, "")
}

type messageRow struct {
	ID          int64
	WebhookID   string
	URL         string
	Secret      string
	Attempts    int32
	CreatedAt   time.Time
	Type        string
	CustomerID  string
	Metric      string
	QuotaWindow *string
	WindowStart *time.Time
	WindowEnd   *time.Time
	GrantID     *string
	PlanKey     *string
	NextPlanKey *string
	Threshold   int32
	LimitValue  int64
	Used        int64
	OccurredAt  time.Time
}

// Deliver claims one due delivery with FOR UPDATE SKIP LOCKED, so that
// processes share the outbox and none sends a message another holds, and
// keeps the row locked while send POSTs it: a process that dies meanwhile
// loses its connection, PostgreSQL rolls its transaction back, and the
// delivery is due again at once, unchanged. The transaction is not
// retried (that would send again).
func (hooks *Webhooks) Deliver(ctx context.Context, now time.Time, send func(context.Context, webhooks.Message) webhooks.Outcome) (bool, error) {
	return deliver(ctx, hooks.core.pool, now, send)
}

func deliver(ctx context.Context, pool *pgxpool.Pool, now time.Time, send func(context.Context, webhooks.Message) webhooks.Outcome) (bool, error) {
	const claim = `
			SELECT d.id, d.webhook_id, w.url, w.secret, d.attempts, d.created_at,
			       e.type, e.customer_id, e.metric, e.quota_window, e.window_start, e.window_end, e.grant_id,
			       e.plan_key, e.next_plan_key, e.threshold, e.limit_value, e.used, e.occurred_at
			FROM webhook_deliveries d
			JOIN webhooks w ON w.id = d.webhook_id
			JOIN usage_events e ON e.id = d.event_id
			WHERE d.status = 'pending' AND d.next_attempt_at <= $1
			  -- One webhook's deliveries of one customer's metric go out in
			  -- the order their events happened: none while an earlier one
			  -- is pending (held by another claimer, or waiting to be tried
			  -- again).
			  AND NOT EXISTS (
			    SELECT 1 FROM webhook_deliveries d2
			    JOIN usage_events e2 ON e2.id = d2.event_id
			    WHERE d2.webhook_id = d.webhook_id AND d2.status = 'pending'
			      AND e2.customer_id = e.customer_id AND e2.metric = e.metric
			      AND (e2.occurred_at, d2.id) < (e.occurred_at, d.id))
			ORDER BY d.next_attempt_at, d.id
			LIMIT 1
			-- Only the delivery is locked: webhook writes need not wait.
			FOR UPDATE OF d SKIP LOCKED`
	return deliverOne(ctx, pool, "deliver webhook message", claim, now, func(tx pgx.Tx, r messageRow) error {
		m := webhooks.Message{
			ID: webhooks.MessageID(r.ID), Webhook: r.WebhookID, URL: r.URL, Secret: r.Secret,
			Attempts: int(r.Attempts), CreatedAt: utc(r.CreatedAt),
			Event: webhooks.Event{
				Type: webhooks.EventType(r.Type), Customer: r.CustomerID, Metric: r.Metric,
				Threshold: int(r.Threshold), Limit: r.LimitValue, Used: r.Used, At: utc(r.OccurredAt),
			},
		}
		// A usage event's window; grant.exhausted's grant.
		if r.QuotaWindow != nil && r.WindowStart != nil && r.WindowEnd != nil {
			m.Event.Window, _ = tiers.ParseWindow(*r.QuotaWindow)
			m.Event.Start, m.Event.End = utc(*r.WindowStart), utc(*r.WindowEnd)
		}
		if r.GrantID != nil {
			m.Event.Grant = *r.GrantID
		}
		if r.PlanKey != nil && r.NextPlanKey != nil {
			m.Event.Plan, m.Event.NextPlan = *r.PlanKey, *r.NextPlanKey
		}
		o := send(ctx, m)
		next, lastStatus := outcomeColumns(o)
		const record = `
			UPDATE webhook_deliveries
			SET status = $2, attempts = attempts + 1, last_attempt_at = $3, next_attempt_at = $4,
			    last_status = $5, last_error = $6,
			    delivered_at = CASE WHEN $2 = 'delivered' THEN $3::timestamptz END
			WHERE id = $1`
		_, err := tx.Exec(ctx, record, r.ID, string(o.Status), o.At, next, lastStatus, o.Error)
		return err
	})
}

// deliverOne claims the one due outbox row that claim selects (with now as
// $1, FOR UPDATE SKIP LOCKED) and hands it to handle in the same
// transaction, so that the row stays locked while it is sent; it reports
// whether there was a row. what names the delivery in errors.
func deliverOne[R any](ctx context.Context, pool *pgxpool.Pool, what, claim string, now time.Time, handle func(pgx.Tx, R) error) (bool, error) {
	var found bool
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claim, now)
		if err != nil {
			return err
		}
		r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[R])
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return handle(tx, r)
	})
	if err != nil {
		return found, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return found, nil
}

// outcomeColumns returns the next attempt's time and the last HTTP status
// (nil for none) that an outbox row records of a delivery's outcome: a
// message no longer pending is due, if ever, at the time of its outcome.
func outcomeColumns(o webhooks.Outcome) (next time.Time, lastStatus *int32) {
	next = o.Next
	if o.Status != webhooks.Pending {
		next = o.At
	}
	if o.HTTPStatus != 0 {
		s := int32(o.HTTPStatus)
		lastStatus = &s
	}
	return next, lastStatus
}
