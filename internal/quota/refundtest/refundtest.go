// Package refundtest is the contract of refunds, written once as a test
// suite and run against engines over every ledger (the in-memory test
// double and PostgreSQL), so that a refund means the same on both: a
// refund naming a check's request id gives back at most what that check
// charged, once, whatever the processes and concurrency; an id that
// names no admitted check of the customer is refused; every refund is in
// the audit log.
package refundtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// Harness is what the suite needs of an implementation.
type Harness struct {
	// New returns a fresh store in which metrics "api_calls" and "images"
	// exist, and customers "acme" and "globex" on a plan limiting each
	// metric to 1000 a day, hard.
	New func(t *testing.T) Store
}

// Store is one store shared by quotad processes.
type Store interface {
	// Engine starts a quotad process on the store, on clock: an engine
	// whose long windows are charged to the ledger directly, or leased
	// from it. It is closed when the test ends.
	Engine(t *testing.T, clock quota.Clock, leases bool) *quota.Engine
	// Refunds returns the refunds' audit events of customer, oldest
	// first, as the audit log keeps them.
	Refunds(t *testing.T, customer string) []quota.RefundEvent
}

// At is the moment the suite's calls are about.
var At = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Limit is the daily limit of each metric of the suite's customers.
const Limit = 1000

// Run runs the suite against h, each case with long windows charged
// directly and with leases.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"a refund gives back at most what its check charged", clampedToTheCharge},
		{"a refund repeated gives back once; another refund of the check is a conflict", once},
		{"a refund naming no admitted check of its customer is refused", noSuchCheck},
		{"a refund of a check of items gives back what its item charged", itemOfACheck},
		{"concurrent refunds of one check from two processes give back at most its charge", concurrent},
		{"a refund in another process gives back the check's units, reported or not", inAnotherProcess},
		{"a refund without a request id gives back its cost, as used allows", withoutRequestID},
		{"every refund but a repeat is in the audit log", audited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, leases := range []bool{false, true} {
				t.Run(map[bool]string{false: "direct", true: "leases"}[leases], func(t *testing.T) {
					t.Parallel()
					s := h.New(t)
					clock := quotafake.NewClock(At)
					tt.run(t, &fixture{s: s, clock: clock, leases: leases, engine: s.Engine(t, clock, leases)})
				})
			}
		})
	}
}

// fixture is one process on a fresh store.
type fixture struct {
	s      Store
	clock  *quotafake.Clock
	leases bool
	engine *quota.Engine
}

// check charges cost units of metric to customer under id, and fails the
// test unless it is admitted (want true) or denied (want false).
func (f *fixture) check(t *testing.T, customer, metric string, cost int64, id string, want bool) {
	t.Helper()
	d, err := f.engine.Check(context.Background(), quota.Request{Customer: customer, Metric: metric, Cost: cost, RequestID: id})
	if err != nil {
		t.Fatalf("check %s %s*%d (%q): %v", customer, metric, cost, id, err)
	}
	if d.Allowed != want {
		t.Fatalf("check %s %s*%d (%q): allowed %v, want %v", customer, metric, cost, id, d.Allowed, want)
	}
}

// used returns customer's day count of metric.
func (f *fixture) used(t *testing.T, customer, metric string) int64 {
	t.Helper()
	_, usage, err := f.engine.Usage(context.Background(), customer, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if u.Metric == metric && u.Window == tiers.Day {
			return u.Used
		}
	}
	t.Fatalf("no day window of %s in %+v", metric, usage)
	return 0
}

// refund refunds r (of acme and api_calls unless it says otherwise) and
// returns what it gave back.
func (f *fixture) refund(t *testing.T, r quota.RefundRequest) (int64, error) {
	t.Helper()
	if r.Customer == "" {
		r.Customer = "acme"
	}
	if r.Metric == "" {
		r.Metric = "api_calls"
	}
	res, err := f.engine.Refund(context.Background(), r)
	return res.Refunded, err
}

