package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
)

// Retention, table by table, on a manual clock: a purge through the engine
// deletes the rows each table keeps no longer and keeps the young ones and
// those still in use (a current counter and its lease, a held reservation,
// an undelivered webhook, an event a delivery still names). Five old rows
// and batches of two: the purge loops until a short batch.
func TestRetentionPurgesEachTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	today := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	const days = 24 * time.Hour
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const (
		insertCounter = `INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
			VALUES ('acme', 'api_calls', $1, $2, 1)`
		insertLease = `INSERT INTO counter_leases (customer_id, metric, quota_window, window_start, holder, unused, held)
			VALUES ('acme', 'api_calls', $1, $2, 7, 0, $3)`
		insertAssignment = `INSERT INTO plan_assignments (customer_id, valid_from, valid_to, plan_key, plan_name,
			price_amount_cents, price_currency, price_interval) VALUES ($1, $2, $3, 'p', $4, 0, 'USD', 'month')`
		insertReservation = `INSERT INTO reservations (id, customer_id, metric, cost, state, committed, expires_at,
			created_at, settled_at, windows, answer) VALUES ($1, 'acme', 'api_calls', 3, $2, $3, $4, $4, $5, '[]', '{}')`
		insertWebhook = `INSERT INTO webhooks (id, url, events, thresholds, secret, created_at, updated_at)
			VALUES ('hook', 'https://example.com/', '{usage.threshold}', '{80}', 'whsec_x', $1, $1)`
		insertEvent = `INSERT INTO usage_events (type, customer_id, metric, quota_window, window_start, window_end,
			threshold, limit_value, used, occurred_at)
			VALUES ('usage.threshold', 'acme', 'api_calls', 'day', $1::timestamptz - interval '1 day', $1, $2, 100, 80,
			        $1::timestamptz - interval '1 hour')
			RETURNING id`
		insertDelivery = `INSERT INTO webhook_deliveries (webhook_id, event_id, status, next_attempt_at, last_attempt_at,
			created_at) VALUES ('hook', $1, $2, $3, $4, $3)`
	)
	type execFunc func(sql string, args ...any)
	type idFunc func(sql string, args ...any) int64
	tests := []struct {
		name      string
		retention quota.Retention
		seed      func(exec execFunc, id idFunc)
		table     string // the table purged: 5 rows
		left      string // lists what is left, one text
		want      string
	}{
		{
			name: "counters, with their leases",
			seed: func(exec execFunc, _ idFunc) {
				for i := range 4 {
					exec(insertCounter, "day", today.AddDate(0, 0, -3-i))
				}
				exec(insertCounter, "hour", now.Add(-3*time.Hour).Truncate(time.Hour))
				exec(insertLease, "day", today.AddDate(0, 0, -3), false) // settled: a fence, goes with its counter
				exec(insertCounter, "day", today)                        // current
				exec(insertLease, "day", today, true)                    // held
				exec(insertCounter, "hour", now.Truncate(time.Hour).Add(-time.Hour))
				exec(insertCounter, "month", today.AddDate(0, 0, -40)) // a month lasts up to 31 days, kept 63
				exec(insertCounter, "total", quota.TotalStart)         // never ends: never purged
			},
			table: "usage_counters",
			left: `SELECT string_agg(quota_window || ' ' || to_char(window_start AT TIME ZONE 'UTC', 'MM-DD HH24') ||
			              coalesce((SELECT ' leased' FROM counter_leases l WHERE l.window_start = c.window_start
			                        AND l.quota_window = c.quota_window), ''), ', ' ORDER BY window_start)
			       FROM usage_counters c`,
			want: "total 01-01 00, month 10-27 00, day 12-06 00 leased, hour 12-06 11",
		},
		{
			name: "global usage",
			seed: func(exec execFunc, _ idFunc) {
				for shard := range 5 {
					exec(`INSERT INTO metric_usage (metric, quota_window, window_start, shard, used) VALUES ('api_calls', 'day', $1, $2, 1)`,
						today.AddDate(0, 0, -3), shard)
				}
				exec(`INSERT INTO metric_usage (metric, quota_window, window_start, shard, used) VALUES ('api_calls', 'day', $1, 0, 1)`, today)
			},
			table: "metric_usage",
			left:  `SELECT string_agg(to_char(window_start AT TIME ZONE 'UTC', 'MM-DD'), ', ') FROM metric_usage`,
			want:  "12-06",
		},
		{
			name: "units grants paid for, as counters",
			seed: func(exec execFunc, _ idFunc) {
				for i := range 5 {
					exec(`INSERT INTO granted_usage (customer_id, metric, quota_window, window_start, granted) VALUES ('acme', 'api_calls', 'day', $1, 1)`,
						today.AddDate(0, 0, -3-i))
				}
				exec(`INSERT INTO granted_usage (customer_id, metric, quota_window, window_start, granted) VALUES ('acme', 'api_calls', 'day', $1, 1)`, today)
			},
			table: "granted_usage",
			left:  `SELECT string_agg(to_char(window_start AT TIME ZONE 'UTC', 'MM-DD'), ', ') FROM granted_usage`,
			want:  "12-06",
		},
		{
			name: "request ids, after 24 hours",
			seed: func(exec execFunc, _ idFunc) {
				for i := range 5 {
					exec(`INSERT INTO request_ids (customer_id, kind, request_id, metric, cost, created_at) VALUES ('acme', 'check', $1, 'api_calls', 1, $2)`,
						fmt.Sprint("old-", i), ago(25*time.Hour+time.Duration(i)*time.Minute))
				}
				exec(`INSERT INTO request_ids (customer_id, kind, request_id, metric, cost, created_at) VALUES ('acme', 'check', 'young', 'api_calls', 1, $1)`,
					ago(23*time.Hour))
			},
			table: "request_ids",
			left:  `SELECT string_agg(request_id, ', ') FROM request_ids`,
			want:  "young",
		},
		{
			name:      "usage history, a deleted customer's too",
			retention: quota.Retention{History: 400 * days},
			seed: func(exec execFunc, _ idFunc) {
				cutoff := today.AddDate(0, 0, -400)
				for i := range 5 {
					exec(`INSERT INTO usage_history (customer_id, metric, day, used) VALUES ($1, 'api_calls', $2, 1)`,
						[]string{"acme", "ghost"}[i%2], cutoff.AddDate(0, 0, -1-i))
				}
				exec(`INSERT INTO usage_history (customer_id, metric, day, used) VALUES ('ghost', 'api_calls', $1, 1)`, cutoff)
				exec(`INSERT INTO usage_history (customer_id, metric, day, used) VALUES ('acme', 'api_calls', $1, 1)`, today)
			},
			table: "usage_history",
			left:  `SELECT string_agg(customer_id || ' ' || to_char(day, 'YYYY-MM-DD'), ', ' ORDER BY day) FROM usage_history`,
			want:  "ghost 2025-11-01, acme 2026-12-06",
		},
		{
			name:      "closed billing terms, with the history",
			retention: quota.Retention{History: 400 * days},
			seed: func(exec execFunc, _ idFunc) {
				for i := range 5 {
					exec(insertAssignment, "ghost", ago(900*days), ago(401*days+time.Duration(i)*days), fmt.Sprint("old-", i))
				}
				exec(insertAssignment, "ghost", ago(401*days), ago(399*days), "young")
				exec(insertAssignment, "ghost", ago(399*days), nil, "open")
				exec(insertAssignment, "other", ago(900*days), nil, "open since long")
			},
			table: "plan_assignments",
			left:  `SELECT string_agg(plan_name, ', ' ORDER BY id) FROM plan_assignments WHERE customer_id <> 'acme'`,
			want:  "young, open, open since long",
		},
		{
			name:      "audit events",
			retention: quota.Retention{Audit: 400 * days},
			seed: func(exec execFunc, _ idFunc) {
				for i := range 5 {
					exec(`INSERT INTO audit_events (at, actor, action, resource) VALUES ($1, 'ops', 'update', $2)`,
						ago(401*days+time.Duration(i)*time.Hour), fmt.Sprint("old-", i))
				}
				exec(`INSERT INTO audit_events (at, actor, action, resource) VALUES ($1, 'ops', 'update', 'young')`, ago(399*days))
			},
			table: "audit_events",
			left:  `SELECT string_agg(resource, ', ') FROM audit_events WHERE actor = 'ops' AND resource NOT LIKE '%/%'`,
			want:  "young",
		},
		{
			name:      "finished reservations",
			retention: quota.Retention{Reservations: 7 * days},
			seed: func(exec execFunc, _ idFunc) {
				for i, state := range []string{"committed", "released", "expired", "committed", "released"} {
					var committed *int64
					if state == "committed" {
						committed = ptr(int64(2))
					}
					exec(insertReservation, fmt.Sprint("rsv_old", i), state, committed, ago(9*days), ago(8*days))
				}
				// Held past its expiry, not yet swept: still holds units.
				exec(insertReservation, "rsv_held", "held", nil, ago(30*days), nil)
				exec(insertReservation, "rsv_young", "committed", ptr(int64(1)), ago(7*days), ago(6*days))
			},
			table: "reservations",
			left:  `SELECT string_agg(id, ', ' ORDER BY id) FROM reservations`,
			want:  "rsv_held, rsv_young",
		},
		{
			name:      "webhook deliveries",
			retention: quota.Retention{Deliveries: 30 * days},
			seed: func(exec execFunc, id idFunc) {
				exec(insertWebhook, ago(100*days))
				// The events' window is current: they stay whatever
				// becomes of their deliveries.
				var events []int64
				for threshold := range 8 {
					events = append(events, id(insertEvent, today.AddDate(0, 0, 1), 80+threshold))
				}
				for i, status := range []string{"delivered", "failed", "delivered", "failed", "delivered"} {
					exec(insertDelivery, events[i], status, ago(40*days), ago(31*days))
				}
				exec(insertDelivery, events[5], "pending", ago(40*days), ago(31*days)) // undelivered, still retried
				exec(insertDelivery, events[6], "delivered", ago(40*days), ago(29*days))
				exec(insertDelivery, events[7], "pending", ago(40*days), nil)
			},
			table: "webhook_deliveries",
			left: `SELECT string_agg(status || ' ' || coalesce(to_char(last_attempt_at AT TIME ZONE 'UTC', 'MM-DD'), '-'), ', ' ORDER BY id)
			       FROM webhook_deliveries`,
			want: "pending 11-05, delivered 11-07, pending -",
		},
		{
			name:      "usage events",
			retention: quota.Retention{Deliveries: 30 * days},
			seed: func(exec execFunc, id idFunc) {
				exec(insertWebhook, ago(100*days))
				for threshold := range 5 {
					id(insertEvent, ago(31*days), 80+threshold)
				}
				// Its window ended long ago, but a delivery of it is
				// still pending.
				named := id(insertEvent, ago(31*days), 90)
				exec(insertDelivery, named, "pending", ago(31*days), nil)
				id(insertEvent, ago(29*days), 91)
				id(insertEvent, today.AddDate(0, 0, 1), 92) // the current window
			},
			table: "usage_events",
			left:  `SELECT string_agg(threshold::text, ', ' ORDER BY threshold) FROM usage_events`,
			want:  "90, 91, 92",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := MustOpen(t)
			MustSeed(t, db, nil, "acme")
			exec := func(sql string, args ...any) {
				t.Helper()
				if _, err := db.Pool().Exec(ctx, sql, args...); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			id := func(sql string, args ...any) int64 {
				t.Helper()
				var id int64
				if err := db.Pool().QueryRow(ctx, sql, args...).Scan(&id); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				return id
			}
			tt.seed(exec, id)

			r := tt.retention
			r.Batch = 2
			var heard []quota.Purged
			e := quota.New(quota.Options{Counts: db.Ledger, Requests: db.Ledger, Maintenance: db.Ledger, Audits: db.Audit,
				Clock: quotafake.NewClock(now), Retention: r,
				OnPurge: func(p quota.Purged) { heard = append(heard, p) }})
			if err := e.Purge(ctx); err != nil {
				t.Fatal(err)
			}
			if len(heard) != 1 || len(heard[0]) != 1 || heard[0][tt.table] != 5 {
				t.Errorf("purged %v, want 5 rows of %s alone", heard, tt.table)
			}
			var left *string
			if err := db.Pool().QueryRow(ctx, tt.left).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left == nil || *left != tt.want {
				t.Errorf("left: %v, want %s", deref(left), tt.want)
			}
			// Nothing more to purge until the clock moves.
			if err := e.Purge(ctx); err != nil {
				t.Fatal(err)
			}
			if len(heard) != 2 || heard[1].Total() != 0 {
				t.Errorf("a second purge at the same time deleted %v", heard[1:])
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "nothing"
	}
	return *s
}

// Durations of 0 keep history, audit, reservations and deliveries forever;
// the counters and request ids the engine no longer needs go all the same.
func TestRetentionZeroKeepsForever(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	long := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO usage_history (customer_id, metric, day, used) VALUES ('acme', 'api_calls', $1, 1)`,
		`INSERT INTO audit_events (at, actor, action, resource) VALUES ($1, 'ops', 'update', 'x')`,
		`INSERT INTO reservations (id, customer_id, metric, cost, state, expires_at, created_at, settled_at, windows, answer)
		 VALUES ('rsv_x', 'acme', 'api_calls', 1, 'released', $1, $1, $1, '[]', '{}')`,
		`INSERT INTO request_ids (customer_id, kind, request_id, metric, cost, created_at) VALUES ('acme', 'check', 'x', 'api_calls', 1, $1)`,
	} {
		if _, err := db.Pool().Exec(ctx, q, long); err != nil {
			t.Fatal(err)
		}
	}
	purged, err := db.Ledger.Purge(ctx, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), quota.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if len(purged) != 1 || purged["request_ids"] != 1 {
		t.Errorf("purged %v, want the request id alone", purged)
	}
}

// While one process purges a schema, another's purge deletes nothing and
// says so without an error.
func TestRetentionOneProcessAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	MustSeed(t, db, nil, "acme")
	if _, err := db.Pool().Exec(ctx, `INSERT INTO request_ids (customer_id, kind, request_id, metric, cost, created_at)
		VALUES ('acme', 'check', 'x', 'api_calls', 1, $1)`, day0); err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('quotad.purge:' || current_schema(), 0))`); err != nil {
		t.Fatal(err)
	}
	now := day0.AddDate(0, 0, 3)
	if purged, err := db.Ledger.Purge(ctx, now, quota.Retention{}); err != nil || len(purged) != 0 {
		t.Errorf("purged %v (%v) while another process held the purge's lock, want nothing", purged, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('quotad.purge:' || current_schema(), 0))`); err != nil {
		t.Fatal(err)
	}
	if purged, err := db.Ledger.Purge(ctx, now, quota.Retention{}); err != nil || purged["request_ids"] != 1 {
		t.Errorf("purged %v (%v) once the lock was free, want the request id", purged, err)
	}
}

// A purge's failure is reported, with what went before it.
func TestRetentionReportsFailure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	db := MustOpen(t)
	if _, err := db.Ledger.Purge(ctx, day0, quota.DefaultRetention); !errors.Is(err, context.Canceled) {
		t.Errorf("purge with its context ended: %v, want context.Canceled", err)
	}
}

// A row another transaction holds locked (a lease call on an old counter,
// say) is skipped, not waited for: the purge takes the others at once, and
// that one at a later run.
func TestRetentionSkipsLockedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	for i := range 3 {
		if _, err := db.Pool().Exec(ctx, `INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
			VALUES ('acme', 'api_calls', 'day', $1, 1)`, day0.AddDate(0, 0, -i)); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM usage_counters WHERE window_start = $1 FOR UPDATE`, day0); err != nil {
		t.Fatal(err)
	}
	now := day0.AddDate(0, 0, 10)
	r := quota.Retention{Batch: 1, BatchTimeout: 10 * time.Second}
	start := time.Now()
	purged, err := db.Ledger.Purge(ctx, now, r)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("purge took %s beside a locked row, want no wait", took)
	}
	if purged["usage_counters"] != 2 {
		t.Errorf("purged %v beside a locked counter, want the 2 others", purged)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if purged, err := db.Ledger.Purge(ctx, now, r); err != nil || purged["usage_counters"] != 1 {
		t.Errorf("purged %v (%v) once the lock was gone, want the last counter", purged, err)
	}
}
