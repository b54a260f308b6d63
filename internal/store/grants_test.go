package store_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// grantFixture is a schema with customer acme on a plan whose api_calls
// have a hard day limit and whose images have a hard day limit of 10.
type grantFixture struct {
	t     *testing.T
	db    *store.DB
	s     *dbtest.Schema
	clock *quotafake.Clock
}

// dayStart is the day of the grants' tests; they run at noon.
var dayStart = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func newGrantFixture(t *testing.T, dayLimit int64) *grantFixture {
	t.Helper()
	db, s := MustOpenSchema(t)
	ctx := context.Background()
	var limits []tiers.Limit
	for m, l := range map[string]int64{"api_calls": dayLimit, "images": 10} {
		mustPut(t, second(db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: m})))
		limits = append(limits, tiers.Limit{Metric: m, Window: tiers.Day, Limit: l, Mode: tiers.Hard})
	}
	mustPut(t, second(db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: limits}, false)))
	mustPut(t, second(db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "p", Metadata: []byte(`{}`)})))
	return &grantFixture{t: t, db: db, s: s, clock: quotafake.NewClock(dayStart.Add(12 * time.Hour))}
}

// grantProcess is one quotad process over the fixture's schema: a DB of
// its own with its listener (recalls, freed counters, and grants' and
// customers' changes to its cache, as quotad applies them), an engine
// with leases that draws on grants, and a grants service.
type grantProcess struct {
	db     *store.DB
	cache  *tiers.Cache
	engine *quota.Engine
	grants *grants.Service
	// draws counts the engine's calls to draw on grants, notes the
	// notifications of grants' changes the process heard.
	draws, notes *atomic.Int64
	// watched is what the engine's watcher saw (see webhooks).
	watched *watched
}

// watched records what a quota.Watcher is shown.
type watched struct {
	mu  sync.Mutex
	obs []quota.Observation
}

func (w *watched) Observe(o quota.Observation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.obs = append(w.obs, o)
}

// last returns the last observation.
func (w *watched) last() quota.Observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.obs[len(w.obs)-1]
}

// countedGrants counts the draws on the grants of a store.
type countedGrants struct {
	*store.Grants
	draws *atomic.Int64
}

func (c countedGrants) Draw(ctx context.Context, draws []quota.GrantDraw, at time.Time) ([]quota.GrantTake, bool, error) {
	c.draws.Add(1)
	return c.Grants.Draw(ctx, draws, at)
}

func (f *grantFixture) process() *grantProcess {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.New(ctx, f.s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	cache := tiers.NewCache(db.Catalog, 0)
	pool := lease.NewPool(db.Ledger, f.clock)
	var background sync.WaitGroup
	notes := new(atomic.Int64)
	l := db.Listener(func(n store.Notification) {
		switch n.Kind {
		case store.NotifyGrants:
			cache.Invalidate(tiers.Change{Kind: tiers.CustomerChanged, Key: n.Key})
			notes.Add(1)
		case store.NotifyFreed:
			if k, ok := store.ParseCounterKey(n.Key); ok {
				pool.Freed(k)
			}
		case store.NotifyRecall:
			if k, ok := store.ParseCounterKey(n.Key); ok && !n.Local {
				background.Go(func() { _ = pool.Yield(ctx, k) })
			}
		}
	}, func() { cache.Purge() }, func(err error) { t.Log(err) })
	stopped := runListener(t, ctx, l)
	draws, w := new(atomic.Int64), new(watched)
	e := quota.New(quota.Options{Catalog: cache, Counts: db.Ledger, Requests: db.Ledger, Maintenance: db.Ledger, Audits: db.Audit,
		History: db.History, Clock: f.clock, Leases: pool,
		Grants: countedGrants{db.Grants, draws}, Watcher: w, StoreTimeout: 30 * time.Second})
	svc := grants.NewService(db.Grants, f.clock.Now)
	svc.Changed = func(customer string) { cache.Invalidate(tiers.Change{Kind: tiers.CustomerChanged, Key: customer}) }
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
		cancel()
		<-stopped
		background.Wait()
	})
	return &grantProcess{db: db, cache: cache, engine: e, grants: svc, draws: draws, notes: notes, watched: w}
}

