package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// errRollback ends a transaction whose outcome is already decided (a
// denial) without committing anything.
var errRollback = errors.New("rollback")

// The statements below name a counter by its key: customer $1, metric $2,
// subject $3 ("" for the customer's own counter), window $4 and start $5.

// chargeQ adds $6 units to a counter if, and only if, the result stays
// within the threshold $7. It never reads and then writes: the condition
// and the increment are one atomic upsert. A missing row is created only
// when the cost alone fits.
const chargeQ = `
	INSERT INTO usage_counters AS c (customer_id, metric, subject, quota_window, window_start, used)
	SELECT $1, $2, $3, $4, $5, $6::bigint
	WHERE $6::bigint <= $7::bigint
	ON CONFLICT (customer_id, metric, subject, quota_window, window_start)
	DO UPDATE SET used = c.used + EXCLUDED.used
	WHERE c.used + EXCLUDED.used <= $7::bigint
	RETURNING used`

const counterQ = `
	SELECT coalesce((SELECT used FROM usage_counters
	                 WHERE customer_id = $1 AND metric = $2 AND subject = $3
	                   AND quota_window = $4 AND window_start = $5), 0)`

// admittedQ reads a counter as admitted units: without the units other
// live processes (than holder $6) report holding unused in leases. The
// units of a process that died stay counted.
const admittedQ = `
	SELECT coalesce((
	    SELECT c.used - coalesce((
	        SELECT sum(l.unused) FROM quotad_live_leases l
	        WHERE l.customer_id = c.customer_id AND l.metric = c.metric AND l.subject = c.subject
	          AND l.quota_window = c.quota_window AND l.window_start = c.window_start
	          AND l.holder <> $6 AND l.unused > 0), 0)
	    FROM usage_counters c
	    WHERE c.customer_id = $1 AND c.metric = $2 AND c.subject = $3
	      AND c.quota_window = $4 AND c.window_start = $5), 0)`

const globalQ = `
	SELECT coalesce(sum(used), 0)::bigint FROM metric_usage
	WHERE metric = $1 AND quota_window = $2 AND window_start = $3`

// Take implements quota.Counter: every span's conditional upsert, of
// every charge of the set, runs in one transaction, pipelined in one round
// trip; if any span denies, the transaction rolls back and nothing is
// charged.
func (l *Ledger) Take(ctx context.Context, cs []quota.Charge) (bool, error) {
	if !counts(cs) {
		return true, nil
	}
	cs[0].Trips++
	if c := &cs[0]; len(cs) == 1 && len(c.Spans) == 1 && !c.Spans[0].Rule.Spare && len(c.Globals) == 0 {
		return l.takeOne(ctx, c)
	}
	var ok bool
	err := l.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if ok, err = take(ctx, tx, cs); err == nil && !ok {
			err = errRollback
		}
		return err
	})
	switch {
	case errors.Is(err, errRollback):
		return false, nil
	case err != nil:
		return false, chargeErr("charge", cs, err)
	}
	return true, nil
}

// counts reports whether the set cs counts anywhere: in a span or in a
// global window.
func counts(cs []quota.Charge) bool {
	for i := range cs {
		if len(cs[i].Spans)+len(cs[i].Globals) > 0 {
			return true
		}
	}
	return false
}

// chargeErr names a failed charge, or reports a customer deleted meanwhile.
func chargeErr(op string, cs []quota.Charge, err error) error {
	if isCode(err, "23503") { // foreign_key_violation: the customer (or metric) is gone
		return tiers.ErrCustomerNotFound
	}
	return fmt.Errorf("%s %s/%s: %w", op, cs[0].Customer, cs[0].Metric, mapErr(err))
}

