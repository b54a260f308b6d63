package tiers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSource is an in-memory CacheSource that counts its loads and records
// its batches of customers. When gate is set, each load reports on entered
// (metrics "m:key", customers "c:id,id,...") once it has read its answer
// and then waits for gate to close.
type fakeSource struct {
	mu       sync.Mutex
	metrics  map[string]Metric
	plans    map[string]Plan
	accounts map[string]Customer          // customer id -> customer; the plan comes from plans
	features map[string][]FeatureOverride // customer id -> its feature overrides
	fail     error
	calls    map[string]int
	batches  [][]string // the ids of every load of customers, in order
	// deadlines: the deadline of each load's context, by key as calls.
	deadlines map[string]time.Time

	gate    chan struct{}
	entered chan string
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		metrics:  map[string]Metric{},
		plans:    map[string]Plan{},
		accounts: map[string]Customer{},
		calls:    map[string]int{},

		deadlines: map[string]time.Time{},
	}
}

// deadline returns the deadline of the last load of key's context.
func (s *fakeSource) deadline(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadlines[key]
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

func (s *fakeSource) FindMetric(ctx context.Context, key string) (Metric, error) {
	s.mu.Lock()
	s.calls["m:"+key]++
	s.deadlines["m:"+key], _ = ctx.Deadline()
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
	m.Draws = s.draws(key)
	return m, nil
}

// draws fills a metric's Draws as the store does: from the schema of the
// pool that names it.
func (s *fakeSource) draws(key string) *Draw {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pool, m := range s.metrics {
		for _, r := range m.CreditSchema {
			if r.Metric == key {
				return &Draw{Pool: pool, Credits: r.Credits, Per: r.Per}
			}
		}
	}
	return nil
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

func (s *fakeSource) FindPublicPlans(context.Context) ([]Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["public"]++
	if s.fail != nil {
		return nil, s.fail
	}
	var out []Plan
	for _, p := range s.plans {
		if p.Public {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Plan) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// planOrNil returns the plan key, nil for "". s.mu must be held.
func (s *fakeSource) planOrNil(key string) *Plan {
	if key == "" {
		return nil
	}
	p := s.plans[key]
	return &p
}

func (s *fakeSource) FindAccounts(ctx context.Context, ids []string) (map[string]Account, error) {
	s.mu.Lock()
	s.batches = append(s.batches, slices.Clone(ids))
	out := make(map[string]Account)
	for _, id := range ids {
		s.calls["c:"+id]++
		s.deadlines["c:"+id], _ = ctx.Deadline()
		if c, ok := s.accounts[id]; ok {
			a := Account{Customer: c, Plan: s.plans[c.Plan], FeatureOverrides: s.features[id]}
			if trial, scheduled := c.PendingPlans(); trial != "" || scheduled != "" {
				a.TrialPlan, a.ScheduledPlan = s.planOrNil(trial), s.planOrNil(scheduled)
			}
			out[id] = a
		}
	}
	fail := s.fail
	s.mu.Unlock()
	s.wait("c:" + strings.Join(ids, ","))
	if fail != nil {
		return nil, fail
	}
	return out, nil
}

// sizes returns the sizes of the batches of customers loaded so far.
func (s *fakeSource) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n []int
	for _, b := range s.batches {
		n = append(n, len(b))
	}
	return n
}

// locked runs f holding s's lock, for a change to what s holds.
func (s *fakeSource) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *fakeSource) setMetric(m Metric)     { s.locked(func() { s.metrics[m.Key] = m }) }
func (s *fakeSource) setPlan(p Plan)         { s.locked(func() { s.plans[p.Key] = p }) }
func (s *fakeSource) setCustomer(c Customer) { s.locked(func() { s.accounts[c.ID] = c }) }
func (s *fakeSource) setFail(err error)      { s.locked(func() { s.fail = err }) }

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
		{name: "invalidating a plan of the same name keeps the metric",
			before: func() { c.Invalidate(Change{Kind: PlanChanged, Key: "api_calls"}) },
			key:    "api_calls", wantDesc: "v1", wantLoads: 1},
		{name: "invalidating another metric drops this one too (its pool's schema may have changed)",
			before: func() { c.Invalidate(Change{Kind: MetricChanged, Key: "tokens"}) },
			key:    "api_calls", wantDesc: "v2", wantLoads: 2},
		{name: "invalidation reloads",
			before: func() {
				src.setMetric(Metric{Key: "api_calls", Description: "v3", Version: 3})
				c.Invalidate(Change{Kind: MetricChanged, Key: "api_calls"})
			},
			key: "api_calls", wantDesc: "v3", wantLoads: 3},
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
				src.locked(func() { delete(src.metrics, "nope") })
				c.Invalidate(Change{Kind: MetricChanged, Key: "nope", Deleted: true})
			},
			key: "nope", wantErr: ErrMetricNotFound, wantLoads: 3},
		{name: "purge reloads everything",
			before: func() { c.Purge() },
			key:    "api_calls", wantDesc: "v3", wantLoads: 4},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		m, err := c.Metric(ctx, st.key)
		if lookupAnswered(t, st.name, fmt.Sprintf("Metric(%q)", st.key), err, st.wantErr) && m.Description != st.wantDesc {
			t.Errorf("%s: Metric(%q).Description = %q, want %q", st.name, st.key, m.Description, st.wantDesc)
		}
		checkLoads(t, src, st.name, "m:", st.key, st.wantLoads)
	}
}

