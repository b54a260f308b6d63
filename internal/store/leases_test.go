package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// process is one quotad process's store on a shared schema; with listen,
// it runs its listener, which is what makes it alive to the others.
type process struct {
	db      *store.DB
	notices chan store.Notification
}

func MustProcess(t testing.TB, s *dbtest.Schema, listen bool) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db, err := store.New(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{db: db, notices: make(chan store.Notification, 64)}
	if listen {
		connected := make(chan struct{}, 1)
		l := db.Listener(func(n store.Notification) { p.notices <- n }, func() {}, func(err error) { t.Log(err) })
		l.Connected = connected
		go l.Run(ctx)
		select {
		case <-connected:
		case <-time.After(10 * time.Second):
			t.Fatal("listener did not connect")
		}
	}
	return p
}

func lease(t testing.TB, db *store.DB, r quota.LeaseRequest) quota.LeaseRequest {
	t.Helper()
	if err := db.Lease(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLeaseGrantsAndSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	a := MustProcess(t, s, true)
	MustSeed(t, a.db, map[tiers.Window]int64{tiers.Day: 1000}, "acme")
	key := daySpan("acme", 0).Key
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	ask := quota.LeaseRequest{Key: key, Threshold: 20, Need: 3, Extra: 5, InFlight: 3, Global: global}

	// A grant takes the need and a block beyond it, never past the threshold.
	r := lease(t, a.db, ask)
	if r.Granted != 8 || r.Used != 8 || r.Others != 0 || r.Lost {
		t.Fatalf("first grant: %+v, want 8 granted", r)
	}
	ask.Held = true
	for _, want := range []struct{ granted, used int64 }{{8, 16}, {4, 20}, {0, 20}} {
		if r := lease(t, a.db, ask); r.Granted != want.granted || r.Used != want.used {
			t.Errorf("grant: %+v, want %d granted, counter %d", r, want.granted, want.used)
		}
	}
	// Leased units count in global usage at once.
	if _, g, _ := a.db.Read(ctx, nil, []quota.GlobalKey{global}); g[0] != 20 {
		t.Errorf("global usage = %d, want the 20 units granted", g[0])
	}
	// A need above the threshold creates nothing and is never granted.
	if r := lease(t, a.db, quota.LeaseRequest{Key: span("acme", tiers.Week, day0, 0).Key, Threshold: 2, Need: 3, Extra: 1}); r.Granted != 0 || r.Used != 0 {
		t.Errorf("need above the threshold: %+v", r)
	}

	// Settling gives the unused units back, in the counter and in global
	// usage, and ends the lease: a second settlement gives nothing.
	set := []quota.Settlement{{Key: key, Unused: 6, Global: global}}
	if err := a.db.Settle(ctx, set); err != nil {
		t.Fatal(err)
	}
	if err := a.db.Settle(ctx, set); err != nil {
		t.Fatal(err)
	}
	used, g, err := a.db.Read(ctx, []quota.CounterKey{key}, []quota.GlobalKey{global})
	if err != nil || used[0] != 14 || g[0] != 14 {
		t.Errorf("after settling 6 unused: counter %v, global %v (%v), want 14 and 14", used, g, err)
	}
	// The lease is gone: a grant that believes it holds one is told so.
	if r := lease(t, a.db, ask); !r.Lost || r.Granted != 0 {
		t.Errorf("grant on a settled lease: %+v, want lost", r)
	}
}

func TestLeaseReportAndReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	a, b := MustProcess(t, s, true), MustProcess(t, s, true)
	MustSeed(t, a.db, nil, "acme")
	key := daySpan("acme", 0).Key
	lease(t, a.db, quota.LeaseRequest{Key: key, Threshold: 100, Need: 1, Extra: 9, InFlight: 1})

	// b reads admitted units: a's reported unused units are not admitted.
	if used, _, _ := b.db.Read(ctx, []quota.CounterKey{key}, nil); used[0] != 0 {
		t.Errorf("b reads %d while a reports 10 of 10 unused, want 0", used[0])
	}
	set := []quota.Settlement{{Key: key, Unused: 4}}
	if err := a.db.Report(ctx, set); err != nil || set[0].Lost {
		t.Fatalf("report: %+v, %v", set, err)
	}
	if used, _, _ := b.db.Read(ctx, []quota.CounterKey{key}, nil); used[0] != 6 {
		t.Errorf("b reads %d after a reported 4 unused of 10, want 6", used[0])
	}
	// A refund gives back admitted units only, never a's 4.
	out := make([]quota.Outcome, 1)
	if err := b.db.GiveBack(ctx, charge("acme", 100, daySpan("acme", 100)), out); err != nil || out[0].Used != 6 {
		t.Fatalf("give back: %+v, %v", out, err)
	}
	if raw := MustRaw(t, s, key); raw != 4 {
		t.Errorf("counter = %d after the refund, want a's 4 still reserved", raw)
	}
	// A reset ends the lease with its units: a's report finds it lost.
	if err := b.db.Reset(ctx, "ops", "acme", "api_calls", day0); err != nil {
		t.Fatal(err)
	}
	if err := a.db.Report(ctx, set); err != nil || !set[0].Lost {
		t.Errorf("report after a reset: %+v, %v; want lost", set, err)
	}
}

