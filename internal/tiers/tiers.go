// Package tiers is quotad's catalog: metrics, plans (billing tiers) with their
// limits, customers, per-customer overrides, and the rules that keep them
// valid. Everything here is plain Go: validation and the effective-limit merge
// are pure functions, so the check path can run them on cached values.
//
// The package imports the standard library and, for the cache's one load
// per key, golang.org/x/sync's singleflight: no driver, no web framework.
// Persistence is behind Store, implemented by internal/store.
package tiers

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// MaxLimit is the largest limit, capacity or counter value quota accepts:
// 2^53-1, the largest integer every JSON client represents exactly.
const MaxLimit int64 = 1<<53 - 1

// MaxOveragePercent is the largest overage a soft limit may allow.
const MaxOveragePercent = 1000

// Window is the period a limit counts over.
type Window uint8

// The windows. Second and Minute are short windows, counted in process by
// their limit's Algorithm; the others are long windows counted in
// PostgreSQL: the calendar windows, and Total, which never ends (a gauge:
// seats, projects, a lifetime allowance; checks add to it, refunds take
// from it, only an admin's set or reset brings it elsewhere).
const (
	Second Window = iota + 1
	Minute
	Hour
	Day
	Week
	Month
	Total
)

// Windows lists every window, shortest first.
var Windows = []Window{Second, Minute, Hour, Day, Week, Month, Total}

var windowNames = [...]string{"", "second", "minute", "hour", "day", "week", "month", "total"}

// ParseWindow returns the window named s.
func ParseWindow(s string) (Window, bool) {
	for i := Second; i <= Total; i++ {
		if windowNames[i] == s {
			return i, true
		}
	}
	return 0, false
}

// String returns the window's name as used in the API.
func (w Window) String() string {
	if !w.Valid() {
		return fmt.Sprintf("Window(%d)", uint8(w))
	}
	return windowNames[w]
}

// Valid reports whether w is one of the declared windows.
func (w Window) Valid() bool { return w >= Second && w <= Total }

// Short reports whether w is counted in process (second, minute).
func (w Window) Short() bool { return w == Second || w == Minute }

// Resets reports whether counts of w go back to zero when it ends: every
// window but Total, which never ends.
func (w Window) Resets() bool { return w != Total }

// Length returns the fixed length of a short window; it is 0 for calendar
// windows, whose length depends on the date, and for Total, which has none.
func (w Window) Length() time.Duration {
	switch w {
	case Second:
		return time.Second
	case Minute:
		return time.Minute
	}
	return 0
}