// A metric's Draws is its pool's: the cache hands it out as the source
// fills it, and a change of the pool reaches the metrics that draw on it.
// lookupAnswered reports the error of the step's lookup call unless it is
// wantErr (nil: none), and says whether the lookup answered as wanted, its
// value then to be compared.
func lookupAnswered(t *testing.T, step, call string, err, wantErr error) bool {
	t.Helper()
	switch {
	case wantErr != nil && !errors.Is(err, wantErr):
		t.Errorf("%s: %s error = %v, want %v", step, call, err, wantErr)
	case wantErr == nil && err != nil:
		t.Errorf("%s: %s: %v", step, call, err)
	default:
		return wantErr == nil
	}
	return false
}

// checkLoads reports src's loads so far of key, a kind's prefix before it,
// unless there were want.
func checkLoads(t *testing.T, src *fakeSource, step, prefix, key string, want int) {
	t.Helper()
	if got := src.count(prefix + key); got != want {
		t.Errorf("%s: %d loads of %q, want %d", step, got, key, want)
	}
}

func TestCacheMetricDraws(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource()
	src.setMetric(Metric{Key: "gpt4_tokens"})
	src.setMetric(Metric{Key: "images"})
	src.setMetric(Metric{Key: "credits", CreditSchema: []CreditRate{{Metric: "gpt4_tokens", Credits: 3, Per: 100}}})
	c := NewCache(src, 0)

	steps := []struct {
		name   string
		before func()
		key    string
		want   *Draw
	}{
		{name: "a metric the pool names", key: "gpt4_tokens", want: &Draw{Pool: "credits", Credits: 3, Per: 100}},
		{name: "a metric no pool names", key: "images"},
		{name: "the pool itself draws on none", key: "credits"},
		{name: "a new rate reaches the metric once the pool is invalidated",
			before: func() {
				src.setMetric(Metric{Key: "credits", CreditSchema: []CreditRate{
					{Metric: "gpt4_tokens", Credits: 5, Per: 100}, {Metric: "images", Credits: 10, Per: 1}}})
				c.Invalidate(Change{Kind: MetricChanged, Key: "credits"})
			},
			key: "gpt4_tokens", want: &Draw{Pool: "credits", Credits: 5, Per: 100}},
		{name: "a metric the pool names now", key: "images", want: &Draw{Pool: "credits", Credits: 10, Per: 1}},
		{name: "the pool's deletion frees the metrics",
			before: func() {
				src.locked(func() { delete(src.metrics, "credits") })
				c.Invalidate(Change{Kind: MetricChanged, Key: "credits", Deleted: true})
			},
			key: "images"},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		m, err := c.Metric(ctx, st.key)
		if err != nil {
			t.Fatalf("%s: Metric(%q): %v", st.name, st.key, err)
		}
		if !reflect.DeepEqual(m.Draws, st.want) {
			t.Errorf("%s: Metric(%q).Draws = %+v, want %+v", st.name, st.key, m.Draws, st.want)
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
				src.locked(func() { delete(src.accounts, "acme") })
				c.Invalidate(Change{Kind: CustomerChanged, Key: "acme", Deleted: true})
			},
			id: "acme", wantErr: ErrCustomerNotFound, wantLoads: 4},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		a, err := c.Account(ctx, st.id)
		if lookupAnswered(t, st.name, fmt.Sprintf("Account(%q)", st.id), err, st.wantErr) &&
			(a.Customer.ID != st.id || a.Plan.Key != st.wantPlan || len(a.Plan.Limits) != 1 || a.Plan.Limits[0].Limit != st.wantLimit) {
			t.Errorf("%s: Account(%q) = customer %q on plan %q with limits %+v; want plan %q with limit %d",
				st.name, st.id, a.Customer.ID, a.Plan.Key, a.Plan.Limits, st.wantPlan, st.wantLimit)
		}
		checkLoads(t, src, st.name, "c:", st.id, st.wantLoads)
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

			done := inBackground(func() (string, error) { return k.get(c) })
			<-src.entered // the load has read the old value

			k.setNew(src)
			c.Invalidate(k.change)
			release()

			r := <-done
			if r.err != nil || r.v != "old" {
				t.Fatalf("in-flight load = %q, %v; want its own answer %q", r.v, r.err, "old")
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
// answer is what a call made in the background returned.
type answer[T any] struct {
	v   T
	err error
}

// inBackground calls f in a goroutine and returns the channel its answer
// comes on.
func inBackground[T any](f func() (T, error)) <-chan answer[T] {
	done := make(chan answer[T], 1)
	go func() {
		v, err := f()
		done <- answer[T]{v, err}
	}()
	return done
}

func TestCacheCallerContext(t *testing.T) {
	kinds := []struct {
		name string
		get  func(ctx context.Context, c *Cache) (string, error)
		key  string
	}{
		{"metric", func(ctx context.Context, c *Cache) (string, error) {
			m, err := c.Metric(ctx, "m")
			return m.Description, err
		}, "m:m"},
		{"account", func(ctx context.Context, c *Cache) (string, error) {
			a, err := c.Account(ctx, "acme")
			return a.Customer.Name, err
		}, "c:acme"},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			src := newFakeSource()
			src.setMetric(Metric{Key: "m", Description: "ok"})
			src.setPlan(Plan{Key: "p"})
			src.setCustomer(Customer{ID: "acme", Plan: "p", Name: "ok"})
			c := NewCache(src, 0)
			release := src.block()
			defer release()

			done := make(chan error, 1)
			go func() {
				_, err := k.get(context.Background(), c)
				done <- err
			}()
			<-src.entered

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := k.get(ctx, c); !errors.Is(err, context.Canceled) {
				t.Errorf("with a canceled context = %v, want context.Canceled", err)
			}

			// A caller whose time for the store runs out sees the store as
			// unreachable, as a check then must.
			dctx, dcancel := context.WithDeadline(context.Background(), time.Now())
			defer dcancel()
			if _, err := k.get(dctx, c); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("past its deadline = %v, want ErrUnavailable", err)
			}

			release()
			if err := <-done; err != nil {
				t.Errorf("the first caller's load failed: %v", err)
			}
			if v, err := k.get(context.Background(), c); err != nil || v != "ok" {
				t.Errorf("after the load = %q, %v; want %q", v, err, "ok")
			}
			if got := src.count(k.key); got != 1 {
				t.Errorf("%d loads, want 1: the callers that gave up did not cut the load short", got)
			}
		})
	}
}

