// Package quotatest provides test doubles for the quota engine: a clock
// tests set by hand, and in-memory implementations of its Catalog, Ledger
// and HistoryStore with the same semantics as the PostgreSQL store.
package quotatest

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Clock is a quota.Clock that moves only when told to.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{now: t.UTC()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.UTC()
	c.mu.Unlock()
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Catalog is a quota.Catalog over fixed maps.
type Catalog struct {
	mu       sync.RWMutex
	Metrics  map[string]tiers.Metric
	Accounts map[string]tiers.Account
	// Err, when set, is returned by every lookup.
	Err error
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{Metrics: map[string]tiers.Metric{}, Accounts: map[string]tiers.Account{}}
}

// PutMetric declares a metric with optional capacities.
func (c *Catalog) PutMetric(key string, capacity map[tiers.Window]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Metrics[key] = tiers.Metric{Key: key, Capacity: capacity}
}

// PutCustomer puts a customer on a plan made of limits, with overrides.
func (c *Catalog) PutCustomer(id string, anchor tiers.Anchor, limits []tiers.Limit, overrides ...tiers.Override) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Accounts[id] = tiers.Account{
		Customer:  tiers.Customer{ID: id, Plan: "plan-" + id, Anchor: anchor},
		Plan:      tiers.Plan{Key: "plan-" + id, Limits: limits},
		Overrides: overrides,
	}
}

// Metric implements quota.Catalog.
func (c *Catalog) Metric(_ context.Context, key string) (tiers.Metric, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.Err != nil {
		return tiers.Metric{}, c.Err
	}
	m, ok := c.Metrics[key]
	if !ok {
		return tiers.Metric{}, tiers.ErrMetricNotFound
	}
	return m, nil
}

// Account implements quota.Catalog.
func (c *Catalog) Account(_ context.Context, id string) (tiers.Account, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.Err != nil {
		return tiers.Account{}, c.Err
	}
	a, ok := c.Accounts[id]
	if !ok {
		return tiers.Account{}, tiers.ErrCustomerNotFound
	}
	return a, nil
}

type requestKey struct{ customer, kind, id string }

type requestRecord struct {
	rec quota.Recorded
	at  time.Time
}

// Ledger is an in-memory quota.Ledger with the PostgreSQL store's
// semantics, for engine tests. Err, when set, fails every call as an
// unreachable store would.
type Ledger struct {
	mu       sync.Mutex
	counters map[quota.CounterKey]int64
	global   map[quota.GlobalKey]int64
	requests map[requestKey]requestRecord
	Err      error
	// Charges counts calls to Charge.
	Charges int
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{
		counters: map[quota.CounterKey]int64{},
		global:   map[quota.GlobalKey]int64{},
		requests: map[requestKey]requestRecord{},
	}
}

// Count returns a counter's value.
func (l *Ledger) Count(k quota.CounterKey) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counters[k]
}

// Global returns a metric's global usage in a window.
func (l *Ledger) Global(k quota.GlobalKey) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.global[k]
}

func (l *Ledger) fresh(k requestKey, now time.Time) (quota.Recorded, bool) {
	r, ok := l.requests[k]
	if !ok || !now.Before(r.at.Add(24*time.Hour)) {
		return quota.Recorded{}, false
	}
	return r.rec, true
}

// Charge implements quota.Ledger.
func (l *Ledger) Charge(_ context.Context, c quota.Charge) (quota.Outcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Charges++
	if l.Err != nil {
		return quota.Outcome{}, l.Err
	}
	if c.RequestID != "" {
		if rec, ok := l.fresh(requestKey{c.Customer, "check", c.RequestID}, c.At); ok {
			return quota.Outcome{Replay: &rec}, nil
		}
	}
	n := len(c.Windows)
	out := quota.Outcome{Allowed: true, Used: make([]int64, n), Passed: make([]bool, n), Elastic: make([]bool, n)}
	for i, w := range c.Windows {
		k := quota.CounterKey{Customer: c.Customer, Metric: c.Metric, Window: w.Window, Start: w.Start}
		out.Used[i] = l.counters[k]
		out.Passed[i], out.Elastic[i] = w.Admits(out.Used[i], l.global[w.Global], c.Cost)
		out.Allowed = out.Allowed && out.Passed[i]
	}
	if !out.Allowed {
		return out, nil
	}
	for i, w := range c.Windows {
		l.counters[quota.CounterKey{Customer: c.Customer, Metric: c.Metric, Window: w.Window, Start: w.Start}] = out.Used[i] + c.Cost
	}
	for _, g := range c.Globals {
		l.global[g] += c.Cost
	}
	if c.RequestID != "" && c.Answer != nil {
		answer, err := c.Answer(out)
		if err != nil {
			return quota.Outcome{}, err
		}
		l.requests[requestKey{c.Customer, "check", c.RequestID}] = requestRecord{
			rec: quota.Recorded{Metric: c.Metric, Cost: c.Cost, Answer: answer}, at: c.At}
	}
	return out, nil
}

