package quota_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// usedOf returns what usage reports of customer's window of metric (of
// subject's, if any).
func usedOf(t testing.TB, e *quota.Engine, customer, subject, metric string, w tiers.Window) int64 {
	t.Helper()
	_, usage, err := e.Usage(context.Background(), customer, subject)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if u.Metric == metric && u.Window == w && u.Subject == subject {
			return u.Used
		}
	}
	t.Fatalf("no usage of %s's %s window of %s (subject %q) in %+v", customer, w, metric, subject, usage)
	return 0
}

func lim(metric string, w tiers.Window, n int64) tiers.Limit {
	return tiers.Limit{Metric: metric, Window: w, Limit: n, Mode: tiers.Hard}
}

func perSubject(l tiers.Limit) tiers.Limit {
	l.Per = tiers.PerSubject
	return l
}

func item(metric string, cost int64) quota.Item { return quota.Item{Metric: metric, Cost: cost} }

// history returns customer's admitted units and denied checks of metric
// today, as history keeps them.
func history(t testing.TB, f *fixture, customer, metric string) (used, denied int64) {
	t.Helper()
	if err := f.engine.FlushHistory(context.Background()); err != nil {
		t.Fatal(err)
	}
	days, err := f.history.FindHistory(context.Background(), customer, metric, time.Time{}, time.Now().AddDate(10, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range days {
		used += d.Used
		denied += d.Denied
	}
	return used, denied
}

// A check of items charges every item or none: an item its own windows
// deny (a short window or a long one, first or last) leaves every other
// item's windows as they were; each item is answered with its own windows
// and whether they alone admit it.
func TestCheckItems(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, tc := range []struct {
			name    string
			items   []quota.Item
			allowed bool
			each    []bool // each item's Allowed
			// What the windows count afterwards: api_calls (second, day)
			// and exports (second).
			apiSecond, apiDay, exports int64
		}{
			{name: "all within", items: []quota.Item{item("api_calls", 2), item("exports", 1)},
				allowed: true, each: []bool{true, true}, apiSecond: 2, apiDay: 2, exports: 1},
			{name: "last denied by a short window", items: []quota.Item{item("api_calls", 2), item("exports", 4)},
				each: []bool{true, false}},
			{name: "first denied by a long window", items: []quota.Item{item("api_calls", 5), item("exports", 1)},
				each: []bool{false, true}},
			{name: "both denied", items: []quota.Item{item("api_calls", 6), item("exports", 4)},
				each: []bool{false, false}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := acmeFixture(t, leases, []tiers.Limit{lim("api_calls", tiers.Second, 5),
					lim("api_calls", tiers.Day, 4), lim("exports", tiers.Second, 3)}, "api_calls", "exports")
				d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Items: tc.items})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != tc.allowed {
					t.Errorf("allowed = %v, want %v (%+v)", d.Allowed, tc.allowed, d)
				}
				if len(d.Items) != len(tc.items) {
					t.Fatalf("%d items answered for %d asked", len(d.Items), len(tc.items))
				}
				windows := 0
				for i, it := range d.Items {
					if it.Allowed != tc.each[i] {
						t.Errorf("item %d (%s): allowed = %v, want %v (%+v)", i, it.Metric, it.Allowed, tc.each[i], it)
					}
					if it.Metric != tc.items[i].Metric || it.Cost != tc.items[i].Cost || it.Customer != "acme" {
						t.Errorf("item %d is %s %s×%d, want acme %s×%d", i, it.Customer, it.Metric, it.Cost,
							tc.items[i].Metric, tc.items[i].Cost)
					}
					for _, w := range it.Limits {
						if w.Metric != it.Metric {
							t.Errorf("item %d (%s) reports a window of %s", i, it.Metric, w.Metric)
						}
					}
					windows += len(it.Limits)
				}
				if len(d.Limits) != windows {
					t.Errorf("%d windows at the top, %d in the items", len(d.Limits), windows)
				}
				for _, u := range []struct {
					metric string
					w      tiers.Window
					want   int64
				}{{"api_calls", tiers.Second, tc.apiSecond}, {"api_calls", tiers.Day, tc.apiDay}, {"exports", tiers.Second, tc.exports}} {
					if got := usedOf(t, f.engine, "acme", "", u.metric, u.w); got != u.want {
						t.Errorf("%s/%s used %d, want %d", u.metric, u.w, got, u.want)
					}
				}
				// History: each metric's admitted units when the check
				// passed, one denied check per metric otherwise.
				for _, it := range tc.items {
					used, denied := history(t, f, "acme", it.Metric)
					switch {
					case tc.allowed && (used != it.Cost || denied != 0):
						t.Errorf("history of %s: used %d, denied %d; want %d, 0", it.Metric, used, denied, it.Cost)
					case !tc.allowed && (used != 0 || denied != 1):
						t.Errorf("history of %s: used %d, denied %d; want 0, 1", it.Metric, used, denied)
					}
				}
			})
		}
	})
}

