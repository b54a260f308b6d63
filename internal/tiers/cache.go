package tiers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// CacheSource is what a Cache loads from; the PostgreSQL store implements
// it. FindMetric fills the metric's Draws from its pool's credit schema.
// FindMetric returns ErrMetricNotFound and FindPlan ErrPlanNotFound
// for what does not exist; every method returns ErrUnavailable when the
// source cannot be reached. Implementations are safe for concurrent use.
type CacheSource interface {
	FindMetric(ctx context.Context, key string) (Metric, error)
	FindPlan(ctx context.Context, key string) (Plan, error)
	// FindAccounts returns the accounts of those of the customers ids that
	// exist, each with its plan and all its overrides (expired ones
	// included), all read in one snapshot. A customer that does not exist
	// is absent from the map.
	FindAccounts(ctx context.Context, ids []string) (map[string]Account, error)
	// FindPublicPlans returns every public plan, as of its latest
	// version, ordered by key.
	FindPublicPlans(ctx context.Context) ([]Plan, error)
}

// DefaultCacheCustomers bounds how many customers a Cache holds.
const DefaultCacheCustomers = 1_000_000

// DefaultAccountBatch bounds how many customers a Cache asks its source
// for at once.
const DefaultAccountBatch = 1000

// loadTimeout bounds one load from the source, at least: loads are shared
// by every caller waiting for the same key, so no single caller's context
// cuts one short; but one lasts as long as the most patient of the callers
// that started it may wait (see loadDeadline), so that none is told the
// store is out of reach before its own time for it is up.
const loadTimeout = 2 * time.Second

// loadDeadline returns when a load for callers willing to wait until
// waitUntil (zero: no deadline of their own) gives up: loadTimeout from
// now, or waitUntil if that is later.
func loadDeadline(waitUntil time.Time) time.Time {
	d := time.Now().Add(loadTimeout)
	if waitUntil.After(d) {
		return waitUntil
	}
	return d
}

// maxStale bounds what a batch in flight remembers of the invalidations it
// must not keep; beyond it, the batch keeps nothing.
const maxStale = 10_000

// Cache holds metrics, plans and customers (with their overrides, of
// limits and of features) in memory for the check path. Entries load on
// first use, absent ones included, and stay until Invalidate drops them:
// call it for every committed change, in this process and, through
// PostgreSQL LISTEN/NOTIFY, in the others.
//
// Customers load in batches: the first caller that misses starts a load
// with its customer; callers that miss while it is in flight wait for the
// next load, which brings all of their customers at once (at most
// DefaultAccountBatch) as soon as the one in flight returns. One load of
// customers is in flight at a time, and a customer is in at most one.
//
// A load that started before an invalidation is used for its own callers
// but not kept, so a cache never holds data older than the last change it
// was told of: a metric's load after any invalidation, a batch of
// customers only where the invalidations touched it (a customer, a plan
// of its customers, or all of it after Purge), so that one change does
// not throw away a thousand customers' load. A caller that misses a
// customer after such a change waits for the next load, not the stale
// one. Values returned share memory with the cache: read them, do not
// modify them. Cache is safe for concurrent use.
type Cache struct {
	src          CacheSource
	maxCustomers int
	batchSize    int
	gen          atomic.Uint64 // counts invalidations, for metric loads (see keep)
	loads        singleflight.Group

	metricLoads, customerLoads, customerBatches atomic.Uint64

	mu      sync.RWMutex
	metrics map[string]*Metric // nil: known not to exist
	plans   map[planRef]*Plan
	// public is the public plans, ordered by key; nil until loaded (a
	// change of any plan drops it).
	public    []Plan
	customers map[string]*customerEntry
	// Customers being loaded or waiting to be, by the batch that brings
	// them; batches not sent yet, oldest first; the batch in flight; and
	// whether a goroutine is sending batches.
	waiting map[string]*accountBatch
	queue   []*accountBatch
	sending *accountBatch
	loader  bool
}

// planRef names the plan the customers of one group see: the plan key and
// the version they joined at (Customer.JoinedVersion). Whatever version the
// group is on, every customer of it sees the same plan, and a change or a
// migration of the plan drops every ref of it; a customer's group changes
// only with the customer.
type planRef struct {
	key    string
	joined int64
}

type customerEntry struct {
	customer  Customer
	overrides []Override
	features  []FeatureOverride
	missing   bool
}

// accountBatch is one load of customers from the source.
type accountBatch struct {
	ids  []string
	done chan struct{} // closed once accounts and err are set
	// waitUntil is the latest deadline of the callers that asked for the
	// batch before it was sent (zero: none had one); Cache.mu guards it.
	waitUntil time.Time

	accounts map[string]Account
	err      error

	// What was invalidated while the batch was in flight: customers,
	// plans, or everything. Those answers go to the batch's callers but
	// are not kept. Cache.mu guards them.
	stale      map[string]struct{}
	stalePlans map[string]struct{}
	purged     bool
}

