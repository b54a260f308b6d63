// Package quota decides whether a customer may use units of a metric now:
// it evaluates every effective limit of the check at once, all or nothing,
// counts short windows (second, minute) in process with a sliding window
// counter and long windows (hour, day, week, month) through a Ledger shared
// by every quotad process.
//
// NOTE on over-limit behaviour. A denied check is a result (Decision with
// Allowed false), never an error, and it charges nothing anywhere: units
// taken from short windows are given back when a long window denies. Soft
// limits admit up to floor(limit*(100+overage_percent)/100) and report the
// units above the limit as overage; elastic limits admit beyond the limit
// only while the metric's global usage in that window plus the whole cost
// stays within its declared capacity, and within the ceiling. Every
// computation is exact integer arithmetic; time comes from an injected
// Clock.
package quota

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Clock tells the engine the time.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock, in UTC.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// MaxCost is the largest cost one check may carry.
const MaxCost = 1_000_000_000

// Request is one check: may Customer use Cost units of Metric now?
type Request struct {
	Customer  string
	Metric    string
	Cost      int64
	DryRun    bool
	RequestID string
}

// RefundRequest gives units back to a customer's current windows.
type RefundRequest struct {
	Customer  string
	Metric    string
	Cost      int64
	RequestID string
}

// State is how a window stands after a check.
type State string

// The window states.
const (
	StateOK       State = "ok"       // within the limit
	StateOverage  State = "overage"  // soft limit, above the limit
	StateElastic  State = "elastic"  // above the limit, admitted on spare capacity
	StateExceeded State = "exceeded" // this window denied the check
)

// WindowResult is one window's part of a Decision.
type WindowResult struct {
	Window    tiers.Window
	Mode      tiers.Mode
	Limit     int64
	Used      int64
	Remaining int64
	ResetAt   time.Time
	State     State
	// Length is the window's length at the time of the check (calendar
	// months vary), for the RateLimit-Policy header.
	Length time.Duration
}

// Decision is the answer to a check.
type Decision struct {
	Allowed  bool
	Customer string
	Metric   string
	Cost     int64
	// Overage: the check landed units above a soft limit.
	Overage bool
	// Elastic: the check was admitted beyond a limit on spare capacity.
	Elastic bool
	// RetryAfter is, for a denied check, the fewest whole seconds (>= 1)
	// after which the same check would pass; 0 when allowed. Never is set
	// instead when the check can never pass.
	RetryAfter int64
	Never      bool
	// Degraded: the store could not be consulted; the long windows it
	// would have counted are left out of Limits.
	Degraded bool
	Limits   []WindowResult
	// Replayed: the answer was recorded under the same request id before.
	Replayed bool
}

// Usage is one effective limit's current count.
type Usage struct {
	Metric    string
	Window    tiers.Window
	Limit     int64
	Used      int64
	Remaining int64
	Overage   int64
	ResetAt   time.Time
}

// Day is one day of a customer's usage history of one metric.
type Day struct {
	Date    time.Time // 00:00 UTC
	Metric  string
	Used    int64
	Overage int64
	Denied  int64
}

// Catalog is what the engine reads about customers and metrics, from
// memory. tiers.Cache implements it. Errors: tiers.ErrCustomerNotFound,
// tiers.ErrMetricNotFound, tiers.ErrUnavailable.
type Catalog interface {
	Metric(ctx context.Context, key string) (tiers.Metric, error)
	Account(ctx context.Context, id string) (tiers.Account, error)
}

// CounterKey names one long-window counter.
type CounterKey struct {
	Customer string
	Metric   string
	Window   tiers.Window
	Start    time.Time
}

// GlobalKey names a metric's global usage in one long window: every
// admitted unit of the metric, all customers.
type GlobalKey struct {
	Metric string
	Window tiers.Window
	Start  time.Time
}

// WindowCharge is one long window of a Charge.
type WindowCharge struct {
	Window tiers.Window
	Start  time.Time
	// Threshold: the window admits the cost while used + cost <= Threshold.
	Threshold int64
	// Spare: beyond Threshold, the window admits the cost while the
	// metric's global usage in Global plus the cost stays within Capacity
	// and used + cost stays within Ceiling (elastic limits with declared
	// capacity).
	Spare    bool
	Capacity int64
	Ceiling  int64
	Global   GlobalKey
}

// Admits reports whether the window admits cost at used, given the
// metric's global usage, and whether only spare capacity admits it.
func (w WindowCharge) Admits(used, global, cost int64) (ok, elastic bool) {
	if used+cost <= w.Threshold {
		return true, false
	}
	if w.Spare && global+cost <= w.Capacity && used+cost <= w.Ceiling {
		return true, true
	}
	return false, false
}

