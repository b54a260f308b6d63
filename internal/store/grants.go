package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

var (
	_ grants.Store = (*Grants)(nil)
	_ quota.Grants = (*Grants)(nil)
)

// NotifyGrants tells every process, this one included, that a customer's
// live grants changed (the key is the customer): its cached customer
// knows whether it has live grants. Sent in the writing transaction.
const NotifyGrants = "grants"

type grantRow struct {
	ID        string
	Customer  string
	Metric    string
	Amount    int64
	Remaining int64
	ExpiresAt *time.Time
	Priority  int32
	Reason    string
	CreatedAt time.Time
	VoidedAt  *time.Time
	RequestID *string
}

func toGrant(r grantRow) grants.Grant {
	return grants.Grant{ID: r.ID, Customer: r.Customer, Metric: r.Metric, Amount: r.Amount, Remaining: r.Remaining,
		ExpiresAt: utcPtr(r.ExpiresAt), Priority: int(r.Priority), Reason: r.Reason, CreatedAt: utc(r.CreatedAt),
		VoidedAt: utcPtr(r.VoidedAt)}
}

const grantColumns = `id, customer_id AS customer, metric, amount, remaining, expires_at, priority, reason,
	created_at, voided_at, request_id`

// grantOrder is the order grants are drawn in: lowest priority number,
// then the soonest to expire (never last), then the oldest.
const grantOrder = `priority, expires_at NULLS LAST, created_at, id`

// CreateGrant implements grants.Store: one transaction with its audit
// event and the notification of the customer's grants.
func (gs *Grants) CreateGrant(ctx context.Context, w tiers.Write, g grants.Grant, requestID string) (grants.Grant, bool, error) {
	created := true
	err := gs.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		created = true
		var rid *string
		if requestID != "" {
			rid = &requestID
			// A repeat of the request returns the grant it made.
			const q = `SELECT ` + grantColumns + ` FROM grants WHERE customer_id = $1 AND request_id = $2`
			old, err := findOne(ctx, tx, q, grants.ErrGrantNotFound, toGrant, g.Customer, requestID)
			switch {
			case err == nil:
				created = false
				if old.Metric != g.Metric || old.Amount != g.Amount || old.Priority != g.Priority ||
					!sameTime(old.ExpiresAt, g.ExpiresAt) || old.Reason != g.Reason {
					return fmt.Errorf("%w: request_id %q made another grant (%s)", tiers.ErrConflict, requestID, old.ID)
				}
				g = old
				return nil
			case !errors.Is(err, grants.ErrGrantNotFound):
				return err
			}
		}
		const insert = `
			INSERT INTO grants (id, customer_id, metric, amount, remaining, priority, expires_at, reason, request_id, created_at)
			VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9)`
		if _, err := tx.Exec(ctx, insert, g.ID, g.Customer, g.Metric, g.Amount, g.Priority, g.ExpiresAt, g.Reason,
			rid, w.At); err != nil {
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr) && pgErr.Code == "23503" && strings.Contains(pgErr.ConstraintName, "metric"):
				return tiers.ErrMetricNotFound
			case isCode(err, "23503"):
				return tiers.ErrCustomerNotFound
			case isCode(err, "23505"): // a concurrent creation under the same request id
				return errRetry
			}
			return err
		}
		g.CreatedAt = w.At.UTC()
		e := auditEntry{actor: w.Actor, action: tiers.ActionCreate, resource: "grants/" + g.ID, customer: g.Customer, after: g}
		return gs.core.auditAndNotify(ctx, tx, w.At, e, NotifyGrants, g.Customer)
	})
	if err != nil {
		return grants.Grant{}, false, fmt.Errorf("create grant of customer[%s]: %w", g.Customer, err)
	}
	return g, created, nil
}

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// FindGrants implements grants.Store.
func (gs *Grants) FindGrants(ctx context.Context, customer string, f grants.Filter) ([]grants.Grant, error) {
	q := `SELECT ` + grantColumns + ` FROM grants WHERE customer_id = $1`
	args := []any{customer}
	if !f.All {
		q += ` AND remaining > 0 AND voided_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`
		args = append(args, f.At)
	}
	q += ` ORDER BY ` + grantOrder
	rows, err := gs.core.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find grants of customer[%s]: %w", customer, mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[grantRow])
	if err != nil {
		return nil, fmt.Errorf("find grants of customer[%s]: %w", customer, mapErr(err))
	}
	out := make([]grants.Grant, len(list))
	for i, r := range list {
		out[i] = toGrant(r)
	}
	if len(out) > 0 {
		return out, nil
	}
	var exists bool
	if err := gs.core.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1)`, customer).Scan(&exists); err != nil {
		return nil, fmt.Errorf("find customer[%s]: %w", customer, mapErr(err))
	}
	if !exists {
		return nil, fmt.Errorf("find grants of customer[%s]: %w", customer, tiers.ErrCustomerNotFound)
	}
	return out, nil
}

// VoidGrant implements grants.Store: what remains of the grant goes, in
// one transaction with its audit event; a draw that locked the grant
// first finishes before.
func (gs *Grants) VoidGrant(ctx context.Context, w tiers.Write, id string) (grants.Grant, error) {
	var old grants.Grant
	err := gs.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		const q = `SELECT ` + grantColumns + ` FROM grants WHERE id = $1 AND voided_at IS NULL FOR UPDATE`
		var err error
		if old, err = findOne(ctx, tx, q, grants.ErrGrantNotFound, toGrant, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE grants SET voided_at = $2, remaining = 0 WHERE id = $1`, id, w.At); err != nil {
			return err
		}
		after := old
		at := w.At.UTC()
		after.Remaining, after.VoidedAt = 0, &at
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: "grants/" + id, customer: old.Customer,
			before: old, after: after}
		return gs.core.auditAndNotify(ctx, tx, w.At, e, NotifyGrants, old.Customer)
	})
	if err != nil {
		return grants.Grant{}, fmt.Errorf("void grant[%s]: %w", id, err)
	}
	return old, nil
}