// Bad items are refused before anything is counted; an unknown customer
// or metric, or a subject missing, names its item.
func TestCheckItemsErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, false)
	f.catalog.PutMetric("api_calls", nil)
	f.catalog.PutMetric("seats", nil)
	f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{lim("api_calls", tiers.Day, 10),
		perSubject(lim("seats", tiers.Day, 1))})
	ctx := context.Background()
	var ve *tiers.ValidationError
	for _, tc := range []struct {
		name  string
		r     quota.Request
		field string
	}{
		{"no item", quota.Request{Customer: "acme", Items: []quota.Item{}}, "items"},
		{"metric beside items", quota.Request{Customer: "acme", Metric: "api_calls", Items: []quota.Item{item("api_calls", 1)}}, "items"},
		{"an item twice", quota.Request{Customer: "acme", Items: []quota.Item{item("api_calls", 1), item("api_calls", 2)}}, "items[1]"},
		{"a cost of 0", quota.Request{Customer: "acme", Items: []quota.Item{item("api_calls", 0)}}, "items[0].cost"},
		{"a bad subject", quota.Request{Customer: "acme", Items: []quota.Item{{Metric: "api_calls", Cost: 1, Subject: "a b"}}}, "items[0].subject"},
		{"no customer", quota.Request{Items: []quota.Item{item("api_calls", 1)}}, "customer"},
		{"too many", quota.Request{Customer: "acme", Items: make([]quota.Item, quota.MaxItems+1)}, "items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.engine.Check(ctx, tc.r)
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a validation error", err)
			}
			found := false
			for _, fe := range ve.Fields {
				found = found || fe.Field == tc.field
			}
			if !found {
				t.Errorf("fields %+v, want one about %s", ve.Fields, tc.field)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		items []quota.Item
		index int
		want  error
	}{
		{"an unknown metric", []quota.Item{item("api_calls", 1), item("nope", 1)}, 1, tiers.ErrMetricNotFound},
		{"an unknown customer", []quota.Item{item("api_calls", 1), {Customer: "ghost", Metric: "api_calls", Cost: 1}}, 1, tiers.ErrCustomerNotFound},
		{"a subject missing", []quota.Item{item("api_calls", 1), item("seats", 1)}, 1, tiers.ErrSubjectRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Items: tc.items})
			var ie *quota.ItemError
			if !errors.As(err, &ie) || ie.Index != tc.index || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v of item %d", err, tc.want, tc.index)
			}
			if got := usedOf(t, f.engine, "acme", "", "api_calls", tiers.Day); got != 0 {
				t.Errorf("api_calls counts %d after a refused check, want 0", got)
			}
		})
	}
}

