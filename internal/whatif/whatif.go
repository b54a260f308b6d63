// Package whatif replays recorded daily usage history against proposed
// limits: how many periods would have hit a hard limit, how many units
// would have been denied, and what soft limits' overage would have earned.
// It is pure arithmetic over rows a store streams to it.
package whatif

import (
	"slices"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Row is one customer's usage of one metric on one day, as history records
// it: units admitted (Used, overage included), admitted beyond a soft limit
// (Overage) and denied (Denied).
type Row struct {
	Customer string
	Metric   string
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

// limit is a replayable limit and its count in the current period.
type limit struct {
	tiers.Limit
	cap    int64 // units admitted per period: Limit, plus a soft limit's overage
	price  int64 // micros per overage unit
	period int64 // the current period's number; -1: none yet
	count  int64 // units admitted in it
	over   bool  // whether the period is already counted in PeriodsOver
}

// Replay replays rows in order. Rows must come grouped by customer, each
// customer's in date order (metrics in any order within a day).
type Replay struct {
	byMetric map[string][]*limit
	all      []*limit
	cur      Customer
	started  bool
	res      Result
}

// New returns a replay of limits; limits whose window is shorter than a
// day, whose count never resets (total), that count per subject or that
// are elastic are not replayed and listed in the result as such.
func New(limits []tiers.Limit) *Replay {
	r := &Replay{byMetric: make(map[string][]*limit), res: Result{Customers: []Customer{}, NotReplayed: []NotReplayed{}}}
	for _, l := range limits {
		if reason := unreplayable(l); reason != "" {
			nr := NotReplayed{Metric: l.Metric, Window: l.Window.String(), Reason: reason}
			if l.Per != tiers.PerCustomer {
				nr.Per = l.Per.String()
			}
			r.res.NotReplayed = append(r.res.NotReplayed, nr)
			continue
		}
		lim := &limit{Limit: l, cap: quota.Threshold(l), period: -1}
		if l.Mode == tiers.Soft {
			if l.OveragePriceMicros != nil {
				lim.price = *l.OveragePriceMicros
			}
		}
		r.byMetric[l.Metric] = append(r.byMetric[l.Metric], lim)
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
	if !r.started || row.Customer != r.cur.Customer {
		r.flush()
		r.started = true
		r.cur = Customer{Customer: row.Customer}
		for _, l := range r.all {
			l.period, l.count, l.over = -1, 0, false
		}
	}
	r.cur.Recorded.DeniedUnits += row.Denied
	r.cur.Recorded.OverageUnits += row.Overage
	ls := r.byMetric[row.Metric]
	if len(ls) == 0 {
		return
	}
	demand := row.Used + row.Denied
	admit := demand
	for _, l := range ls {
		if p := periodOf(l.Window, row.Date); p != l.period {
			l.period, l.count, l.over = p, 0, false
		}
		if room := l.cap - l.count; room < admit {
			admit = max(room, 0)
		}
	}
	if denied := demand - admit; denied > 0 {
		r.cur.DeniedUnits += denied
		for _, l := range ls {
			if l.count+admit >= l.cap && !l.over {
				l.over = true
				r.cur.PeriodsOver++
			}
		}
	}
	for _, l := range ls {
		if l.Mode == tiers.Soft {
			over := max(l.count+admit-l.Limit.Limit, 0) - max(l.count-l.Limit.Limit, 0)
			r.cur.OverageUnits += over
			r.cur.OverageRevenueMicros += over * l.price
		}
		l.count += admit
	}
}

func (r *Replay) flush() {
	if !r.started {
		return
	}
	c := r.cur
	r.res.Replayed++
	r.res.Total.PeriodsOver += c.PeriodsOver
	r.res.Total.DeniedUnits += c.DeniedUnits
	r.res.Total.OverageUnits += c.OverageUnits
	r.res.Total.OverageRevenueMicros += c.OverageRevenueMicros
	r.res.Recorded.DeniedUnits += c.Recorded.DeniedUnits
	r.res.Recorded.OverageUnits += c.Recorded.OverageUnits
	if c.Figures != (Figures{}) || c.Recorded != (Recorded{}) {
		r.res.Customers = append(r.res.Customers, c)
	}
}

// Result ends the replay and returns what it found: customers whose
// replay or record is not all zero, in the order their rows came.
func (r *Replay) Result() Result {
	r.flush()
	r.started = false
	return r.res
}