// Recorded implements quota.Ledger.
func (l *Ledger) Recorded(_ context.Context, customer, requestID string, now time.Time) (*quota.Recorded, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Err != nil {
		return nil, l.Err
	}
	if rec, ok := l.fresh(requestKey{customer, "check", requestID}, now); ok {
		return &rec, nil
	}
	return nil, nil
}

// Peek implements quota.Ledger.
func (l *Ledger) Peek(_ context.Context, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Err != nil {
		return nil, nil, l.Err
	}
	used := make([]int64, len(counters))
	for i, k := range counters {
		used[i] = l.counters[k]
	}
	global := make([]int64, len(globals))
	for i, g := range globals {
		global[i] = l.global[g]
	}
	return used, global, nil
}

// Refund implements quota.Ledger.
func (l *Ledger) Refund(_ context.Context, r quota.RefundCharge) ([]int64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Err != nil {
		return nil, false, l.Err
	}
	if r.RequestID != "" {
		k := requestKey{r.Customer, "refund", r.RequestID}
		if _, ok := l.fresh(k, r.At); ok {
			return nil, true, nil
		}
		l.requests[k] = requestRecord{rec: quota.Recorded{Metric: r.Metric, Cost: r.Cost}, at: r.At}
	}
	before := make([]int64, len(r.Counters))
	for i, k := range r.Counters {
		before[i] = l.counters[k]
		l.counters[k] = max(0, before[i]-r.Cost)
	}
	for i, n := range r.GlobalGiveBack(before) {
		g := r.Globals[i]
		l.global[g] -= min(n, l.global[g])
	}
	return before, false, nil
}

// Reset implements quota.Ledger.
func (l *Ledger) Reset(_ context.Context, _, customer, metric string, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Err != nil {
		return l.Err
	}
	for k := range l.counters {
		if k.Customer == customer && k.Metric == metric {
			delete(l.counters, k)
		}
	}
	return nil
}

// Purge implements quota.Ledger.
func (l *Ledger) Purge(context.Context, time.Time) error { return l.Err }

// History is an in-memory quota.HistoryStore.
type History struct {
	mu   sync.Mutex
	days map[historyKey]*quota.Day
}

type historyKey struct {
	customer, metric string
	date             time.Time
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{days: map[historyKey]*quota.Day{}} }

// AddHistory implements quota.HistoryStore.
func (h *History) AddHistory(_ context.Context, deltas []quota.HistoryDelta) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range deltas {
		k := historyKey{d.Customer, d.Metric, d.Date}
		day := h.days[k]
		if day == nil {
			day = &quota.Day{Date: d.Date, Metric: d.Metric}
			h.days[k] = day
		}
		day.Used = max(0, day.Used+d.Used)
		day.Overage = max(0, day.Overage+d.Overage)
		day.Denied = max(0, day.Denied+d.Denied)
	}
	return nil
}

// FindHistory implements quota.HistoryStore.
func (h *History) FindHistory(_ context.Context, customer, metric string, from, to time.Time) ([]quota.Day, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []quota.Day
	for k, d := range h.days {
		if k.customer == customer && (metric == "" || k.metric == metric) && !k.date.Before(from) && !k.date.After(to) {
			out = append(out, *d)
		}
	}
	slices.SortFunc(out, func(a, b quota.Day) int {
		return cmp.Or(a.Date.Compare(b.Date), cmp.Compare(a.Metric, b.Metric))
	})
	return out, nil
}

var (
	_ quota.Clock        = (*Clock)(nil)
	_ quota.Catalog      = (*Catalog)(nil)
	_ quota.Ledger       = (*Ledger)(nil)
	_ quota.HistoryStore = (*History)(nil)
)