// A credit pool: a check of a metric that draws on it also charges the
// pool ceil(cost × credits / per), all or nothing with the metric's own
// windows; a check of the pool itself charges it directly; the answer
// reports the pool's windows; a refund gives the pool its credits back.
func TestCreditPool(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		newPool := func(t *testing.T) *fixture {
			f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, leases)
			f.catalog.PutMetric("credits", nil)
			f.catalog.PutPool("credits", tiers.CreditRate{Metric: "gpt4_tokens", Credits: 3, Per: 100},
				tiers.CreditRate{Metric: "images", Credits: 10, Per: 1})
			f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{lim("credits", tiers.Day, 100),
				lim("credits", tiers.Minute, 1000), lim("gpt4_tokens", tiers.Day, 1_000_000)})
			return f
		}
		t.Run("rounding", func(t *testing.T) {
			t.Parallel()
			f := newPool(t)
			var want int64
			for _, c := range []struct{ tokens, credits int64 }{{1000, 30}, {1, 1}, {34, 2}, {100, 3}, {101, 4}} {
				d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "gpt4_tokens", Cost: c.tokens})
				if err != nil || !d.Allowed {
					t.Fatalf("check of %d tokens: %+v, %v", c.tokens, d, err)
				}
				want += c.credits
				if got := usedOf(t, f.engine, "acme", "", "credits", tiers.Day); got != want {
					t.Errorf("after %d tokens the pool counts %d, want %d (+%d)", c.tokens, got, want, c.credits)
				}
				var pool []quota.WindowResult
				for _, w := range d.Limits {
					if w.Metric == "credits" {
						pool = append(pool, w)
					}
				}
				if len(pool) != 2 || pool[0].Window != tiers.Minute || pool[1].Used != want {
					t.Errorf("the answer's pool windows: %+v, want minute and day, the day at %d", pool, want)
				}
			}
			if used, _ := history(t, f, "acme", "credits"); used != want {
				t.Errorf("history of the pool: %d, want %d", used, want)
			}
		})
		t.Run("a pool denial leaves the metric's windows untouched", func(t *testing.T) {
			t.Parallel()
			f := newPool(t)
			d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "gpt4_tokens", Cost: 4000})
			if err != nil || d.Allowed {
				t.Fatalf("120 credits of 100: %+v, %v; want denied", d, err)
			}
			for _, w := range d.Limits {
				if w.Metric == "gpt4_tokens" && w.State != quota.StateOK || w.Metric == "credits" && w.Window == tiers.Day && w.State != quota.StateExceeded {
					t.Errorf("window %s/%s is %s", w.Metric, w.Window, w.State)
				}
			}
			if got := usedOf(t, f.engine, "acme", "", "gpt4_tokens", tiers.Day); got != 0 {
				t.Errorf("gpt4_tokens counts %d after the pool denied, want 0", got)
			}
			if got := usedOf(t, f.engine, "acme", "", "credits", tiers.Minute); got != 0 {
				t.Errorf("the pool's minute counts %d after its day denied, want 0", got)
			}
		})
		t.Run("items drawing on one pool charge it once, their credits together", func(t *testing.T) {
			t.Parallel()
			f := newPool(t)
			r := quota.Request{Customer: "acme", Items: []quota.Item{item("gpt4_tokens", 1000), item("images", 3), item("credits", 5)}}
			d, err := f.engine.Check(context.Background(), r)
			if err != nil || !d.Allowed {
				t.Fatalf("30 + 30 + 5 credits of 100: %+v, %v", d, err)
			}
			if got := usedOf(t, f.engine, "acme", "", "credits", tiers.Day); got != 65 {
				t.Errorf("pool counts %d, want 65", got)
			}
			if pool := countWindows(d.Limits, func(w quota.WindowResult) bool { return w.Metric == "credits" }); pool != 2 {
				t.Errorf("the top-level limits list the pool's windows %d times, want each once (2)", pool)
			}
			if rem := d.Items[1].Remaining; rem == nil || *rem != 3 {
				t.Errorf("images remaining %v, want 3 (35 credits left, 10 each)", rem)
			}
			d, err = f.engine.Check(context.Background(), quota.Request{Customer: "acme", Items: []quota.Item{item("gpt4_tokens", 100), item("images", 4)}})
			if err != nil || d.Allowed {
				t.Fatalf("3 + 40 credits of 35: %+v, %v; want denied", d, err)
			}
			if got := usedOf(t, f.engine, "acme", "", "credits", tiers.Day); got != 65 {
				t.Errorf("pool counts %d after a denied check, want 65", got)
			}
		})
		t.Run("a refund gives the pool its credits back", func(t *testing.T) {
			t.Parallel()
			f := newPool(t)
			if d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "images", Cost: 5}); err != nil || !d.Allowed {
				t.Fatalf("50 credits: %+v, %v", d, err)
			}
			res, err := f.engine.Refund(context.Background(), quota.RefundRequest{Customer: "acme", Metric: "images", Cost: 2})
			if err != nil {
				t.Fatal(err)
			}
			if got := usedOf(t, f.engine, "acme", "", "credits", tiers.Day); got != 30 {
				t.Errorf("pool counts %d after 2 images refunded, want 30", got)
			}
			found := false
			for _, u := range res.Usage {
				found = found || u.Metric == "credits" && u.Window == tiers.Day && u.Used == 30 && u.Refunded == 20
			}
			if !found {
				t.Errorf("the refund's usage %+v lacks the pool's day at 30, 20 refunded", res.Usage)
			}
		})
	})
}