// MustRaw reads a counter as stored: admitted units and leased ones.
func MustRaw(t testing.TB, s *dbtest.Schema, k quota.CounterKey) int64 {
	t.Helper()
	var used int64
	err := s.Pool.QueryRow(context.Background(), `
		SELECT coalesce((SELECT used FROM usage_counters
		WHERE customer_id = $1 AND metric = $2 AND quota_window = $3 AND window_start = $4), 0)`,
		k.Customer, k.Metric, k.Window.String(), k.Start).Scan(&used)
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// A full counter whose units other live processes hold unused recalls
// them: those processes hear which counter. A process that is not alive
// (its listening session, which holds its advisory lock, is gone) is not
// waited for; its units stay counted.
func TestLeaseRecallAndLiveness(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	alive, dead, asker := MustProcess(t, s, true), MustProcess(t, s, false), MustProcess(t, s, true)
	MustSeed(t, asker.db, nil, "acme")
	key := daySpan("acme", 0).Key
	lease(t, alive.db, quota.LeaseRequest{Key: key, Threshold: 10, Need: 1, Extra: 3, InFlight: 1}) // 4 held
	lease(t, dead.db, quota.LeaseRequest{Key: key, Threshold: 10, Need: 1, Extra: 5, InFlight: 1})  // 6 held

	r := lease(t, asker.db, quota.LeaseRequest{Key: key, Threshold: 10, Need: 2, Extra: 1, Recall: true})
	if r.Granted != 0 || r.Used != 10 || r.Others != 4 {
		t.Fatalf("grant on a full counter: %+v, want nothing granted and the live process's 4 units recallable", r)
	}
	timeout := time.After(10 * time.Second)
	for recalled := false; !recalled; {
		select {
		case n := <-alive.notices:
			if n.Kind != store.NotifyRecall {
				continue // the catalog's, from seeding
			}
			k, ok := store.ParseCounterKey(n.Key)
			if !ok || k != key {
				t.Errorf("recall of %q, want %s", n.Key, store.CounterKeyString(key))
			}
			recalled = true
		case <-timeout:
			t.Fatal("the live holder heard no recall")
		}
	}
	if n, err := asker.db.Recall(context.Background(), key); err != nil || n != 1 {
		t.Errorf("recall: %d leases (%v), want the live one", n, err)
	}
	// Usage reads count the dead process's units as used.
	if used, _, _ := asker.db.Read(context.Background(), []quota.CounterKey{key}, nil); used[0] != 6 {
		t.Errorf("read = %d, want 6: the live holder's 4 unused are not admitted, the dead one's 6 stay counted", used[0])
	}
}

// Grants and settlements of the same counters, with global usage, from
// several processes at once never deadlock: every transaction that locks
// more than one row locks counters first, in one order, then global
// usage. A grant is one statement, never tried again, so a deadlock would
// fail it.
func TestLeaseAndSettleLockInOneOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	const procs, counters, rounds = 4, 6, 20
	ps := make([]*process, procs)
	for i := range ps {
		ps[i] = MustProcess(t, s, false)
	}
	customers := make([]string, counters)
	for i := range customers {
		customers[i] = fmt.Sprintf("c%d", i)
	}
	MustSeed(t, ps[0].db, map[tiers.Window]int64{tiers.Day: 1 << 40}, customers...)
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			for r := range rounds {
				// Grants in an order of their own, each taking 1 unit and
				// holding 2 more; then one settlement of them all, in the
				// counters' order, as the lease pool sorts them.
				for j := range counters {
					k := daySpan(customers[(i+j+r)%counters], 0).Key
					lr := quota.LeaseRequest{Key: k, Threshold: 1 << 40, Need: 1, Extra: 2, InFlight: 1, Global: global}
					if err := p.db.Lease(ctx, &lr); err != nil {
						t.Errorf("process %d, round %d: %v", i, r, err)
						return
					}
				}
				set := make([]quota.Settlement, counters)
				for j, c := range customers {
					set[j] = quota.Settlement{Key: daySpan(c, 0).Key, Unused: 2, Global: global}
				}
				if err := p.db.Settle(ctx, set); err != nil {
					t.Errorf("process %d, round %d: %v", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// What was held went back: each grant counts its 1 unit, in its
	// counter and in global usage.
	keys := make([]quota.CounterKey, counters)
	for i, c := range customers {
		keys[i] = daySpan(c, 0).Key
	}
	used, g, err := ps[0].db.Read(ctx, keys, []quota.GlobalKey{global})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range used {
		if u != procs*rounds {
			t.Errorf("counter %s = %d, want %d", customers[i], u, procs*rounds)
		}
	}
	if g[0] != counters*procs*rounds {
		t.Errorf("global usage = %d, want %d", g[0], counters*procs*rounds)
	}
}

// Settlements and reports, each one statement, have their own transaction
// commit without waiting for the disk, and no other.
func TestSettleAndReportCommitWithoutWaitingForTheDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := show(conn)
	for _, call := range []string{
		`SELECT quotad_settle_all('{}', '{}', '{}', '{}', 1, '{}', '{}')`,
		`SELECT quotad_report('{}', '{}', '{}', '{}', 1, '{}')`,
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, call); err != nil {
			t.Fatal(err)
		}
		within := show(tx)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, call); err != nil {
			t.Fatal(err)
		}
		if after := show(conn); within != "off" || after != before {
			t.Errorf("%s: synchronous_commit %s in its transaction, %s after it; want off, then %s", call, within, after, before)
		}
	}
}