// A load lasts as long as the callers that started it may wait for the
// store, loadTimeout at least: a caller given a minute (a check whose
// store timeout is a minute, on a busy machine) is not told the store is
// out of reach after loadTimeout, and answered degraded, while its own
// time is not up. Callers without a deadline get loadTimeout.
func TestCacheLoadLastsAsLongAsItsCallersWait(t *testing.T) {
	src := newFakeSource()
	src.setMetric(Metric{Key: "m"})
	src.setPlan(Plan{Key: "p"})
	for _, id := range []string{"patient", "hasty", "later"} {
		src.setCustomer(Customer{ID: id, Plan: "p"})
	}
	c := NewCache(src, 0)
	patient := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), patient)
	defer cancel()
	if _, err := c.Metric(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Account(ctx, "patient"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"m:m", "c:patient"} {
		if got := src.deadline(key); !got.Equal(patient) {
			t.Errorf("load of %s gives up at %s, want the caller's deadline %s", key, got.Format(time.StampMilli), patient.Format(time.StampMilli))
		}
	}

	// Callers of one batch: the batch waits for the most patient, who may
	// come after the batch was opened. A load in flight holds the loader,
	// so that the misses queue up in the next batch.
	release := src.block()
	go func() { _, _ = c.Account(context.Background(), "hasty") }()
	<-src.entered
	later := make(chan error, 2)
	go func() { _, err := c.Account(context.Background(), "later"); later <- err }()
	waitFor(t, "the first caller of later to queue", func() bool { return queued(c) == 1 })
	go func() { _, err := c.Account(ctx, "later"); later <- err }()
	waitFor(t, "the patient caller to join the batch", func() bool {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return c.waiting["later"] != nil && c.waiting["later"].waitUntil.Equal(patient)
	})
	release()
	for range 2 {
		if err := <-later; err != nil {
			t.Fatal(err)
		}
	}
	if got := src.deadline("c:later"); !got.Equal(patient) {
		t.Errorf("the batch of two callers gives up at %s, want the later deadline %s", got.Format(time.StampMilli), patient.Format(time.StampMilli))
	}
	if got, bound := src.deadline("c:hasty"), time.Now().Add(loadTimeout); got.After(bound) || got.IsZero() {
		t.Errorf("a load for a caller without a deadline gives up at %s, want at most loadTimeout from its start (before %s)", got, bound)
	}
}

