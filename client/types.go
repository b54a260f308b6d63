package quotad

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Windows, as quotad names them. second and minute are short windows;
// hour, day, week and month calendar windows in UTC; total never resets (a
// gauge: seats, projects; checks add to it, refunds take from it, and
// CustomersService.SetTotal sets it). A total's ResetAt is the zero time.
const (
	Second = "second"
	Minute = "minute"
	Hour   = "hour"
	Day    = "day"
	Week   = "week"
	Month  = "month"
	Total  = "total"
)

// Modes of a limit.
const (
	// Hard allows a check while used + cost <= limit.
	Hard = "hard"
	// Soft allows OveragePercent beyond the limit, counted as overage.
	Soft = "soft"
	// Elastic allows beyond the limit while the metric has spare capacity,
	// up to Ceiling.
	Elastic = "elastic"
)

// Algorithms of a short window.
const (
	SlidingWindow = "sliding_window"
	FixedWindow   = "fixed_window"
	SlidingLog    = "sliding_log"
	TokenBucket   = "token_bucket"
)

// Whom a limit counts for: the customer as a whole (the default, "" in a
// Limit), or each subject of the customer apart (an end user, an IP, an
// API key), beside the customer-wide limits of the metric.
const (
	PerCustomer = "customer"
	PerSubject  = "subject"
)

