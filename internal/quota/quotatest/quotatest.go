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

type requestKey struct {
	customer string
	kind     quota.RequestKind
	id       string
}

type requestRecord struct {
	rec quota.Recorded
	at  time.Time
}

// Ledger is an in-memory quota.Ledger with the PostgreSQL store's
// semantics, for engine tests. Err, when set, fails every call as an
// unreachable store would. Transactions (Atomically) run one at a time and
// roll back by undoing what they did.
type Ledger struct {
	txMu     sync.Mutex // one transaction at a time
	mu       sync.Mutex
	counters map[quota.CounterKey]int64
	global   map[quota.GlobalKey]int64
	requests map[requestKey]requestRecord
	Err      error
	// Charges counts calls to Take, in and out of transactions.
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

// lock locks the ledger and returns Err.
func (l *Ledger) lock() error {
	l.mu.Lock()
	if l.Err != nil {
		l.mu.Unlock()
		return l.Err
	}
	return nil
}

// undoLog collects how to undo a transaction's changes; nil outside one.
type undoLog []func()

func (u *undoLog) add(f func()) {
	if u != nil {
		*u = append(*u, f)
	}
}

// take implements Take with l.mu held.
func (l *Ledger) take(c *quota.Charge, out []quota.Outcome, undo *undoLog) bool {
	l.Charges++
	ok := true
	for i := range c.Spans {
		sp := &c.Spans[i]
		out[i] = c.Judge(i, l.counters[sp.Key], l.global[sp.Global])
		ok = ok && out[i].Passed
	}
	if !ok {
		return false
	}
	for i := range c.Spans {
		k := c.Spans[i].Key
		l.counters[k] += c.Cost
		undo.add(func() { l.counters[k] -= c.Cost })
	}
	for _, g := range c.Globals {
		l.global[g] += c.Cost
		undo.add(func() { l.global[g] -= c.Cost })
	}
	return true
}

// giveBack implements GiveBack with l.mu held.
func (l *Ledger) giveBack(c *quota.Charge, out []quota.Outcome, undo *undoLog) {
	for i := range c.Spans {
		k := c.Spans[i].Key
		before := l.counters[k]
		out[i] = quota.Outcome{Used: before, Passed: true}
		l.counters[k] = max(0, before-c.Cost)
		undo.add(func() { l.counters[k] = before })
	}
	for _, g := range c.Globals {
		n := c.Cost
		if i := c.SpanOf(g); i >= 0 {
			n = min(n, out[i].Used)
		}
		n = min(n, l.global[g])
		l.global[g] -= n
		undo.add(func() { l.global[g] += n })
	}
}

// Take implements quota.Counter.
func (l *Ledger) Take(_ context.Context, c *quota.Charge, out []quota.Outcome) (bool, error) {
	if err := l.lock(); err != nil {
		return false, err
	}
	defer l.mu.Unlock()
	c.Trips++
	return l.take(c, out, nil), nil
}

// GiveBack implements quota.Counter.
func (l *Ledger) GiveBack(_ context.Context, c *quota.Charge, out []quota.Outcome) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	c.Trips++
	l.giveBack(c, out, nil)
	return nil
}

// Peek implements quota.Counter.
func (l *Ledger) Peek(_ context.Context, c *quota.Charge, out []quota.Outcome) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	c.Trips++
	for i := range c.Spans {
		sp := &c.Spans[i]
		out[i] = c.Judge(i, l.counters[sp.Key], l.global[sp.Global])
	}
	return nil
}

// Read implements quota.Ledger.
func (l *Ledger) Read(_ context.Context, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	if err := l.lock(); err != nil {
		return nil, nil, err
	}
	defer l.mu.Unlock()
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

// AddGlobal implements quota.Ledger.
func (l *Ledger) AddGlobal(_ context.Context, deltas []quota.GlobalDelta) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	for _, d := range deltas {
		l.global[d.Key] = max(0, l.global[d.Key]+d.Units)
	}
	return nil
}

