package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/tiers"
)

// A customer's billing terms over time live in plan_assignments, written in
// the transaction of the catalog write that changes them. Their instants
// are those of the writes, to the microsecond (tiers.Instant), never cut
// to the second: two changes within one second are two terms, each on the
// statement (which counts whole seconds, see billing).

type termsRow struct {
	ID               int64
	CustomerID       string
	ValidFrom        time.Time
	ValidTo          *time.Time
	PlanKey          string
	PlanName         string
	PriceAmountCents int64
	PriceCurrency    string
	PriceInterval    string
	OveragePrices    map[string]int64
	BillingAnchorDay *int16
	TimeZone         string
}

func toTerms(r termsRow) billing.Terms {
	t := billing.Terms{
		Customer: r.CustomerID, From: utc(r.ValidFrom), Plan: r.PlanKey, PlanName: r.PlanName,
		PriceCents: r.PriceAmountCents, Currency: r.PriceCurrency, Interval: r.PriceInterval,
		OveragePrices: r.OveragePrices,
	}
	if t.OveragePrices == nil {
		t.OveragePrices = map[string]int64{}
	}
	if r.ValidTo != nil {
		t.To = utc(*r.ValidTo)
	}
	if r.BillingAnchorDay != nil {
		t.AnchorDay = int(*r.BillingAnchorDay)
	}
	t.TimeZone = r.TimeZone
	return t
}

const termsColumns = `id, customer_id, valid_from, valid_to, plan_key, plan_name, price_amount_cents,
	price_currency, price_interval, overage_prices, billing_anchor_day, time_zone`

// billingInstant is the instant a write changes terms at: w.At, never
// before the open terms began (should the clock step back).
func billingInstant(at time.Time, open *billing.Terms) time.Time {
	at = tiers.Instant(at)
	if open != nil && at.Before(open.From) {
		return open.From
	}
	return at
}

// findOpenTerms returns the customer's terms in effect, locked, if any.
func findOpenTerms(ctx context.Context, tx pgx.Tx, customer string) (*billing.Terms, error) {
	const q = `SELECT ` + termsColumns + ` FROM plan_assignments
		WHERE customer_id = $1 AND valid_to IS NULL FOR UPDATE`
	rows, err := tx.Query(ctx, q, customer)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[termsRow])
	if err != nil || len(list) == 0 {
		return nil, err
	}
	t := toTerms(list[0])
	return &t, nil
}

// recordTerms makes t (From and To unset) the customer's terms from at on,
// in tx: unless they are the terms in effect already, it closes those and
// opens t. A change of anchor day or time zone alone opens new terms too,
// so that past periods keep the anchor day and zone they had.
func recordTerms(ctx context.Context, tx pgx.Tx, at time.Time, t billing.Terms) error {
	open, err := findOpenTerms(ctx, tx, t.Customer)
	if err != nil {
		return fmt.Errorf("find open terms: %w", err)
	}
	if open != nil && open.SameBilling(t) && open.AnchorDay == t.AnchorDay && zoneOf(*open) == zoneOf(t) {
		return nil
	}
	at = billingInstant(at, open)
	if open != nil {
		const closeQ = `UPDATE plan_assignments SET valid_to = $2 WHERE customer_id = $1 AND valid_to IS NULL`
		if _, err := tx.Exec(ctx, closeQ, t.Customer, at); err != nil {
			return fmt.Errorf("close terms: %w", err)
		}
	}
	return insertTerms(ctx, tx, []time.Time{at}, []billing.Terms{t})
}

// insertTerms opens each of list from the instant of the same index on.
func insertTerms(ctx context.Context, tx pgx.Tx, froms []time.Time, list []billing.Terms) error {
	if len(list) == 0 {
		return nil
	}
	n := len(list)
	var (
		customers = make([]string, n)
		keys      = make([]string, n)
		names     = make([]string, n)
		prices    = make([]int64, n)
		currency  = make([]string, n)
		intervals = make([]string, n)
		overages  = make([]string, n)
		days      = make([]*int16, n)
		zones     = make([]string, n)
	)
	for i, t := range list {
		b, err := json.Marshal(t.OveragePrices)
		if err != nil {
			return err
		}
		customers[i], keys[i], names[i], prices[i] = t.Customer, t.Plan, t.PlanName, t.PriceCents
		currency[i], intervals[i], overages[i] = t.Currency, t.Interval, string(b)
		if t.AnchorDay > 0 {
			d := int16(t.AnchorDay)
			days[i] = &d
		}
		zones[i] = zoneOf(t)
	}
	const q = `
		INSERT INTO plan_assignments (valid_from, customer_id, plan_key, plan_name, price_amount_cents,
		                              price_currency, price_interval, overage_prices, billing_anchor_day, time_zone)
		SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[],
		                     $7::text[], $8::jsonb[], $9::smallint[], $10::text[])`
	if _, err := tx.Exec(ctx, q, froms, customers, keys, names, prices, currency, intervals, overages, days, zones); err != nil {
		return fmt.Errorf("open terms: %w", err)
	}
	return nil
}

// zoneOf is the time zone terms t are stored with.
func zoneOf(t billing.Terms) string {
	if t.TimeZone == "" {
		return tiers.DefaultTimeZone
	}
	return t.TimeZone
}