// invalidate records a change heard while b is in flight. Cache.mu must be
// held.
func (b *accountBatch) invalidate(ch Change) {
	if b.purged {
		return
	}
	add := func(set map[string]struct{}) map[string]struct{} {
		if set == nil {
			set = make(map[string]struct{})
		}
		set[ch.Key] = struct{}{}
		return set
	}
	switch ch.Kind {
	case CustomerChanged:
		b.stale = add(b.stale)
	case PlanChanged:
		b.stalePlans = add(b.stalePlans)
	}
	b.purged = len(b.stale)+len(b.stalePlans) > maxStale
}

// changed reports whether customer id, or any plan, changed since the
// batch was sent: a caller that asks for id now wants a newer answer.
// Cache.mu must be held.
func (b *accountBatch) changed(id string) bool {
	_, ok := b.stale[id]
	return ok || b.purged || len(b.stalePlans) > 0
}

// keeps reports whether the batch's answer for customer id, on plans (""
// for none), may be kept. Cache.mu must be held.
func (b *accountBatch) keeps(id string, plans ...string) bool {
	if b.purged {
		return false
	}
	if _, ok := b.stale[id]; ok {
		return false
	}
	for _, plan := range plans {
		if _, ok := b.stalePlans[plan]; ok && plan != "" {
			return false
		}
	}
	return true
}

// CacheStats counts a Cache's loads from its source and what it holds.
type CacheStats struct {
	MetricLoads     uint64 // metrics asked of the source
	CustomerLoads   uint64 // customers asked of the source, one per customer of every batch
	CustomerBatches uint64 // loads of customers (source calls)
	Customers       int    // customers held, absent ones included
}

// NewCache returns an empty cache over src holding at most maxCustomers
// customers (DefaultCacheCustomers when <= 0).
func NewCache(src CacheSource, maxCustomers int) *Cache {
	if maxCustomers <= 0 {
		maxCustomers = DefaultCacheCustomers
	}
	return &Cache{
		src: src, maxCustomers: maxCustomers, batchSize: DefaultAccountBatch,
		metrics:   make(map[string]*Metric),
		plans:     make(map[planRef]*Plan),
		customers: make(map[string]*customerEntry),
		waiting:   make(map[string]*accountBatch),
	}
}

// Invalidate drops what the cache holds for the changed entry: the
// customer or the plan, or, for a metric, every metric (a metric's Draws
// comes from another's credit schema).
func (c *Cache) Invalidate(ch Change) {
	c.gen.Add(1)
	c.mu.Lock()
	switch ch.Kind {
	case MetricChanged:
		// A metric's Draws is its pool's schema: a change of one metric
		// may change another. Metrics are few; all of them go.
		clear(c.metrics)
	case PlanChanged:
		// Every group of the plan: a change or a migration may move
		// any of them to another version.
		for ref := range c.plans {
			if ref.key == ch.Key {
				delete(c.plans, ref)
			}
		}
		c.public = nil
	case CustomerChanged:
		delete(c.customers, ch.Key)
	}
	if c.sending != nil {
		c.sending.invalidate(ch)
	}
	c.mu.Unlock()
}

// Purge drops everything, e.g. after missing notifications.
func (c *Cache) Purge() {
	c.gen.Add(1)
	c.mu.Lock()
	clear(c.metrics)
	clear(c.plans)
	c.public = nil
	clear(c.customers)
	if c.sending != nil {
		c.sending.purged = true
	}
	c.mu.Unlock()
}

// Metric returns the metric key, Draws filled as the source fills it, or
// ErrMetricNotFound.
func (c *Cache) Metric(ctx context.Context, key string) (Metric, error) {
	c.mu.RLock()
	m, ok := c.metrics[key]
	c.mu.RUnlock()
	if ok {
		if m == nil {
			return Metric{}, ErrMetricNotFound
		}
		return *m, nil
	}
	v, err := c.load(ctx, "m:"+key, func(ctx context.Context, gen uint64) (any, error) {
		c.metricLoads.Add(1)
		m, err := c.src.FindMetric(ctx, key)
		switch {
		case errors.Is(err, ErrMetricNotFound):
			c.keep(gen, func() { c.metrics[key] = nil })
		case err == nil:
			c.keep(gen, func() { c.metrics[key] = &m })
		}
		return m, err
	})
	if err != nil {
		return Metric{}, err
	}
	return v.(Metric), nil
}

