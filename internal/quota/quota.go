// Package quota decides whether a customer may use units of a metric now:
// it evaluates every effective limit of the check at once, all or nothing,
// counts short windows (second, minute) in process, each by the algorithm
// its limit names (sliding window counter, fixed window, sliding log or
// token bucket; see algorithms.go), and long windows (hour, day, week,
// month, and total, which never resets) through a ledger shared by every
// quotad process.
//
// NOTE on over-limit behaviour. A denied check is a result (Decision with
// Allowed false), never an error, and it charges nothing anywhere: units
// taken from short windows are given back when a long window denies; but
// a forced check (Request.Force: the work is done) is counted denied. Soft
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

// MaxItems is the most items one check may carry: an Envoy request's
// descriptors are items, up to 64 of them (POST /v1/check takes 16).
const MaxItems = 64

// Request is one check: may Customer use Cost units of Metric now (as
// Subject, where the metric has limits per subject)? A check of several
// metrics at once names them in Items instead, each with its cost and
// subject: it is admitted on all of them or none.
type Request struct {
	Customer string
	Metric   string
	Cost     int64
	// Subject is who within the customer spends the units (an end user,
	// an IP, an API key's id): limits per subject count for it alone.
	Subject string
	// Items, when set, stand for Metric, Cost and Subject (which are
	// then empty): 1 to MaxItems of them, no customer, metric and subject
	// twice.
	Items []Item
	// DryRun answers as if checked, counting nothing: each window with
	// the check's units added.
	DryRun bool
	// Look answers as DryRun does, counting nothing, but each window as
	// it stands, without the check's units (a look takes nothing): a window
	// denies when it has no room for Cost (Envoy's hits_addend of 0 is a
	// look of cost 1: denied only when nothing is left).
	Look bool
	// Force counts the units even where a window denies them (the work
	// is done: an LLM's tokens, reported once its answer has streamed).
	// The decision is the one a check would get, denied where a window
	// has no room, but every window counts the units, whatever its limit,
	// and reports them; in every process, as a reservation's commit
	// counts its units beyond the estimate. Not with DryRun, Look or
	// RequestID.
	Force     bool
	RequestID string
}

// Item is one metric a check charges, with its cost and subject.
type Item struct {
	// Customer, where set, is the item's customer in place of the
	// request's: the descriptors of one Envoy request each name theirs.
	Customer string
	Metric   string
	Cost     int64
	Subject  string
}

// RefundRequest gives units back to a customer's current windows.
type RefundRequest struct {
	Customer string
	Metric   string
	Cost     int64
	Subject  string
	// RequestID, when set, names the check whose units the refund gives
	// back: a check of Customer admitted within the last 24 hours with
	// that request id (see Engine.Refund).
	RequestID string
	// Actor is who asked for the refund, as the audit log names it.
	Actor string
}

// RefundEvent is the audit log's record of one refund: who asked, what
// it asked for and what it gave back.
type RefundEvent struct {
	At       time.Time
	Actor    string
	Customer string
	Metric   string
	Subject  string
	// RequestID is the check the refund named; "" for none.
	RequestID string
	// Cost is what the refund asked for; Refunded what it took back (see
	// RefundResult.Refunded).
	Cost     int64
	Refunded int64
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
	// Metric is the metric the window counts: the check's, or the credit
	// pool it draws on.
	Metric string
	// Subject is the subject a window of a limit per subject counts for;
	// "" for the customer's windows.
	Subject   string
	Window    tiers.Window
	Mode      tiers.Mode
	Limit     int64
	Used      int64
	Remaining int64
	// ResetAt is the zero time for a window that never resets (total).
	ResetAt time.Time
	State   State
	// Length is the window's length at the time of the check (calendar
	// months vary), for the RateLimit-Policy header; 0 for a total.
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
	// Granted is how many units the check drew on the customer's grants
	// (see Grants): 0 for a check its windows admitted.
	Granted int64
	Limits  []WindowResult
	// Replayed: the answer was recorded under the same request id before.
	Replayed bool
	// StoreTrips counts the round trips to PostgreSQL this check made.
	StoreTrips int
	// Items, for a check of items, is each item's part of the decision,
	// in the request's order; Limits then holds every window of every
	// item, each once.
	Items []ItemResult
	// Upgrade, on a denied check of one metric whose denying windows are
	// hard limits, is the public plan that would have admitted it (see
	// tiers.CheapestUpgrade); nil otherwise.
	Upgrade *tiers.Upgrade
}

// ItemResult is one item's part of a Decision.
type ItemResult struct {
	Customer string
	Metric   string
	Subject  string
	Cost     int64
	// Allowed: every window of the item admits it. A check is allowed
	// only when every item is.
	Allowed bool
	// Remaining is the fewest units of the item's metric its windows
	// still admit (a credit pool's remaining credits count as the units
	// of the metric they buy); nil when no window limits the item.
	Remaining *int64
	// Limits are the item's windows: its metric's, for the customer and
	// for the subject, then those of the credit pool it draws on.
	Limits []WindowResult
	// RetryAfter and Never are the item's alone, as the Decision's.
	RetryAfter int64
	Never      bool
}

// Usage is one effective limit's current count.
type Usage struct {
	Metric string
	// Subject is the subject a limit per subject counts for; "" for the
	// customer's limits.
	Subject string
	Window  tiers.Window
	// Mode is the limit's: hard, soft or elastic.
	Mode tiers.Mode
	// Algorithm and Burst are the short window's, as its limit names them.
	Algorithm tiers.Algorithm
	Burst     *int64
	Limit     int64
	Used      int64
	Remaining int64
	Overage   int64
	// ResetAt is the zero time for a window that never resets (total).
	ResetAt time.Time
	// Granted is, for a hard window of a day or longer, how many units of
	// the window grants paid for (not counted in Used).
	Granted int64
	// Refunded, in a refund's answer, is how many units the refund took
	// off this window's count (see RefundResult); 0 elsewhere.
	Refunded int64
}

// RefundResult is what a refund did.
type RefundResult struct {
	// Refunded is how many units the refund took back: the most it took
	// off any one window's count. A refund takes min(cost, used) off each
	// window, used being the window's count just before (as Usage reports
	// it), so 1000 units refunded against 9 used take back 9; a refund
	// naming a check takes back at most what that check charged. It is 0
	// when the metric has no effective limit (no window counts it) and
	// when the check was refunded before (nothing is taken back twice).
	Refunded int64
	// Usage is the metric's usage after the refund, each window with
	// what the refund took off it.
	Usage []Usage
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
	// PublicPlans returns the public plans, ordered by key.
	PublicPlans(ctx context.Context) ([]tiers.Plan, error)
}
