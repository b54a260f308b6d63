package store_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

var day0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// MustSeed declares metric api_calls (with capacities) and customers on a
// plan without limits: counters need both to exist.
func MustSeed(t testing.TB, db *store.DB, capacity map[tiers.Window]int64, customers ...string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls", Capacity: capacity}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range customers {
		if _, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: c, Plan: "p", Metadata: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

// span is a window of customer's api_calls from start, admitting up to
// threshold.
func span(customer string, w tiers.Window, start time.Time, threshold int64) quota.Span {
	end := start.AddDate(0, 0, 1)
	if w == tiers.Hour {
		end = start.Add(time.Hour)
	}
	return quota.Span{Key: quota.CounterKey{Customer: customer, Metric: "api_calls", Window: w, Start: start},
		End: end, Rule: quota.Rule{Mode: tiers.Hard, Limit: threshold, Size: threshold, Threshold: threshold, Ceiling: tiers.MaxLimit}}
}

func daySpan(customer string, threshold int64) quota.Span {
	return span(customer, tiers.Day, day0, threshold)
}

func charge(customer string, cost int64, spans ...quota.Span) *quota.Charge {
	return &quota.Charge{Customer: customer, Metric: "api_calls", Cost: cost, Spans: spans, At: day0.Add(10 * time.Hour)}
}

// MustTake takes c and returns whether it was admitted, with the outcomes.
func MustTake(t testing.TB, l quota.Counter, c *quota.Charge) (bool, []quota.Outcome) {
	t.Helper()
	out := make([]quota.Outcome, len(c.Spans))
	ok, err := l.Take(context.Background(), quotafake.One(c, out))
	if err != nil {
		t.Fatal(err)
	}
	return ok, out
}

// MustRead reads counters.
func MustRead(t testing.TB, db *store.DB, keys ...quota.CounterKey) []int64 {
	t.Helper()
	used, _, err := db.Ledger.Read(context.Background(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	return used
}

func TestTakeIsConditionalAndAllOrNothing(t *testing.T) {
	t.Parallel()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	hour := span("acme", tiers.Hour, day0.Add(10*time.Hour), 100)
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
		ok, out := MustTake(t, db.Ledger, charge("acme", s.cost, hour, daySpan("acme", s.threshold)))
		if ok != s.allowed || out[1].Used != s.usedDay || !out[0].Passed || out[1].Passed != s.allowed {
			t.Fatalf("step %d: allowed %v, outcomes %+v; want allowed %v with day used %d", i, ok, out, s.allowed, s.usedDay)
		}
		if !ok && out[1].Wait != 14*3600*1000 {
			t.Errorf("step %d: wait %d ms, want until midnight", i, out[1].Wait)
		}
	}
	// Denied charges left the hour window (which admitted them) untouched.
	if used := MustRead(t, db, hour.Key, daySpan("acme", 0).Key); used[0] != 11 || used[1] != 11 {
		t.Errorf("counters = %v, want [11 11]", used)
	}
	// A cost above the threshold creates no row, and can never pass.
	week := span("acme", tiers.Week, day0, 6)
	ok, out := MustTake(t, db.Ledger, charge("acme", 7, week))
	if ok || out[0].Used != 0 || out[0].Wait != -1 {
		t.Fatalf("cost above threshold: %v %+v", ok, out)
	}
}

func TestTakeUnknownCustomer(t *testing.T) {
	t.Parallel()
	db := MustOpen(t)
	MustSeed(t, db, nil)
	out := make([]quota.Outcome, 1)
	if _, err := db.Ledger.Take(context.Background(), quotafake.One(charge("ghost", 1, daySpan("ghost", 10)), out)); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("err = %v, want ErrCustomerNotFound", err)
	}
}

func TestElasticSpendsSpareCapacityOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, map[tiers.Window]int64{tiers.Day: 20}, "a", "b", "c")
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	el := func(customer string) quota.Span {
		sp := daySpan(customer, 5)
		sp.Rule.Mode, sp.Rule.Spare, sp.Rule.Capacity, sp.Global = tiers.Elastic, true, 20, global
		return sp
	}
	withGlobal := func(c *quota.Charge) *quota.Charge { c.Globals = []quota.GlobalKey{global}; return c }

	// c, without a limit, uses 4 of the capacity.
	if ok, out := MustTake(t, db.Ledger, withGlobal(charge("c", 4))); !ok {
		t.Fatal(out)
	}
	// a and b use their limit of 5 each: within a limit units never wait
	// for capacity. Global usage is now 14.
	for _, id := range []string{"a", "b"} {
		if ok, out := MustTake(t, db.Ledger, withGlobal(charge(id, 5, el(id)))); !ok || out[0].Elastic {
			t.Fatal(out)
		}
	}
	// Then they race for the 6 units of spare capacity left, 1 at a time,
	// 25 attempts each: no spare unit may be spent twice.
	var elastic atomic.Int64
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		wg.Go(func() {
			out := make([]quota.Outcome, 1)
			for range 25 {
				ok, err := db.Ledger.Take(ctx, quotafake.One(withGlobal(charge(id, 1, el(id))), out))
				if err != nil {
					t.Error(err)
					return
				}
				if ok && out[0].Elastic {
					elastic.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := elastic.Load(); got != 6 {
		t.Errorf("elastic admissions = %d, want 6", got)
	}
	_, g, err := db.Ledger.Read(ctx, nil, []quota.GlobalKey{global})
	if err != nil || g[0] != 20 {
		t.Errorf("global usage = %v (%v), want 20", g, err)
	}
}

// A give-back takes off a global window only what it gave back to the
// customer's counter of the same window, or its cost where the charge has
// no such counter (a take being undone); it leaves no shard below zero.
func TestGiveBackTakesGlobalUsageOnlyWhatWasUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, schema := MustOpenSchema(t)
	MustSeed(t, db, map[tiers.Window]int64{tiers.Day: 100}, "a", "c")
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	// a counts 10 units in its day window, in 5 charges over random shards;
	// c, without a day limit, counts 7 in global usage only.
	for range 5 {
		c := charge("a", 2, daySpan("a", 100))
		c.Globals = []quota.GlobalKey{global}
		if ok, out := MustTake(t, db.Ledger, c); !ok {
			t.Fatal(out)
		}
	}
	c := charge("c", 7)
	c.Globals = []quota.GlobalKey{global}
	if ok, _ := MustTake(t, db.Ledger, c); !ok {
		t.Fatal("c denied")
	}
	if _, g, err := db.Ledger.Read(ctx, nil, []quota.GlobalKey{global}); err != nil || g[0] != 17 {
		t.Fatalf("global usage after charges = %v (%v), want 17", g, err)
	}
	for _, step := range []struct {
		name       string
		charge     *quota.Charge
		wantGlobal int64
	}{
		{"a gives back more than it used: only its 10 come off", charge("a", 25, daySpan("a", 100)), 7},
		{"a gives back again with nothing left", charge("a", 5, daySpan("a", 100)), 7},
		{"c, with no counter of the window, gives back its cost", charge("c", 3), 4},
		{"more than there is leaves zero", charge("c", 50), 0},
	} {
		step.charge.Globals = []quota.GlobalKey{global}
		if err := db.Ledger.GiveBack(ctx, quotafake.One(step.charge, make([]quota.Outcome, len(step.charge.Spans)))); err != nil {
			t.Fatal(err)
		}
		_, g, err := db.Ledger.Read(ctx, nil, []quota.GlobalKey{global})
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

// AddGlobal writes the changes of many windows at once, summed by window,
// and takes units off the shards a window is spread over without taking
// any below zero.
func TestAddGlobalSumsByWindowNeverBelowZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, schema := MustOpenSchema(t)
	MustSeed(t, db, nil)
	day := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	week := quota.GlobalKey{Metric: "api_calls", Window: tiers.Week, Start: day0}
	month := quota.GlobalKey{Metric: "api_calls", Window: tiers.Month, Start: day0}
	keys := []quota.GlobalKey{day, week, month}
	// Eight writes of the day window, each to a random shard.
	for range 8 {
		if err := db.Ledger.AddGlobal(ctx, []quota.GlobalDelta{{Key: day, Units: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name   string
		deltas []quota.GlobalDelta
		want   []int64 // day, week, month
	}{
		{"adds", []quota.GlobalDelta{{Key: week, Units: 7}, {Key: day, Units: 5}, {Key: month, Units: 2}, {Key: day, Units: -1}},
			[]int64{12, 7, 2}},
		{"takes off across shards", []quota.GlobalDelta{{Key: month, Units: -5}, {Key: day, Units: -7}, {Key: week, Units: 1}},
			[]int64{5, 8, 0}},
		{"nothing", nil, []int64{5, 8, 0}},
		{"takes off more than there is", []quota.GlobalDelta{{Key: day, Units: -3}, {Key: day, Units: -4}}, []int64{0, 8, 0}},
	} {
		if err := db.Ledger.AddGlobal(ctx, step.deltas); err != nil {
			t.Fatal(err)
		}
		_, g, err := db.Ledger.Read(ctx, nil, keys)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g, step.want) {
			t.Errorf("%s: global usage (day, week, month) = %v, want %v", step.name, g, step.want)
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

// checkOnce claims a request id, takes c and keeps an answer, as the
// engine does for a check with a request id; it returns the replayed
// record, if any.
func checkOnce(ctx context.Context, db *store.DB, id string, c *quota.Charge, answers *atomic.Int64) (*quota.Recorded, error) {
	var replay *quota.Recorded
	cl := quota.Claim{Customer: c.Customer, Kind: quota.KindCheck, ID: id, Metric: c.Metric, Cost: c.Cost, At: c.At}
	errReplay := errors.New("replay")
	err := db.Ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
		rec, err := tx.Claim(ctx, cl)
		if err != nil {
			return err
		}
		if rec != nil {
			replay = rec
			return errReplay
		}
		out := make([]quota.Outcome, len(c.Spans))
		if ok, err := tx.Take(ctx, quotafake.One(c, out)); err != nil || !ok {
			return fmt.Errorf("take: %v %v", ok, err)
		}
		answers.Add(1)
		return tx.Keep(ctx, cl, []byte(fmt.Sprintf(`{"used": %d}`, out[0].Used)))
	})
	if errors.Is(err, errReplay) {
		err = nil
	}
	return replay, err
}

func TestRequestIDsAreKeptOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	var answers, replays atomic.Int64
	c := charge("acme", 2, daySpan("acme", 100))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			c := *c
			rec, err := checkOnce(ctx, db, "op-1", &c, &answers)
			if err != nil {
				t.Error(err)
				return
			}
			if rec != nil {
				replays.Add(1)
				if rec.Cost != 2 || string(rec.Answer) != `{"used": 0}` {
					t.Errorf("replay = %+v (%s)", rec, rec.Answer)
				}
			}
		})
	}
	wg.Wait()
	if answers.Load() != 1 || replays.Load() != 15 {
		t.Errorf("answers recorded %d, replays %d; want 1 and 15", answers.Load(), replays.Load())
	}
	rec, err := db.Ledger.Recorded(ctx, "acme", "op-1", c.At.Add(23*time.Hour))
	if err != nil || rec == nil {
		t.Fatalf("recorded within 24 h: %v, %v", rec, err)
	}
	if rec, _ := db.Ledger.Recorded(ctx, "acme", "op-1", c.At.Add(25*time.Hour)); rec != nil {
		t.Errorf("recorded after 24 h: %+v", rec)
	}
	if used := MustRead(t, db, c.Spans[0].Key); used[0] != 2 {
		t.Errorf("counter = %d, want 2 (charged once)", used[0])
	}
	// A take that denies within a transaction leaves nothing behind, even
	// if the transaction commits.
	var denied bool
	err = db.Ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
		out := make([]quota.Outcome, 2)
		ok, err := tx.Take(ctx, quotafake.One(charge("acme", 5, span("acme", tiers.Hour, day0.Add(10*time.Hour), 100), daySpan("acme", 6)), out))
		denied = !ok
		return err
	})
	if err != nil || !denied {
		t.Fatalf("denying take in a transaction: denied %v, %v", denied, err)
	}
	if used := MustRead(t, db, span("acme", tiers.Hour, day0.Add(10*time.Hour), 0).Key); used[0] != 0 {
		t.Errorf("hour counter = %d after a denied take committed, want 0", used[0])
	}
}