// takeOne charges a single window with nothing else to count: the
// conditional upsert alone is atomic, so it runs as one statement, in one
// round trip, holding the row lock only while it executes and commits.
func (l *Ledger) takeOne(ctx context.Context, c *quota.Charge) (bool, error) {
	sp := &c.Spans[0]
	var after int64
	err := l.core.pool.QueryRow(ctx, chargeQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start,
		c.Cost, sp.Rule.Threshold).Scan(&after)
	switch {
	case err == nil:
		c.Out[0] = quota.Outcome{Used: after - c.Cost, Passed: true}
		return true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return false, chargeErr("charge", []quota.Charge{*c}, err)
	}
	var used int64
	c.Trips++
	err = l.core.pool.QueryRow(ctx, counterQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("read counter %s/%s: %w", c.Customer, c.Metric, mapErr(err))
	}
	c.Out[0] = c.Judge(0, used, 0)
	return false, nil
}

// take runs the conditional upserts of the spans of every charge of cs on
// tx, in one batch, then settles the spans that denied: elastic ones may
// still admit on spare capacity; the others report their count. When
// every span admits, the units count in each charge's global windows too.
// It changes nothing the caller must keep unless it returns true.
func take(ctx context.Context, tx pgx.Tx, cs []quota.Charge) (bool, error) {
	order := lockOrder(cs)
	b := &pgx.Batch{}
	for _, x := range order {
		c := &cs[x.c]
		sp := &c.Spans[x.i]
		b.Queue(chargeQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start, c.Cost,
			sp.Rule.Threshold)
	}
	if b.Len() > 0 {
		res := tx.SendBatch(ctx, b)
		for _, x := range order {
			c := &cs[x.c]
			var after int64
			err := res.QueryRow().Scan(&after)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				c.Out[x.i] = quota.Outcome{}
			case err != nil:
				res.Close()
				return false, err
			default:
				c.Out[x.i] = quota.Outcome{Used: after - c.Cost, Passed: true}
			}
		}
		if err := res.Close(); err != nil {
			return false, err
		}
	}
	ok := true
	for _, x := range order {
		c := &cs[x.c]
		if c.Out[x.i].Passed {
			continue
		}
		sp := &c.Spans[x.i]
		if sp.Rule.Spare {
			passed, err := chargeElastic(ctx, tx, c, x.i)
			if err != nil {
				return false, err
			}
			if passed {
				continue
			}
		} else {
			var used int64
			err := tx.QueryRow(ctx, counterQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(),
				sp.Key.Start).Scan(&used)
			if err != nil {
				return false, err
			}
			c.Out[x.i] = c.Judge(x.i, used, 0)
		}
		ok = false
	}
	if !ok {
		return false, nil
	}
	var d globalDeltas
	for ci := range cs {
		for _, g := range cs[ci].Globals {
			d.add(g, cs[ci].Cost)
		}
	}
	return true, d.exec(ctx, tx)
}

// spanAt names span i of charge c of a set.
type spanAt struct{ c, i int }

// lockOrder returns the spans of set cs in the one order every statement
// that locks counters takes them: by the counters' key (customer, metric,
// subject, window, start), the order the lease functions lock in too. So
// two sets of the same counters, listed in other orders (items in another
// order, an item and the pool it draws on), never wait for each other in a
// circle: no deadlock.
func lockOrder(cs []quota.Charge) []spanAt {
	var order []spanAt
	for ci := range cs {
		for i := range cs[ci].Spans {
			order = append(order, spanAt{ci, i})
		}
	}
	if len(cs) > 1 {
		slices.SortFunc(order, func(a, b spanAt) int {
			x, y := &cs[a.c].Spans[a.i].Key, &cs[b.c].Spans[b.i].Key
			return cmp.Or(strings.Compare(x.Customer, y.Customer), strings.Compare(x.Metric, y.Metric),
				strings.Compare(x.Subject, y.Subject), cmp.Compare(x.Window, y.Window), x.Start.Compare(y.Start))
		})
	}
	return order
}