type liveGrantRow struct {
	ID        string
	Metric    string
	Amount    int64
	Remaining int64
}

// Draw implements quota.Grants in one transaction. It locks every live
// grant of the draws' customers and metrics in one order (by id), so two
// draws never wait for each other in a cycle, then takes each draw's units
// in drawing order (grantOrder).
func (gs *Grants) Draw(ctx context.Context, draws []quota.GrantDraw, at time.Time) ([]quota.GrantTake, bool, error) {
	if err := gs.rollOver(ctx, draws, at); err != nil {
		return nil, false, fmt.Errorf("draw on grants: %w", err)
	}
	var taken []quota.GrantTake
	ok := false
	err := gs.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		taken, ok = taken[:0], false
		var exhausted []webhooks.Event // of the grants the draws use up
		for _, d := range sortedDraws(draws) {
			const lock = `
				SELECT id, metric, amount, remaining FROM (
				  SELECT id, metric, amount, remaining, priority, expires_at, created_at FROM grants
				  WHERE customer_id = $1 AND metric = $2 AND remaining > 0 AND voided_at IS NULL
				    AND (expires_at IS NULL OR expires_at > $3)
				  ORDER BY id
				  FOR UPDATE) g
				ORDER BY ` + grantOrder
			rows, err := tx.Query(ctx, lock, d.Customer, d.Metric, at)
			if err != nil {
				return err
			}
			live, err := pgx.CollectRows(rows, pgx.RowToStructByName[liveGrantRow])
			if err != nil {
				return err
			}
			need := d.Units
			for _, g := range live {
				if need == 0 {
					break
				}
				n := min(need, g.Remaining)
				need -= n
				taken = append(taken, quota.GrantTake{Grant: g.ID, Customer: d.Customer, Metric: d.Metric, Units: n})
				if n == g.Remaining {
					exhausted = append(exhausted, webhooks.Event{Type: webhooks.GrantExhausted, Customer: d.Customer,
						Metric: d.Metric, Grant: g.ID, Limit: g.Amount, Used: g.Amount, At: at})
				}
			}
			if need > 0 {
				return errTooFew
			}
		}
		if err := applyTakes(ctx, tx, draws, taken, at, 1); err != nil {
			return err
		}
		// A grant used up: its customer's processes learn it has no more
		// (if none is left), and the webhooks hear of it.
		customers := make([]string, len(exhausted))
		for i, e := range exhausted {
			customers[i] = e.Customer
		}
		slices.Sort(customers)
		for _, c := range slices.Compact(customers) {
			if err := gs.core.notify(ctx, tx, NotifyGrants, c); err != nil {
				return err
			}
		}
		if _, err := gs.core.recordEvents(ctx, tx, exhausted); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if errors.Is(err, errTooFew) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("draw on grants: %w", err)
	}
	return taken, ok, nil
}