// A pool shared by two metrics is drained exactly to its limit by
// concurrent checks of both: every credit admitted is counted once, none
// beyond the limit, none stranded.
func TestCreditPoolDrainedExactly(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		const limit = 997
		f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, leases)
		f.catalog.PutMetric("credits", nil)
		f.catalog.PutPool("credits", tiers.CreditRate{Metric: "tokens", Credits: 1, Per: 100},
			tiers.CreditRate{Metric: "images", Credits: 7, Per: 1})
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{lim("credits", tiers.Day, limit),
			lim("tokens", tiers.Day, 1_000_000), lim("images", tiers.Day, 1_000_000)})
		var credits, tokens, images atomic.Int64
		var wg sync.WaitGroup
		for w := range 64 {
			wg.Go(func() {
				metric, cost, rate := "tokens", int64(250), int64(3) // 250 tokens: ceil(2.5) = 3 credits
				if w%2 == 1 {
					metric, cost, rate = "images", 1, 7
				}
				for {
					d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: metric, Cost: cost})
					if err != nil {
						t.Error(err)
						return
					}
					if !d.Allowed {
						return
					}
					credits.Add(rate)
					if metric == "tokens" {
						tokens.Add(cost)
					} else {
						images.Add(cost)
					}
				}
			})
		}
		wg.Wait()
		// What the concurrent checks left (less than an image's 7 credits)
		// goes in checks of 100 tokens, a credit each.
		for {
			d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "tokens", Cost: 100})
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
			credits.Add(1)
			tokens.Add(100)
		}
		if got := credits.Load(); got != limit {
			t.Errorf("checks were admitted %d credits, want the pool's %d", got, limit)
		}
		for _, u := range []struct {
			metric string
			want   int64
		}{{"credits", limit}, {"tokens", tokens.Load()}, {"images", images.Load()}} {
			if got := usedOf(t, f.engine, "acme", "", u.metric, tiers.Day); got != u.want {
				t.Errorf("%s counts %d, want %d", u.metric, got, u.want)
			}
		}
	})
}

// Limits per subject count each subject apart, beside the customer's
// limits of the same metric, all at once; a check of such a metric names
// its subject.
func TestSubjects(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{lim("api_calls", tiers.Day, 12),
			perSubject(lim("api_calls", tiers.Day, 5)), perSubject(lim("api_calls", tiers.Minute, 4))}, "api_calls")
		ctx := context.Background()
		check := func(subject string, cost int64) quota.Decision {
			t.Helper()
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: cost, Subject: subject})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		for _, s := range []struct {
			subject string
			cost    int64
			allowed bool
		}{
			{"alice", 4, true}, {"alice", 1, false}, // her minute
			{"bob", 4, true}, {"carol", 3, true}, // 11 of the customer's 12
			{"dave", 2, false}, // the customer's day
			{"dave", 1, true},
		} {
			if d := check(s.subject, s.cost); d.Allowed != s.allowed {
				t.Errorf("%s takes %d: allowed = %v, want %v (%+v)", s.subject, s.cost, d.Allowed, s.allowed, d)
			}
		}
		for _, u := range []struct {
			subject string
			want    int64
		}{{"", 12}, {"alice", 4}, {"bob", 4}, {"carol", 3}, {"dave", 1}, {"erin", 0}} {
			if got := usedOf(t, f.engine, "acme", u.subject, "api_calls", tiers.Day); got != u.want {
				t.Errorf("day of %q counts %d, want %d", u.subject, got, u.want)
			}
		}
		d := check("erin", 1) // the customer's day is full
		if d.Allowed || d.Limits[0].Subject != "" || d.Limits[0].State != quota.StateExceeded {
			t.Errorf("erin, the customer's day full: %+v; want denied by it", d)
		}
		if subjects := countWindows(d.Limits, func(w quota.WindowResult) bool { return w.Subject == "erin" }); subjects != 2 {
			t.Errorf("the answer lists %d of erin's windows, want 2: %+v", subjects, d.Limits)
		}
		var ie *quota.ItemError
		if _, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1}); !errors.As(err, &ie) ||
			!errors.Is(err, tiers.ErrSubjectRequired) {
			t.Errorf("a check without a subject: %v, want subject required", err)
		}
	})
}

