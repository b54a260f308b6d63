package quota_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// fakeShards is a SharedStore of shards that the test takes down and
// brings back. A charge's shard is its customer's (shardOf). A call
// counts nothing: it answers that every window admits the charge, from
// empty windows, which the shared counters reproduce.
type fakeShards struct {
	shardOf map[string]int

	mu    sync.Mutex
	down  map[int]bool
	calls map[int]int
	// A call of a shard in hold says so on entered, then waits until its
	// channel is closed, to answer as the shard was when it arrived.
	hold    map[int]chan struct{}
	entered chan int
}

var _ quota.SharedStore = (*fakeShards)(nil)

func newFakeShards(shardOf map[string]int) *fakeShards {
	return &fakeShards{shardOf: shardOf, down: map[int]bool{}, calls: map[int]int{},
		hold: map[int]chan struct{}{}, entered: make(chan int)}
}

func (s *fakeShards) Shard(c *quota.Charge) int { return s.shardOf[c.Customer] }

// Run answers as the shard is when the call arrives, and after any hold.
func (s *fakeShards) Run(_ context.Context, op *quota.SharedOp) error {
	id := s.Shard(&op.Charges[0])
	s.mu.Lock()
	s.calls[id]++
	hold, down := s.hold[id], s.down[id]
	s.mu.Unlock()
	if hold != nil {
		s.entered <- id
		<-hold
	}
	if down {
		return fmt.Errorf("%w: shard %d is down", tiers.ErrUnavailable, id)
	}
	// The keys hold what the decision saw: it stands.
	op.AnsweredMs, op.Written, op.Found = op.Charges[0].At.UnixMilli(), op.Write, append(op.Found, op.Expect...)
	return nil
}

func (s *fakeShards) Clear(context.Context, string, []string) error { return nil }

func (s *fakeShards) setDown(id int, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[id] = down
}

// callsOf returns how many calls each shard has had.
func (s *fakeShards) callsOf() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// failoverFixture is an engine whose short windows are shared in a
// fakeShards, with a manual wall clock for its failover, and what it
// reported of its changes of mode.
type failoverFixture struct {
	store  *fakeShards
	wall   *quotafake.Clock
	engine *quota.Engine

	mu      sync.Mutex
	changes []string
}

func newFailoverFixture(t *testing.T, shardOf map[string]int) *failoverFixture {
	t.Helper()
	f := &failoverFixture{store: newFakeShards(shardOf),
		wall: quotafake.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))}
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	for customer := range shardOf {
		catalog.PutCustomer(customer, tiers.Anchor{}, []tiers.Limit{{Metric: "api_calls", Window: tiers.Second, Limit: 1_000_000}})
	}
	ledger := quotafake.NewLedger()
	f.engine = quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		Clock: quotafake.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)), Shared: f.store,
		OnSharedChange: func(shared bool, err error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if shared {
				f.changes = append(f.changes, "shared")
			} else {
				f.changes = append(f.changes, "down: "+err.Error())
			}
		}})
	f.engine.SetFailoverClock(f.wall.Now)
	return f
}

// checks sends n checks of each customer, from n goroutines a customer,
// and returns how many answers of each were degraded.
func (f *failoverFixture) checks(t *testing.T, n int, customers ...string) map[string]int {
	t.Helper()
	var mu sync.Mutex
	degraded := map[string]int{}
	for _, c := range customers {
		degraded[c] = 0
	}
	var wg sync.WaitGroup
	for _, c := range customers {
		for range n {
			wg.Go(func() {
				d := f.check(t, c)
				mu.Lock()
				defer mu.Unlock()
				if d.Degraded {
					degraded[c]++
				}
			})
		}
	}
	wg.Wait()
	return degraded
}

// check sends one check of customer, which must be allowed.
func (f *failoverFixture) check(t *testing.T, customer string) quota.Decision {
	d, err := f.engine.Check(context.Background(), quota.Request{Customer: customer, Metric: "api_calls", Cost: 1})
	if err != nil {
		t.Errorf("check of %s: %v", customer, err)
	} else if !d.Allowed {
		t.Errorf("check of %s denied: %+v", customer, d)
	}
	return d
}

func (f *failoverFixture) reported() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.changes)
}

// failoverStep is one step of a failover scenario: the wall clock moves
// on, shards go down or come back, then n checks of each customer run at
// once, and the step wants exactly: the degraded answers of each customer,
// the calls each shard had during the step, and then the shards down, the
// failed calls so far and the changes of mode reported so far.
type failoverStep struct {
	name      string
	advance   time.Duration
	down, up  []int
	n         int
	customers []string

	degraded   map[string]int
	calls      map[int]int
	shardsDown int64
	failures   uint64
	changes    []string
}