func (l *Ledger) fresh(k requestKey, now time.Time) (quota.Recorded, bool) {
	r, ok := l.requests[k]
	if !ok || !now.Before(r.at.Add(24*time.Hour)) {
		return quota.Recorded{}, false
	}
	return r.rec, true
}

// Recorded implements quota.Ledger.
func (l *Ledger) Recorded(_ context.Context, customer, requestID string, now time.Time) (*quota.Recorded, error) {
	if err := l.lock(); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	if rec, ok := l.fresh(requestKey{customer, quota.KindCheck, requestID}, now); ok && rec.Answer != nil {
		return &rec, nil
	}
	return nil, nil
}

// Atomically implements quota.Ledger.
func (l *Ledger) Atomically(ctx context.Context, fn func(ctx context.Context, tx quota.Tx) error) error {
	l.txMu.Lock()
	defer l.txMu.Unlock()
	tx := &ledgerTx{l: l}
	err := fn(ctx, tx)
	if err != nil {
		l.mu.Lock()
		for i := len(tx.undo) - 1; i >= 0; i-- {
			tx.undo[i]()
		}
		l.mu.Unlock()
	}
	return err
}

// ledgerTx is a Ledger transaction.
type ledgerTx struct {
	l    *Ledger
	undo undoLog
}

func (t *ledgerTx) Take(_ context.Context, c *quota.Charge, out []quota.Outcome) (bool, error) {
	if err := t.l.lock(); err != nil {
		return false, err
	}
	defer t.l.mu.Unlock()
	c.Trips++
	return t.l.take(c, out, &t.undo), nil
}

func (t *ledgerTx) GiveBack(_ context.Context, c *quota.Charge, out []quota.Outcome) error {
	if err := t.l.lock(); err != nil {
		return err
	}
	defer t.l.mu.Unlock()
	c.Trips++
	t.l.giveBack(c, out, &t.undo)
	return nil
}

func (t *ledgerTx) Peek(ctx context.Context, c *quota.Charge, out []quota.Outcome) error {
	return t.l.Peek(ctx, c, out)
}

func (t *ledgerTx) Claim(_ context.Context, c quota.Claim) (*quota.Recorded, error) {
	if err := t.l.lock(); err != nil {
		return nil, err
	}
	defer t.l.mu.Unlock()
	k := requestKey{c.Customer, c.Kind, c.ID}
	if rec, ok := t.l.fresh(k, c.At); ok {
		return &rec, nil
	}
	old, had := t.l.requests[k]
	t.l.requests[k] = requestRecord{rec: quota.Recorded{Metric: c.Metric, Cost: c.Cost}, at: c.At}
	t.undo.add(func() {
		if had {
			t.l.requests[k] = old
		} else {
			delete(t.l.requests, k)
		}
	})
	return nil, nil
}

func (t *ledgerTx) Keep(_ context.Context, c quota.Claim, answer []byte) error {
	if err := t.l.lock(); err != nil {
		return err
	}
	defer t.l.mu.Unlock()
	k := requestKey{c.Customer, c.Kind, c.ID}
	r := t.l.requests[k]
	r.rec.Answer = answer
	t.l.requests[k] = r
	return nil
}

// Reset implements quota.Ledger.
func (l *Ledger) Reset(_ context.Context, _, customer, metric string, _ time.Time) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	for k := range l.counters {
		if k.Customer == customer && k.Metric == metric {
			delete(l.counters, k)
		}
	}
	return nil
}

// Purge implements quota.Ledger.
func (l *Ledger) Purge(context.Context, time.Time) error {
	if err := l.lock(); err != nil {
		return err
	}
	l.mu.Unlock()
	return nil
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
	_ quota.Ledger       = (*Ledger)(nil)
	_ quota.Tx           = (*ledgerTx)(nil)
	_ quota.HistoryStore = (*History)(nil)
)
