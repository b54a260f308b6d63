package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

var day0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// MustSeed declares metric api_calls (with capacities) and customers on a
// plan without limits: counters need both to exist.
func MustSeed(t testing.TB, db *store.DB, capacity map[tiers.Window]int64, customers ...string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := db.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls", Capacity: capacity}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}); err != nil {
		t.Fatal(err)
	}
	for _, c := range customers {
		if _, _, err := db.PutCustomer(ctx, write("ops"), tiers.Customer{ID: c, Plan: "p", Metadata: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

func dayWindow(threshold int64) quota.WindowCharge {
	return quota.WindowCharge{Window: tiers.Day, Start: day0, Threshold: threshold}
}

func charge(customer string, cost int64, windows ...quota.WindowCharge) quota.Charge {
	return quota.Charge{Customer: customer, Metric: "api_calls", Cost: cost, Windows: windows, At: day0.Add(10 * time.Hour)}
}

func TestChargeIsConditionalAndAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	hour := quota.WindowCharge{Window: tiers.Hour, Start: day0.Add(10 * time.Hour), Threshold: 100}
	steps := []struct {
		cost      int64
		threshold int64
		allowed   bool
		usedDay   int64 // before the charge
	}{
		{cost: 5, threshold: 10, allowed: true, usedDay: 0},
		{cost: 6, threshold: 10, allowed: false, usedDay: 5},
		{cost: 5, threshold: 10, allowed: true, usedDay: 5},
		{cost: 1, threshold: 10, allowed: false, usedDay: 10},
		{cost: 1, threshold: 11, allowed: true, usedDay: 10},
	}
	for i, s := range steps {
		out, err := db.Charge(ctx, charge("acme", s.cost, hour, dayWindow(s.threshold)))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if out.Allowed != s.allowed || out.Used[1] != s.usedDay || out.Passed[0] != true || out.Passed[1] != s.allowed {
			t.Fatalf("step %d: outcome %+v, want allowed %v with day used %d", i, out, s.allowed, s.usedDay)
		}
	}
	used, _, err := db.Peek(ctx, []quota.CounterKey{
		{Customer: "acme", Metric: "api_calls", Window: tiers.Hour, Start: hour.Start},
		{Customer: "acme", Metric: "api_calls", Window: tiers.Day, Start: day0},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Denied charges left the hour window (which admitted them) untouched.
	if used[0] != 11 || used[1] != 11 {
		t.Errorf("counters = %v, want [11 11]", used)
	}
	// A cost above the threshold creates no row.
	out, err := db.Charge(ctx, charge("acme", 7, quota.WindowCharge{Window: tiers.Week, Start: day0, Threshold: 6}))
	if err != nil || out.Allowed || out.Used[0] != 0 {
		t.Fatalf("cost above threshold: %+v, %v", out, err)
	}
}

func TestChargeUnknownCustomer(t *testing.T) {
	t.Parallel()
	db := MustOpen(t)
	MustSeed(t, db, nil)
	if _, err := db.Charge(context.Background(), charge("ghost", 1, dayWindow(10))); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("err = %v, want ErrCustomerNotFound", err)
	}
}

func TestChargeExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const workers, perWorker, limit = 64, 10, 250
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				out, err := db.Charge(ctx, charge("acme", 1, dayWindow(limit)))
				if err != nil {
					t.Error(err)
					return
				}
				if out.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("admitted %d of %d attempts, want exactly %d", got, workers*perWorker, limit)
	}
}

func TestElasticSpendsSpareCapacityOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, map[tiers.Window]int64{tiers.Day: 20}, "a", "b", "c")
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	el := quota.WindowCharge{Window: tiers.Day, Start: day0, Threshold: 5, Spare: true, Capacity: 20,
		Ceiling: tiers.MaxLimit, Global: global}
	withGlobal := func(c quota.Charge) quota.Charge { c.Globals = []quota.GlobalKey{global}; return c }

	// c, without a limit, uses 4 of the capacity.
	if out, err := db.Charge(ctx, withGlobal(charge("c", 4))); err != nil || !out.Allowed {
		t.Fatal(out, err)
	}
	// a and b use their limit of 5 each: within a limit units never wait
	// for capacity. Global usage is now 14.
	for _, id := range []string{"a", "b"} {
		if out, err := db.Charge(ctx, withGlobal(charge(id, 5, el))); err != nil || !out.Allowed || out.Elastic[0] {
			t.Fatal(out, err)
		}
	}
	// Then they race for the 6 units of spare capacity left, 1 at a time,
	// 25 attempts each: no spare unit may be spent twice.
	var elastic atomic.Int64
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		wg.Go(func() {
			for range 25 {
				out, err := db.Charge(ctx, withGlobal(charge(id, 1, el)))
				if err != nil {
					t.Error(err)
					return
				}
				if out.Elastic[0] {
					elastic.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := elastic.Load(); got != 6 {
		t.Errorf("elastic admissions = %d, want 6", got)
	}
	_, g, err := db.Peek(ctx, nil, []quota.GlobalKey{global})
	if err != nil || g[0] != 20 {
		t.Errorf("global usage = %v (%v), want 20", g, err)
	}
}

// A refund takes off global usage only what it gave back to the customer's
// counter of the same window, and leaves no shard below zero.
func TestRefundGivesBackGlobalUsageOnlyWhatWasUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := dbtest.New(t)
	db, err := store.New(ctx, schema.Pool)
	if err != nil {
		t.Fatal(err)
	}
	MustSeed(t, db, map[tiers.Window]int64{tiers.Day: 100}, "a", "c")
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	counter := quota.CounterKey{Customer: "a", Metric: "api_calls", Window: tiers.Day, Start: day0}
	// a counts 10 units in its day window, in 5 charges over random shards;
	// c, without a day limit, counts 7 in global usage only.
	for range 5 {
		c := charge("a", 2, dayWindow(100))
		c.Globals = []quota.GlobalKey{global}
		if out, err := db.Charge(ctx, c); err != nil || !out.Allowed {
			t.Fatal(out, err)
		}
	}
	c := charge("c", 7)
	c.Globals = []quota.GlobalKey{global}
	if out, err := db.Charge(ctx, c); err != nil || !out.Allowed {
		t.Fatal(out, err)
	}

	if _, g, err := db.Peek(ctx, nil, []quota.GlobalKey{global}); err != nil || g[0] != 17 {
		t.Fatalf("global usage after charges = %v (%v), want 17", g, err)
	}
	refund := func(customer string, cost int64, counters ...quota.CounterKey) {
		t.Helper()
		_, _, err := db.Refund(ctx, quota.RefundCharge{Customer: customer, Metric: "api_calls", Cost: cost,
			Counters: counters, Globals: []quota.GlobalKey{global}, At: day0.Add(11 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name       string
		customer   string
		cost       int64
		counters   []quota.CounterKey
		wantGlobal int64
	}{
		{"a refunds more than it used: only its 10 come off", "a", 25, []quota.CounterKey{counter}, 7},
		{"a refunds again with nothing left", "a", 5, []quota.CounterKey{counter}, 7},
		{"c, with no counter of the window, gives nothing back", "c", 7, nil, 7},
	} {
		refund(step.customer, step.cost, step.counters...)
		_, g, err := db.Peek(ctx, nil, []quota.GlobalKey{global})
		if err != nil || g[0] != step.wantGlobal {
			t.Errorf("%s: global usage = %v (%v), want %d", step.name, g, err, step.wantGlobal)
		}
	}
	var negative int
	if err := schema.Pool.QueryRow(ctx, `SELECT count(*) FROM metric_usage WHERE used < 0`).Scan(&negative); err != nil {
		t.Fatal(err)
	}
	if negative != 0 {
		t.Errorf("%d global usage shards below zero", negative)
	}
}

func TestRequestIDsAreKeptOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	var answers atomic.Int64
	c := charge("acme", 2, dayWindow(100))
	c.RequestID = "op-1"
	c.Answer = func(o quota.Outcome) ([]byte, error) {
		answers.Add(1)
		return json.Marshal(map[string]int64{"used": o.Used[0]})
	}
	var wg sync.WaitGroup
	var replays atomic.Int64
	for range 16 {
		wg.Go(func() {
			out, err := db.Charge(ctx, c)
			if err != nil {
				t.Error(err)
				return
			}
			if out.Replay != nil {
				replays.Add(1)
				if out.Replay.Cost != 2 || string(out.Replay.Answer) != `{"used": 0}` {
					t.Errorf("replay = %+v (%s)", out.Replay, out.Replay.Answer)
				}
			}
		})
	}
	wg.Wait()
	if answers.Load() != 1 || replays.Load() != 15 {
		t.Errorf("answers recorded %d, replays %d; want 1 and 15", answers.Load(), replays.Load())
	}
	rec, err := db.Recorded(ctx, "acme", "op-1", c.At.Add(23*time.Hour))
	if err != nil || rec == nil {
		t.Fatalf("recorded within 24 h: %v, %v", rec, err)
	}
	if rec, _ := db.Recorded(ctx, "acme", "op-1", c.At.Add(25*time.Hour)); rec != nil {
		t.Errorf("recorded after 24 h: %+v", rec)
	}
	used, _, _ := db.Peek(ctx, []quota.CounterKey{{Customer: "acme", Metric: "api_calls", Window: tiers.Day, Start: day0}}, nil)
	if used[0] != 2 {
		t.Errorf("counter = %d, want 2 (charged once)", used[0])
	}
}

func TestRefundResetPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	key := quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: tiers.Day, Start: day0}
	if _, err := db.Charge(ctx, charge("acme", 5, dayWindow(10))); err != nil {
		t.Fatal(err)
	}
	r := quota.RefundCharge{Customer: "acme", Metric: "api_calls", Cost: 3, Counters: []quota.CounterKey{key},
		RequestID: "ref-1", At: day0.Add(time.Hour)}
	before, replayed, err := db.Refund(ctx, r)
	if err != nil || replayed || before[0] != 5 {
		t.Fatalf("refund: %v %v %v", before, replayed, err)
	}
	if _, replayed, _ := db.Refund(ctx, r); !replayed {
		t.Errorf("a repeated refund id refunded again")
	}
	r.RequestID, r.Cost = "", 100
	if _, _, err := db.Refund(ctx, r); err != nil {
		t.Fatal(err)
	}
	used, _, _ := db.Peek(ctx, []quota.CounterKey{key}, nil)
	if used[0] != 0 {
		t.Errorf("after refunds counter = %d, want 0 (never below zero)", used[0])
	}

	if _, err := db.Charge(ctx, charge("acme", 4, dayWindow(10))); err != nil {
		t.Fatal(err)
	}
	if err := db.Reset(ctx, "ops", "acme", "api_calls", day0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	used, _, _ = db.Peek(ctx, []quota.CounterKey{key}, nil)
	events, _, _ := db.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 1})
	if used[0] != 0 || len(events) != 1 || events[0].Action != "reset" || events[0].Resource != "customers/acme/usage/api_calls" {
		t.Errorf("after reset: counter %d, audit %+v", used[0], events)
	}
	if err := db.Reset(ctx, "ops", "ghost", "api_calls", day0); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("reset of a missing customer: err = %v", err)
	}

	old := quota.WindowCharge{Window: tiers.Day, Start: day0.AddDate(0, 0, -3), Threshold: 10}
	if _, err := db.Charge(ctx, charge("acme", 1, old, dayWindow(10))); err != nil {
		t.Fatal(err)
	}
	if err := db.Purge(ctx, day0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	used, _, _ = db.Peek(ctx, []quota.CounterKey{{Customer: "acme", Metric: "api_calls", Window: tiers.Day, Start: old.Start}, key}, nil)
	if used[0] != 0 || used[1] != 1 {
		t.Errorf("after purge: %v, want the old window gone and today kept", used)
	}
}

func TestHistoryNeverNegativeAndOutlivesCustomer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	d1, d2 := day0, day0.AddDate(0, 0, 1)
	err := db.AddHistory(ctx, []quota.HistoryDelta{
		{Customer: "acme", Metric: "api_calls", Date: d1, Used: 10, Overage: 2, Denied: 1},
		{Customer: "acme", Metric: "exports", Date: d1, Used: 1},
		{Customer: "acme", Metric: "api_calls", Date: d2, Used: -5}, // a refund on a day with nothing
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AddHistory(ctx, []quota.HistoryDelta{{Customer: "acme", Metric: "api_calls", Date: d1, Used: -3, Overage: -5}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteCustomer(ctx, write("ops"), "acme"); err != nil {
		t.Fatal(err)
	}
	days, err := db.FindHistory(ctx, "acme", "", d1, d2)
	if err != nil {
		t.Fatal(err)
	}
	want := []quota.Day{
		{Date: d1, Metric: "api_calls", Used: 7, Overage: 0, Denied: 1},
		{Date: d1, Metric: "exports", Used: 1},
		{Date: d2, Metric: "api_calls"},
	}
	if len(days) != len(want) {
		t.Fatalf("history = %+v, want %+v", days, want)
	}
	for i := range want {
		if days[i] != want[i] {
			t.Errorf("day %d = %+v, want %+v", i, days[i], want[i])
		}
	}
}

func TestListenerHearsOtherProcesses(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := store.New(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.New(ctx, s.Pool) // another process on the same schema
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Notification, 16)
	connected := make(chan struct{}, 1)
	l := b.Listener(func(n store.Notification) { got <- n }, func() {}, func(err error) { t.Log(err) })
	l.Connected = connected
	go l.Run(ctx)
	<-connected

	if _, _, err := a.PutMetric(ctx, write("ops"), tiers.Metric{Key: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}); err != nil {
		t.Fatal(err)
	}
	want := []store.Notification{{Kind: store.NotifyMetric, Key: "m"}, {Kind: store.NotifyPlan, Key: "p", Local: true}}
	for _, w := range want {
		select {
		case n := <-got:
			if n != w {
				t.Errorf("notification = %+v, want %+v", n, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %+v", w)
		}
	}
}