func (p *grantProcess) mustGrant(t *testing.T, amount int64, priority int, expires *time.Time) grants.Grant {
	t.Helper()
	g, _, err := p.grants.CreateGrant(context.Background(), write("ops"), "acme",
		grants.Spec{Metric: "api_calls", Amount: amount, Priority: &priority, ExpiresAt: expires})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (p *grantProcess) check(t *testing.T, r quota.Request) quota.Decision {
	t.Helper()
	if r.Customer == "" {
		r.Customer = "acme"
	}
	d, err := p.engine.Check(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// remaining returns what is left of each grant of acme, by id (every
// grant, used up and voided ones included).
func (p *grantProcess) remaining(t *testing.T) map[string]int64 {
	t.Helper()
	list, err := p.grants.Grants(context.Background(), "acme", true)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, g := range list {
		out[g.ID] = g.Remaining
	}
	return out
}

// dayUsage returns acme's api_calls day window: used and granted.
func (p *grantProcess) dayUsage(t *testing.T, metric string) (used, granted int64) {
	t.Helper()
	_, us, err := p.engine.Usage(context.Background(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Metric == metric && u.Window == tiers.Day {
			return u.Used, u.Granted
		}
	}
	t.Fatalf("no day window of %s in %+v", metric, us)
	return 0, 0
}

// 64 concurrent checks over 4 processes with leases, far more than the
// limit and the grants hold: exactly limit + grants are admitted, every
// grant is used up, and the window counts its limit and the grants'
// units as granted.
func TestGrantsDrawnExactlyAcrossProcesses(t *testing.T) {
	t.Parallel()
	const limit, workers, each = 100, 64, 5
	f := newGrantFixture(t, limit)
	procs := make([]*grantProcess, 4)
	for i := range procs {
		procs[i] = f.process()
	}
	procs[0].mustGrant(t, 30, 0, nil)
	procs[1].mustGrant(t, 20, 1, nil)
	var admitted, granted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		p := procs[w%len(procs)]
		wg.Go(func() {
			for range each {
				d, err := p.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
					granted.Add(d.Granted)
				}
			}
		})
	}
	wg.Wait()
	if got, want := admitted.Load(), int64(limit+50); got != want {
		t.Errorf("admitted %d of %d checks; want exactly limit + grants = %d", got, workers*each, want)
	}
	if got := granted.Load(); got != 50 {
		t.Errorf("answers say %d units came from grants; want 50", got)
	}
	for id, left := range procs[2].remaining(t) {
		if left != 0 {
			t.Errorf("grant %s has %d units left; want every one drawn", id, left)
		}
	}
	for _, p := range procs {
		if err := p.engine.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	used, inGrants := procs[3].dayUsage(t, "api_calls")
	if used != limit || inGrants != 50 {
		t.Errorf("day window: used %d, granted %d; want %d and 50", used, inGrants, limit)
	}
}

// Grants are drawn lowest priority number first, then the soonest to
// expire; an expired grant never, even when the others are used up.
func TestGrantsDrawOrderAndExpiry(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t, 1)
	p := f.process()
	mustPutWebhook(t, p.db.Webhooks, "grants", []webhooks.EventType{webhooks.GrantExhausted}, nil)
	soon, later := f.clock.Now().Add(2*time.Hour), f.clock.Now().Add(48*time.Hour)
	lowLate := p.mustGrant(t, 2, 0, &later)
	lowSoon := p.mustGrant(t, 2, 0, &soon)
	high := p.mustGrant(t, 2, 5, nil)
	expiring := p.mustGrant(t, 5, 0, &soon)
	if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 1}); !d.Allowed || d.Granted != 0 {
		t.Fatalf("first check: allowed %v, granted %d; want the window's own unit", d.Allowed, d.Granted)
	}
	// Past the soon expiry: lowSoon and expiring are gone for good.
	f.clock.Advance(3 * time.Hour)
	wantOrder := []struct {
		grant string
		left  int64
	}{{lowLate.ID, 1}, {lowLate.ID, 0}, {high.ID, 1}, {high.ID, 0}}
	for i, w := range wantOrder {
		d := p.check(t, quota.Request{Metric: "api_calls", Cost: 1})
		if !d.Allowed || d.Granted != 1 {
			t.Fatalf("check %d: allowed %v, granted %d; want 1 unit from a grant", i, d.Allowed, d.Granted)
		}
		// The window denied it (webhooks hear its limit reached) and
		// counts none of it.
		if o := p.watched.last(); o.State != quota.StateExceeded || o.Used != 1 || d.Limits[0].Used != 1 {
			t.Fatalf("check %d: the watcher saw %+v, the answer %+v; want the day window exceeded at 1", i, o, d.Limits)
		}
		if got := p.remaining(t)[w.grant]; got != w.left {
			t.Fatalf("check %d: grant %s has %d left; want %d (drawn in priority, then expiry order)", i, w.grant, got, w.left)
		}
	}
	if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 1}); d.Allowed {
		t.Fatalf("a check with only expired grants left was admitted: %+v", d)
	}
	left := p.remaining(t)
	if left[lowSoon.ID] != 2 || left[expiring.ID] != 5 {
		t.Errorf("expired grants were drawn: %d and %d left of 2 and 5", left[lowSoon.ID], left[expiring.ID])
	}
	// Each grant used up is one event for the webhooks, once.
	ds, _, err := p.db.Webhooks.FindDeliveries(context.Background(), webhooks.DeliveryFilter{Webhook: "grants", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var exhausted []string
	for _, d := range slices.Backward(ds) {
		if d.Event.Type != webhooks.GrantExhausted || d.Event.Customer != "acme" || d.Event.Window != nil {
			t.Errorf("delivery %+v: want grant.exhausted of acme, without a window", d)
		}
		exhausted = append(exhausted, d.Event.Grant)
	}
	if want := []string{lowLate.ID, high.ID}; !slices.Equal(exhausted, want) {
		t.Errorf("grant.exhausted events of %v; want %v (the grants used up, in that order)", exhausted, want)
	}
	// The statement lists what each grant gave, billing none of it.
	st, err := billing.NewService(p.db.Billing, f.clock.Now).Statement(context.Background(), "acme", "2026-11")
	if err != nil {
		t.Fatal(err)
	}
	drawn := map[string]int64{}
	for _, l := range st.Lines {
		if l.Kind == billing.KindGrant {
			drawn[*l.Metric] += l.Quantity
			if l.AmountCents != 0 || l.Plan != "p" {
				t.Errorf("grant line %+v: want amount 0 on plan p", l)
			}
		}
		if l.Kind == billing.KindOverage {
			t.Errorf("an overage line for units drawn on grants: %+v", l)
		}
	}
	if drawn["api_calls"] != 4 {
		t.Errorf("statement lists %d units drawn on grants; want 4 (%+v)", drawn["api_calls"], st.Lines)
	}
	// A cost no window fits comes whole from grants, all or nothing.
	p.mustGrant(t, 3, 0, nil)
	if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 4}); d.Allowed {
		t.Fatalf("a check of 4 admitted on 3 units of grants: %+v", d)
	}
	if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 3}); !d.Allowed || d.Granted != 3 {
		t.Fatalf("a check of 3 on 3 units of grants: allowed %v, granted %d", d.Allowed, d.Granted)
	}
}