// waitFor polls cond until it holds, and fails the test if it does not
// within a bound generous enough for a busy machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// queued returns how many customers wait for a batch not sent yet.
func queued(c *Cache) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, b := range c.queue {
		n += len(b.ids)
	}
	return n
}

// names returns prefix1 … prefixN.
func names(prefix string, from, to int) []string {
	var ids []string
	for i := from; i <= to; i++ {
		ids = append(ids, fmt.Sprintf("%s%d", prefix, i))
	}
	return ids
}

// TestCacheBatchesMisses misses customer c0 with its load blocked, then
// misses others from many goroutines at once: they wait for the load in
// flight and go together in the next, as many as a batch holds.
func TestCacheBatchesMisses(t *testing.T) {
	tests := []struct {
		name      string
		batchSize int      // 0: DefaultAccountBatch
		then      []string // asked at once while c0's load is blocked
		batches   []int    // the size of every load of customers
	}{
		{name: "200 customers: the first alone, every other in the second load",
			then: names("c", 1, 199), batches: []int{1, 199}},
		{name: "batches are bounded", batchSize: 50,
			then: names("c", 1, 199), batches: []int{1, 50, 50, 50, 49}},
		{name: "a customer asked by many callers is loaded once",
			then: slices.Repeat([]string{"c1"}, 100), batches: []int{1, 1}},
		{name: "callers of the customer in flight wait for its load",
			then: slices.Repeat([]string{"c0"}, 50), batches: []int{1}},
		{name: "absent customers go with the others and are remembered",
			then: append(names("c", 1, 20), names("ghost", 1, 20)...), batches: []int{1, 40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			src := newFakeSource()
			src.setPlan(Plan{Key: "p", Limits: []Limit{hard("api_calls", Day, 100)}})
			for _, id := range names("c", 0, 199) {
				src.setCustomer(Customer{ID: id, Plan: "p"})
			}
			c := NewCache(src, 0)
			if tt.batchSize > 0 {
				c.batchSize = tt.batchSize
			}
			release := src.block()
			defer release()

			asked := append([]string{"c0"}, tt.then...)
			errs := make([]error, len(asked))
			got := make([]Account, len(asked))
			var wg sync.WaitGroup
			wg.Go(func() { got[0], errs[0] = c.Account(ctx, "c0") })
			<-src.entered
			for i, id := range tt.then {
				wg.Go(func() { got[i+1], errs[i+1] = c.Account(ctx, id) })
			}
			distinct := map[string]bool{}
			for _, id := range tt.then {
				distinct[id] = id != "c0"
			}
			want := 0
			for _, queues := range distinct {
				if queues {
					want++
				}
			}
			waitFor(t, fmt.Sprintf("%d customers to wait for the next load", want), func() bool { return queued(c) == want })
			release()
			wg.Wait()

			for i, id := range asked {
				switch {
				case strings.HasPrefix(id, "ghost") && !errors.Is(errs[i], ErrCustomerNotFound):
					t.Errorf("Account(%q) error = %v, want ErrCustomerNotFound", id, errs[i])
				case !strings.HasPrefix(id, "ghost") && (errs[i] != nil || got[i].Customer.ID != id || got[i].Plan.Key != "p"):
					t.Errorf("Account(%q) = customer %q on plan %q, %v", id, got[i].Customer.ID, got[i].Plan.Key, errs[i])
				}
			}
			if got := src.sizes(); !slices.Equal(got, tt.batches) {
				t.Errorf("loads of %v customers, want %v", got, tt.batches)
			}
			// Everything loaded is kept, absent customers included.
			for _, id := range asked {
				_, _ = c.Account(ctx, id)
			}
			if got := src.sizes(); !slices.Equal(got, tt.batches) {
				t.Errorf("after asking again, loads of %v customers, want still %v", got, tt.batches)
			}
		})
	}
}