// chargeElastic admits span i's cost beyond its threshold when the
// metric's global usage in the window leaves room for all of it and the
// ceiling allows. Elastic admissions of one metric and window are
// serialized by an advisory lock, so that two of them never spend the same
// spare capacity; the count is then charged with the ceiling as the
// upsert's condition.
func chargeElastic(ctx context.Context, tx pgx.Tx, c *quota.Charge, i int) (bool, error) {
	out := c.Out
	sp := &c.Spans[i]
	g := sp.Global
	key := "quotad.elastic:" + g.Metric + ":" + g.Window.String() + ":" + strconv.FormatInt(g.Start.Unix(), 10)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key); err != nil {
		return false, err
	}
	var global, used int64
	if err := tx.QueryRow(ctx, globalQ, g.Metric, g.Window.String(), g.Start).Scan(&global); err != nil {
		return false, err
	}
	err := tx.QueryRow(ctx, counterQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start).Scan(&used)
	if err != nil {
		return false, err
	}
	if out[i] = c.Judge(i, used, global); !out[i].Passed {
		return false, nil
	}
	var after int64
	err = tx.QueryRow(ctx, chargeQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start,
		c.Cost, sp.Rule.Ceiling).Scan(&after)
	if errors.Is(err, pgx.ErrNoRows) {
		// Another check took the room between the read and now.
		out[i] = quota.Outcome{Used: used, Wait: sp.CalendarWait(used, c.Cost, c.At)}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out[i] = quota.Outcome{Used: after - c.Cost, Passed: true, Elastic: true}
	return true, nil
}

// globalDeltas are changes to global usage as columns, for
// quotad_add_global, which sums them by window, locks the windows in
// order and takes units off without going below zero.
type globalDeltas struct {
	metrics, windows []string
	starts           []time.Time
	units            []int64
}

func (d *globalDeltas) add(g quota.GlobalKey, n int64) {
	d.metrics = append(d.metrics, g.Metric)
	d.windows = append(d.windows, g.Window.String())
	d.starts = append(d.starts, g.Start)
	d.units = append(d.units, n)
}

// exec writes d on q, in one statement.
func (d *globalDeltas) exec(ctx context.Context, q querier) error {
	if len(d.units) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `SELECT quotad_add_global($1, $2, $3, $4)`, d.metrics, d.windows, d.starts, d.units)
	return err
}

// AddGlobal implements quota.Counts, in one statement.
func (l *Ledger) AddGlobal(ctx context.Context, deltas []quota.GlobalDelta) error {
	var d globalDeltas
	for _, x := range deltas {
		d.add(x.Key, x.Units)
	}
	if err := retry(func() error { return d.exec(ctx, l.core.pool) }); err != nil {
		return fmt.Errorf("add global usage: %w", mapErr(err))
	}
	return nil
}

// Peek implements quota.Counter.
func (l *Ledger) Peek(ctx context.Context, cs []quota.Charge) error {
	return peek(ctx, l.core.pool, l.core.holderID(), cs)
}

// peek reads the counts of cs's spans on q, in one round trip, and judges
// them.
func peek(ctx context.Context, q conn, holder int64, cs []quota.Charge) error {
	err := quota.PeekWith(cs, func(counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
		return read(ctx, q, holder, counters, globals)
	})
	if err != nil {
		return fmt.Errorf("peek %s/%s: %w", cs[0].Customer, cs[0].Metric, err)
	}
	return nil
}

// Read implements quota.Counts.
func (l *Ledger) Read(ctx context.Context, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	return read(ctx, l.core.pool, l.core.holderID(), counters, globals)
}

func read(ctx context.Context, q conn, holder int64, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	used := make([]int64, len(counters))
	global := make([]int64, len(globals))
	if len(counters)+len(globals) == 0 {
		return used, global, nil
	}
	b := &pgx.Batch{}
	for _, k := range counters {
		b.Queue(admittedQ, k.Customer, k.Metric, k.Subject, k.Window.String(), k.Start, holder)
	}
	for _, g := range globals {
		b.Queue(globalQ, g.Metric, g.Window.String(), g.Start)
	}
	res := q.SendBatch(ctx, b)
	defer res.Close()
	for i := range used {
		if err := res.QueryRow().Scan(&used[i]); err != nil {
			return nil, nil, fmt.Errorf("read counters: %w", mapErr(err))
		}
	}
	for i := range global {
		if err := res.QueryRow().Scan(&global[i]); err != nil {
			return nil, nil, fmt.Errorf("read global usage: %w", mapErr(err))
		}
	}
	return used, global, nil
}