// A void stops every process drawing on the grant before its next check,
// whichever process voided it and whatever their caches hold.
func TestGrantVoidStopsEveryProcess(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t, 0)
	a, b := f.process(), f.process()
	g := a.mustGrant(t, 100, 0, nil)
	for _, p := range []*grantProcess{a, b} {
		if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 1}); !d.Allowed {
			t.Fatalf("a check on a live grant was denied: %+v", d)
		}
	}
	if err := a.grants.VoidGrant(context.Background(), write("ops"), g.ID); err != nil {
		t.Fatal(err)
	}
	for i, p := range []*grantProcess{b, a} {
		if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 1}); d.Allowed {
			t.Fatalf("process %d drew on a voided grant: %+v", i, d)
		}
	}
	if err := a.grants.VoidGrant(context.Background(), write("ops"), g.ID); !errors.Is(err, grants.ErrGrantNotFound) {
		t.Errorf("a second void: %v; want grant not found", err)
	}
	if left := a.remaining(t)[g.ID]; left != 0 {
		t.Errorf("a voided grant shows %d units left; want 0", left)
	}
}

// A check of items draws on grants only if every other item is admitted:
// an item its own windows deny takes the draw back, with the others'
// units; and a request id's repeat draws nothing again.
func TestGrantsAllOrNothingWithItems(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t, 0)
	p := f.process()
	g := p.mustGrant(t, 10, 0, nil)
	items := func(images int64) quota.Request {
		return quota.Request{Customer: "acme", Items: []quota.Item{{Metric: "api_calls", Cost: 2}, {Metric: "images", Cost: images}}}
	}
	if d := p.check(t, items(11)); d.Allowed {
		t.Fatalf("items admitted though images is over its limit: %+v", d)
	}
	if left := p.remaining(t)[g.ID]; left != 10 {
		t.Fatalf("a denied check of items drew on the grant: %d left of 10", left)
	}
	if used, _ := p.dayUsage(t, "images"); used != 0 {
		t.Fatalf("a denied check of items counted %d images", used)
	}
	// Grants too small for the item that needs them: the other item's
	// units, taken before the draw, go back.
	small := quota.Request{Customer: "acme", Items: []quota.Item{{Metric: "api_calls", Cost: 11}, {Metric: "images", Cost: 4}}}
	if d := p.check(t, small); d.Allowed {
		t.Fatalf("items admitted though the grant holds 10 of the 11 units needed: %+v", d)
	}
	if used, _ := p.dayUsage(t, "images"); used != 0 {
		t.Fatalf("a check of items denied for want of grants counted %d images", used)
	}
	if left := p.remaining(t)[g.ID]; left != 10 {
		t.Fatalf("a check of items denied for want of grants drew on the grant: %d left of 10", left)
	}
	d := p.check(t, items(4))
	if !d.Allowed || d.Granted != 2 {
		t.Fatalf("items on a grant: allowed %v, granted %d; want admitted with 2 units from the grant", d.Allowed, d.Granted)
	}
	if used, _ := p.dayUsage(t, "images"); used != 4 {
		t.Errorf("images used %d; want 4", used)
	}
	r := quota.Request{Customer: "acme", Metric: "api_calls", Cost: 3, RequestID: "once"}
	for i := range 2 {
		if d := p.check(t, r); !d.Allowed || d.Granted != 3 || d.Replayed != (i == 1) {
			t.Fatalf("check %d under a request id: %+v", i, d)
		}
	}
	if left := p.remaining(t)[g.ID]; left != 5 {
		t.Errorf("grant has %d left; want 5 (2 for the items, 3 once for the request id)", left)
	}
	if _, granted := p.dayUsage(t, "api_calls"); granted != 5 {
		t.Errorf("day window granted %d; want 5", granted)
	}
}