// TestCacheBatchHeardAChange changes the catalog while a batch of
// customers a (on plan p), b (on plan q) and ghost (absent) is in flight:
// the batch's callers get its answers, and only what the change did not
// touch is kept.
func TestCacheBatchHeardAChange(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Cache)
		kept   []string
	}{
		{"nothing", func(*Cache) {}, []string{"a", "b", "ghost"}},
		{"another customer", func(c *Cache) { c.Invalidate(Change{Kind: CustomerChanged, Key: "z"}) }, []string{"a", "b", "ghost"}},
		{"a metric of the same name", func(c *Cache) { c.Invalidate(Change{Kind: MetricChanged, Key: "a"}) }, []string{"a", "b", "ghost"}},
		{"another plan", func(c *Cache) { c.Invalidate(Change{Kind: PlanChanged, Key: "r"}) }, []string{"a", "b", "ghost"}},
		{"one of its customers", func(c *Cache) { c.Invalidate(Change{Kind: CustomerChanged, Key: "a"}) }, []string{"b", "ghost"}},
		{"the absent customer, now created", func(c *Cache) { c.Invalidate(Change{Kind: CustomerChanged, Key: "ghost"}) }, []string{"a", "b"}},
		{"one of their plans", func(c *Cache) { c.Invalidate(Change{Kind: PlanChanged, Key: "p"}) }, []string{"b", "ghost"}},
		{"everything (purge)", func(c *Cache) { c.Purge() }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			src := newFakeSource()
			src.setPlan(Plan{Key: "p"})
			src.setPlan(Plan{Key: "q"})
			src.setCustomer(Customer{ID: "a", Plan: "p"})
			src.setCustomer(Customer{ID: "b", Plan: "q"})
			c := NewCache(src, 0)
			release := src.block()
			defer release()

			done := inBackground(func() (int, error) { return c.Warm(ctx, []string{"a", "b", "ghost"}) })
			if got, want := <-src.entered, "c:a,b,ghost"; got != want {
				t.Fatalf("load %q, want %q", got, want)
			}
			tt.change(c)
			release()
			if r := <-done; r.err != nil || r.v != 2 {
				t.Fatalf("Warm = %d, %v; want 2 found", r.v, r.err)
			}
			var kept []string
			for _, id := range []string{"a", "b", "ghost"} {
				before := src.count("c:" + id)
				_, _ = c.Account(ctx, id)
				if src.count("c:"+id) == before {
					kept = append(kept, id)
				}
			}
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("kept %q, want %q", kept, tt.kept)
			}
		})
	}
}