// GiveBack implements quota.Counter: a refund of every span of every
// charge, with the global windows, in one transaction.
func (l *Ledger) GiveBack(ctx context.Context, cs []quota.Charge) error {
	if !counts(cs) {
		return nil
	}
	cs[0].Trips++
	err := l.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return giveBackAll(ctx, tx, l.core.channel, l.freedPayload, cs)
	})
	if err != nil {
		return chargeErr("give back", cs, err)
	}
	return nil
}

// giveBackAll gives back every charge of cs on q (see giveBack), the
// counters in lock order (see lockOrder).
func giveBackAll(ctx context.Context, q conn, channel string, payload func(quota.CounterKey) string, cs []quota.Charge) error {
	for _, x := range lockOrder(cs) {
		if err := giveBackSpan(ctx, q, channel, payload, &cs[x.c], x.i); err != nil {
			return err
		}
	}
	var d globalDeltas
	for ci := range cs {
		c := &cs[ci]
		for _, g := range c.Globals {
			n := c.Cost
			if i := c.SpanOf(g); i >= 0 {
				n = min(c.Cost, c.Out[i].Used)
			}
			d.add(g, -n)
		}
	}
	return d.exec(ctx, q)
}

// giveBackSpan takes up to c.Cost off span i's counter on q, never below
// zero (giveBackAll then takes off c's global windows what the span of the
// same window gave back, c.Cost where there is none). A counter gives back
// only admitted units: what leases hold unused stays, so that their
// holders never admit beyond the bound. That includes the leases of
// processes that seem dead: one may only have lost its listening session
// for a moment, and the settlement of one that did die may still arrive.
// A charge of units known admitted in the counter (c.Admitted) is not
// held to that: they may have come from a lease that has not reported
// them yet, and what its holder goes on admitting stays within the bound.
func giveBackSpan(ctx context.Context, q conn, channel string, payload func(quota.CounterKey) string, c *quota.Charge, i int) error {
	// A counter that a process knew full (watched) is told that units
	// came back to it.
	const refundQ = `
		WITH old AS MATERIALIZED (
		    SELECT used, watched FROM usage_counters
		    WHERE customer_id = $1 AND metric = $2 AND subject = $3 AND quota_window = $4 AND window_start = $5
		    FOR UPDATE
		), leased AS MATERIALIZED (
		    SELECT coalesce(sum(l.unused), 0) AS unused FROM counter_leases l
		    WHERE l.customer_id = $1 AND l.metric = $2 AND l.subject = $3 AND l.quota_window = $4
		      AND l.window_start = $5 AND l.unused > 0
		), back AS (
		    SELECT LEAST(GREATEST(old.used - CASE WHEN $7 THEN 0 ELSE leased.unused END, 0), $6) AS units FROM old, leased
		)
		UPDATE usage_counters c SET used = c.used - back.units, watched = old.watched AND back.units = 0
		FROM old, leased, back
		WHERE c.customer_id = $1 AND c.metric = $2 AND c.subject = $3 AND c.quota_window = $4 AND c.window_start = $5
		RETURNING GREATEST(old.used - CASE WHEN $7 THEN 0 ELSE leased.unused END, 0), old.watched AND back.units > 0`
	sp := &c.Spans[i]
	var before int64
	var freed bool
	err := q.QueryRow(ctx, refundQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start,
		c.Cost, c.Admitted).Scan(&before, &freed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	c.Out[i] = quota.Outcome{Used: before, Passed: true}
	if freed {
		if _, err := q.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload(sp.Key)); err != nil {
			return err
		}
	}
	return nil
}

// Atomically implements quota.Requests.
func (l *Ledger) Atomically(ctx context.Context, fn func(ctx context.Context, tx quota.Tx) error) error {
	err := l.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, txLedger{tx, l}) })
	if isCode(err, "23503") { // the customer went away meanwhile
		return tiers.ErrCustomerNotFound
	}
	return err
}