// 10,000 subjects of one customer, checked concurrently: each subject's
// limit and the customer's both hold exactly — every counter holds what
// was admitted, none beyond its limit, and once every subject is checked
// until the customer's limit denies, that limit is reached to the unit.
func TestManySubjectsExact(t *testing.T) {
	t.Parallel()
	const (
		subjects   = 10_000
		perSubject = 3
		customer   = 25_000
	)
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{lim("api_calls", tiers.Day, customer),
			perSubjectLimit(tiers.Day, perSubject), perSubjectLimit(tiers.Second, perSubject)}, "api_calls")
		admitted := make([]atomic.Int64, subjects)
		check := func(i int) (bool, error) {
			d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1,
				Subject: fmt.Sprintf("user-%d", i)})
			if err == nil && d.Allowed {
				admitted[i].Add(1)
			}
			return err == nil && d.Allowed, err
		}
		var wg sync.WaitGroup
		const workers = 16
		for w := range workers {
			wg.Go(func() {
				for n := range 2 * subjects / workers {
					if _, err := check((w*subjects/workers + n*7919) % subjects); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		// Then every subject, in turn, until the customer's day is full
		// (two seconds on, no second's window counts anything).
		f.clock.Advance(2 * time.Second)
	fill:
		for i := range subjects {
			for admitted[i].Load() < perSubject {
				ok, err := check(i)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break fill
				}
			}
		}
		var total int64
		for i := range subjects {
			n := admitted[i].Load()
			total += n
			if n > perSubject {
				t.Fatalf("user-%d admitted %d, beyond %d", i, n, perSubject)
			}
		}
		if total != customer {
			t.Errorf("admitted %d in all, want the customer's %d", total, customer)
		}
		if got := usedOf(t, f.engine, "acme", "", "api_calls", tiers.Day); got != total {
			t.Errorf("the customer's day counts %d, want %d admitted", got, total)
		}
		for _, i := range []int{0, 1, subjects / 2, subjects - 1} {
			if got, want := usedOf(t, f.engine, "acme", fmt.Sprintf("user-%d", i), "api_calls", tiers.Day), admitted[i].Load(); got != want {
				t.Errorf("user-%d's day counts %d, want %d", i, got, want)
			}
		}
	})
}

func perSubjectLimit(w tiers.Window, n int64) tiers.Limit {
	return perSubject(lim("api_calls", w, n))
}