// A denial of a customer without live grants of the metric does not try
// to draw (no round trip for it): the process knows from memory. Once a
// draw uses the last grant up, the processes hear of it and stop trying.
func TestGrantsDenialWithoutGrantsCostsNoRoundTrip(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t, 0)
	a, b := f.process(), f.process()
	// denied checks once in p, denied, and returns how many draws it
	// tried.
	denied := func(p *grantProcess) int64 {
		t.Helper()
		before := p.draws.Load()
		if d := p.check(t, quota.Request{Metric: "api_calls", Cost: 1}); d.Allowed {
			t.Fatalf("admitted: %+v", d)
		}
		return p.draws.Load() - before
	}
	if n := denied(b); n != 0 {
		t.Fatalf("a denial without grants tried %d draws; want none", n)
	}
	if _, _, err := a.grants.CreateGrant(context.Background(), write("ops"), "acme",
		grants.Spec{Metric: "images", Amount: 5}); err != nil {
		t.Fatal(err)
	}
	a.mustGrant(t, 1, 0, nil)
	// b hears of both creations, then draws the last unit itself: only
	// the draw's own notification tells it the grants are used up.
	waitUntil(t, "the creations' notifications", func() bool { return b.notes.Load() >= 2 })
	if d := b.check(t, quota.Request{Metric: "api_calls", Cost: 1}); !d.Allowed || d.Granted != 1 {
		t.Fatalf("a check on the grant: %+v", d)
	}
	waitUntil(t, "the used-up grant's notification", func() bool { return b.notes.Load() >= 3 })
	for _, p := range []*grantProcess{b, a} {
		if n := denied(p); n != 0 {
			t.Fatalf("a denial with only grants of another metric left tried %d draws; want none", n)
		}
	}
}

