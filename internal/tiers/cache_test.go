package tiers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeSource is an in-memory CacheSource that counts its loads. When gate is
// set, each load reports on entered once it has read its answer and then
// waits for gate to close.
type fakeSource struct {
	mu       sync.Mutex
	metrics  map[string]Metric
	plans    map[string]Plan
	accounts map[string]Customer // customer id -> customer; the plan comes from plans
	fail     error
	calls    map[string]int

	gate    chan struct{}
	entered chan string
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		metrics:  map[string]Metric{},
		plans:    map[string]Plan{},
		accounts: map[string]Customer{},
		calls:    map[string]int{},
	}
}

func (s *fakeSource) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

func (s *fakeSource) wait(key string) {
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.mu.Unlock()
	if gate != nil {
		entered <- key
		<-gate
	}
}

func (s *fakeSource) FindMetric(_ context.Context, key string) (Metric, error) {
	s.mu.Lock()
	s.calls["m:"+key]++
	m, ok := s.metrics[key]
	fail := s.fail
	s.mu.Unlock()
	s.wait("m:" + key)
	switch {
	case fail != nil:
		return Metric{}, fail
	case !ok:
		return Metric{}, fmt.Errorf("find metric %q: %w", key, ErrMetricNotFound)
	}
	return m, nil
}

func (s *fakeSource) FindPlan(_ context.Context, key string) (Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["p:"+key]++
	p, ok := s.plans[key]
	if !ok {
		return Plan{}, ErrPlanNotFound
	}
	return p, nil
}

func (s *fakeSource) FindAccount(_ context.Context, id string) (Account, error) {
	s.mu.Lock()
	s.calls["c:"+id]++
	c, ok := s.accounts[id]
	p := s.plans[c.Plan]
	fail := s.fail
	s.mu.Unlock()
	s.wait("c:" + id)
	switch {
	case fail != nil:
		return Account{}, fail
	case !ok:
		return Account{}, fmt.Errorf("find account %q: %w", id, ErrCustomerNotFound)
	}
	return Account{Customer: c, Plan: p}, nil
}

func (s *fakeSource) setMetric(m Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics[m.Key] = m
}

func (s *fakeSource) setPlan(p Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plans[p.Key] = p
}

func (s *fakeSource) setCustomer(c Customer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accounts[c.ID] = c
}

func (s *fakeSource) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// block makes the following loads wait until the returned release is called.
func (s *fakeSource) block() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.entered = make(chan struct{}), make(chan string, 16)
	gate := s.gate
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

func TestCacheMetric(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource()
	src.setMetric(Metric{Key: "api_calls", Description: "v1", Version: 1})
	c := NewCache(src, 0)

	steps := []struct {
		name      string
		before    func()
		key       string
		wantDesc  string
		wantErr   error
		wantLoads int // loads of key so far
	}{
		{name: "first use loads", key: "api_calls", wantDesc: "v1", wantLoads: 1},
		{name: "second use is cached", key: "api_calls", wantDesc: "v1", wantLoads: 1},
		{name: "a change without invalidation is not seen",
			before: func() { src.setMetric(Metric{Key: "api_calls", Description: "v2", Version: 2}) },
			key:    "api_calls", wantDesc: "v1", wantLoads: 1},
		{name: "invalidating another metric keeps this one",
			before: func() { c.Invalidate(Change{Kind: MetricChanged, Key: "tokens"}) },
			key:    "api_calls", wantDesc: "v1", wantLoads: 1},
		{name: "invalidating a plan of the same name keeps the metric",
			before: func() { c.Invalidate(Change{Kind: PlanChanged, Key: "api_calls"}) },
			key:    "api_calls", wantDesc: "v1", wantLoads: 1},
		{name: "invalidation reloads",
			before: func() { c.Invalidate(Change{Kind: MetricChanged, Key: "api_calls"}) },
			key:    "api_calls", wantDesc: "v2", wantLoads: 2},
		{name: "missing metric", key: "nope", wantErr: ErrMetricNotFound, wantLoads: 1},
		{name: "missing metric is remembered", key: "nope", wantErr: ErrMetricNotFound, wantLoads: 1},
		{name: "declared metric appears after invalidation",
			before: func() {
				src.setMetric(Metric{Key: "nope", Description: "now"})
				c.Invalidate(Change{Kind: MetricChanged, Key: "nope"})
			},
			key: "nope", wantDesc: "now", wantLoads: 2},
		{name: "deletion is seen after invalidation",
			before: func() {
				src.mu.Lock()
				delete(src.metrics, "nope")
				src.mu.Unlock()
				c.Invalidate(Change{Kind: MetricChanged, Key: "nope", Deleted: true})
			},
			key: "nope", wantErr: ErrMetricNotFound, wantLoads: 3},
		{name: "purge reloads everything",
			before: func() { c.Purge() },
			key:    "api_calls", wantDesc: "v2", wantLoads: 3},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		m, err := c.Metric(ctx, st.key)
		switch {
		case st.wantErr != nil && !errors.Is(err, st.wantErr):
			t.Errorf("%s: Metric(%q) error = %v, want %v", st.name, st.key, err, st.wantErr)
		case st.wantErr == nil && err != nil:
			t.Errorf("%s: Metric(%q): %v", st.name, st.key, err)
		case st.wantErr == nil && m.Description != st.wantDesc:
			t.Errorf("%s: Metric(%q).Description = %q, want %q", st.name, st.key, m.Description, st.wantDesc)
		}
		if got := src.count("m:" + st.key); got != st.wantLoads {
			t.Errorf("%s: %d loads of %q, want %d", st.name, got, st.key, st.wantLoads)
		}
	}
}