// Idle subjects cost no memory: once their windows count nothing, what a
// hundred thousand subjects seen once held in the process is gone, and
// their leases are given back.
func TestIdleSubjectsFreeTheirMemory(t *testing.T) {
	// Not parallel: it reads the heap.
	ctx := context.Background()
	t.Run("short windows", func(t *testing.T) {
		const subjects = 100_000
		f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, false)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{lim("api_calls", tiers.Minute, 1_000_000),
			perSubjectLimit(tiers.Minute, 10), perSubjectLimit(tiers.Second, 5)})
		before := heap()
		for i := range subjects {
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, Subject: fmt.Sprintf("u-%d", i)})
			if err != nil || !d.Allowed {
				t.Fatalf("check %d: %+v, %v", i, d, err)
			}
		}
		held := heap() - before
		if keys := f.engine.Stats().ShortKeys; keys < 2*subjects {
			t.Fatalf("after %d subjects: %d short keys; want two each", subjects, keys)
		}
		// Two minutes on, a minute's window counts nothing.
		f.clock.Advance(2*time.Minute + time.Second)
		f.engine.EvictIdle()
		left := heap() - before
		t.Logf("%d subjects held %d KB; %d KB once idle", subjects, held/1024, left/1024)
		if keys := f.engine.Stats().ShortKeys; keys != 0 {
			t.Errorf("after the idle minutes: %d short keys, want none", keys)
		}
		if left > held/10 {
			t.Errorf("once idle, %d KB of the %d KB %d subjects held are still held", left/1024, held/1024, subjects)
		}
	})
	t.Run("leases", func(t *testing.T) {
		const subjects = 10_000
		f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, true)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{perSubjectLimit(tiers.Day, 100)})
		for i := range subjects {
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, Subject: fmt.Sprintf("u-%d", i)})
			if err != nil || !d.Allowed {
				t.Fatalf("check %d: %+v, %v", i, d, err)
			}
		}
		if n := f.engine.Stats().Leases.Leases; n != subjects {
			t.Fatalf("after %d subjects: %d leases", subjects, n)
		}
		// Leases idle for IdleAfter are given back by the flushes.
		f.clock.Advance(time.Minute)
		pool := f.leases
		for range int(quota.IdleAfter/quota.FlushEvery) + 2 {
			if err := pool.Flush(ctx, f.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.engine.Stats().Leases.Leases; n != 0 {
			t.Errorf("after the idle minute: %d leases, want none", n)
		}
		for _, i := range []int{0, subjects - 1} {
			if got := usedOf(t, f.engine, "acme", fmt.Sprintf("u-%d", i), "api_calls", tiers.Day); got != 1 {
				t.Errorf("u-%d's day counts %d once its lease is given back, want 1", i, got)
			}
		}
	})
}

// heap returns the bytes of the heap in use, after a collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// The store unreachable: a check of items fails open (allowed, degraded:
// the short windows alone count it) or closed (ErrUnavailable, and what
// its short windows took given back).
func TestCheckItemsStoreDown(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, closed := range []bool{false, true} {
			f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), closed, leases)
			f.catalog.PutMetric("api_calls", nil)
			f.catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 3)})
			f.catalog.PutCustomer("b", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 3), hard(tiers.Day, 100)})
			f.ledger.Err = errors.Join(tiers.ErrUnavailable)
			d, err := f.engine.Check(context.Background(), quota.Request{Items: []quota.Item{
				{Customer: "a", Metric: "api_calls", Cost: 2}, {Customer: "b", Metric: "api_calls", Cost: 2}}})
			switch {
			case closed && !errors.Is(err, tiers.ErrUnavailable):
				t.Errorf("closed: %+v, %v; want ErrUnavailable", d, err)
			case !closed && (err != nil || !d.Allowed || !d.Degraded || !d.Items[0].Allowed || !d.Items[1].Allowed):
				t.Errorf("open: %+v, %v; want both allowed, degraded", d, err)
			}
			f.ledger.Err = nil
			want := map[bool]int64{false: 2, true: 0}[closed]
			for _, c := range []string{"a", "b"} {
				if got := usedOf(t, f.engine, c, "", "api_calls", tiers.Second); got != want {
					t.Errorf("closed=%v: %s's second window counts %d, want %d", closed, c, got, want)
				}
			}
		}
	})
}