// TestCacheAsksAgainAfterAChange: a caller that misses a customer whose
// load began before a change to it waits for the next load, not the stale
// one; one that misses after an unrelated change joins the load in flight.
func TestCacheAsksAgainAfterAChange(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*fakeSource, *Cache)
		want    string // the second caller's customer name and plan's limit
		batches []int
	}{
		{"the customer changed", func(s *fakeSource, c *Cache) {
			s.setCustomer(Customer{ID: "acme", Plan: "p", Name: "new"})
			c.Invalidate(Change{Kind: CustomerChanged, Key: "acme"})
		}, "new 100", []int{1, 1}},
		{"its plan changed", func(s *fakeSource, c *Cache) {
			s.setPlan(Plan{Key: "p", Limits: []Limit{hard("api_calls", Day, 200)}})
			c.Invalidate(Change{Kind: PlanChanged, Key: "p"})
		}, "old 200", []int{1, 1}},
		{"everything was purged", func(s *fakeSource, c *Cache) {
			s.setCustomer(Customer{ID: "acme", Plan: "p", Name: "new"})
			c.Purge()
		}, "new 100", []int{1, 1}},
		{"another customer changed", func(s *fakeSource, c *Cache) {
			c.Invalidate(Change{Kind: CustomerChanged, Key: "globex"})
		}, "old 100", []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			src := newFakeSource()
			src.setPlan(Plan{Key: "p", Limits: []Limit{hard("api_calls", Day, 100)}})
			src.setCustomer(Customer{ID: "acme", Plan: "p", Name: "old"})
			c := NewCache(src, 0)
			release := src.block()
			defer release()

			show := func(a Account, err error) string {
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("%s %d", a.Customer.Name, a.Plan.Limits[0].Limit)
			}
			first, second := make(chan string, 1), make(chan string, 1)
			go func() { first <- show(c.Account(ctx, "acme")) }()
			<-src.entered
			tt.change(src, c)
			go func() { second <- show(c.Account(ctx, "acme")) }()
			if len(tt.batches) > 1 {
				waitFor(t, "the second caller to wait for the next load", func() bool { return queued(c) == 1 })
			}
			release()
			if got := <-first; got != "old 100" {
				t.Errorf("the first caller got %q, want its load's answer %q", got, "old 100")
			}
			if got := <-second; got != tt.want {
				t.Errorf("the second caller got %q, want %q", got, tt.want)
			}
			if got := show(c.Account(ctx, "acme")); got != tt.want {
				t.Errorf("the cache then holds %q, want %q", got, tt.want)
			}
			if got := src.sizes(); !slices.Equal(got, tt.batches) {
				t.Errorf("loads of %v customers, want %v", got, tt.batches)
			}
		})
	}
}