// PublicPlans returns the public plans, ordered by key, loading them on
// first use and after any change of a plan.
func (c *Cache) PublicPlans(ctx context.Context) ([]Plan, error) {
	c.mu.RLock()
	plans := c.public
	c.mu.RUnlock()
	if plans != nil {
		return plans, nil
	}
	v, err := c.load(ctx, "public", func(ctx context.Context, gen uint64) (any, error) {
		plans, err := c.src.FindPublicPlans(ctx)
		if err != nil {
			return nil, err
		}
		if plans == nil {
			plans = []Plan{} // loaded, none: not nil
		}
		c.keep(gen, func() { c.public = plans })
		return plans, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]Plan), nil
}

// Account returns a customer with its plan and overrides, or
// ErrCustomerNotFound.
func (c *Cache) Account(ctx context.Context, id string) (Account, error) {
	c.mu.RLock()
	a, found, err := c.heldLocked(id)
	c.mu.RUnlock()
	if found {
		return a, err
	}
	c.mu.Lock()
	if a, found, err := c.heldLocked(id); found {
		c.mu.Unlock()
		return a, err
	}
	b := c.waiting[id]
	waitUntil, _ := ctx.Deadline()
	if b == nil || b.changed(id) {
		// Not on its way, or on its way in a load that began before a
		// change: the next batch brings it. That batch goes after the
		// one in flight, so a customer is in one load at a time.
		b = c.enqueueLocked(id, waitUntil)
	} else if b != c.sending {
		b.waitFor(waitUntil) // not sent yet: it waits for this caller too
	}
	c.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return Account{}, waitErr(ctx, "c:"+id)
	}
	if b.err != nil {
		return Account{}, b.err
	}
	a, ok := b.accounts[id]
	if !ok {
		return Account{}, ErrCustomerNotFound
	}
	return a, nil
}

// heldLocked returns the account id as the cache holds it, and whether it
// does (a customer known to be absent is held, with ErrCustomerNotFound).
// c.mu must be held.
func (c *Cache) heldLocked(id string) (Account, bool, error) {
	ce, ok := c.customers[id]
	switch {
	case !ok:
		return Account{}, false, nil
	case ce.missing:
		return Account{}, true, ErrCustomerNotFound
	}
	p := c.plans[planRef{ce.customer.Plan, ce.customer.JoinedVersion}]
	if p == nil {
		return Account{}, false, nil
	}
	a := Account{Customer: ce.customer, Plan: *p, Overrides: ce.overrides, FeatureOverrides: ce.features}
	if trial, scheduled := ce.customer.PendingPlans(); trial != "" || scheduled != "" {
		// The plans it will be on, held too (a change of one drops it).
		var ok bool
		if a.TrialPlan, ok = c.pendingPlanLocked(trial); !ok {
			return Account{}, false, nil
		}
		if a.ScheduledPlan, ok = c.pendingPlanLocked(scheduled); !ok {
			return Account{}, false, nil
		}
	}
	return a, true, nil
}

// pendingPlanLocked returns the plan key as held (nil for ""), and whether
// it is. c.mu must be held.
func (c *Cache) pendingPlanLocked(key string) (*Plan, bool) {
	if key == "" {
		return nil, true
	}
	p := c.plans[latestRef(key)]
	return p, p != nil
}

// latestRef names a plan's latest version, as the plan a trial or a
// scheduled change will put a customer on (it joins the latest then).
func latestRef(key string) planRef { return planRef{key: key} }

// planKey returns p's key, "" for nil.
func planKey(p *Plan) string {
	if p == nil {
		return ""
	}
	return p.Key
}

// waitFor makes batch b, not sent yet, wait for a caller that may wait
// until waitUntil (zero: no deadline): its load lasts that long at least.
// Cache.mu must be held.
func (b *accountBatch) waitFor(waitUntil time.Time) {
	if waitUntil.After(b.waitUntil) {
		b.waitUntil = waitUntil
	}
}

// enqueueLocked adds customer id, for a caller that may wait until
// waitUntil (zero: no deadline), to the batch that goes next, opening one
// when there is none or it is full, and starts the loader if it is idle.
// c.mu must be held.
func (c *Cache) enqueueLocked(id string, waitUntil time.Time) *accountBatch {
	var b *accountBatch
	if n := len(c.queue); n > 0 && len(c.queue[n-1].ids) < c.batchSize {
		b = c.queue[n-1]
	} else {
		b = &accountBatch{done: make(chan struct{})}
		c.queue = append(c.queue, b)
	}
	b.ids = append(b.ids, id)
	b.waitFor(waitUntil)
	c.waiting[id] = b
	if !c.loader {
		c.loader = true
		go c.loadBatches()
	}
	return b
}