// Checks of two items of two customers (an Envoy request of two
// descriptors) from many clients, through two processes sharing one
// ledger with leases: "b" has room for 20, "a" for far more. Exactly 20
// checks pass, and "a" is charged for those 20 only.
func TestCheckItemsAcrossProcesses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := quotafake.NewClock(now)
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 10_000), hard(tiers.Day, 10_000)})
	catalog.PutCustomer("b", tiers.Anchor{}, []tiers.Limit{hard(tiers.Hour, 20)})
	store := quotafake.NewStore()
	engines, _ := leasedProcesses(store, catalog, clock)
	const workers, each = 8, 10
	var passed, denied atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				d, err := engines[(w+i)%2].Check(context.Background(), quota.Request{Items: []quota.Item{
					{Customer: "a", Metric: "api_calls", Cost: 1}, {Customer: "b", Metric: "api_calls", Cost: 1}}})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed != (d.Items[0].Allowed && d.Items[1].Allowed) {
					t.Errorf("allowed %v with items %v and %v", d.Allowed, d.Items[0].Allowed, d.Items[1].Allowed)
				}
				if d.Allowed {
					passed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 20 || denied.Load() != workers*each-20 {
		t.Errorf("%d checks passed, %d denied; want 20 and %d", passed.Load(), denied.Load(), workers*each-20)
	}
	for _, e := range engines {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	day, _ := quota.Bounds(tiers.Day, now, tiers.Anchor{})
	hour, _ := quota.Bounds(tiers.Hour, now, tiers.Anchor{})
	if got := store.Count(quota.CounterKey{Customer: "a", Metric: "api_calls", Window: tiers.Day, Start: day}); got != passed.Load() {
		t.Errorf("a's day counts %d, want the %d checks that passed", got, passed.Load())
	}
	if got := store.Count(quota.CounterKey{Customer: "b", Metric: "api_calls", Window: tiers.Hour, Start: hour}); got != 20 {
		t.Errorf("b's hour counts %d, want 20", got)
	}
	// Short windows are per process here: the minute counts of both
	// processes add up to the checks that passed.
	var minute int64
	for _, e := range engines {
		minute += usedOf(t, e, "a", "", "api_calls", tiers.Minute)
	}
	if minute != passed.Load() {
		t.Errorf("a's minute windows count %d in all, want %d", minute, passed.Load())
	}
}

// The engine's surface reads like the API, and its internals are one
// pipeline: at most 25 methods (exported and not), in the package's own
// files.
func TestEngineSurface(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Engine" {
					methods = append(methods, fn.Name.Name)
				}
			}
		}
	}
	if len(methods) < 10 {
		t.Fatalf("found %d methods of quota.Engine, want its whole surface: %v", len(methods), methods)
	}
	// 27: SetTotal, a gauge's set, and Entitlements, the paywall's read
	// (issue 32), are two of the API's verbs.
	if len(methods) > 27 {
		t.Errorf("quota.Engine has %d methods, want at most 27: %v", len(methods), methods)
	}
}

// A check of items with a request id is answered once: a repeat replays
// the first answer, items included, and charges nothing again; a repeat
// with other items is a conflict.
func TestCheckItemsRequestID(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{lim("api_calls", tiers.Day, 10), lim("exports", tiers.Day, 10)}, "api_calls", "exports")
		ctx := context.Background()
		r := quota.Request{Customer: "acme", RequestID: "job-1", Items: []quota.Item{item("api_calls", 2), item("exports", 3)}}
		first, err := f.engine.Check(ctx, r)
		if err != nil || !first.Allowed || first.Replayed {
			t.Fatalf("first: %+v, %v", first, err)
		}
		again, err := f.engine.Check(ctx, r)
		if err != nil || !again.Replayed || len(again.Items) != 2 || again.Items[1].Metric != "exports" ||
			again.Items[1].Limits[0].Used != 3 {
			t.Fatalf("repeat: %+v, %v; want the first answer replayed", again, err)
		}
		if got := usedOf(t, f.engine, "acme", "", "exports", tiers.Day); got != 3 {
			t.Errorf("exports counts %d after a repeat, want 3", got)
		}
		other := r
		other.Items = []quota.Item{item("api_calls", 2), item("exports", 4)}
		if _, err := f.engine.Check(ctx, other); !errors.Is(err, tiers.ErrConflict) {
			t.Errorf("the id with other items: %v, want a conflict", err)
		}
	})
}