// refund claims a refund id (if any) and gives c back, as the engine does.
func refund(ctx context.Context, db *store.DB, id string, c *quota.Charge) (before []quota.Outcome, replayed bool, err error) {
	before = make([]quota.Outcome, len(c.Spans))
	errReplay := errors.New("replay")
	err = db.Ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
		if id != "" {
			rec, err := tx.Claim(ctx, quota.Claim{Customer: c.Customer, Kind: quota.KindRefund, ID: id, Metric: c.Metric, Cost: c.Cost, At: c.At})
			if err != nil {
				return err
			}
			if rec != nil {
				return errReplay
			}
		}
		return tx.GiveBack(ctx, quotafake.One(c, before))
	})
	if errors.Is(err, errReplay) {
		return nil, true, nil
	}
	return before, false, err
}

func TestRefundResetPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	key := daySpan("acme", 10).Key
	if ok, _ := MustTake(t, db.Ledger, charge("acme", 5, daySpan("acme", 10))); !ok {
		t.Fatal("denied")
	}
	r := charge("acme", 3, daySpan("acme", 10))
	r.At = day0.Add(time.Hour)
	before, replayed, err := refund(ctx, db, "ref-1", r)
	if err != nil || replayed || before[0].Used != 5 {
		t.Fatalf("refund: %v %v %v", before, replayed, err)
	}
	if _, replayed, _ := refund(ctx, db, "ref-1", r); !replayed {
		t.Errorf("a repeated refund id refunded again")
	}
	r.Cost = 100
	if _, _, err := refund(ctx, db, "", r); err != nil {
		t.Fatal(err)
	}
	if used := MustRead(t, db, key); used[0] != 0 {
		t.Errorf("after refunds counter = %d, want 0 (never below zero)", used[0])
	}

	if ok, _ := MustTake(t, db.Ledger, charge("acme", 4, daySpan("acme", 10))); !ok {
		t.Fatal("denied")
	}
	if err := db.Ledger.Reset(ctx, "ops", "acme", "api_calls", day0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	used := MustRead(t, db, key)
	events, _, _ := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 1})
	if used[0] != 0 || len(events) != 1 || events[0].Action != "reset" || events[0].Resource != "customers/acme/usage/api_calls" {
		t.Errorf("after reset: counter %d, audit %+v", used[0], events)
	}
	if err := db.Ledger.Reset(ctx, "ops", "ghost", "api_calls", day0); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("reset of a missing customer: err = %v", err)
	}

	old := span("acme", tiers.Day, day0.AddDate(0, 0, -3), 10)
	if ok, _ := MustTake(t, db.Ledger, charge("acme", 1, old, daySpan("acme", 10))); !ok {
		t.Fatal("denied")
	}
	if _, err := db.Ledger.Purge(ctx, day0.Add(time.Hour), quota.Retention{}); err != nil {
		t.Fatal(err)
	}
	if used := MustRead(t, db, old.Key, key); used[0] != 0 || used[1] != 1 {
		t.Errorf("after purge: %v, want the old window gone and today kept", used)
	}
}