// loadBatches sends the queued batches one after the other until none is
// left: the batch that returns hands over to the next, so callers wait
// for the database, never for a timer.
func (c *Cache) loadBatches() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.loader = false
			c.mu.Unlock()
			return
		}
		b := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.sending = b
		deadline := loadDeadline(b.waitUntil)
		c.mu.Unlock()

		c.customerBatches.Add(1)
		c.customerLoads.Add(uint64(len(b.ids)))
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		accounts, err := c.src.FindAccounts(ctx, b.ids)
		cancel()

		c.mu.Lock()
		c.sending = nil
		if err == nil {
			for _, id := range b.ids {
				a, ok := accounts[id]
				switch {
				case !ok && b.keeps(id, ""):
					c.putCustomer(id, &customerEntry{missing: true})
				case ok && b.keeps(id, a.Plan.Key, planKey(a.TrialPlan), planKey(a.ScheduledPlan)):
					c.putCustomer(id, &customerEntry{customer: a.Customer, overrides: a.Overrides, features: a.FeatureOverrides})
					ref := planRef{a.Plan.Key, a.Customer.JoinedVersion}
					if _, held := c.plans[ref]; !held {
						p := a.Plan
						c.plans[ref] = &p
					}
					for _, p := range [...]*Plan{a.TrialPlan, a.ScheduledPlan} {
						if p == nil {
							continue
						}
						if ref := latestRef(p.Key); c.plans[ref] == nil {
							p := *p
							c.plans[ref] = &p
						}
					}
				}
			}
		}
		for _, id := range b.ids {
			if c.waiting[id] == b {
				delete(c.waiting, id)
			}
		}
		b.accounts, b.err = accounts, err
		c.mu.Unlock()
		close(b.done)
	}
}

// Warm loads the accounts of customers ids, in batches and in their order,
// so that their first checks find them in memory. It stops when all are
// loaded, when the cache is full (it makes no room for them), on the
// source's first error or when ctx ends; the batch in flight then is
// kept, as any other. It returns how many of ids the cache loaded and
// found to exist.
func (c *Cache) Warm(ctx context.Context, ids []string) (int, error) {
	loaded := 0
	waitUntil, _ := ctx.Deadline()
	for len(ids) > 0 {
		c.mu.Lock()
		room := c.maxCustomers - len(c.customers) - len(c.waiting)
		var mine []string
		batches := map[*accountBatch]struct{}{}
		for len(ids) > 0 && len(mine) < min(room, c.batchSize) {
			id := ids[0]
			ids = ids[1:]
			if _, held := c.customers[id]; held || c.waiting[id] != nil {
				continue
			}
			mine = append(mine, id)
			batches[c.enqueueLocked(id, waitUntil)] = struct{}{}
		}
		c.mu.Unlock()
		if len(mine) == 0 {
			break // full
		}
		for b := range batches {
			select {
			case <-b.done:
			case <-ctx.Done():
				return loaded, waitErr(ctx, "customers")
			}
			if b.err != nil {
				return loaded, b.err
			}
		}
		for _, id := range mine {
			if brought(batches, id) {
				loaded++
			}
		}
	}
	return loaded, nil
}

// brought reports whether one of batches found customer id.
func brought(batches map[*accountBatch]struct{}, id string) bool {
	for b := range batches {
		if _, ok := b.accounts[id]; ok {
			return true
		}
	}
	return false
}

// load runs fn once for all concurrent callers of the same key.
func (c *Cache) load(ctx context.Context, key string, fn func(ctx context.Context, gen uint64) (any, error)) (any, error) {
	ch := c.loads.DoChan(key, func() (any, error) {
		gen := c.gen.Load()
		waitUntil, _ := ctx.Deadline()
		lctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), loadDeadline(waitUntil))
		defer cancel()
		return fn(lctx, gen)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, waitErr(ctx, key)
	}
}

// waitErr is the error of a caller that stopped waiting for a load of
// what because ctx ended.
func waitErr(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller's time for the store ran out: to it, the store
		// could not be reached.
		return fmt.Errorf("%w: waiting for %s: %w", ErrUnavailable, what, ctx.Err())
	}
	return ctx.Err()
}

// keep stores a loaded value unless an invalidation happened since the
// load began.
func (c *Cache) keep(gen uint64, store func()) {
	c.mu.Lock()
	if c.gen.Load() == gen {
		store()
	}
	c.mu.Unlock()
}

// putCustomer stores an entry, making room first when the cache is full.
// c.mu must be held.
func (c *Cache) putCustomer(id string, e *customerEntry) {
	if _, ok := c.customers[id]; !ok && len(c.customers) >= c.maxCustomers {
		// Drop about 1% of the entries; map order makes the choice random.
		n := max(1, c.maxCustomers/100)
		for k := range c.customers {
			delete(c.customers, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.customers[id] = e
}

// Len returns how many customers the cache holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.customers)
}

// Stats returns what the cache has loaded so far and holds now.
func (c *Cache) Stats() CacheStats {
	return CacheStats{
		MetricLoads:     c.metricLoads.Load(),
		CustomerLoads:   c.customerLoads.Load(),
		CustomerBatches: c.customerBatches.Load(),
		Customers:       c.Len(),
	}
}