// Meta is what every stored resource carries.
type Meta struct {
	// Version grows by one on every write.
	Version int64 `json:"version"`
	// ETag is the strong entity tag of Version, as IfMatch takes it.
	ETag      string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// etagOf is the entity tag quotad makes of a version.
func etagOf(version int64) string { return strconv.Quote(strconv.FormatInt(version, 10)) }

// Capacity is a metric's global budget per window, keyed by window (Second
// ... Month).
type Capacity map[string]int64

// MetricSpec is the body of MetricsService.Put.
type MetricSpec struct {
	Description string   `json:"description,omitempty"`
	Capacity    Capacity `json:"capacity,omitempty"`
	// CreditSchema makes the metric a credit pool: a check of a metric it
	// names also charges the pool ceil(cost * Credits / Per) units. A
	// metric draws on at most one pool, and a pool on none.
	CreditSchema []CreditRate `json:"credit_schema,omitempty"`
}

// CreditRate is how one metric draws on a credit pool: Credits units of
// the pool for every Per units of the metric (Per 1 when 0).
type CreditRate struct {
	Metric  string `json:"metric"`
	Credits int64  `json:"credits"`
	Per     int64  `json:"per,omitempty"`
}

// Metric is a declared metric.
type Metric struct {
	Key string `json:"key"`
	MetricSpec
	Meta
}

// Limit is how many units of a metric may be used per window, and what
// happens beyond; a plan lists them. The zero values of the optional
// fields are what quotad answers where they do not apply, so a Limit read
// from quotad can be sent back as it is.
type Limit struct {
	Metric string `json:"metric"`
	Window string `json:"window"`
	Limit  int64  `json:"limit"`
	// Mode is Hard (the default when empty), Soft or Elastic.
	Mode string `json:"mode,omitempty"`
	// OveragePercent: how far beyond Limit a soft limit admits.
	OveragePercent     int    `json:"overage_percent,omitempty"`
	OveragePriceMicros *int64 `json:"overage_price_micros,omitempty"`
	// Ceiling bounds an elastic limit.
	Ceiling *int64 `json:"ceiling,omitempty"`
	// Algorithm counts a short window; SlidingWindow when empty.
	Algorithm string `json:"algorithm,omitempty"`
	// Burst is a token bucket's size; Limit when nil.
	Burst *int64 `json:"burst,omitempty"`
	// Per is PerCustomer (the default when empty) or PerSubject. A plan
	// may have a customer-wide limit and a limit per subject on one
	// metric and window.
	Per string `json:"per,omitempty"`
	// Rollover, on a hard limit of a day, week or month, turns the
	// window's unused units (at most Max) into a grant that expires when
	// the next window ends.
	Rollover *Rollover `json:"rollover,omitempty"`
}

// Rollover is how much of a window's unused units roll over into the
// next window.
type Rollover struct {
	Max int64 `json:"max"`
}

// Price is what a plan costs per interval.
type Price struct {
	AmountCents int64 `json:"amount_cents"`
	// Currency is an ISO 4217 code; USD when empty.
	Currency string `json:"currency,omitempty"`
	// Interval is day, week, month (the default when empty) or year.
	Interval string `json:"interval,omitempty"`
}

// PlanSpec is the body of PlansService.Put.
type PlanSpec struct {
	// Name defaults to the plan's key.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Public: the plan may be offered as the Upgrade of a check a hard
	// limit denies.
	Public bool    `json:"public,omitempty"`
	Price  *Price  `json:"price,omitempty"`
	Limits []Limit `json:"limits,omitempty"`
	// Features the plan grants, by key.
	Features Features `json:"features,omitempty"`
}

// Plan is a billing tier.
type Plan struct {
	Key string `json:"key"`
	PlanSpec
	// LatestVersion is the number of the plan's newest version, whose
	// price, limits and features PlanSpec holds (Meta.Version counts
	// writes).
	LatestVersion int64 `json:"latest_version"`
	Meta
}

// PlanVersion is a plan's price, limits and features as they were from
// CreatedAt on: every change of them made a version.
type PlanVersion struct {
	Plan     string   `json:"plan"`
	Version  int64    `json:"version"`
	Price    *Price   `json:"price"`
	Limits   []Limit  `json:"limits"`
	Features Features `json:"features"`
	// Customers counts the customers on this version now.
	Customers int64     `json:"customers"`
	CreatedAt time.Time `json:"created_at"`
}

// MigrationSpec is the body of PlansService.Migrate: the version whose customers
// move (nil: every version older than ToVersion), the version they move to
// (nil: the latest), and whether to move them at all.
type MigrationSpec struct {
	FromVersion *int64 `json:"from_version,omitempty"`
	ToVersion   *int64 `json:"to_version,omitempty"`
	DryRun      bool   `json:"dry_run"`
}

// Migration is what a migration moved, or would move.
type Migration struct {
	Plan         string             `json:"plan"`
	FromVersions []int64            `json:"from_versions"`
	ToVersion    int64              `json:"to_version"`
	DryRun       bool               `json:"dry_run"`
	Customers    []MigratedCustomer `json:"customers"`
}

// MigratedCustomer is a customer a migration moves, and the windows whose
// current usage is beyond the limits it moves to.
type MigratedCustomer struct {
	Customer    string      `json:"customer"`
	FromVersion int64       `json:"from_version"`
	OverLimit   []OverLimit `json:"over_limit"`
}

// OverLimit is a window whose current usage is beyond a limit.
type OverLimit struct {
	Metric string `json:"metric"`
	Window string `json:"window"`
	Used   int64  `json:"used"`
	Limit  int64  `json:"limit"`
}

// CustomerSpec is the body of CustomersService.Put.
type CustomerSpec struct {
	Plan string `json:"plan"`
	Name string `json:"name,omitempty"`
	// BillingAnchorDay (1..28) starts month windows on that day; nil for
	// calendar months.
	BillingAnchorDay *int `json:"billing_anchor_day,omitempty"`
	// TimeZone is an IANA time zone name ("Europe/Berlin"): the
	// customer's day, week and month windows and its billing periods
	// start at local midnight there. Empty means UTC; quotad answers
	// "UTC" then.
	TimeZone string   `json:"time_zone,omitempty"`
	Metadata Metadata `json:"metadata,omitempty"`
	// Status is StatusActive (the default, "") or StatusSuspended: a
	// suspended customer's checks are refused (ErrCustomerSuspended) for
	// StatusReason.
	Status       string `json:"status,omitempty"`
	StatusReason string `json:"status_reason,omitempty"`
	// Trial puts the customer on another plan until it ends.
	Trial *Trial `json:"trial,omitempty"`
	// ScheduledChange moves the customer to another plan at an instant.
	ScheduledChange *ScheduledChange `json:"scheduled_change,omitempty"`
}

// The statuses of a customer.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended"
)

// Trial is a customer's trial: it is on Plan until EndsAt (a future
// instant, whole seconds), billed nothing for it, then back on its own
// plan; quotad applies the end at that instant.
type Trial struct {
	Plan   string    `json:"plan"`
	EndsAt time.Time `json:"ends_at"`
}

// ScheduledChange moves a customer to Plan at At: an RFC 3339 instant in
// the future (whole seconds; see At), or PeriodEnd. quotad applies it at
// that instant; read back, At is always the instant.
type ScheduledChange struct {
	Plan string `json:"plan"`
	At   string `json:"at"`
}