// MarshalText implements encoding.TextMarshaler.
func (w Window) MarshalText() ([]byte, error) {
	if !w.Valid() {
		return nil, fmt.Errorf("invalid window %d", uint8(w))
	}
	return []byte(w.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (w *Window) UnmarshalText(b []byte) error {
	v, ok := ParseWindow(string(b))
	if !ok {
		return fmt.Errorf("unknown window %q", b)
	}
	*w = v
	return nil
}

// Mode says what happens when a limit is reached.
type Mode uint8

// The modes. The zero value is not a mode; a limit without one is Hard.
const (
	Hard Mode = iota + 1
	Soft
	Elastic
)

var modeNames = [...]string{"", "hard", "soft", "elastic"}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, bool) {
	for i := Hard; i <= Elastic; i++ {
		if modeNames[i] == s {
			return i, true
		}
	}
	return 0, false
}

// String returns the mode's name as used in the API.
func (m Mode) String() string {
	if m < Hard || m > Elastic {
		return fmt.Sprintf("Mode(%d)", uint8(m))
	}
	return modeNames[m]
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) {
	if m < Hard || m > Elastic {
		return nil, fmt.Errorf("invalid mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error {
	v, ok := ParseMode(string(b))
	if !ok {
		return fmt.Errorf("unknown mode %q", b)
	}
	*m = v
	return nil
}

// Algorithm is how a short window counts. The zero value is the default,
// SlidingWindow; long windows are calendar counters and have none.
type Algorithm uint8

// The algorithms of short windows.
const (
	// SlidingWindow weighs the previous clock-aligned bucket by the part of
	// it the window still covers: two integers per key, approximate.
	SlidingWindow Algorithm = iota
	// FixedWindow counts per clock-aligned bucket and starts again at each
	// boundary: up to twice the limit may pass across one.
	FixedWindow
	// SlidingLog keeps the admitted units of the last window: exact, with
	// memory bounded by the limit (MaxLogLimit at most).
	SlidingLog
	// TokenBucket holds Burst tokens refilled continuously at Limit per
	// window; a check takes its cost in tokens. A leaky bucket used as a
	// meter admits by the same rule.
	TokenBucket
)

// MaxLogLimit is the largest limit a sliding log may have: its memory
// grows with the units it holds.
const MaxLogLimit = 10000

var algorithmNames = [...]string{"sliding_window", "fixed_window", "sliding_log", "token_bucket"}

// Algorithms lists every algorithm, the default first.
var Algorithms = []Algorithm{SlidingWindow, FixedWindow, SlidingLog, TokenBucket}

// ParseAlgorithm returns the algorithm named s.
func ParseAlgorithm(s string) (Algorithm, bool) {
	for i, name := range algorithmNames {
		if name == s {
			return Algorithm(i), true
		}
	}
	return 0, false
}

// String returns the algorithm's name as used in the API.
func (a Algorithm) String() string {
	if int(a) >= len(algorithmNames) {
		return fmt.Sprintf("Algorithm(%d)", uint8(a))
	}
	return algorithmNames[a]
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if int(a) >= len(algorithmNames) {
		return nil, fmt.Errorf("invalid algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, ok := ParseAlgorithm(string(b))
	if !ok {
		return fmt.Errorf("unknown algorithm %q", b)
	}
	*a = v
	return nil
}

// Limit is how many units of a metric a customer may use per window, and
// what happens beyond.
type Limit struct {
	Metric string `json:"metric"`
	Window Window `json:"window"`
	Limit  int64  `json:"limit"`
	Mode   Mode   `json:"mode"`
	// OveragePercent is how far beyond Limit a soft limit admits (0..1000).
	OveragePercent int64 `json:"overage_percent"`
	// OveragePriceMicros is the price of one overage unit in millionths of
	// the currency unit (soft limits only).
	OveragePriceMicros *int64 `json:"overage_price_micros"`
	// Ceiling bounds an elastic limit even when spare capacity remains.
	Ceiling *int64 `json:"ceiling"`
	// Algorithm is how a short window counts (long windows: always the
	// zero value). JSON shows it on short windows only; see MarshalJSON.
	Algorithm Algorithm `json:"algorithm"`
	// Burst is a token bucket's size; nil means Limit. JSON shows a token
	// bucket's size, set or not; see MarshalJSON.
	Burst *int64 `json:"burst"`
	// Per says whom the limit counts for: the customer as a whole (the
	// zero value), or each of the customer's subjects apart (an end user,
	// an IP, an API key), beside the customer-wide limits of the metric.
	Per Per `json:"per"`
	// Rollover, on a hard limit of a day, week or month, turns the
	// window's unused units (at most Max) into a grant that expires when
	// the next window ends; nil: none.
	Rollover *Rollover `json:"rollover"`
}

// Rollover is how much of a window's unused units roll over into the
// next window.
type Rollover struct {
	Max int64 `json:"max"`
}

// Size is how many units a short window's count admits before any soft
// or elastic allowance: the token bucket's burst, or else the limit.
func (l Limit) Size() int64 {
	if l.Algorithm == TokenBucket && l.Burst != nil {
		return *l.Burst
	}
	return l.Limit
}

// Key identifies the metric, window and scope a limit applies to.
func (l Limit) Key() LimitKey { return LimitKey{Metric: l.Metric, Window: l.Window, Per: l.Per} }

// LimitKey names one metric+window, counted for the customer or per
// subject.
type LimitKey struct {
	Metric string
	Window Window
	Per    Per
}

// String names the key as logs and cursors do: metric/window, then
// /subject for a limit per subject.
func (k LimitKey) String() string {
	s := k.Metric + "/" + k.Window.String()
	if k.Per != PerCustomer {
		s += "/" + k.Per.String()
	}
	return s
}

// ParseLimitKey returns the key String names s, and whether s names one
// (a valid metric key, a window, and "subject" or nothing after them).
func ParseLimitKey(s string) (LimitKey, bool) {
	metric, rest, _ := strings.Cut(s, "/")
	window, per, hasPer := strings.Cut(rest, "/")
	k := LimitKey{Metric: metric}
	var ok bool
	if k.Window, ok = ParseWindow(window); !ok || !ValidKey(metric) {
		return LimitKey{}, false
	}
	if hasPer {
		if per != PerSubject.String() {
			return LimitKey{}, false
		}
		k.Per = PerSubject
	}
	return k, true
}

// Per is whom a limit counts for.
type Per uint8

// The scopes of a limit. The zero value is the customer.
const (
	// PerCustomer: one count for the customer, whoever of its subjects
	// spends it.
	PerCustomer Per = iota
	// PerSubject: a count for each subject of the customer apart.
	PerSubject
)

var perNames = [...]string{"customer", "subject"}

// ParsePer returns the scope named s.
func ParsePer(s string) (Per, bool) {
	for i, name := range perNames {
		if name == s {
			return Per(i), true
		}
	}
	return 0, false
}

// String returns the scope's name as used in the API.
func (p Per) String() string {
	if int(p) >= len(perNames) {
		return fmt.Sprintf("Per(%d)", uint8(p))
	}
	return perNames[p]
}

// MarshalText implements encoding.TextMarshaler.
func (p Per) MarshalText() ([]byte, error) {
	if int(p) >= len(perNames) {
		return nil, fmt.Errorf("invalid per %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Per) UnmarshalText(b []byte) error {
	v, ok := ParsePer(string(b))
	if !ok {
		return fmt.Errorf("unknown per %q", b)
	}
	*p = v
	return nil
}

// CreditRate is how one metric draws on a credit pool: credits units of
// the pool for every per units of the metric, rounded up per check
// (ceil(cost * credits / per)).
type CreditRate struct {
	Metric  string `json:"metric"`
	Credits int64  `json:"credits"`
	Per     int64  `json:"per"`
}

// Draw is the pool a metric draws on, and at what rate.
type Draw struct {
	Pool    string
	Credits int64
	Per     int64
}

// Metric is a countable resource. Capacity, when declared for a window, is
// the whole system's budget for that window, which elastic limits borrow
// from.
type Metric struct {
	Key         string           `json:"key"`
	Description string           `json:"description"`
	Capacity    map[Window]int64 `json:"capacity"`
	// CreditSchema, on a credit pool, lists the metrics that draw on it:
	// a check of one of them also charges the pool its credits.
	CreditSchema []CreditRate `json:"credit_schema"`
	// Draws, on a metric that draws on a pool, is that pool and the
	// rate, as the pool's CreditSchema says (it is the pool's, not part
	// of this metric's own JSON); nil otherwise.
	Draws     *Draw     `json:"-"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Price is what a plan costs. Money is integers: cents of Currency.
type Price struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Interval    string `json:"interval"`
}

// Plan is a billing tier and the limits it grants.
type Plan struct {
	Key         string `json:"key"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Public: the plan may be offered as the upgrade of a denied check
	// (see Upgrade). An attribute of the plan, not of its versions.
	Public bool    `json:"public"`
	Price  Price   `json:"price"`
	Limits []Limit `json:"limits"`
	// Features maps each feature the plan grants to its value; never nil
	// on a plan read from the store.
	Features map[string]FeatureValue `json:"features"`
	// LatestVersion is the number of the plan's newest version (see
	// PlanVersion); Version counts writes, for ETags.
	LatestVersion int64     `json:"latest_version"`
	Version       int64     `json:"version"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Customer is an account of the SaaS, on one plan.
type Customer struct {
	ID   string `json:"id"`
	Plan string `json:"plan"`
	// PlanVersion is the version of the plan the customer is on, whose
	// price, limits and features apply to it.
	PlanVersion int64 `json:"plan_version"`
	// JoinedVersion is the version the customer joined the plan at: its
	// group, which changes and migrations move as one (PlanVersion is
	// where the group is). Caches key the plan a customer sees by it.
	JoinedVersion int64  `json:"-"`
	Name          string `json:"name"`
	Anchor        Anchor `json:"-"`
	// BillingAnchorDay mirrors Anchor.Day for the API (nil: calendar
	// month), TimeZone Anchor.Loc (its IANA name).
	BillingAnchorDay *int            `json:"billing_anchor_day"`
	TimeZone         string          `json:"time_zone"`
	Metadata         json.RawMessage `json:"metadata"`
	// Status: a suspended customer's checks are refused (see CheckActive),
	// for StatusReason.
	Status       Status `json:"status"`
	StatusReason string `json:"status_reason"`
	// Trial and ScheduledChange, when set, are pending: see PlanAt.
	Trial           *Trial           `json:"trial"`
	ScheduledChange *ScheduledChange `json:"scheduled_change"`
	Version         int64            `json:"version"`
	CreatedAt       time.Time        `json:"created_at"`
	UpdatedAt       time.Time        `json:"updated_at"`
	// Grants are the metrics and expiries of the customer's grants that
	// had units left when it was loaded (see HasGrants); the catalog's
	// loads fill it, nothing else.
	Grants []GrantTerm `json:"-"`
}

// GrantTerm is what the catalog keeps of a customer's live grant: its
// metric and when it expires (nil: never).
type GrantTerm struct {
	Metric    string     `json:"metric"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// HasGrants reports whether the customer, as loaded, has a grant of
// metric ("": of any metric) that is unexpired at at: whether a check a
// hard long window denies may draw on grants. It may say true of grants
// drawn or voided since (the draw then finds nothing), never false of one
// created before the load.
func (c *Customer) HasGrants(metric string, at time.Time) bool {
	for _, g := range c.Grants {
		if (metric == "" || g.Metric == metric) && (g.ExpiresAt == nil || g.ExpiresAt.After(at)) {
			return true
		}
	}
	return false
}

// Override is a limit set for one customer on one metric+window. It replaces
// the plan's limit there, or adds one, until it expires.
type Override struct {
	Customer string `json:"customer"`
	Limit
	ExpiresAt *time.Time `json:"expires_at"`
	Reason    string     `json:"reason"`
	// Expired is computed when the override is read.
	Expired   bool      `json:"expired"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ExpiredAt reports whether the override no longer counts at now.
func (o Override) ExpiredAt(now time.Time) bool { return expiredAt(o.ExpiresAt, now) }

// expiredAt reports whether an expiry, nil for none, has come at now.
func expiredAt(expiresAt *time.Time, now time.Time) bool {
	return expiresAt != nil && !now.Before(*expiresAt)
}

// Account is a customer together with everything that decides its limits.
type Account struct {
	Customer Customer
	// Plan is the customer's plan (Customer.Plan); TrialPlan and
	// ScheduledPlan, the plans its trial and its scheduled change name,
	// if any. At resolves which is in effect.
	Plan          Plan
	TrialPlan     *Plan
	ScheduledPlan *Plan
	Overrides     []Override
	// FeatureOverrides are the customer's overrides of features, expired
	// ones included.
	FeatureOverrides []FeatureOverride
}

// AuditEvent records one committed admin write, or one refund.
type AuditEvent struct {
	ID       int64     `json:"id"`
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
	Action   string    `json:"action"`
	Resource string    `json:"resource"`
	// Customer is the customer the event concerns, if any (for filtering).
	Customer string          `json:"-"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
}

// Audit actions.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
	ActionReset  = "reset"
	// ActionRelease: an admin released a dead process's leases.
	ActionRelease = "release"
	// ActionRefund: units given back to a customer's windows by POST
	// /v1/refund.
	ActionRefund = "refund"
)