// txLedger is the ledger within one transaction.
type txLedger struct {
	tx     pgx.Tx
	ledger *Ledger
}

// Claim implements quota.Tx.
func (l txLedger) Claim(ctx context.Context, c quota.Claim) (*quota.Recorded, error) {
	return claim(ctx, l.tx, c)
}

// Keep implements quota.Tx.
func (l txLedger) Keep(ctx context.Context, c quota.Claim, answer []byte) error {
	return keep(ctx, l.tx, c, answer)
}

// Take implements quota.Counter within the transaction. A denial takes
// back, in the same transaction, what the spans that admitted counted.
func (l txLedger) Take(ctx context.Context, cs []quota.Charge) (bool, error) {
	if !counts(cs) {
		return true, nil
	}
	cs[0].Trips++
	ok, err := take(ctx, l.tx, cs)
	if err != nil || ok {
		return ok, err
	}
	const undoQ = `
		UPDATE usage_counters SET used = used - $6
		WHERE customer_id = $1 AND metric = $2 AND subject = $3 AND quota_window = $4 AND window_start = $5`
	b := &pgx.Batch{}
	for _, x := range lockOrder(cs) {
		if c := &cs[x.c]; c.Out[x.i].Passed {
			sp := &c.Spans[x.i]
			b.Queue(undoQ, c.Customer, c.Metric, c.Subject, sp.Key.Window.String(), sp.Key.Start, c.Cost)
		}
	}
	return false, sendBatch(ctx, l.tx, b)
}

// GiveBack implements quota.Counter within the transaction.
func (l txLedger) GiveBack(ctx context.Context, cs []quota.Charge) error {
	if !counts(cs) {
		return nil
	}
	cs[0].Trips++
	return giveBackAll(ctx, l.tx, l.ledger.core.channel, l.ledger.freedPayload, cs)
}

// Peek implements quota.Counter within the transaction.
func (l txLedger) Peek(ctx context.Context, cs []quota.Charge) error {
	return peek(ctx, l.tx, l.ledger.core.holderID(), cs)
}

// sendBatch runs b on q, if it holds anything, and reads every result.
func sendBatch(ctx context.Context, q conn, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return q.SendBatch(ctx, b).Close()
}

// Reset implements quota.Maintenance: it zeroes the customer's counters of
// metric, its own and every subject's, records the reset in the audit log
// and tells every process.
func (l *Ledger) Reset(ctx context.Context, actor, customer, metric string, at time.Time) error {
	// zeroed is a counter the reset zeroed, as the audit event shows it:
	// a subject's names it, the customer's own names none.
	type zeroed struct {
		Subject string    `json:"subject,omitempty"`
		Window  string    `json:"window"`
		Start   time.Time `json:"window_start"`
		Used    int64     `json:"used"`
	}
	err := l.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, true); err != nil {
			return err
		}
		// The counters go to zero rather than away, and their leases end
		// but keep their rows: a lease call still in flight from before
		// the reset then finds its number taken, not an empty table. The
		// customer and metric are a prefix of the key: every subject's
		// counters are found with the customer's, and locked in the key's
		// order (the customer's own first).
		const q = `
			WITH old AS MATERIALIZED (
			    SELECT subject, quota_window, window_start, used FROM usage_counters
			    WHERE customer_id = $1 AND metric = $2 AND used > 0
			    ORDER BY subject, window_rank(quota_window), window_start
			    FOR UPDATE
			)
			UPDATE usage_counters c SET used = 0, watched = false
			FROM old
			WHERE c.customer_id = $1 AND c.metric = $2 AND c.subject = old.subject
			  AND c.quota_window = old.quota_window AND c.window_start = old.window_start
			RETURNING c.subject, c.quota_window, c.window_start, old.used`
		const leasesQ = `
			UPDATE counter_leases SET held = false, unused = 0, granted = 0
			WHERE customer_id = $1 AND metric = $2 AND held`
		rows, err := tx.Query(ctx, q, customer, metric)
		if err != nil {
			return err
		}
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (zeroed, error) {
			var z zeroed
			err := row.Scan(&z.Subject, &z.Window, &z.Start, &z.Used)
			z.Start = z.Start.UTC()
			return z, err
		})
		if err != nil {
			return err
		}
		if list == nil {
			list = []zeroed{}
		}
		if _, err := tx.Exec(ctx, leasesQ, customer, metric); err != nil {
			return err
		}
		e := auditEntry{actor: actor, action: tiers.ActionReset, customer: customer,
			resource: usageResource(customer, metric),
			before:   map[string]any{"metric": metric, "counters": list}}
		if err := recordAudit(ctx, tx, at, e); err != nil {
			return err
		}
		return l.core.notify(ctx, tx, NotifyReset, customer+"/"+metric)
	})
	if err != nil {
		return fmt.Errorf("reset usage %s/%s: %w", customer, metric, err)
	}
	return nil
}

