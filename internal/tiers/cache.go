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

// CacheSource is what a Cache loads from; Store implements it.
type CacheSource interface {
	FindMetric(ctx context.Context, key string) (Metric, error)
	FindPlan(ctx context.Context, key string) (Plan, error)
	FindAccount(ctx context.Context, id string) (Account, error)
}

// DefaultCacheCustomers bounds how many customers a Cache holds.
const DefaultCacheCustomers = 1_000_000

// loadTimeout bounds one load from the source; loads are shared by every
// caller waiting for the same key, so no single caller's context governs.
const loadTimeout = 2 * time.Second

// Cache holds metrics, plans and customers (with their overrides) in
// memory for the check path. Entries load on first use, absent ones
// included, and stay until Invalidate drops them: call it for every
// committed change, in this process and, through PostgreSQL
// LISTEN/NOTIFY, in the others.
//
// A load that started before an invalidation is used for its own caller
// but not kept, so a cache never holds data older than the last change it
// was told of. Values returned share memory with the cache: read them, do
// not modify them. Cache is safe for concurrent use.
type Cache struct {
	src          CacheSource
	maxCustomers int
	gen          atomic.Uint64
	loads        singleflight.Group

	mu        sync.RWMutex
	metrics   map[string]*Metric // nil: known not to exist
	plans     map[string]*Plan
	customers map[string]*customerEntry
}

type customerEntry struct {
	customer  Customer
	overrides []Override
	missing   bool
}

// NewCache returns an empty cache over src holding at most maxCustomers
// customers (DefaultCacheCustomers when <= 0).
func NewCache(src CacheSource, maxCustomers int) *Cache {
	if maxCustomers <= 0 {
		maxCustomers = DefaultCacheCustomers
	}
	return &Cache{
		src: src, maxCustomers: maxCustomers,
		metrics:   make(map[string]*Metric),
		plans:     make(map[string]*Plan),
		customers: make(map[string]*customerEntry),
	}
}

// Invalidate drops what the cache holds for the changed entry.
func (c *Cache) Invalidate(ch Change) {
	c.gen.Add(1)
	c.mu.Lock()
	switch ch.Kind {
	case MetricChanged:
		delete(c.metrics, ch.Key)
	case PlanChanged:
		delete(c.plans, ch.Key)
	case CustomerChanged:
		delete(c.customers, ch.Key)
	}
	c.mu.Unlock()
}

// Purge drops everything, e.g. after missing notifications.
func (c *Cache) Purge() {
	c.gen.Add(1)
	c.mu.Lock()
	clear(c.metrics)
	clear(c.plans)
	clear(c.customers)
	c.mu.Unlock()
}

// Metric returns the metric key, or ErrMetricNotFound.
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

// Account returns a customer with its plan and overrides, or
// ErrCustomerNotFound.
func (c *Cache) Account(ctx context.Context, id string) (Account, error) {
	c.mu.RLock()
	ce, ok := c.customers[id]
	var p *Plan
	if ok && !ce.missing {
		p = c.plans[ce.customer.Plan]
	}
	c.mu.RUnlock()
	switch {
	case ok && ce.missing:
		return Account{}, ErrCustomerNotFound
	case ok && p != nil:
		return Account{Customer: ce.customer, Plan: *p, Overrides: ce.overrides}, nil
	}
	v, err := c.load(ctx, "c:"+id, func(ctx context.Context, gen uint64) (any, error) {
		a, err := c.src.FindAccount(ctx, id)
		switch {
		case errors.Is(err, ErrCustomerNotFound):
			c.keep(gen, func() { c.putCustomer(id, &customerEntry{missing: true}) })
		case err == nil:
			c.keep(gen, func() {
				c.putCustomer(id, &customerEntry{customer: a.Customer, overrides: a.Overrides})
				c.plans[a.Plan.Key] = &a.Plan
			})
		}
		return a, err
	})
	if err != nil {
		return Account{}, err
	}
	return v.(Account), nil
}

// load runs fn once for all concurrent callers of the same key.
func (c *Cache) load(ctx context.Context, key string, fn func(ctx context.Context, gen uint64) (any, error)) (any, error) {
	ch := c.loads.DoChan(key, func() (any, error) {
		gen := c.gen.Load()
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		return fn(lctx, gen)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The caller's time for the store ran out: to it, the store
			// could not be reached.
			return nil, fmt.Errorf("%w: waiting for %s: %w", ErrUnavailable, key, ctx.Err())
		}
		return nil, ctx.Err()
	}
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