func TestCacheDoesNotKeepErrors(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource()
	src.setMetric(Metric{Key: "m"})
	src.setPlan(Plan{Key: "p"})
	src.setCustomer(Customer{ID: "acme", Plan: "p"})
	src.setFail(ErrUnavailable)
	c := NewCache(src, 0)

	for i := 1; i <= 2; i++ {
		if _, err := c.Metric(ctx, "m"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Metric #%d error = %v, want ErrUnavailable", i, err)
		}
		if _, err := c.Account(ctx, "acme"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Account #%d error = %v, want ErrUnavailable", i, err)
		}
	}
	if got := src.count("m:m") + src.count("c:acme"); got != 4 {
		t.Errorf("%d loads, want 4: a failed load must not be cached", got)
	}

	src.setFail(nil)
	if _, err := c.Metric(ctx, "m"); err != nil {
		t.Errorf("Metric after recovery: %v", err)
	}
	if a, err := c.Account(ctx, "acme"); err != nil || a.Customer.ID != "acme" {
		t.Errorf("Account after recovery = %+v, %v", a, err)
	}
}

func TestCacheAccount(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource()
	src.setPlan(Plan{Key: "free", Limits: []Limit{hard("api_calls", Day, 100)}})
	src.setPlan(Plan{Key: "pro", Limits: []Limit{hard("api_calls", Day, 1000)}})
	src.setCustomer(Customer{ID: "acme", Plan: "free"})
	c := NewCache(src, 0)

	steps := []struct {
		name      string
		before    func()
		id        string
		wantPlan  string
		wantLimit int64
		wantErr   error
		wantLoads int
	}{
		{name: "first use loads", id: "acme", wantPlan: "free", wantLimit: 100, wantLoads: 1},
		{name: "second use is cached", id: "acme", wantPlan: "free", wantLimit: 100, wantLoads: 1},
		{name: "plan change is seen after the plan's invalidation",
			before: func() {
				src.setPlan(Plan{Key: "free", Limits: []Limit{hard("api_calls", Day, 150)}})
				c.Invalidate(Change{Kind: PlanChanged, Key: "free"})
			},
			id: "acme", wantPlan: "free", wantLimit: 150, wantLoads: 2},
		{name: "invalidating an unrelated plan keeps the account",
			before: func() { c.Invalidate(Change{Kind: PlanChanged, Key: "pro"}) },
			id:     "acme", wantPlan: "free", wantLimit: 150, wantLoads: 2},
		{name: "moving to another plan is seen after the customer's invalidation",
			before: func() {
				src.setCustomer(Customer{ID: "acme", Plan: "pro"})
				c.Invalidate(Change{Kind: CustomerChanged, Key: "acme"})
			},
			id: "acme", wantPlan: "pro", wantLimit: 1000, wantLoads: 3},
		{name: "metric invalidation of the same name keeps the account",
			before: func() { c.Invalidate(Change{Kind: MetricChanged, Key: "acme"}) },
			id:     "acme", wantPlan: "pro", wantLimit: 1000, wantLoads: 3},
		{name: "unknown customer", id: "ghost", wantErr: ErrCustomerNotFound, wantLoads: 1},
		{name: "unknown customer is remembered", id: "ghost", wantErr: ErrCustomerNotFound, wantLoads: 1},
		{name: "new customer is seen after invalidation",
			before: func() {
				src.setCustomer(Customer{ID: "ghost", Plan: "free"})
				c.Invalidate(Change{Kind: CustomerChanged, Key: "ghost"})
			},
			id: "ghost", wantPlan: "free", wantLimit: 150, wantLoads: 2},
		{name: "deleted customer is gone after invalidation",
			before: func() {
				src.mu.Lock()
				delete(src.accounts, "acme")
				src.mu.Unlock()
				c.Invalidate(Change{Kind: CustomerChanged, Key: "acme", Deleted: true})
			},
			id: "acme", wantErr: ErrCustomerNotFound, wantLoads: 4},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		a, err := c.Account(ctx, st.id)
		switch {
		case st.wantErr != nil && !errors.Is(err, st.wantErr):
			t.Errorf("%s: Account(%q) error = %v, want %v", st.name, st.id, err, st.wantErr)
		case st.wantErr == nil && err != nil:
			t.Errorf("%s: Account(%q): %v", st.name, st.id, err)
		case st.wantErr == nil && (a.Customer.ID != st.id || a.Plan.Key != st.wantPlan ||
			len(a.Plan.Limits) != 1 || a.Plan.Limits[0].Limit != st.wantLimit):
			t.Errorf("%s: Account(%q) = customer %q on plan %q with limits %+v; want plan %q with limit %d",
				st.name, st.id, a.Customer.ID, a.Plan.Key, a.Plan.Limits, st.wantPlan, st.wantLimit)
		}
		if got := src.count("c:" + st.id); got != st.wantLoads {
			t.Errorf("%s: %d loads of %q, want %d", st.name, got, st.id, st.wantLoads)
		}
	}
	if got := src.count("p:free") + src.count("p:pro"); got != 0 {
		t.Errorf("the cache loaded plans on their own %d times; accounts bring their plan", got)
	}
}

