// Package quotafake provides test doubles for the quota engine: a clock
// tests set by hand, and in-memory implementations of its Catalog, Ledger
// and HistoryStore with the same semantics as the PostgreSQL store.
package quotafake

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
	"unsafe"

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
	// Plans are the public plans PublicPlans returns, ordered by key.
	Plans []tiers.Plan
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

// PutPool declares metric pool a credit pool that the metrics of rates
// draw on (declaring those that are not yet), as the catalog reads a
// pool's credit_schema: each drawing metric's Draws names the pool.
func (c *Catalog) PutPool(pool string, rates ...tiers.CreditRate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.Metrics[pool]
	p.Key, p.CreditSchema = pool, rates
	c.Metrics[pool] = p
	for _, r := range rates {
		m := c.Metrics[r.Metric]
		m.Key = r.Metric
		m.Draws = &tiers.Draw{Pool: pool, Credits: r.Credits, Per: max(r.Per, 1)}
		c.Metrics[r.Metric] = m
	}
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

// PublicPlans implements quota.Catalog.
func (c *Catalog) PublicPlans(context.Context) ([]tiers.Plan, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.Err != nil {
		return nil, c.Err
	}
	return c.Plans, nil
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
	_ quota.HistoryStore = (*History)(nil)
)

// One returns c as a set of one, with outcomes out: the set is c itself
// (what a counter keeps in the charge for an undo stays in c).
func One(c *quota.Charge, out []quota.Outcome) []quota.Charge {
	c.Out = out[:len(c.Spans)]
	return unsafe.Slice(c, 1)
}