// rollOver makes the rollover grants draws owe, in a transaction of their
// own (a draw that finds too few units must not take them back): each
// once, under its request id, whatever the processes. The unused units
// are the ended window's limit less its count as stored: units processes
// still hold in leases of it count as used (they settle within a flush
// interval after the window ends), so a rollover made sooner rolls over
// fewer units, never more.
func (gs *Grants) rollOver(ctx context.Context, draws []quota.GrantDraw, at time.Time) error {
	var rs []quota.GrantRollover
	for _, d := range draws {
		rs = append(rs, d.Rollovers...)
	}
	if len(rs) == 0 {
		return nil
	}
	return gs.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		made := false
		for _, r := range rs {
			id, err := grants.NewID()
			if err != nil {
				return err
			}
			const q = `
				INSERT INTO grants (id, customer_id, metric, amount, remaining, priority, expires_at, reason,
				                    request_id, created_at)
				SELECT $1, $2, $3, n, n, 0, $8, 'rollover', $9, $10
				FROM (SELECT least($4::bigint, $5::bigint - coalesce((
				        SELECT used FROM usage_counters
				        WHERE customer_id = $2 AND metric = $3 AND subject = '' AND quota_window = $6
				          AND window_start = $7), 0)) AS n) unused
				WHERE n > 0
				-- Made before, by this process or another: once.
				ON CONFLICT (customer_id, request_id) DO NOTHING`
			tag, err := tx.Exec(ctx, q, id, r.Window.Customer, r.Window.Metric, r.Max, r.Limit, r.Window.Window.String(),
				r.Window.Start, r.Expires, r.Request, at)
			if err != nil {
				return err
			}
			made = made || tag.RowsAffected() > 0
		}
		if !made {
			return nil
		}
		// The customers' processes learn they have live grants.
		customers := make([]string, len(rs))
		for i, r := range rs {
			customers[i] = r.Window.Customer
		}
		slices.Sort(customers)
		for _, c := range slices.Compact(customers) {
			if err := gs.core.notify(ctx, tx, NotifyGrants, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// errTooFew rolls back a draw that found too few units.
var errTooFew = errors.New("too few units in grants")

// sortedDraws returns draws by customer and metric: the order their
// grants are locked in.
func sortedDraws(draws []quota.GrantDraw) []quota.GrantDraw {
	out := slices.Clone(draws)
	slices.SortFunc(out, func(a, b quota.GrantDraw) int {
		return strings.Compare(a.Customer+"\x00"+a.Metric, b.Customer+"\x00"+b.Metric)
	})
	return out
}

// applyTakes takes (sign 1) or gives back (sign -1) taken from the
// grants, logs it for statements, and adds it to or takes it off the
// draws' windows' granted units.
func applyTakes(ctx context.Context, tx pgx.Tx, draws []quota.GrantDraw, taken []quota.GrantTake, at time.Time, sign int64) error {
	for _, t := range taken {
		const update = `
			UPDATE grants SET remaining = remaining - $2,
			       exhausted_at = CASE WHEN remaining - $2 = 0 THEN $3::timestamptz END
			WHERE id = $1`
		if _, err := tx.Exec(ctx, update, t.Grant, sign*t.Units, at); err != nil {
			return err
		}
		const log = `INSERT INTO grant_draws (grant_id, customer_id, metric, units, drawn_at) VALUES ($1, $2, $3, $4, $5)`
		if _, err := tx.Exec(ctx, log, t.Grant, t.Customer, t.Metric, sign*t.Units, at); err != nil {
			return err
		}
	}
	for _, d := range draws {
		for _, k := range d.Windows {
			const add = `
				INSERT INTO granted_usage (customer_id, metric, quota_window, window_start, granted)
				VALUES ($1, $2, $3, $4, greatest($5, 0))
				ON CONFLICT (customer_id, metric, quota_window, window_start)
				DO UPDATE SET granted = greatest(granted_usage.granted + $5, 0)`
			if _, err := tx.Exec(ctx, add, k.Customer, k.Metric, k.Window.String(), k.Start, sign*d.Units); err != nil {
				return err
			}
		}
	}
	return nil
}

// Return implements quota.Grants: a voided grant stays voided (what it
// gets back is not drawn again).
func (gs *Grants) Return(ctx context.Context, draws []quota.GrantDraw, taken []quota.GrantTake, at time.Time) error {
	err := gs.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := applyTakes(ctx, tx, draws, taken, at, -1); err != nil {
			return err
		}
		// A voided grant keeps nothing.
		ids := make([]string, len(taken))
		for i, t := range taken {
			ids[i] = t.Grant
		}
		if _, err := tx.Exec(ctx, `UPDATE grants SET remaining = 0 WHERE id = ANY($1) AND voided_at IS NOT NULL`, ids); err != nil {
			return err
		}
		customers := make([]string, 0, len(draws))
		for _, d := range draws {
			customers = append(customers, d.Customer)
		}
		slices.Sort(customers)
		for _, c := range slices.Compact(customers) {
			if err := gs.core.notify(ctx, tx, NotifyGrants, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("give back draws on grants: %w", err)
	}
	return nil
}

// Granted implements quota.Grants, in one statement.
func (gs *Grants) Granted(ctx context.Context, counters []quota.CounterKey) ([]int64, error) {
	customers, metrics, windows, starts := make([]string, len(counters)), make([]string, len(counters)),
		make([]string, len(counters)), make([]time.Time, len(counters))
	for i, k := range counters {
		customers[i], metrics[i], windows[i], starts[i] = k.Customer, k.Metric, k.Window.String(), k.Start
	}
	const q = `
		SELECT coalesce(u.granted, 0)
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS k(c, m, w, s, n)
		LEFT JOIN granted_usage u
		  ON u.customer_id = k.c AND u.metric = k.m AND u.quota_window = k.w AND u.window_start = k.s
		ORDER BY k.n`
	rows, err := gs.core.pool.Query(ctx, q, customers, metrics, windows, starts)
	if err != nil {
		return nil, fmt.Errorf("read granted units: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read granted units: %w", mapErr(err))
	}
	return out, nil
}

type grantUseRow struct {
	GrantID string
	Metric  string
	Units   int64
}

// FindGrantUse implements billing.Store.
func (bill *Billing) FindGrantUse(ctx context.Context, customer string, from, to time.Time) ([]billing.GrantUse, error) {
	const q = `
		SELECT grant_id AS grantid, metric, sum(units)::bigint AS units FROM grant_draws
		WHERE customer_id = $1 AND drawn_at >= $2 AND drawn_at < $3
		GROUP BY grant_id, metric HAVING sum(units) > 0
		ORDER BY metric, grant_id`
	rows, err := bill.core.pool.Query(ctx, q, customer, from, to)
	if err != nil {
		return nil, fmt.Errorf("find grant use of customer[%s]: %w", customer, mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[grantUseRow])
	if err != nil {
		return nil, fmt.Errorf("find grant use of customer[%s]: %w", customer, mapErr(err))
	}
	out := make([]billing.GrantUse, len(list))
	for i, r := range list {
		out[i] = billing.GrantUse{Grant: r.GrantID, Metric: r.Metric, Units: r.Units}
	}
	return out, nil
}