// TestCacheDropsLoadsOlderThanAnInvalidation starts a load, invalidates the
// entry while the load is in flight, and checks that the stale answer is
// not kept.
func TestCacheDropsLoadsOlderThanAnInvalidation(t *testing.T) {
	kinds := []struct {
		name   string
		setOld func(*fakeSource)
		setNew func(*fakeSource)
		change Change
		get    func(*Cache) (string, error)
		key    string
	}{
		{
			name:   "metric",
			setOld: func(s *fakeSource) { s.setMetric(Metric{Key: "m", Description: "old"}) },
			setNew: func(s *fakeSource) { s.setMetric(Metric{Key: "m", Description: "new"}) },
			change: Change{Kind: MetricChanged, Key: "m"},
			get: func(c *Cache) (string, error) {
				m, err := c.Metric(context.Background(), "m")
				return m.Description, err
			},
			key: "m:m",
		},
		{
			name: "account",
			setOld: func(s *fakeSource) {
				s.setPlan(Plan{Key: "p"})
				s.setCustomer(Customer{ID: "acme", Plan: "p", Name: "old"})
			},
			setNew: func(s *fakeSource) { s.setCustomer(Customer{ID: "acme", Plan: "p", Name: "new"}) },
			change: Change{Kind: CustomerChanged, Key: "acme"},
			get: func(c *Cache) (string, error) {
				a, err := c.Account(context.Background(), "acme")
				return a.Customer.Name, err
			},
			key: "c:acme",
		},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			src := newFakeSource()
			k.setOld(src)
			c := NewCache(src, 0)
			release := src.block()
			defer release()

			type result struct {
				val string
				err error
			}
			done := make(chan result, 1)
			go func() {
				v, err := k.get(c)
				done <- result{v, err}
			}()
			<-src.entered // the load has read the old value

			k.setNew(src)
			c.Invalidate(k.change)
			release()

			r := <-done
			if r.err != nil || r.val != "old" {
				t.Fatalf("in-flight load = %q, %v; want its own answer %q", r.val, r.err, "old")
			}
			v, err := k.get(c)
			if err != nil || v != "new" {
				t.Errorf("after the invalidation = %q, %v; want %q (the stale load was kept)", v, err, "new")
			}
			if got := src.count(k.key); got != 2 {
				t.Errorf("%d loads, want 2", got)
			}
		})
	}
}