// closeTerms ends the customer's terms in effect at at.
func closeTerms(ctx context.Context, tx pgx.Tx, at time.Time, customer string) error {
	const q = `
		UPDATE plan_assignments SET valid_to = greatest(valid_from, $2)
		WHERE customer_id = $1 AND valid_to IS NULL`
	if _, err := tx.Exec(ctx, q, customer, tiers.Instant(at)); err != nil {
		return fmt.Errorf("close terms: %w", err)
	}
	return nil
}

// splitPlanTerms gives every customer on the plan key the terms the
// version it is on bills, from at on, where they differ from the terms in
// effect.
func splitPlanTerms(ctx context.Context, tx pgx.Tx, at time.Time, key string) error {
	const q = `SELECT ` + openTermsColumns + `, c.plan_version AS joined_version
		FROM plan_assignments t JOIN customers c ON c.id = t.customer_id
		WHERE t.plan_key = $1 AND t.valid_to IS NULL ORDER BY t.customer_id FOR UPDATE OF t`
	rows, err := tx.Query(ctx, q, key)
	if err != nil {
		return err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[groupTermsRow])
	if err != nil {
		return err
	}
	var (
		ids   []int64
		froms []time.Time
		next  []billing.Terms
		plans = map[int64]tiers.Plan{} // by group (joined version)
	)
	at = tiers.Instant(at)
	for _, r := range list {
		p, ok := plans[r.JoinedVersion]
		if !ok {
			if p, err = findPlanOfGroup(ctx, tx, key, r.JoinedVersion); err != nil {
				return err
			}
			plans[r.JoinedVersion] = p
		}
		open := toTerms(r.termsRow)
		t := billing.TermsOf(tiers.Customer{ID: open.Customer,
			Anchor: tiers.Anchor{Day: open.AnchorDay, Loc: tiers.ZoneOf(open.TimeZone)}}, p)
		if open.SameBilling(t) {
			continue
		}
		ids, froms, next = append(ids, r.ID), append(froms, open.From), append(next, t)
	}
	if len(ids) == 0 {
		return nil
	}
	// Terms that began after at (a clock stepped back) end where they began.
	const closeQ = `UPDATE plan_assignments SET valid_to = greatest(valid_from, $2) WHERE id = ANY($1)`
	if _, err := tx.Exec(ctx, closeQ, ids, at); err != nil {
		return fmt.Errorf("close terms: %w", err)
	}
	for i := range froms {
		froms[i] = billingInstant(at, &billing.Terms{From: froms[i]})
	}
	return insertTerms(ctx, tx, froms, next)
}

// groupTermsRow is a customer's open terms and the version it joined its
// plan at.
type groupTermsRow struct {
	termsRow
	JoinedVersion int64
}

// openTermsColumns are termsColumns of plan_assignments t.
const openTermsColumns = `t.id, t.customer_id, t.valid_from, t.valid_to, t.plan_key, t.plan_name,
	t.price_amount_cents, t.price_currency, t.price_interval, t.overage_prices, t.billing_anchor_day, t.time_zone`

// FindTerms implements billing.Store.
func (bill *Billing) FindTerms(ctx context.Context, customer string) ([]billing.Terms, error) {
	const q = `SELECT ` + termsColumns + ` FROM plan_assignments WHERE customer_id = $1 ORDER BY valid_from, id`
	rows, err := bill.core.pool.Query(ctx, q, customer)
	if err != nil {
		return nil, fmt.Errorf("find terms[%s]: %w", customer, mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[termsRow])
	if err != nil {
		return nil, fmt.Errorf("scan terms[%s]: %w", customer, mapErr(err))
	}
	out := make([]billing.Terms, len(list))
	for i, r := range list {
		out[i] = toTerms(r)
	}
	return out, nil
}

// FindOverage implements billing.Store.
func (bill *Billing) FindOverage(ctx context.Context, customer string, from, to time.Time) ([]billing.Overage, error) {
	const q = `
		SELECT day, metric, overage FROM usage_history
		WHERE customer_id = $1 AND day >= $2::date AND day < $3::date AND overage > 0
		ORDER BY day, metric`
	rows, err := bill.core.pool.Query(ctx, q, customer, from.UTC().Format(time.DateOnly), to.UTC().Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("find overage[%s]: %w", customer, mapErr(err))
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (billing.Overage, error) {
		var d billing.Overage
		err := row.Scan(&d.Date, &d.Metric, &d.Units)
		d.Date = time.Date(d.Date.Year(), d.Date.Month(), d.Date.Day(), 0, 0, 0, 0, time.UTC)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan overage[%s]: %w", customer, mapErr(err))
	}
	return days, nil
}

// FindBilledCustomers implements billing.Store.
func (bill *Billing) FindBilledCustomers(ctx context.Context, from, to time.Time, page tiers.Page) ([]string, bool, error) {
	const q = `
		SELECT DISTINCT customer_id FROM plan_assignments
		WHERE customer_id > $1 AND valid_from < $3 AND (valid_to IS NULL OR valid_to > $2)
		ORDER BY customer_id
		LIMIT $4`
	rows, err := bill.core.pool.Query(ctx, q, page.After, from, to, page.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("find billed customers: %w", mapErr(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("scan billed customers: %w", mapErr(err))
	}
	more := len(ids) > page.Limit
	if more {
		ids = ids[:page.Limit]
	}
	return ids, more, nil
}

var _ billing.Store = (*Billing)(nil)