// SetTotal implements quota.Maintenance: it sets the customer's own counter of
// metric in window total to used, ending the leases on it as Reset ends
// them, records the change in the audit log and tells every process.
func (l *Ledger) SetTotal(ctx context.Context, actor, customer, metric string, used int64, at time.Time) (int64, error) {
	// total is the audit image of the count, before and after.
	type total struct {
		Used int64 `json:"used"`
	}
	var before int64
	err := l.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := requireCustomer(ctx, tx, customer, true); err != nil {
			return err
		}
		if err := requireMetric(ctx, tx, metric, true); err != nil {
			return err
		}
		// The counter is locked first, as every lease call locks it before
		// its leases: none lands between the read and the set. Units the
		// leases report unused are not admitted ones.
		const q = `
			WITH old AS MATERIALIZED (
			    SELECT c.used - coalesce((SELECT sum(l.unused) FROM counter_leases l
			        WHERE l.customer_id = c.customer_id AND l.metric = c.metric AND l.subject = c.subject
			          AND l.quota_window = c.quota_window AND l.window_start = c.window_start AND l.held), 0) AS admitted
			    FROM usage_counters c
			    WHERE c.customer_id = $1 AND c.metric = $2 AND c.subject = '' AND c.quota_window = 'total'
			      AND c.window_start = $3
			    FOR UPDATE
			)
			SELECT coalesce((SELECT greatest(admitted, 0) FROM old), 0)`
		const setQ = `
			INSERT INTO usage_counters AS c (customer_id, metric, subject, quota_window, window_start, used)
			VALUES ($1, $2, '', 'total', $3, $4)
			ON CONFLICT (customer_id, metric, subject, quota_window, window_start)
			DO UPDATE SET used = EXCLUDED.used, watched = false`
		// The leases end but keep their rows: a call in flight from before
		// the set finds its number taken (see Reset).
		const leasesQ = `
			UPDATE counter_leases SET held = false, unused = 0, granted = 0
			WHERE customer_id = $1 AND metric = $2 AND subject = '' AND quota_window = 'total'
			  AND window_start = $3 AND held`
		if err := tx.QueryRow(ctx, q, customer, metric, quota.TotalStart).Scan(&before); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, setQ, customer, metric, quota.TotalStart, used); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, leasesQ, customer, metric, quota.TotalStart); err != nil {
			return err
		}
		e := auditEntry{actor: actor, action: tiers.ActionUpdate, customer: customer,
			resource: usageResource(customer, metric) + "/total",
			before:   total{Used: before}, after: total{Used: used}}
		if err := recordAudit(ctx, tx, at, e); err != nil {
			return err
		}
		return l.core.notify(ctx, tx, NotifyTotal, customer+"/"+metric)
	})
	if err != nil {
		return 0, fmt.Errorf("set total %s/%s: %w", customer, metric, err)
	}
	return before, nil
}

var (
	_ quota.Counts      = (*Ledger)(nil)
	_ quota.Requests    = (*Ledger)(nil)
	_ quota.Maintenance = (*Ledger)(nil)
	_ quota.Tx          = txLedger{}
)