// TestCacheCallerContext checks that a caller whose context ends stops
// waiting for a load in flight, without disturbing the load itself; one
// whose deadline passed is told the store is unavailable.
func TestCacheCallerContext(t *testing.T) {
	src := newFakeSource()
	src.setMetric(Metric{Key: "m", Description: "ok"})
	c := NewCache(src, 0)
	release := src.block()
	defer release()

	done := make(chan error, 1)
	go func() {
		_, err := c.Metric(context.Background(), "m")
		done <- err
	}()
	<-src.entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Metric(ctx, "m"); !errors.Is(err, context.Canceled) {
		t.Errorf("Metric with a canceled context = %v, want context.Canceled", err)
	}

	// A caller whose time for the store runs out sees the store as
	// unreachable, as a check then must.
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now())
	defer dcancel()
	if _, err := c.Metric(dctx, "m"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Metric past its deadline = %v, want ErrUnavailable", err)
	}

	release()
	if err := <-done; err != nil {
		t.Errorf("the first caller's load failed: %v", err)
	}
	if m, err := c.Metric(context.Background(), "m"); err != nil || m.Description != "ok" {
		t.Errorf("Metric = %+v, %v", m, err)
	}
	if got := src.count("m:m"); got != 1 {
		t.Errorf("%d loads, want 1", got)
	}
}

func TestCacheBoundsCustomers(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		customers int
	}{
		{"tiny cache", 1, 10},
		{"small cache", 3, 50},
		{"a hundred", 100, 250},
		{"room to spare", 100, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			src := newFakeSource()
			src.setPlan(Plan{Key: "p"})
			c := NewCache(src, tc.max)
			for i := range tc.customers {
				id := fmt.Sprintf("c%d", i)
				if i%2 == 0 {
					src.setCustomer(Customer{ID: id, Plan: "p"})
				}
				a, err := c.Account(ctx, id)
				switch {
				case i%2 == 0 && (err != nil || a.Customer.ID != id):
					t.Fatalf("Account(%q) = %+v, %v", id, a.Customer, err)
				case i%2 == 1 && !errors.Is(err, ErrCustomerNotFound):
					t.Fatalf("Account(%q) error = %v, want ErrCustomerNotFound", id, err)
				}
				if n := c.Len(); n > tc.max {
					t.Fatalf("after %d customers the cache holds %d, more than its bound %d", i+1, n, tc.max)
				}
			}
			// Known customers and known-missing ones both count. A full
			// cache evicts about 1% to make room, never most of itself.
			n := c.Len()
			if tc.customers <= tc.max && n != tc.customers {
				t.Errorf("cache holds %d customers, want all %d", n, tc.customers)
			}
			if low := tc.max - max(1, tc.max/100) + 1; tc.customers > tc.max && n < low {
				t.Errorf("full cache holds %d customers, want at least %d of %d", n, low, tc.max)
			}
			// The customer loaded last is kept.
			last := fmt.Sprintf("c%d", tc.customers-1)
			before := src.count("c:" + last)
			_, _ = c.Account(ctx, last)
			if src.count("c:"+last) != before {
				t.Errorf("the customer loaded last was evicted")
			}
		})
	}
	if c := NewCache(newFakeSource(), 0); c.maxCustomers != DefaultCacheCustomers {
		t.Errorf("NewCache(src, 0) bound = %d, want %d", c.maxCustomers, DefaultCacheCustomers)
	}
	if c := NewCache(newFakeSource(), -5); c.maxCustomers != DefaultCacheCustomers {
		t.Errorf("NewCache(src, -5) bound = %d, want %d", c.maxCustomers, DefaultCacheCustomers)
	}
}

// TestCacheConcurrentUse hammers one cache from several goroutines while
// entries are invalidated; run with the race detector.
func TestCacheConcurrentUse(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource()
	src.setMetric(Metric{Key: "m"})
	src.setPlan(Plan{Key: "p"})
	for i := range 10 {
		src.setCustomer(Customer{ID: fmt.Sprintf("c%d", i), Plan: "p"})
	}
	c := NewCache(src, 5)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("c%d", (g+i)%10)
				if a, err := c.Account(ctx, id); err != nil || a.Customer.ID != id {
					errs <- fmt.Errorf("Account(%q) = %q, %v", id, a.Customer.ID, err)
					return
				}
				if _, err := c.Metric(ctx, "m"); err != nil {
					errs <- fmt.Errorf("Metric: %v", err)
					return
				}
				switch i % 7 {
				case 0:
					c.Invalidate(Change{Kind: CustomerChanged, Key: id})
				case 3:
					c.Invalidate(Change{Kind: PlanChanged, Key: "p"})
				case 5:
					c.Invalidate(Change{Kind: MetricChanged, Key: "m"})
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.Len(); n > 5 {
		t.Errorf("cache holds %d customers, bound is 5", n)
	}
}
