// Package billing turns a customer's billing terms over time and its daily
// usage history into statements: a base line per plan the customer was on
// during a period, prorated by the seconds it was on it, and an overage line
// per plan and metric, priced at the plan's overage price. Money is
// integers throughout (cents and millionths of the currency unit), every
// product is computed exactly (math/big) and each line is rounded half up
// to whole cents once; floating point is never used.
//
// The package imports only the standard library and tiers. Persistence is
// behind Store, implemented by internal/store.
package billing

import (
	"cmp"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Terms is what a customer was billed from From until To: one row of its
// plan assignments, with a snapshot of the plan as it was.
type Terms struct {
	Customer string
	From     time.Time
	// To is when the terms ended; zero while they are in effect.
	To         time.Time
	Plan       string
	PlanName   string
	PriceCents int64
	Currency   string
	// Interval is the price's: day, week, month or year.
	Interval string
	// OveragePrices is the price of one overage unit per metric, in
	// millionths of the currency unit (see OveragePrices).
	OveragePrices map[string]int64
	// AnchorDay is the day billing periods start on (0: the 1st).
	AnchorDay int
	// TimeZone is the IANA time zone whose midnight they start at (""
	// means UTC).
	TimeZone string
}

// zone returns the location of the terms' time zone.
func (t Terms) zone() *time.Location { return tiers.ZoneOf(t.TimeZone) }

// open reports whether the terms are still in effect.
func (t Terms) open() bool { return t.To.IsZero() }

// SameBilling reports whether t and u bill alike: the same plan, name,
// price, currency, interval and overage prices. The anchor day and the
// time zone are not part of it.
func (t Terms) SameBilling(u Terms) bool {
	return t.Plan == u.Plan && t.PlanName == u.PlanName && t.PriceCents == u.PriceCents &&
		t.Currency == u.Currency && t.Interval == u.Interval && maps.Equal(t.OveragePrices, u.OveragePrices)
}

// TermsOf returns the terms plan p bills for customer c (From and To
// unset).
func TermsOf(c tiers.Customer, p tiers.Plan) Terms {
	return Terms{
		Customer: c.ID, Plan: p.Key, PlanName: p.Name, PriceCents: p.Price.AmountCents,
		Currency: p.Price.Currency, Interval: p.Price.Interval, OveragePrices: OveragePrices(p.Limits),
		AnchorDay: c.Anchor.Day, TimeZone: c.Anchor.ZoneName(),
	}
}

// OveragePrices returns the overage price per metric of a plan's limits:
// the soft limits' overage_price_micros. A metric whose soft limits on
// several windows carry a price takes the customer's limits' before those
// per subject, then the longest window's, since history is kept per day
// and per metric and cannot say which window's overage a unit was.
func OveragePrices(limits []tiers.Limit) map[string]int64 {
	out := map[string]int64{}
	chosen := map[string]tiers.Limit{}
	for _, l := range limits {
		if l.OveragePriceMicros == nil {
			continue
		}
		if c, ok := chosen[l.Metric]; ok && (c.Per < l.Per || c.Per == l.Per && c.Window > l.Window) {
			continue
		}
		out[l.Metric], chosen[l.Metric] = *l.OveragePriceMicros, l
	}
	return out
}

// GrantUse is the units checks drew on one grant in a period.
type GrantUse struct {
	Grant  string
	Metric string
	Units  int64
}

// grantLines returns the lines of statement st's grant consumption: one
// per grant drawn on, of no amount (grants are paid for when granted, and
// units drawn on them are no overage), under the plan of st's last base
// line.
func grantLines(st Statement, use []GrantUse) []Line {
	plan := ""
	for _, l := range st.Lines {
		if l.Kind == KindBase {
			plan = l.Plan
		}
	}
	var out []Line
	for _, u := range use {
		metric := u.Metric
		out = append(out, Line{Kind: KindGrant, Plan: plan, Metric: &metric, Quantity: u.Units,
			Description: fmt.Sprintf("%d units of %s drawn on grant %s: paid for when granted, not billed here",
				u.Units, u.Metric, u.Grant)})
	}
	return out
}

// Overage is one day's overage units of one metric, from usage history.
type Overage struct {
	Date   time.Time // the customer's local date, as 00:00 UTC of it
	Metric string
	Units  int64
}

// Period is a billing period, [Start, End).
type Period struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// seconds is the period's length in seconds.
func (p Period) seconds() int64 { return int64(p.End.Sub(p.Start) / time.Second) }

// Month is a calendar month, as a statement's period parameter names it.
type Month struct {
	Year  int
	Month time.Month
}

var monthPattern = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}$`)

// ParseMonth parses YYYY-MM. Its error is a *tiers.ValidationError about
// field.
func ParseMonth(field, s string) (Month, error) {
	bad := tiers.Invalid(field, "must be a month, YYYY-MM (e.g. 2026-11)")
	if !monthPattern.MatchString(s) {
		return Month{}, bad
	}
	y, _ := strconv.Atoi(s[:4])
	m, _ := strconv.Atoi(s[5:])
	if y < 1 || m < 1 || m > 12 {
		return Month{}, bad
	}
	return Month{Year: y, Month: time.Month(m)}, nil
}

// String returns the month as YYYY-MM.
func (m Month) String() string { return fmt.Sprintf("%04d-%02d", m.Year, int(m.Month)) }

// Start returns the month's first instant, 00:00 UTC on the 1st.
func (m Month) Start() time.Time { return time.Date(m.Year, m.Month, 1, 0, 0, 0, 0, time.UTC) }

// next returns the month after m.
func (m Month) next() Month {
	n := m.Start().AddDate(0, 1, 0)
	return Month{Year: n.Year(), Month: n.Month()}
}

// PeriodStart returns, in UTC, when the billing period that starts in m
// starts for anchor day day (1..28; 0 means the 1st) in time zone loc:
// local midnight on that day.
func (m Month) PeriodStart(day int, loc *time.Location) time.Time {
	if day < 1 {
		day = 1
	}
	return tiers.Midnight(m.Year, m.Month, day, loc)
}

// termsAt returns the terms in effect at at: of terms (oldest first, not
// empty), the last that began by then, or the earliest.
func termsAt(terms []Terms, at time.Time) Terms {
	cur := terms[0]
	for _, t := range terms {
		if t.From.After(at) {
			break
		}
		cur = t
	}
	return cur
}

// PeriodOf returns the billing period of month m for a customer with terms
// (oldest first, not empty). It starts in m on the anchor day, at local
// midnight in the time zone, of the terms in effect at m's first instant
// (in UTC; or, before any, of the earliest terms) and ends where the next
// month's period starts. So periods never overlap nor leave a gap: one
// month long while the anchor day and the zone stay, shorter or longer
// once, across a change of either.
func PeriodOf(m Month, terms []Terms) Period {
	start, end := termsAt(terms, m.Start()), termsAt(terms, m.next().Start())
	return Period{Start: m.PeriodStart(start.AnchorDay, start.zone()), End: m.next().PeriodStart(end.AnchorDay, end.zone())}
}

// Dates returns the customer's local dates period p of terms holds, as
// 00:00 UTC of each: from the date p starts on in the time zone of the
// terms in effect then, to (excluded) the date it ends on in the zone of
// those in effect at its end. Usage history counts days in the
// customer's zone, so these are the days of history the period bills.
func Dates(p Period, terms []Terms) (from, to time.Time) {
	if len(terms) == 0 {
		return civil(p.Start, time.UTC), civil(p.End, time.UTC)
	}
	return civil(p.Start, termsAt(terms, p.Start).zone()), civil(p.End, termsAt(terms, p.End).zone())
}

// civil returns t's date in loc, as 00:00 UTC of it.
func civil(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Line kinds.
const (
	KindBase    = "base"
	KindOverage = "overage"
	// KindGrant: units drawn on a grant in the period, paid for when it
	// was granted: listed, never billed (amount 0).
	KindGrant = "grant"
)

// Line is one line of a statement.
type Line struct {
	Kind string `json:"kind"`
	Plan string `json:"plan"`
	// Metric is set on overage lines only.
	Metric *string `json:"metric"`
	// Quantity: seconds on the plan (base), overage units (overage).
	Quantity int64 `json:"quantity"`
	// UnitPriceMicros: the plan's price for one whole interval (base), the
	// price of one overage unit (overage), in millionths of the currency.
	UnitPriceMicros int64  `json:"unit_price_micros"`
	AmountCents     int64  `json:"amount_cents"`
	Description     string `json:"description"`
}

// Statement is what a customer owes for one period.
type Statement struct {
	Customer   string `json:"customer"`
	Period     Period `json:"period"`
	Currency   string `json:"currency"`
	Lines      []Line `json:"lines"`
	TotalCents int64  `json:"total_cents"`
}

// ConflictError is a statement that cannot be made: its period mixes
// currencies, or an amount does not fit 64 bits. It matches
// tiers.ErrConflict; Detail is meant for the client.
type ConflictError struct{ Detail string }

func (e *ConflictError) Error() string { return e.Detail }

// Is makes a ConflictError match tiers.ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == tiers.ErrConflict }

func overflow(what string) error {
	return &ConflictError{Detail: what + " does not fit a 64-bit integer; this statement cannot be made"}
}

// segments merges consecutive terms that bill alike into one span of
// time and drops terms of no length (closed at the instant they opened:
// two changes in one write). Terms of less than a second are kept: their
// line says 0 s, at no amount, and their currency counts.
func segments(terms []Terms) []Terms {
	var out []Terms
	for _, t := range terms {
		if !t.open() && !t.To.After(t.From) {
			continue
		}
		if n := len(out); n > 0 && !out[n-1].open() && out[n-1].To.Equal(t.From) && out[n-1].SameBilling(t) {
			out[n-1].To = t.To
			continue
		}
		out = append(out, t)
	}
	return out
}

// overlap reports whether terms s lie within p for any time, and the
// seconds they are billed for there: the whole seconds from the second
// they start in to the second they end in. Terms' instants are finer than
// seconds (see tiers.Precision); counting whole seconds at each boundary
// makes the seconds of consecutive terms add up to the period's. So terms
// of less than a second count 0 s, or 1 s if they cross into the next
// second. Open terms run to the period's end, as if nothing changed.
func (s Terms) overlap(p Period) (int64, bool) {
	from, to := s.From, p.End
	if from.Before(p.Start) {
		from = p.Start
	}
	if !s.open() && s.To.Before(to) {
		to = s.To
	}
	if !to.After(from) {
		return 0, false
	}
	return to.Unix() - from.Unix(), true
}

// Overlaps reports whether any of terms lies within p for any time.
func Overlaps(terms []Terms, p Period) bool {
	for _, s := range segments(terms) {
		if _, ok := s.overlap(p); ok {
			return true
		}
	}
	return false
}

// intervalSeconds is the length in seconds of one whole interval of a price,
// as proration counts it: a month is the calendar month from the period's
// start, local midnight to local midnight in time zone loc (the period
// itself, unless a change of anchor day or zone stretched or shortened
// it), a year twelve of them.
func intervalSeconds(interval string, p Period, loc *time.Location) (int64, string) {
	y, m, d := p.Start.In(loc).Date()
	month := int64(tiers.Midnight(y, m+1, d, loc).Sub(p.Start) / time.Second)
	switch interval {
	case "year":
		return 12 * month, "year's"
	case "week":
		return 7 * 86400, "week's"
	case "day":
		return 86400, "day's"
	}
	if month != p.seconds() {
		// A period stretched or shortened by a change of anchor day or zone.
		return month, "month's"
	}
	return month, "period's"
}

// Build makes the statement of customer for period p from its terms
// (oldest first, as written) and its overage days within p. It returns a
// *ConflictError when the lines mix currencies or an amount does not fit
// an int64.
func Build(customer string, p Period, terms []Terms, usage []Overage) (Statement, error) {
	st := Statement{Customer: customer, Period: p, Lines: []Line{}}
	if len(terms) > 0 {
		st.Currency = terms[len(terms)-1].Currency
	}
	segs := segments(terms)
	if len(segs) == 0 && len(terms) > 0 {
		// Only terms of no length: overage, if any, is priced by the last.
		segs = terms[len(terms)-1:]
	}
	currencies := map[string]bool{}
	loc := time.UTC // the zone the period started in
	if len(terms) > 0 {
		loc = termsAt(terms, p.Start).zone()
	}

	for _, s := range segs {
		secs, ok := s.overlap(p)
		if !ok {
			continue
		}
		per, name := intervalSeconds(s.Interval, p, loc)
		amount, ok := roundHalfUp(mul(s.PriceCents, secs), per)
		if !ok {
			return Statement{}, overflow("the base amount of " + s.Plan)
		}
		unit, ok := product(s.PriceCents, 10000)
		if !ok {
			return Statement{}, overflow("the price of " + s.Plan)
		}
		currencies[s.Currency] = true
		st.Lines = append(st.Lines, Line{
			Kind: KindBase, Plan: s.Plan, Quantity: secs, UnitPriceMicros: unit, AmountCents: amount,
			Description: fmt.Sprintf("%s, %s %s per %s, for %d s of the %s %d s",
				s.PlanName, cents(s.PriceCents), s.Currency, s.Interval, secs, name, per),
		})
	}

	// Each day (a local date of the customer's) is priced by the terms in
	// effect at its last instant.
	type key struct {
		seg    int
		metric string
	}
	units := map[key]int64{}
	from, to := Dates(p, terms)
	for _, d := range usage {
		if d.Units <= 0 || d.Date.Before(from) || !d.Date.Before(to) || len(segs) == 0 {
			continue
		}
		end := tiers.Midnight(d.Date.Year(), d.Date.Month(), d.Date.Day()+1, loc)
		seg := 0
		for i, s := range segs {
			if s.From.Before(end) {
				seg = i
			}
		}
		k := key{seg, d.Metric}
		sum := units[k] + d.Units
		if sum < units[k] {
			return Statement{}, overflow("the overage units of " + d.Metric)
		}
		units[k] = sum
	}
	keys := slices.SortedFunc(maps.Keys(units), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.seg, b.seg), strings.Compare(a.metric, b.metric))
	})
	for _, k := range keys {
		s, n := segs[k.seg], units[k]
		metric := k.metric
		line := Line{Kind: KindOverage, Plan: s.Plan, Metric: &metric, Quantity: n}
		price, priced := s.OveragePrices[k.metric]
		if priced {
			amount, ok := roundHalfUp(mul(n, price), 10000)
			if !ok {
				return Statement{}, overflow("the overage amount of " + k.metric)
			}
			line.UnitPriceMicros, line.AmountCents = price, amount
			line.Description = fmt.Sprintf("%d overage units of %s on %s at %d micros (%s %s) each",
				n, k.metric, s.PlanName, price, micros(price), s.Currency)
		} else {
			line.Description = fmt.Sprintf("%d overage units of %s on %s, which has no overage price for it: not billed",
				n, k.metric, s.PlanName)
		}
		currencies[s.Currency] = true
		st.Lines = append(st.Lines, line)
	}

	if len(currencies) > 1 {
		list := slices.Sorted(maps.Keys(currencies))
		return Statement{}, &ConflictError{Detail: fmt.Sprintf(
			"the period of customer %s mixes currencies %s: one statement bills one currency", customer, strings.Join(list, " and "))}
	}
	for c := range currencies {
		st.Currency = c
	}
	for _, l := range st.Lines {
		total := st.TotalCents + l.AmountCents
		if total < st.TotalCents {
			return Statement{}, overflow("the total")
		}
		st.TotalCents = total
	}
	return st, nil
}

func mul(a, b int64) *big.Int { return new(big.Int).Mul(big.NewInt(a), big.NewInt(b)) }

// product returns a×b if it fits an int64.
func product(a, b int64) (int64, bool) {
	p := mul(a, b)
	return p.Int64(), p.IsInt64()
}

// roundHalfUp returns num/den rounded half up (num >= 0, den > 0), if it
// fits an int64: floor((2·num + den) / (2·den)).
func roundHalfUp(num *big.Int, den int64) (int64, bool) {
	d := big.NewInt(den)
	n := new(big.Int).Lsh(num, 1)
	n.Add(n, d)
	n.Quo(n, d.Lsh(d, 1))
	return n.Int64(), n.IsInt64()
}

// cents writes an amount of cents in currency units: 4900 is 49.00.
func cents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

// micros writes millionths in currency units without trailing zeros: 1000
// is 0.001.
func micros(m int64) string {
	s := fmt.Sprintf("%d.%06d", m/1000000, m%1000000)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