func clampedToTheCharge(t *testing.T, f *fixture) {
	f.check(t, "acme", "api_calls", 30, "", true)
	f.check(t, "acme", "api_calls", 10, "c1", true)
	got, err := f.refund(t, quota.RefundRequest{Cost: 25, RequestID: "c1"})
	if err != nil || got != 10 {
		t.Errorf("refund of 25 naming a check of 10 = %d, %v; want 10", got, err)
	}
	if got := f.used(t, "acme", "api_calls"); got != 30 {
		t.Errorf("used after = %d, want 30: the other check's units stay", got)
	}
}

func once(t *testing.T, f *fixture) {
	f.check(t, "acme", "api_calls", 30, "", true)
	f.check(t, "acme", "api_calls", 10, "c1", true)
	f.check(t, "acme", "api_calls", 10, "c2", true)
	// A refund of all the check charged and more, repeated (a client
	// retrying it): the check's units go back once.
	for i, want := range []int64{10, 0, 0} {
		got, err := f.refund(t, quota.RefundRequest{Cost: 25, RequestID: "c1"})
		if err != nil || got != want {
			t.Errorf("refund #%d = %d, %v; want %d", i+1, got, err, want)
		}
	}
	// Part of a check, then the rest of it: another refund of the check.
	if got, err := f.refund(t, quota.RefundRequest{Cost: 6, RequestID: "c2"}); err != nil || got != 6 {
		t.Errorf("refund of 6 of c2 = %d, %v; want 6", got, err)
	}
	for _, r := range []quota.RefundRequest{{Cost: 4, RequestID: "c2"}, {Cost: 25, RequestID: "c1"}, {Cost: 6, RequestID: "c1"}} {
		got, err := f.refund(t, r)
		if r.Cost == 25 && (err != nil || got != 0) || r.Cost != 25 && !errors.Is(err, tiers.ErrConflict) {
			t.Errorf("refund of %d more of %s = %d, %v; want nothing given back", r.Cost, r.RequestID, got, err)
		}
	}
	if got := f.used(t, "acme", "api_calls"); got != 34 {
		t.Errorf("used after = %d, want 34", got)
	}
}

func noSuchCheck(t *testing.T, f *fixture) {
	f.check(t, "acme", "api_calls", 30, "", true)
	f.check(t, "acme", "api_calls", Limit, "denied", false)
	if _, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: 5,
		RequestID: "dry", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	f.check(t, "globex", "api_calls", 10, "theirs", true)
	f.check(t, "acme", "api_calls", 10, "old", true)
	f.clock.Advance(24*time.Hour + time.Minute)
	f.check(t, "acme", "api_calls", 10, "images?", true)
	tests := []struct {
		name string
		r    quota.RefundRequest
		want error
	}{
		{"never used", quota.RefundRequest{Cost: 1, RequestID: "nope"}, tiers.ErrCheckNotFound},
		{"a denied check", quota.RefundRequest{Cost: 1, RequestID: "denied"}, tiers.ErrCheckNotFound},
		{"a dry run", quota.RefundRequest{Cost: 1, RequestID: "dry"}, tiers.ErrCheckNotFound},
		{"another customer's check", quota.RefundRequest{Cost: 1, RequestID: "theirs"}, tiers.ErrCheckNotFound},
		{"a check older than 24 hours", quota.RefundRequest{Cost: 1, RequestID: "old"}, tiers.ErrCheckNotFound},
		{"a check of another metric", quota.RefundRequest{Metric: "images", Cost: 1, RequestID: "images?"}, tiers.ErrConflict},
	}
	for _, tt := range tests {
		if got, err := f.refund(t, tt.r); !errors.Is(err, tt.want) {
			t.Errorf("%s: refund = %d, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	if got := f.used(t, "acme", "api_calls"); got != 10 {
		t.Errorf("used today = %d, want 10: nothing given back", got)
	}
}

func itemOfACheck(t *testing.T, f *fixture) {
	d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", RequestID: "i1",
		Items: []quota.Item{{Metric: "api_calls", Cost: 4}, {Metric: "images", Cost: 6}}})
	if err != nil || !d.Allowed {
		t.Fatalf("check of items = %+v, %v", d, err)
	}
	f.check(t, "acme", "images", 20, "", true)
	got, err := f.refund(t, quota.RefundRequest{Metric: "images", Cost: 100, RequestID: "i1"})
	if err != nil || got != 6 {
		t.Errorf("refund of images naming the check = %d, %v; want 6", got, err)
	}
	if got, want := f.used(t, "acme", "images"), int64(20); got != want {
		t.Errorf("images used = %d, want %d", got, want)
	}
	if got, want := f.used(t, "acme", "api_calls"), int64(4); got != want {
		t.Errorf("api_calls used = %d, want %d", got, want)
	}
}

