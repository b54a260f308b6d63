// Package whatif replays recorded daily usage history against proposed
// limits: how many periods would have hit a hard limit, how many units
// would have been denied, and what soft limits' overage would have earned.
// It is pure arithmetic over rows a store streams to it.
package whatif

import (
	"slices"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Row is one customer's usage of one metric on one day, as history records
// it: units admitted (Used, overage included), admitted beyond a soft limit
// (Overage) and denied (Denied). Customer and Metric are bytes a store may
// reuse for its next row: Add copies what it keeps, so that a replay of
// millions of rows allocates once per customer, not once per row.
type Row struct {
	Customer []byte
	Metric   []byte
	Date     time.Time // 00:00 UTC of the customer's local date
	Used     int64
	Overage  int64
	Denied   int64
}

// Figures are what a replay found, for a customer or in total.
type Figures struct {
	// PeriodsOver counts the periods (a limit's day, week or month) in
	// which that hard limit, or a soft limit's ceiling, would have denied
	// some demand.
	PeriodsOver int64 `json:"periods_over"`
	// DeniedUnits is demand (units used and denied that day) that would
	// have been denied.
	DeniedUnits int64 `json:"denied_units"`
	// OverageUnits are units soft limits would have admitted beyond their
	// limit, OverageRevenueMicros their price.
	OverageUnits         int64 `json:"overage_units"`
	OverageRevenueMicros int64 `json:"overage_revenue_micros"`
}

// Recorded is what history says happened.
type Recorded struct {
	DeniedUnits  int64 `json:"denied_units"`
	OverageUnits int64 `json:"overage_units"`
}

// Customer is one customer's replay.
type Customer struct {
	Customer string `json:"customer"`
	Figures
	Recorded Recorded `json:"recorded"`
}

// NotReplayed is a proposed limit daily history cannot replay, and why.
type NotReplayed struct {
	Metric string `json:"metric"`
	Window string `json:"window"`
	Per    string `json:"per,omitempty"`
	Reason string `json:"reason"`
}

// Result is a whole replay.
type Result struct {
	Customers   []Customer    `json:"customers"`
	Total       Figures       `json:"total"`
	Recorded    Recorded      `json:"recorded"`
	Replayed    int64         `json:"customers_replayed"`
	NotReplayed []NotReplayed `json:"not_replayed"`
}

// limit is a replayable limit.
type limit struct {
	tiers.Limit
	cap   int64 // units admitted per period: Limit, plus a soft limit's overage
	price int64 // micros per overage unit
}

// period is a customer's count of one limit in its current period.
type period struct {
	n     int64 // the period's number (see periodOf); -1: none yet
	count int64 // units admitted in it
	over  bool  // whether the period is already counted in PeriodsOver
}

// customer is one customer's replay so far: its figures and, for each
// limit of the replay (in the order of Replay.all), its current period.
type customer struct {
	Customer
	periods []period
}

// Replay replays rows in date order: a customer's rows must come in date
// order; customers' rows may interleave (a store reads a day at a time),
// and metrics come in any order within a day.
type Replay struct {
	all      []limit
	byMetric map[string][]int // indexes into all
	// customers holds each customer's replay so far: a few words per
	// customer and limit, so that a day's rows need not come grouped.
	customers   map[string]*customer
	notReplayed []NotReplayed
}

// New returns a replay of limits; limits whose window is shorter than a
// day, whose count never resets (total), that count per subject or that
// are elastic are not replayed and listed in the result as such.
func New(limits []tiers.Limit) *Replay {
	r := &Replay{byMetric: make(map[string][]int), customers: make(map[string]*customer), notReplayed: []NotReplayed{}}
	for _, l := range limits {
		if reason := unreplayable(l); reason != "" {
			nr := NotReplayed{Metric: l.Metric, Window: l.Window.String(), Reason: reason}
			if l.Per != tiers.PerCustomer {
				nr.Per = l.Per.String()
			}
			r.notReplayed = append(r.notReplayed, nr)
			continue
		}
		lim := limit{Limit: l, cap: quota.Threshold(l)}
		if l.Mode == tiers.Soft && l.OveragePriceMicros != nil {
			lim.price = *l.OveragePriceMicros
		}
		r.byMetric[l.Metric] = append(r.byMetric[l.Metric], len(r.all))
		r.all = append(r.all, lim)
	}
	return r
}

// Metrics lists the metrics the replay reads: those of its replayable
// limits.
func (r *Replay) Metrics() []string {
	out := make([]string, 0, len(r.byMetric))
	for m := range r.byMetric {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

func unreplayable(l tiers.Limit) string {
	switch {
	case l.Window < tiers.Day:
		return "history is kept by day: a window shorter than a day cannot be replayed"
	case l.Window == tiers.Total:
		return "a total is a gauge that history does not record"
	case l.Per != tiers.PerCustomer:
		return "history is kept per customer, not per subject"
	case l.Mode == tiers.Elastic:
		return "an elastic limit depends on spare capacity history does not record"
	}
	return ""
}

// periodOf numbers the period of w date falls in: its day, its week
// (from Monday) or its calendar month.
func periodOf(w tiers.Window, date time.Time) int64 {
	days := date.Unix() / 86400
	switch w {
	case tiers.Week:
		return (days + 3) / 7 // 1970-01-01 was a Thursday
	case tiers.Month:
		y, m, _ := date.Date()
		return int64(y)*12 + int64(m)
	}
	return days
}

// Add replays one row.
func (r *Replay) Add(row Row) {
	c := r.customers[string(row.Customer)]
	if c == nil {
		c = &customer{Customer: Customer{Customer: string(row.Customer)}, periods: make([]period, len(r.all))}
		for i := range c.periods {
			c.periods[i].n = -1
		}
		r.customers[c.Customer.Customer] = c
	}
	c.Recorded.DeniedUnits += row.Denied
	c.Recorded.OverageUnits += row.Overage
	ls := r.byMetric[string(row.Metric)]
	if len(ls) == 0 {
		return
	}
	demand := row.Used + row.Denied
	admit := demand
	for _, i := range ls {
		l, p := &r.all[i], &c.periods[i]
		if n := periodOf(l.Window, row.Date); n != p.n {
			*p = period{n: n}
		}
		if room := l.cap - p.count; room < admit {
			admit = max(room, 0)
		}
	}
	if denied := demand - admit; denied > 0 {
		c.DeniedUnits += denied
		for _, i := range ls {
			if p := &c.periods[i]; p.count+admit >= r.all[i].cap && !p.over {
				p.over = true
				c.PeriodsOver++
			}
		}
	}
	for _, i := range ls {
		l, p := &r.all[i], &c.periods[i]
		if l.Mode == tiers.Soft {
			over := max(p.count+admit-l.Limit.Limit, 0) - max(p.count-l.Limit.Limit, 0)
			c.OverageUnits += over
			c.OverageRevenueMicros += over * l.price
		}
		p.count += admit
	}
}

// Result returns what the replay found: customers whose replay or record
// is not all zero, by id, and the totals over every customer with rows.
func (r *Replay) Result() Result {
	res := Result{Customers: []Customer{}, NotReplayed: r.notReplayed, Replayed: int64(len(r.customers))}
	for _, c := range r.customers {
		res.Total.PeriodsOver += c.PeriodsOver
		res.Total.DeniedUnits += c.DeniedUnits
		res.Total.OverageUnits += c.OverageUnits
		res.Total.OverageRevenueMicros += c.OverageRevenueMicros
		res.Recorded.DeniedUnits += c.Recorded.DeniedUnits
		res.Recorded.OverageUnits += c.Recorded.OverageUnits
		if c.Figures != (Figures{}) || c.Recorded != (Recorded{}) {
			res.Customers = append(res.Customers, c.Customer)
		}
	}
	slices.SortFunc(res.Customers, func(a, b Customer) int { return strings.Compare(a.Customer, b.Customer) })
	return res
}