// A customer's counter of a metric and window and its subjects' counters
// of the same metric and window count apart: every charge counts in its
// own, decides on its own, and gives back to its own; a set of charges of
// the customer and its subjects is all or nothing; a reset of the metric
// zeroes all of them, and shows each with its subject; a purge takes the
// subjects' old counters too.
func TestSubjectsCountApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, map[tiers.Window]int64{tiers.Day: 100}, "acme", "globex")
	const u1, u2 = "org/7:user@example.com", "10.0.0.0/8"
	global := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: day0}
	// The counters watched, all of api_calls on day0.
	counters := []quota.CounterKey{
		subjectSpan("acme", "", 0).Key,
		subjectSpan("acme", u1, 0).Key,
		subjectSpan("acme", u2, 0).Key,
		subjectSpan("globex", u1, 0).Key,
	}
	type ask struct {
		customer, subject string
		cost, threshold   int64
		elastic           bool // beyond the threshold up to 10, on the metric's spare capacity
	}
	const (
		take       = "take"
		takeInTx   = "take in a transaction"
		peek       = "peek"
		giveBack   = "give back"
		giveBackTx = "give back in a transaction"
	)
	steps := []struct {
		name   string
		op     string
		set    []ask
		wantOK bool    // take: admitted
		used   []int64 // each charge's count before, as its outcome says
		passed []bool  // each charge's span passed (take, peek)
		want   []int64 // counters, as stored, after
	}{
		{"the customer takes", take, []ask{{"acme", "", 5, 10, false}},
			true, []int64{0}, []bool{true}, []int64{5, 0, 0, 0}},
		{"a subject takes: its own count, from zero", take, []ask{{"acme", u1, 3, 3, false}},
			true, []int64{0}, []bool{true}, []int64{5, 3, 0, 0}},
		{"the subject is full, the customer is not", take, []ask{{"acme", u1, 1, 3, false}},
			false, []int64{3}, []bool{false}, []int64{5, 3, 0, 0}},
		{"the customer takes beside its full subject", take, []ask{{"acme", "", 1, 10, false}},
			true, []int64{5}, []bool{true}, []int64{6, 3, 0, 0}},
		{"another subject, and the same subject of another customer", take,
			[]ask{{"acme", u2, 2, 3, false}, {"globex", u1, 1, 3, false}},
			true, []int64{0, 0}, []bool{true, true}, []int64{6, 3, 2, 1}},
		{"each counter looked at as it is", peek,
			[]ask{{"acme", "", 4, 10, false}, {"acme", u1, 1, 3, false}, {"acme", u2, 1, 3, false}},
			false, []int64{6, 3, 2}, []bool{true, false, true}, []int64{6, 3, 2, 1}},
		{"the customer and its subject at once: the subject denies, nothing counts", take,
			[]ask{{"acme", "", 1, 10, false}, {"acme", u2, 2, 3, false}},
			false, []int64{6, 2}, []bool{true, false}, []int64{6, 3, 2, 1}},
		{"the customer and its subject at once, within both", take,
			[]ask{{"acme", "", 1, 10, false}, {"acme", u2, 1, 3, false}},
			true, []int64{6, 2}, []bool{true, true}, []int64{7, 3, 3, 1}},
		{"in a transaction, the customer denies: its subjects' takes are undone", takeInTx,
			[]ask{{"acme", "", 4, 10, false}, {"acme", u1, 1, 5, false}, {"acme", u2, 1, 5, false}},
			false, []int64{7, 3, 3}, []bool{false, true, true}, []int64{7, 3, 3, 1}},
		{"a full subject admits on spare capacity, up to its ceiling", take, []ask{{"acme", u2, 2, 3, true}},
			true, []int64{3}, []bool{true}, []int64{7, 3, 5, 1}},
		{"a subject gives back its own units", giveBack, []ask{{"acme", u1, 2, 0, false}},
			false, []int64{3}, nil, []int64{7, 1, 5, 1}},
		{"the customer gives back its own, in a transaction", giveBackTx, []ask{{"acme", "", 5, 0, false}},
			false, []int64{7}, nil, []int64{2, 1, 5, 1}},
	}
	for _, step := range steps {
		cs := make([]quota.Charge, len(step.set))
		for i, a := range step.set {
			sp := subjectSpan(a.customer, a.subject, a.threshold)
			if a.elastic {
				sp.Rule.Mode, sp.Rule.Spare, sp.Rule.Capacity, sp.Rule.Ceiling, sp.Global = tiers.Elastic, true, 100, 10, global
			}
			cs[i] = *charge(a.customer, a.cost, sp)
			cs[i].Subject, cs[i].Out = a.subject, make([]quota.Outcome, 1)
		}
		var ok bool
		var err error
		switch step.op {
		case take:
			ok, err = db.Ledger.Take(ctx, cs)
		case takeInTx:
			err = db.Ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
				ok, err = tx.Take(ctx, cs)
				return err
			})
		case peek:
			err = db.Ledger.Peek(ctx, cs)
		case giveBack:
			err = db.Ledger.GiveBack(ctx, cs)
		case giveBackTx:
			err = db.Ledger.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error { return tx.GiveBack(ctx, cs) })
		}
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if ok != step.wantOK {
			t.Errorf("%s: admitted %v, want %v", step.name, ok, step.wantOK)
		}
		for i := range cs {
			o := cs[i].Out[0]
			if o.Used != step.used[i] || (step.passed != nil && o.Passed != step.passed[i]) {
				t.Errorf("%s: charge %d (%q): %+v, want used %d, passed %v", step.name, i, cs[i].Subject, o, step.used[i],
					step.passed != nil && step.passed[i])
			}
		}
		if got := MustRead(t, db, counters...); !slices.Equal(got, step.want) {
			t.Errorf("%s: counters %v, want %v", step.name, got, step.want)
		}
	}

	// A reset of acme's api_calls zeroes its counter and every subject's,
	// and the audit event shows each with its subject; globex's stay.
	old := subjectSpan("acme", u1, 10)
	old.Key.Start = day0.AddDate(0, 0, -3)
	if ok, out := MustTake(t, db.Ledger, &quota.Charge{Customer: "acme", Metric: "api_calls", Subject: u1, Cost: 1,
		At: old.Key.Start, Spans: []quota.Span{old}}); !ok {
		t.Fatal(out)
	}
	if err := db.Ledger.Reset(ctx, "ops", "acme", "api_calls", day0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, want := MustRead(t, db, append(counters, old.Key)...), []int64{0, 0, 0, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("after the reset: counters %v, want %v", got, want)
	}
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 1})
	if err != nil || len(events) != 1 {
		t.Fatalf("audit events %+v (%v), want the reset", events, err)
	}
	type zeroed struct {
		Subject string    `json:"subject"`
		Window  string    `json:"window"`
		Start   time.Time `json:"window_start"`
		Used    int64     `json:"used"`
	}
	var before struct {
		Metric   string   `json:"metric"`
		Counters []zeroed `json:"counters"`
	}
	if err := json.Unmarshal(events[0].Before, &before); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(before.Counters, func(a, b zeroed) int {
		return cmp.Or(cmp.Compare(a.Subject, b.Subject), a.Start.Compare(b.Start))
	})
	wantZeroed := []zeroed{
		{Window: "day", Start: day0, Used: 2},
		{Subject: u2, Window: "day", Start: day0, Used: 5},
		{Subject: u1, Window: "day", Start: old.Key.Start, Used: 1},
		{Subject: u1, Window: "day", Start: day0, Used: 1},
	}
	if before.Metric != "api_calls" || !slices.Equal(before.Counters, wantZeroed) {
		t.Errorf("the reset's audit image: %s, want the counters %+v", events[0].Before, wantZeroed)
	}
	if strings.Contains(string(events[0].Before), `"subject":""`) {
		t.Errorf("the reset's audit image names a subject for the customer's own counter: %s", events[0].Before)
	}

	// A purge takes the subjects' old counters as it takes the customer's.
	if ok, out := MustTake(t, db.Ledger, &quota.Charge{Customer: "acme", Metric: "api_calls", Subject: u1, Cost: 1,
		At: old.Key.Start, Spans: []quota.Span{old}}); !ok {
		t.Fatal(out)
	}
	if _, err := db.Ledger.Purge(ctx, day0.Add(time.Hour), quota.Retention{}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM usage_counters WHERE window_start < $1`, day0).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d counters of windows long past left after the purge", left)
	}
}

// subjectSpan is customer's day window of api_calls from day0, counted for
// subject ("" for the customer's own), admitting up to threshold.
func subjectSpan(customer, subject string, threshold int64) quota.Span {
	sp := daySpan(customer, threshold)
	sp.Key.Subject = subject
	return sp
}

func TestHistoryNeverNegativeAndOutlivesCustomer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme")
	d1, d2 := day0, day0.AddDate(0, 0, 1)
	err := db.History.AddHistory(ctx, []quota.HistoryDelta{
		{Customer: "acme", Metric: "api_calls", Date: d1, Used: 10, Overage: 2, Denied: 1},
		{Customer: "acme", Metric: "exports", Date: d1, Used: 1},
		{Customer: "acme", Metric: "api_calls", Date: d2, Used: -5}, // a refund on a day with nothing
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.History.AddHistory(ctx, []quota.HistoryDelta{{Customer: "acme", Metric: "api_calls", Date: d1, Used: -3, Overage: -5}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog.DeleteCustomer(ctx, write("ops"), "acme"); err != nil {
		t.Fatal(err)
	}
	days, err := db.History.FindHistory(ctx, "acme", "", d1, d2)
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

	if _, _, err := a.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}, false); err != nil {
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

// Many request ids claimed in one statement: each as alone, an id twice in
// the batch claimed once (the second finds the first), an id used within
// 24 hours found with its answer, one used earlier claimed anew.
func TestClaimBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "acme", "globex")
	at := day0.Add(10 * time.Hour)
	claim := func(customer, id string, cost int64, at time.Time) quota.Claim {
		return quota.Claim{Customer: customer, Kind: quota.KindCheck, ID: id, Metric: "api_calls", Cost: cost, At: at,
			Answer: []byte(fmt.Sprintf(`{"cost":%d}`, cost))}
	}
	batch := []quota.Claim{claim("acme", "r1", 1, at), claim("globex", "r1", 2, at), claim("acme", "r1", 3, at)}
	if err := db.Ledger.Claim(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if batch[0].Found != nil || batch[1].Found != nil {
		t.Errorf("new ids found used: %+v, %+v", batch[0].Found, batch[1].Found)
	}
	if f := batch[2].Found; f == nil || f.Cost != 1 || string(f.Answer) != `{"cost":1}` {
		t.Errorf("the id's second claim in the batch found %+v, want the first's record", f)
	}
	again := []quota.Claim{claim("acme", "r1", 5, at.Add(23*time.Hour)), claim("globex", "r1", 6, at.Add(25*time.Hour))}
	if err := db.Ledger.Claim(ctx, again); err != nil {
		t.Fatal(err)
	}
	if f := again[0].Found; f == nil || f.Cost != 1 || strings.ReplaceAll(string(f.Answer), " ", "") != `{"cost":1}` {
		t.Errorf("an id used 23 hours before found %+v, want its record", f)
	}
	if again[1].Found != nil {
		t.Errorf("an id used 25 hours before found %+v, want it claimed anew", again[1].Found)
	}
	if rec, err := db.Ledger.Recorded(ctx, "globex", "r1", at.Add(25*time.Hour)); err != nil || rec == nil || rec.Cost != 6 {
		t.Errorf("globex's r1 after it was claimed anew: %+v, %v; want cost 6", rec, err)
	}
}