// PeriodEnd is ScheduledChange.At for the end of the customer's billing
// period in progress when it is written.
const PeriodEnd = "period_end"

// At returns the RFC 3339 form of t for ScheduledChange.At.
func At(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Metadata is a customer's free-form JSON object. Read from quotad, its
// numbers are json.Number, not float64, so that they keep their digits
// (1.50 stays 1.50, an integer beyond 2^53 stays exact) when sent back.
type Metadata map[string]any

// UnmarshalJSON decodes a JSON object, numbers as json.Number.
func (m *Metadata) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return err
	}
	*m = obj
	return nil
}

// Customer is a customer of the SaaS and its plan.
type Customer struct {
	ID string `json:"id"`
	CustomerSpec
	// PlanVersion is the version of its plan the customer is on
	// (read-only: grandfathered changes keep it, migrations move it).
	PlanVersion int64 `json:"plan_version"`
	Meta
}

// OverrideSpec is the body of OverridesService.Put: a complete limit for one
// customer on one metric and window (an empty Mode is Hard, whatever the
// plan says).
type OverrideSpec struct {
	Limit              int64  `json:"limit"`
	Mode               string `json:"mode,omitempty"`
	OveragePercent     int    `json:"overage_percent,omitempty"`
	OveragePriceMicros *int64 `json:"overage_price_micros,omitempty"`
	Ceiling            *int64 `json:"ceiling,omitempty"`
	Algorithm          string `json:"algorithm,omitempty"`
	Burst              *int64 `json:"burst,omitempty"`
	// Rollover: see Limit.Rollover.
	Rollover *Rollover `json:"rollover,omitempty"`
	// ExpiresAt, if set, must lie in the future.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// Override is a limit set for one customer on one metric and window,
// customer-wide or per subject.
type Override struct {
	Customer string `json:"customer"`
	Metric   string `json:"metric"`
	Window   string `json:"window"`
	// Per is PerSubject for an override per subject, else empty: with
	// customer, metric and window, it is the override's address.
	Per string `json:"per,omitempty"`
	OverrideSpec
	// Expired: ExpiresAt has passed; the override no longer counts.
	Expired bool `json:"expired"`
	Meta
}

// EffectiveLimit is a limit that applies to a customer now.
type EffectiveLimit struct {
	Limit
	// Source is plan or override.
	Source string `json:"source"`
	// ExpiresAt is an override's expiry.
	ExpiresAt *time.Time `json:"expires_at"`
}

// EffectiveLimits are a customer's plan limits with its unexpired
// overrides laid over them.
type EffectiveLimits struct {
	Customer string           `json:"customer"`
	Plan     string           `json:"plan"`
	Limits   []EffectiveLimit `json:"limits"`
}

// CheckRequest asks whether a customer may use Cost units of a metric, and
// charges them if so; or, with Items, units of several metrics at once, all
// of them or none.
type CheckRequest struct {
	// Customer, or APIKey: exactly one of the two.
	Customer string `json:"customer,omitempty"`
	// APIKey is one of the customer's API keys, in place of Customer. An
	// unknown, revoked or expired key is ErrInvalidAPIKey. A check by key
	// without a Subject counts for the key's id as its subject.
	APIKey string `json:"api_key,omitempty"`
	Metric string `json:"metric,omitempty"`
	// Cost is 1 when 0.
	Cost int64 `json:"cost,omitempty"`
	// Subject is who within the customer spends the units (an end user,
	// an IP): the metric's limits per subject count for it alone. A metric
	// with such a limit checked without a subject (and not by key) is
	// ErrSubjectRequired.
	Subject string `json:"subject,omitempty"`
	// Items, when set, are what the check charges in place of Metric,
	// Cost and Subject (which must then be empty): 1 to 16 metrics, each
	// with its cost and subject, no metric and subject twice. The check is
	// allowed on every item or none; CheckResult.Items answers each.
	Items []CheckItem `json:"items,omitempty"`
	// DryRun answers as if checked but charges nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// RequestID makes the check idempotent for 24 hours, and lets the
	// client retry it.
	RequestID string `json:"request_id,omitempty"`
}

// CheckItem is one metric a check of items charges.
type CheckItem struct {
	Metric string `json:"metric"`
	// Cost is 1 when 0.
	Cost int64 `json:"cost,omitempty"`
	// Subject is the item's subject, as CheckRequest.Subject.
	Subject string `json:"subject,omitempty"`
}

// CheckResult is quotad's decision. A denied check is a result with
// Allowed false, not an error.
type CheckResult struct {
	Allowed  bool   `json:"allowed"`
	Customer string `json:"customer"`
	// Metric and Cost are a check of one metric's; empty for a check of
	// items, which Items answers.
	Metric string `json:"metric"`
	Cost   int64  `json:"cost"`
	// Overage: some units land above a soft limit.
	Overage bool `json:"overage"`
	// Elastic: some window admitted the check on spare capacity.
	Elastic bool `json:"elastic"`
	// RetryAfter is 0 when allowed; when denied, the seconds after which
	// the same check could pass, or nil if it never can.
	RetryAfter *int64 `json:"retry_after"`
	// Degraded: quotad answered without a shared store it could not reach.
	Degraded bool `json:"degraded"`
	// Granted is how many units the check drew on the customer's grants
	// (a hard window of a day or longer denied them); 0 otherwise.
	Granted int64 `json:"granted,omitempty"`
	// Limits are every window the check covered (of every item, once):
	// the customer's, its subjects', the credit pools'.
	Limits []CheckLimit `json:"limits"`
	// Items, for a check of items, is each item's part, in the request's
	// order.
	Items []CheckItemResult `json:"items,omitempty"`
	// Code and Detail are set on a 429: "quota_exceeded", with a Detail
	// that says whether the limit is reached or the cost is larger than
	// what remains ("it needs 994, 988 remain"); or, when it can never
	// pass (RetryAfter nil), "cost_exceeds_limit", with a Detail naming
	// the window and its limit (and, in a check of items, the item).
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Upgrade, on a check of one metric that a hard limit denied, is the
	// cheapest public plan that would have admitted it; nil otherwise.
	Upgrade *Upgrade `json:"upgrade,omitempty"`

	// RateLimit and RateLimitPolicy are quotad's headers of the same
	// names: RateLimit for the most constraining window (absent when the
	// check can never pass), RateLimitPolicy listing every window of the
	// check; empty when no limit applies.
	RateLimit       string `json:"-"`
	RateLimitPolicy string `json:"-"`
}

// Upgrade is the plan a denied check's answer offers: the cheapest public
// plan, by price per month in the currency of the customer's plan, whose
// limits would have admitted the check at the customer's usage.
type Upgrade struct {
	Plan  string `json:"plan"`
	Name  string `json:"name"`
	Price Price  `json:"price"`
	// Limit is the plan's limit on the window that denied the check; nil
	// when the plan does not limit the metric in that window.
	Limit *int64 `json:"limit"`
}

// CheckItemResult is one item's part of a check of items.
type CheckItemResult struct {
	Metric  string `json:"metric"`
	Subject string `json:"subject,omitempty"`
	Cost    int64  `json:"cost"`
	// Allowed: every window of the item admits it. An item allowed in a
	// denied check is not charged either.
	Allowed bool `json:"allowed"`
	// Remaining is the fewest units of the item's metric its windows
	// still admit (a credit pool's credits counted as the units they
	// buy); nil when no window limits the item.
	Remaining *int64       `json:"remaining"`
	Limits    []CheckLimit `json:"limits"`
}

// CheckLimit is one window a check covered.
type CheckLimit struct {
	// Metric is the metric the window counts: the check's (an item's),
	// or the credit pool it draws on.
	Metric string `json:"metric"`
	// Subject is the subject a window of a limit per subject counts for;
	// empty for the customer's windows.
	Subject   string `json:"subject,omitempty"`
	Window    string `json:"window"`
	Limit     int64  `json:"limit"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	// ResetAt is the zero time for a Total, which never resets.
	ResetAt time.Time `json:"reset_at"`
	Mode    string    `json:"mode"`
	// State is ok, overage, elastic or exceeded (this window denied).
	State string `json:"state"`
}

// RefundRequest gives units back to a customer's current windows.
type RefundRequest struct {
	// Customer, or APIKey: exactly one of the two.
	Customer string `json:"customer,omitempty"`
	APIKey   string `json:"api_key,omitempty"`
	Metric   string `json:"metric"`
	// Cost is 1 when 0.
	Cost int64 `json:"cost,omitempty"`
	// Subject gets the units back too, as CheckRequest.Subject (by key
	// without one, the key's id).
	Subject string `json:"subject,omitempty"`
	// RequestID names the check whose units the refund gives back: the
	// request_id of a check of this customer admitted within the last 24
	// hours. quotad gives back at most what that check charged Metric
	// (and Subject), once: a larger Cost is clamped to it, a repeat of the
	// refund gives nothing more (so the client may retry it), another
	// refund of the check is ErrConflict, and an id that names no such
	// check is ErrCheckNotFound. Without it, the refund gives Cost back
	// unless quotad runs with --refund-requires-request-id, which refuses
	// it (ErrForbidden) but from an admin token without an API key.
	RequestID string `json:"request_id,omitempty"`
}

// RefundResult is the usage of the metric's windows after a refund.
type RefundResult struct {
	// Customer is the customer refunded (the API key's, by key).
	Customer string `json:"customer"`
	// Refunded is how many units went back (0 for a replay; at most what
	// the check named by RequestID charged), when quotad says.
	Refunded int64        `json:"refunded"`
	Usage    []UsageEntry `json:"usage"`
}

// UsageEntry is the current usage of one effective limit.
type UsageEntry struct {
	Metric string `json:"metric"`
	// Subject is the subject a window of a limit per subject counts for
	// (SubjectUsage); empty for the customer's windows.
	Subject   string `json:"subject,omitempty"`
	Window    string `json:"window"`
	Limit     int64  `json:"limit"`
	Algorithm string `json:"algorithm,omitempty"`
	Burst     *int64 `json:"burst,omitempty"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	Overage   int64  `json:"overage"`
	// Granted is how many units of the window the customer's grants paid
	// for (not counted in Used).
	Granted int64 `json:"granted"`
	// ResetAt is the zero time for a Total, which never resets.
	ResetAt time.Time `json:"reset_at"`
	// Refunded is, in a refund's answer, how many units went back to this
	// window, when quotad says.
	Refunded int64 `json:"refunded,omitempty"`
}

// Usage is a customer's current usage of every effective limit.
type Usage struct {
	Customer string       `json:"customer"`
	Plan     string       `json:"plan"`
	Usage    []UsageEntry `json:"usage"`
}

// MetricUsageEntry is a metric's global usage in one window.
type MetricUsageEntry struct {
	Window string `json:"window"`
	// Capacity and Remaining are nil for a window without capacity.
	Capacity  *int64    `json:"capacity"`
	Used      int64     `json:"used"`
	Remaining *int64    `json:"remaining"`
	ResetAt   time.Time `json:"reset_at"`
	// Scope is "shared" when Used counts every quotad process's units,
	// "process" when only the answering process's (short windows without
	// Redis, or while Redis is out of reach).
	Scope string `json:"scope"`
}

// MetricUsage is a metric's global usage in each window with a capacity.
type MetricUsage struct {
	Metric string             `json:"metric"`
	Usage  []MetricUsageEntry `json:"usage"`
}

// UsageDay is one metric's totals on one day (UTC).
type UsageDay struct {
	// Date is YYYY-MM-DD.
	Date    string `json:"date"`
	Metric  string `json:"metric"`
	Used    int64  `json:"used"`
	Overage int64  `json:"overage"`
	// Denied counts denied checks, not units.
	Denied int64 `json:"denied"`
}

// HistoryFilter selects daily usage totals.
type HistoryFilter struct {
	// Metric: all metrics when empty.
	Metric string
	// From and To are inclusive days (their UTC dates); quotad answers the
	// last 30 days when both are zero.
	From, To time.Time
}

// AuditEvent is one committed admin write.
type AuditEvent struct {
	ID    int64     `json:"id"`
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
	// Action is create, update, delete or reset.
	Action string `json:"action"`
	// Resource is the path below /v1, e.g. plans/pro.
	Resource string `json:"resource"`
	// Before and After are the resource as GET returned it, nil when it
	// did not (or no longer) exist.
	Before map[string]any `json:"before"`
	After  map[string]any `json:"after"`
}

// CustomerFilter selects customers.
type CustomerFilter struct {
	// Plan: only customers on this plan.
	Plan string
	// Query: only customers whose id or name contains this text,
	// ignoring case.
	Query string
	// PageSize is how many customers each request fetches (1..1000);
	// quotad's default when 0.
	PageSize int
}

// AuditFilter selects audit events.
type AuditFilter struct {
	// Customer: only events about this customer, its overrides and usage.
	Customer string
	// PageSize is how many events each request fetches (1..1000).
	PageSize int
}