// A request id is kept with the check's subject: the id reused for
// another subject is a conflict, not a replay (of a check or a refund).
func TestRequestIDKeepsTheSubject(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{lim("api_calls", tiers.Day, 10), perSubjectLimit(tiers.Day, 5)}, "api_calls")
		ctx := context.Background()
		r := quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, Subject: "alice", RequestID: "r1"}
		if d, err := f.engine.Check(ctx, r); err != nil || !d.Allowed {
			t.Fatalf("alice: %+v, %v", d, err)
		}
		if d, err := f.engine.Check(ctx, r); err != nil || !d.Replayed {
			t.Fatalf("alice again: %+v, %v; want a replay", d, err)
		}
		r.Subject = "bob"
		if _, err := f.engine.Check(ctx, r); !errors.Is(err, tiers.ErrConflict) {
			t.Errorf("the id for bob: %v, want a conflict", err)
		}
		refund := quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 1, Subject: "alice", RequestID: "r1"}
		if _, err := f.engine.Refund(ctx, refund); err != nil {
			t.Fatal(err)
		}
		refund.Subject = "bob"
		if _, err := f.engine.Refund(ctx, refund); !errors.Is(err, tiers.ErrConflict) {
			t.Errorf("a refund for bob of alice's check: %v, want a conflict", err)
		}
	})
}

// Forced checks (Request.Force: the work is done) from many clients
// through two processes sharing one ledger with leases, against a day
// limit of 20: every unit is counted, once, exactly 20 checks are allowed (those within the limit),
// the others are denied though counted, and history counts them all as
// used, none denied.
func TestForceAcrossProcesses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := quotafake.NewClock(now)
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("a", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 20)})
	store := quotafake.NewStore()
	engines, histories := leasedProcesses(store, catalog, clock)
	const workers, each = 8, 10
	var passed, denied atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				d, err := engines[(w+i)%2].Check(context.Background(), quota.Request{Customer: "a", Metric: "api_calls", Cost: 1, Force: true})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					passed.Add(1)
					continue
				}
				denied.Add(1)
				if w := d.Limits[0]; w.State != quota.StateExceeded || w.Used <= 20 || w.Remaining != 0 {
					t.Errorf("a denied forced check's window %+v, want it exceeded, counting more than 20", w)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 20 || denied.Load() != workers*each-20 {
		t.Errorf("%d forced checks allowed, %d denied; want 20 and %d", passed.Load(), denied.Load(), workers*each-20)
	}
	var used, deniedDays int64
	for i, e := range engines {
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		days, err := histories[i].FindHistory(context.Background(), "a", "api_calls", time.Time{}, now.AddDate(1, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			used, deniedDays = used+d.Used, deniedDays+d.Denied
		}
	}
	day, _ := quota.Bounds(tiers.Day, now, tiers.Anchor{})
	if got := store.Count(quota.CounterKey{Customer: "a", Metric: "api_calls", Window: tiers.Day, Start: day}); got != workers*each {
		t.Errorf("a's day counts %d, want every one of the %d forced units", got, workers*each)
	}
	if used != workers*each || deniedDays != 0 {
		t.Errorf("history: %d used, %d denied; want %d used, 0 denied", used, deniedDays, workers*each)
	}
	// A forced check cannot be kept under a request id, nor count nothing.
	for _, r := range []quota.Request{
		{Customer: "a", Metric: "api_calls", Cost: 1, Force: true, RequestID: "r1"},
		{Customer: "a", Metric: "api_calls", Cost: 1, Force: true, DryRun: true},
		{Customer: "a", Items: []quota.Item{item("api_calls", 1)}, Force: true, Look: true},
	} {
		if err := r.Validate(); !errors.As(err, new(*tiers.ValidationError)) || !strings.Contains(err.Error(), "force") {
			t.Errorf("%+v: %v, want a validation error naming force", r, err)
		}
	}
}

// leasedProcesses returns the engines of two processes of store, each
// with a lease pool and a history of its own.
func leasedProcesses(store *quotafake.Store, catalog *quotafake.Catalog, clock *quotafake.Clock) ([]*quota.Engine, []*quotafake.History) {
	engines := make([]*quota.Engine, 2)
	histories := make([]*quotafake.History, 2)
	for i := range engines {
		ledger := store.Process()
		histories[i] = quotafake.NewHistory()
		engines[i] = quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
			History: histories[i], Clock: clock, Leases: lease.NewPool(ledger, clock), StoreTimeout: testStoreTimeout})
	}
	return engines, histories
}

// countWindows returns how many of the windows keep says yes to.
func countWindows(ws []quota.WindowResult, keep func(quota.WindowResult) bool) int {
	n := 0
	for _, w := range ws {
		if keep(w) {
			n++
		}
	}
	return n
}