// Charge asks a Ledger to count Cost units in every window, all or nothing.
type Charge struct {
	Customer string
	Metric   string
	Cost     int64
	Windows  []WindowCharge
	// Globals are the metric's windows with declared capacity: every
	// admitted unit counts there, whatever the customer's limits.
	Globals []GlobalKey
	// RequestID, when set, makes the charge idempotent: see Ledger.
	RequestID string
	// Answer encodes the decision to keep under RequestID; it is called
	// with the outcome when every window admits.
	Answer func(Outcome) ([]byte, error)
	At     time.Time
}

// Outcome is what a Ledger did with a Charge.
type Outcome struct {
	Allowed bool
	// Per window of the Charge: the count before this charge, whether the
	// window admits the cost, and whether only spare capacity admits it.
	Used    []int64
	Passed  []bool
	Elastic []bool
	// Replay is the answer recorded earlier under the same request id;
	// nothing was charged.
	Replay *Recorded
}

// Recorded is a check answer kept under its request id.
type Recorded struct {
	Metric string
	Cost   int64
	Answer []byte
}

// RefundCharge asks a Ledger to give units back.
type RefundCharge struct {
	Customer  string
	Metric    string
	Cost      int64
	Counters  []CounterKey
	Globals   []GlobalKey
	RequestID string
	At        time.Time
}

// GlobalGiveBack returns, per r.Globals, how many units the refund takes
// off the metric's global usage, given the counts of r.Counters before it:
// what the customer's counter of the same window and start gave back, as
// those units were counted in the global window when they were charged. A
// global window without such a counter (no limit there, or a month anchored
// on another day) gets nothing back, as the customer's share of it is not
// known: counting too much there only makes elastic limits more cautious,
// where counting too little would let them pass the declared capacity.
func (r RefundCharge) GlobalGiveBack(before []int64) []int64 {
	out := make([]int64, len(r.Globals))
	for i, g := range r.Globals {
		for j, k := range r.Counters {
			if k.Window == g.Window && k.Start.Equal(g.Start) && j < len(before) {
				out[i] = min(r.Cost, max(0, before[j]))
				break
			}
		}
	}
	return out
}

// Ledger keeps long-window counters in a store that every quotad process
// shares. Implementations are safe for concurrent use and keep hard limits
// exact across processes: a window's count only changes by atomic
// conditional updates. Errors: tiers.ErrUnavailable when the store cannot
// be reached (nothing was charged), tiers.ErrCustomerNotFound when the
// customer went away.
type Ledger interface {
	// Charge adds c.Cost to every window of c, in one transaction, if and
	// only if every window admits it. With c.RequestID set, a request id
	// recorded for the customer within the last 24 hours returns its
	// Recorded answer and charges nothing; otherwise an admitted charge
	// records c.Answer under the id, in the same transaction.
	Charge(ctx context.Context, c Charge) (Outcome, error)
	// Recorded returns the answer recorded under a check's request id
	// within the last 24 hours, or nil.
	Recorded(ctx context.Context, customer, requestID string, now time.Time) (*Recorded, error)
	// Peek returns current counts of counters and global usages.
	Peek(ctx context.Context, counters []CounterKey, globals []GlobalKey) ([]int64, []int64, error)
	// Refund subtracts up to Cost from each counter (never below zero) and
	// returns the counts before. A refund id seen within 24 hours refunds
	// nothing and reports replayed.
	Refund(ctx context.Context, r RefundCharge) (before []int64, replayed bool, err error)
	// Reset zeroes the customer's counters of metric, recording an audit
	// event for actor, and tells every quotad process to zero its short
	// windows too.
	Reset(ctx context.Context, actor, customer, metric string, at time.Time) error
	// Purge deletes counters of windows long past and request ids older
	// than 24 hours.
	Purge(ctx context.Context, now time.Time) error
}

// HistoryDelta is a change to one day of usage history.
type HistoryDelta struct {
	Customer string
	Metric   string
	Date     time.Time
	Used     int64 // may be negative (refunds); the store keeps days >= 0
	Overage  int64
	Denied   int64
}

// HistoryStore keeps daily usage history, beyond customers' lives.
type HistoryStore interface {
	AddHistory(ctx context.Context, deltas []HistoryDelta) error
	// FindHistory returns days from..to inclusive, by date then metric;
	// metric "" means every metric.
	FindHistory(ctx context.Context, customer, metric string, from, to time.Time) ([]Day, error)
}