// inAnotherProcess refunds, in a second process, a check the first
// admitted: with leases, from a block whose use the first has not yet
// reported to the ledger (which counts it as held unused), and which it
// may not report when asked (a process can be slow).
func inAnotherProcess(t *testing.T, f *fixture) {
	other := f.s.Engine(t, f.clock, f.leases)
	f.check(t, "acme", "api_calls", 5, "", true)
	f.check(t, "acme", "api_calls", 10, "c1", true)
	res, err := other.Refund(context.Background(), quota.RefundRequest{Customer: "acme", Metric: "api_calls",
		Cost: 10, RequestID: "c1"})
	if err != nil || res.Refunded != 10 {
		t.Fatalf("refund in the other process = %d, %v; want 10", res.Refunded, err)
	}
	if got := f.used(t, "acme", "api_calls"); got != 5 {
		t.Errorf("used after = %d, want 5", got)
	}
}

func concurrent(t *testing.T, f *fixture) {
	other := f.s.Engine(t, f.clock, f.leases)
	f.check(t, "acme", "api_calls", 50, "", true)
	f.check(t, "acme", "api_calls", 10, "c1", true)
	const each = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	var errs []error
	for i := range 2 * each {
		e := []*quota.Engine{f.engine, other}[i%2]
		cost := int64(10)
		if i%4 == 3 {
			cost = 7 // another refund of the check: one of the two kinds wins
		}
		wg.Go(func() {
			res, err := e.Refund(context.Background(), quota.RefundRequest{Customer: "acme", Metric: "api_calls",
				Cost: cost, RequestID: "c1"})
			mu.Lock()
			defer mu.Unlock()
			total += res.Refunded
			if err != nil && !errors.Is(err, tiers.ErrConflict) {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if total != 10 && total != 7 {
		t.Errorf("refunds gave back %d in all, want the one refund that claimed the check (10 or 7)", total)
	}
	if got := f.used(t, "acme", "api_calls"); got != 60-total {
		t.Errorf("used after = %d, want %d", got, 60-total)
	}
	if got := len(f.s.Refunds(t, "acme")); got != 1 {
		t.Errorf("%d refunds audited, want 1: the one that gave back", got)
	}
}

func withoutRequestID(t *testing.T, f *fixture) {
	f.check(t, "acme", "api_calls", 30, "", true)
	for _, want := range []int64{25, 5} {
		got, err := f.refund(t, quota.RefundRequest{Cost: 25})
		if err != nil || got != want {
			t.Errorf("refund of 25 = %d, %v; want %d", got, err, want)
		}
	}
}

func audited(t *testing.T, f *fixture) {
	f.check(t, "acme", "api_calls", 30, "c1", true)
	refunds := []quota.RefundRequest{
		{Cost: 50, RequestID: "c1", Actor: "gateway"},
		{Cost: 50, RequestID: "c1", Actor: "gateway"}, // a replay: gives nothing back
		{Cost: 3, Actor: "ops"},
	}
	for _, r := range refunds {
		if _, err := f.refund(t, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.refund(t, quota.RefundRequest{Cost: 1, RequestID: "nope", Actor: "gateway"}); !errors.Is(err, tiers.ErrCheckNotFound) {
		t.Fatalf("refund naming no check: %v", err)
	}
	want := []quota.RefundEvent{
		{At: At, Actor: "gateway", Customer: "acme", Metric: "api_calls", RequestID: "c1", Cost: 50, Refunded: 30},
		{At: At, Actor: "ops", Customer: "acme", Metric: "api_calls", Cost: 3, Refunded: 0},
	}
	got := f.s.Refunds(t, "acme")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refunds audited = %+v, want %+v", got, want)
	}
}