// waitUntil waits until cond holds, failing after 10 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		runtime.Gosched()
	}
}

// A day limit of 10 with a rollover of at most 4, across window
// boundaries on a manual clock, with two processes: the day's unused
// units, capped, become one grant (whatever the processes) available the
// next day only.
func TestGrantsRollover(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t, 10)
	ctx := context.Background()
	mustPut(t, second(f.db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Day, Limit: 10, Mode: tiers.Hard, Rollover: &tiers.Rollover{Max: 4}},
	}}, false)))
	a, b := f.process(), f.process()
	admitted := func(n int) (allowed int, granted int64) {
		t.Helper()
		for i := range n {
			d := []*grantProcess{a, b}[i%2].check(t, quota.Request{Metric: "api_calls", Cost: 1})
			if d.Allowed {
				allowed++
				granted += d.Granted
			}
		}
		return allowed, granted
	}
	// Day 1: 3 of 10 used, and no rollover from before the customer was.
	if n, g := admitted(3); n != 3 || g != 0 {
		t.Fatalf("day 1: %d admitted, %d granted; want 3 and 0", n, g)
	}
	if n, _ := admitted(8); n != 7 {
		t.Fatalf("day 1: %d more admitted; want the 7 left, nothing rolled over into the first window", n)
	}
	// Undo the last 7 (a refund): 7 unused at the day's end, 4 roll over.
	if _, err := a.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 7}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*grantProcess{a, b} {
		if err := p.engine.Close(ctx); err != nil { // the day's leases settled
			t.Fatal(err)
		}
	}
	f.clock.Set(dayStart.AddDate(0, 0, 1).Add(time.Second))
	if n, g := admitted(10); n != 10 || g != 0 {
		t.Fatalf("day 2: %d admitted, %d granted; want the window's own 10", n, g)
	}
	if n, g := admitted(2); n != 2 || g != 2 {
		t.Fatalf("day 2: %d admitted beyond the limit, %d granted; want 2 from the rollover", n, g)
	}
	list, err := a.grants.Grants(ctx, "acme", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Amount != 4 || list[0].Remaining != 2 || list[0].ExpiresAt == nil ||
		!list[0].ExpiresAt.Equal(dayStart.AddDate(0, 0, 2)) {
		t.Fatalf("grants on day 2: %+v; want one rollover of 4 (capped), 2 left, expiring at the end of day 2", list)
	}
	// Day 3: day 2 left nothing unused; day 1's rollover has expired.
	f.clock.Set(dayStart.AddDate(0, 0, 2).Add(time.Second))
	if n, g := admitted(12); n != 10 || g != 0 {
		t.Fatalf("day 3: %d admitted, %d granted; want the window's own 10, the rollover gone", n, g)
	}
	all, err := a.grants.Grants(ctx, "acme", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Errorf("every grant by day 3: %+v; want the one rollover, made once", all)
	}
}