func runSteps(t *testing.T, shardOf map[string]int, steps []failoverStep) {
	t.Helper()
	f := newFailoverFixture(t, shardOf)
	for _, st := range steps {
		f.wall.Advance(st.advance)
		for _, id := range st.down {
			f.store.setDown(id, true)
		}
		for _, id := range st.up {
			f.store.setDown(id, false)
		}
		before := f.store.callsOf()
		degraded := f.checks(t, st.n, st.customers...)
		if !mapsEqual(degraded, st.degraded) {
			t.Errorf("%s: degraded answers %v, want %v", st.name, degraded, st.degraded)
		}
		calls := map[int]int{}
		for k, v := range f.store.callsOf() {
			if d := v - before[k]; d != 0 {
				calls[k] = d
			}
		}
		if !mapsEqual(calls, st.calls) {
			t.Errorf("%s: calls by shard %v, want %v", st.name, calls, st.calls)
		}
		s := f.engine.Stats().Shared
		if s.ShardsDown != st.shardsDown || s.Up != (st.shardsDown == 0) || s.Failures != st.failures {
			t.Errorf("%s: stats %+v, want %d shards down, %d failures", st.name, s, st.shardsDown, st.failures)
		}
		if got := f.reported(); !slices.Equal(got, st.changes) {
			t.Errorf("%s: changes of mode reported %q, want %q", st.name, got, st.changes)
		}
	}
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

const (
	down1 = "down: store unavailable: shard 1 is down"
	down0 = "down: store unavailable: shard 0 is down"
)

// In a store of several shards (a Redis Cluster's hash slots), a shard
// that fails sends only its own charges in process; the others go on in
// the store. Each shard down is tried again by one check a second after
// its last failure; the mode is reported once for any number of shards.
func TestFailoverPerShard(t *testing.T) {
	t.Parallel()
	shardOf := map[string]int{"a": 0, "b": 1, "b2": 1, "c": 2}
	all := []string{"a", "b", "b2", "c"}
	runSteps(t, shardOf, []failoverStep{
		{name: "every shard up", n: 8, customers: all,
			degraded: map[string]int{"a": 0, "b": 0, "b2": 0, "c": 0}, calls: map[int]int{0: 8, 1: 16, 2: 8}},
		{name: "shard 1 fails", down: []int{1}, n: 1, customers: []string{"b"},
			degraded: map[string]int{"b": 1}, calls: map[int]int{1: 1},
			shardsDown: 1, failures: 1, changes: []string{down1}},
		{name: "shard 1's checks go on in process, the others' in the store", n: 8, customers: all,
			degraded: map[string]int{"a": 0, "b": 8, "b2": 8, "c": 0}, calls: map[int]int{0: 8, 2: 8},
			shardsDown: 1, failures: 1, changes: []string{down1}},
		{name: "not yet a second later", advance: quota.RetryEvery - time.Millisecond, n: 8, customers: all,
			degraded: map[string]int{"a": 0, "b": 8, "b2": 8, "c": 0}, calls: map[int]int{0: 8, 2: 8},
			shardsDown: 1, failures: 1, changes: []string{down1}},
		{name: "a second later one check of 16 tries shard 1 again", advance: time.Millisecond, n: 8, customers: all,
			degraded: map[string]int{"a": 0, "b": 8, "b2": 8, "c": 0}, calls: map[int]int{0: 8, 1: 1, 2: 8},
			shardsDown: 1, failures: 2, changes: []string{down1}},
		{name: "shard 2 fails too, reported with shard 1", down: []int{2}, n: 1, customers: []string{"c"},
			degraded: map[string]int{"c": 1}, calls: map[int]int{2: 1},
			shardsDown: 2, failures: 3, changes: []string{down1}},
		{name: "both back: a check of each finds it a second later", up: []int{1, 2}, advance: quota.RetryEvery,
			n: 1, customers: []string{"b", "c"},
			degraded: map[string]int{"b": 0, "c": 0}, calls: map[int]int{1: 1, 2: 1},
			shardsDown: 0, failures: 3, changes: []string{down1, "shared"}},
		{name: "every check in the store again", n: 8, customers: all,
			degraded: map[string]int{"a": 0, "b": 0, "b2": 0, "c": 0}, calls: map[int]int{0: 8, 1: 16, 2: 8},
			shardsDown: 0, failures: 3, changes: []string{down1, "shared"}},
	})
}

// A store of one shard (a single Redis) is one switch: when it fails,
// every customer's checks go on in process without calling it, and one
// check a second tries it again.
func TestFailoverOneShard(t *testing.T) {
	t.Parallel()
	shardOf := map[string]int{"a": 0, "b": 0}
	both := []string{"a", "b"}
	runSteps(t, shardOf, []failoverStep{
		{name: "up", n: 8, customers: both,
			degraded: map[string]int{"a": 0, "b": 0}, calls: map[int]int{0: 16}},
		{name: "a check fails", down: []int{0}, n: 1, customers: []string{"a"},
			degraded: map[string]int{"a": 1}, calls: map[int]int{0: 1},
			shardsDown: 1, failures: 1, changes: []string{down0}},
		{name: "every customer's checks in process, none calls the store", n: 8, customers: both,
			degraded: map[string]int{"a": 8, "b": 8}, calls: map[int]int{},
			shardsDown: 1, failures: 1, changes: []string{down0}},
		{name: "a second later one check tries it", advance: quota.RetryEvery, n: 8, customers: both,
			degraded: map[string]int{"a": 8, "b": 8}, calls: map[int]int{0: 1},
			shardsDown: 1, failures: 2, changes: []string{down0}},
		{name: "back: the next try finds it", up: []int{0}, advance: quota.RetryEvery, n: 1, customers: []string{"b"},
			degraded: map[string]int{"b": 0}, calls: map[int]int{0: 1},
			shardsDown: 0, failures: 2, changes: []string{down0, "shared"}},
		{name: "every check in the store again", n: 8, customers: both,
			degraded: map[string]int{"a": 0, "b": 0}, calls: map[int]int{0: 16},
			shardsDown: 0, failures: 2, changes: []string{down0, "shared"}},
	})
}

// A shard down that no check comes to is forgotten after ForgetAfter
// (the process leaves fallback), while one with checks stays down; a
// forgotten shard's next check tries the store.
func TestFailoverForgetsIdleShards(t *testing.T) {
	t.Parallel()
	shardOf := map[string]int{"a": 0, "b": 1, "c": 2}
	half := quota.ForgetAfter / 2
	runSteps(t, shardOf, []failoverStep{
		{name: "shard 1 fails", down: []int{1, 2}, n: 1, customers: []string{"b"},
			degraded: map[string]int{"b": 1}, calls: map[int]int{1: 1},
			shardsDown: 1, failures: 1, changes: []string{down1}},
		{name: "shard 2 fails", n: 1, customers: []string{"c"},
			degraded: map[string]int{"c": 1}, calls: map[int]int{2: 1},
			shardsDown: 2, failures: 2, changes: []string{down1}},
		{name: "shard 2 tried again", advance: half, n: 1, customers: []string{"c"},
			degraded: map[string]int{"c": 1}, calls: map[int]int{2: 1},
			shardsDown: 2, failures: 3, changes: []string{down1}},
		{name: "shard 1 idle, not long enough", advance: half - quota.RetryEvery, n: 1, customers: []string{"a"},
			degraded: map[string]int{"a": 0}, calls: map[int]int{0: 1},
			shardsDown: 2, failures: 3, changes: []string{down1}},
		{name: "shard 1 idle long enough: forgotten; shard 2 kept", advance: quota.RetryEvery, n: 1, customers: []string{"a"},
			degraded: map[string]int{"a": 0}, calls: map[int]int{0: 1},
			shardsDown: 1, failures: 3, changes: []string{down1}},
		{name: "shard 2 idle long enough: forgotten, no shard left down", advance: half, n: 1, customers: []string{"a"},
			degraded: map[string]int{"a": 0}, calls: map[int]int{0: 1},
			shardsDown: 0, failures: 3, changes: []string{down1, "shared"}},
		{name: "a forgotten shard's next check tries the store", n: 1, customers: []string{"b"},
			degraded: map[string]int{"b": 1}, calls: map[int]int{1: 1},
			shardsDown: 1, failures: 4, changes: []string{down1, "shared", down1}},
	})
}

// While one check tries a failed shard again (and the store takes its
// time to answer), the shard's other checks go on in process without
// waiting for it, and without a second try.
func TestFailoverTriesOneAtATime(t *testing.T) {
	t.Parallel()
	f := newFailoverFixture(t, map[string]int{"a": 0, "b": 0})
	f.store.setDown(0, true)
	if d := f.check(t, "a"); !d.Degraded {
		t.Fatalf("the failed check: %+v, want degraded", d)
	}
	f.wall.Advance(quota.RetryEvery)
	hold := make(chan struct{})
	f.store.mu.Lock()
	f.store.hold[0] = hold
	f.store.mu.Unlock()
	trial := make(chan quota.Decision)
	go func() { trial <- f.check(t, "a") }()
	<-f.store.entered // the trial is in the store, held

	others := make(chan map[string]int)
	go func() { others <- f.checks(t, 8, "a", "b") }()
	select {
	case got := <-others:
		if want := map[string]int{"a": 8, "b": 8}; !mapsEqual(got, want) {
			t.Errorf("checks during the trial: degraded %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second): // a bound, not a measure: they must not wait for the trial
		t.Errorf("checks during the trial did not answer while it was held")
	}
	close(hold)
	if d := <-trial; !d.Degraded {
		t.Errorf("the trial: %+v, want degraded (the store is still down)", d)
	}
	if got := f.store.callsOf(); !mapsEqual(got, map[int]int{0: 2}) {
		t.Errorf("calls %v, want 2 (the failed check and the trial)", got)
	}
	if s := f.engine.Stats().Shared; s.ShardsDown != 1 || s.Failures != 2 {
		t.Errorf("stats %+v, want 1 shard down, 2 failures", s)
	}
}

// A check whose time runs out while it waits for another check of its
// customer's, slow in the store, is answered degraded, but the store is
// not taken for down: the other check is answered from it, and so are
// the next ones.
func TestFailoverOutOfTurnIsNotAnOutage(t *testing.T) {
	t.Parallel()
	f := newFailoverFixture(t, map[string]int{"a": 0})
	hold := make(chan struct{})
	f.store.mu.Lock()
	f.store.hold[0] = hold
	f.store.mu.Unlock()
	first := make(chan quota.Decision)
	go func() { first <- f.check(t, "a") }()
	<-f.store.entered // the first check holds the customer's turn, in the store
	if d := f.check(t, "a"); !d.Degraded {
		t.Errorf("a check out of time behind the first: %+v, want degraded", d)
	}
	if s := f.engine.Stats().Shared; s.ShardsDown != 0 || s.Failures != 0 || !s.Up {
		t.Errorf("stats %+v after a check ran out of time waiting its turn, want the store up, no failure", s)
	}
	f.store.mu.Lock()
	delete(f.store.hold, 0)
	f.store.mu.Unlock()
	close(hold)
	if d := <-first; d.Degraded {
		t.Errorf("the slow check: %+v, want answered from the store", d)
	}
	if d := f.check(t, "a"); d.Degraded {
		t.Errorf("the next check: %+v, want answered from the store", d)
	}
}

// A call sent before its shard failed, which succeeds after, does not
// bring the shard back: only a check trying it again does.
func TestFailoverLateSuccessKeepsShardDown(t *testing.T) {
	t.Parallel()
	f := newFailoverFixture(t, map[string]int{"a": 0, "b": 0})
	hold := make(chan struct{})
	f.store.mu.Lock()
	f.store.hold[0] = hold
	f.store.mu.Unlock()
	late := make(chan quota.Decision)
	go func() { late <- f.check(t, "a") }()
	<-f.store.entered // in the store while it is up, held
	f.store.mu.Lock()
	delete(f.store.hold, 0)
	f.store.mu.Unlock()
	f.store.setDown(0, true)
	if d := f.check(t, "b"); !d.Degraded {
		t.Fatalf("the failed check: %+v, want degraded", d)
	}
	close(hold)
	if d := <-late; d.Degraded {
		t.Errorf("the late call: %+v, want counted in the store", d)
	}
	if s := f.engine.Stats().Shared; s.ShardsDown != 1 || s.Failures != 1 {
		t.Errorf("stats %+v, want the shard still down, 1 failure", s)
	}
	if got, want := f.reported(), []string{down0}; !slices.Equal(got, want) {
		t.Errorf("changes of mode reported %q, want %q", got, want)
	}
	if d := f.check(t, "a"); !d.Degraded {
		t.Errorf("a check after the late call: %+v, want degraded", d)
	}
	if got := f.store.callsOf(); !mapsEqual(got, map[int]int{0: 2}) {
		t.Errorf("calls %v, want 2 (the late one and the failed one)", got)
	}
}