// TestCacheWarm loads customers in batches before anyone asks for them.
func TestCacheWarm(t *testing.T) {
	tests := []struct {
		name     string
		max      int      // the cache's bound; 0: the default
		held     []string // asked for before warming
		ids      []string
		fail     error
		found    int
		wantErr  error
		batches  []int
		holds    int
		warmHits []string // asked for after warming, answered from memory
	}{
		{name: "in batches, in order, absent ones remembered",
			ids: append(names("c", 1, 9), "ghost1", "ghost2"), found: 9,
			batches: []int{4, 4, 3}, holds: 11, warmHits: append(names("c", 1, 9), "ghost1", "ghost2")},
		{name: "customers held are not loaded again", held: []string{"c1", "c2"},
			ids: names("c", 1, 6), found: 4, batches: []int{1, 1, 4}, holds: 6, warmHits: names("c", 1, 6)},
		{name: "no further than the cache's bound, making no room", max: 5, held: []string{"c9"},
			ids: names("c", 1, 8), found: 4, batches: []int{1, 4}, holds: 5, warmHits: names("c", 1, 4)},
		{name: "nothing to warm", ids: nil, found: 0, batches: nil, holds: 0},
		{name: "the source fails", ids: names("c", 1, 6), fail: ErrUnavailable, wantErr: ErrUnavailable,
			found: 0, batches: []int{4}, holds: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			src := newFakeSource()
			src.setPlan(Plan{Key: "p"})
			for _, id := range names("c", 1, 9) {
				src.setCustomer(Customer{ID: id, Plan: "p"})
			}
			c := NewCache(src, tt.max)
			c.batchSize = 4
			for _, id := range tt.held {
				if _, err := c.Account(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			src.setFail(tt.fail)
			n, err := c.Warm(ctx, tt.ids)
			if !errors.Is(err, tt.wantErr) || n != tt.found {
				t.Errorf("Warm = %d, %v; want %d, %v", n, err, tt.found, tt.wantErr)
			}
			if got := src.sizes(); !slices.Equal(got, tt.batches) {
				t.Errorf("loads of %v customers, want %v", got, tt.batches)
			}
			if got := c.Len(); got != tt.holds {
				t.Errorf("the cache holds %d customers, want %d", got, tt.holds)
			}
			src.setFail(nil)
			loads := len(src.sizes())
			for _, id := range tt.warmHits {
				_, _ = c.Account(ctx, id)
			}
			if got := len(src.sizes()); got != loads {
				t.Errorf("asking for %q after warming made %d loads, want none", tt.warmHits, got-loads)
			}
			if st := c.Stats(); st.CustomerBatches != uint64(len(src.sizes())) || st.Customers != c.Len() {
				t.Errorf("Stats = %+v, want %d batches and %d customers", st, len(src.sizes()), c.Len())
			}
		})
	}
}

// TestCacheWarmDeadline: warming stops waiting when its context ends; the
// batch in flight is still kept.
func TestCacheWarmDeadline(t *testing.T) {
	src := newFakeSource()
	src.setPlan(Plan{Key: "p"})
	src.setCustomer(Customer{ID: "acme", Plan: "p"})
	c := NewCache(src, 0)
	release := src.block()
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Warm(ctx, []string{"acme", "ghost"})
		done <- err
	}()
	<-src.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Warm with its context canceled = %v, want context.Canceled", err)
	}
	release()
	waitFor(t, "the batch in flight to be kept", func() bool { return c.Len() == 2 })
	if _, err := c.Account(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	if got := src.sizes(); !slices.Equal(got, []int{2}) {
		t.Errorf("loads of %v customers, want [2]", got)
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

// The public plans load once, and again after any change of a plan, a
// purge, or none found.
func TestCachePublicPlans(t *testing.T) {
	src := newFakeSource()
	src.plans["pro"] = Plan{Key: "pro", Public: true}
	src.plans["free"] = Plan{Key: "free"}
	c := NewCache(src, 0)
	ctx := context.Background()
	keys := func() []string {
		t.Helper()
		plans, err := c.PublicPlans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range plans {
			out = append(out, p.Key)
		}
		return out
	}
	steps := []struct {
		name  string
		do    func()
		want  []string
		loads int
	}{
		{"first use loads", func() {}, []string{"pro"}, 1},
		{"held", func() {}, []string{"pro"}, 1},
		{"a change of a customer keeps them", func() { c.Invalidate(Change{Kind: CustomerChanged, Key: "acme"}) }, []string{"pro"}, 1},
		{"a change of a plan drops them", func() {
			src.mu.Lock()
			src.plans["free"] = Plan{Key: "free", Public: true}
			src.mu.Unlock()
			c.Invalidate(Change{Kind: PlanChanged, Key: "free"})
		}, []string{"free", "pro"}, 2},
		{"a purge drops them", func() {
			src.mu.Lock()
			src.plans["pro"] = Plan{Key: "pro"}
			src.plans["free"] = Plan{Key: "free"}
			src.mu.Unlock()
			c.Purge()
		}, nil, 3},
		{"none is held too", func() {}, nil, 3},
	}
	for _, s := range steps {
		s.do()
		if got := keys(); !slices.Equal(got, s.want) {
			t.Errorf("%s: public plans %v, want %v", s.name, got, s.want)
		}
		if n := src.count("public"); n != s.loads {
			t.Errorf("%s: %d loads, want %d", s.name, n, s.loads)
		}
	}
}
