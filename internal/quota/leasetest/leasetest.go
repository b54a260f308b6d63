// Package leasetest is the contract of lease.Leaser, the store side of
// leases, written once as a test suite, so that the PostgreSQL store and
// the in-memory test double are held to the same protocol: grants within
// the bound, settlements and reports, calls numbered so that a late copy
// changes nothing, resolutions of calls whose answer was lost, recalls of
// live holders only, resets, the notice that units came back to a counter
// a process was refused, and a subject's counters kept apart from their
// customer's; and, under the lease pools of several processes at once,
// sets of charges taken all or nothing within every bound, every unit
// accounted for once the pools settle.
package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// Harness is what the suite needs of an implementation.
type Harness struct {
	// New returns a fresh store in which customers "acme" and "globex"
	// and metric "api_calls" exist, the metric with a capacity in the day
	// window (so that leases count in its global usage).
	New func(t *testing.T) Store
}

// Store is one store shared by processes.
type Store interface {
	// Process starts a process on the store: alive, hearing recalls and
	// notices that units came back, until it is killed.
	Process(t *testing.T) *Process
	// Count returns counter k as stored: admitted units and units held
	// in leases.
	Count(t *testing.T, k quota.CounterKey) int64
	// Reset zeroes customer's api_calls counters and ends their leases.
	Reset(t *testing.T, customer string)
	// SetTotal sets customer's api_calls total to used and ends the
	// total's leases; it returns the total's admitted units before.
	SetTotal(t *testing.T, customer string, used int64) int64
}

// Process is one quotad process's view of the store.
type Process struct {
	lease.Store
	// Recalls and Freed receive the counters other processes recalled
	// units of, and those units came back to after this process was
	// refused (see lease.Leaser.Lease).
	Recalls <-chan quota.CounterKey
	Freed   <-chan quota.CounterKey
	// Kill ends the process as a SIGKILL would, and returns once the
	// other processes see it dead.
	Kill func()
}

// At is the moment the suite's calls are about: its counters are day
// windows of that day.
var At = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"grants take the need and a block, within the bound", grantsWithinBound},
		{"a batch makes each grant as it would be made alone", batchOfGrants},
		{"a counter a batch creates is granted as if it had been there, empty", freshCounters},
		{"a settlement gives back once and ends the lease", settleOnce},
		{"a late copy of a call changes nothing", lateCopies},
		{"a resolution tells what a call did and fences off one that never arrived", resolution},
		{"reports set what reads leave out; refunds give back admitted units only", reportsAndRefunds},
		{"a reset ends leases and keeps their calls fenced", resetEndsLeases},
		{"recalls reach live holders only; dead holders' units stay counted", recallLiveOnly},
		{"a process refused with nothing to recall hears when units come back", freedNotices},
		{"a subject's leases and its customer's are apart: grants, reports, resolutions, settlements, refunds",
			subjectsApart},
		{"recalls and notices name a subject's counter or its customer's, never both", subjectNotices},
		{"a reset of a metric ends its subjects' leases with its customer's", resetEndsSubjectLeases},
		{"a set of a total ends its leases, fenced, and no other window's", setTotalEndsItsLeases},
		{"the lease pools of several processes take sets all or nothing, within every bound", poolSets},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h.New(t))
		})
	}
}

// key is customer's api_calls counter of At's day.
func key(customer string) quota.CounterKey {
	start, _ := quota.Bounds(tiers.Day, At, tiers.Anchor{})
	return quota.CounterKey{Customer: customer, Metric: "api_calls", Window: tiers.Day, Start: start}
}

// subjectKey is customer's subject's api_calls counter of At's day.
func subjectKey(customer, subject string) quota.CounterKey {
	k := key(customer)
	k.Subject = subject
	return k
}

// Subjects as tricky as they come: slashes (a notification's key is
// slash-separated), colons, at signs.
const (
	subject1 = "org/7:jane.doe@example.com"
	subject2 = "10.0.0.0/8"
)

// refund gives back cost units of counter k through p, and returns what
// k counted admitted before.
func refund(t *testing.T, p *Process, k quota.CounterKey, cost int64) int64 {
	t.Helper()
	out := make([]quota.Outcome, 1)
	cs := []quota.Charge{{Customer: k.Customer, Metric: k.Metric, Subject: k.Subject, Cost: cost, At: At,
		Spans: []quota.Span{{Key: k}}, Out: out}}
	if err := p.GiveBack(context.Background(), cs); err != nil {
		t.Fatalf("give back %d of %v: %v", cost, k, err)
	}
	return out[0].Used
}

// global is api_calls's global usage in At's day.
func global() quota.GlobalKey {
	start, _ := quota.Bounds(tiers.Day, At, tiers.Anchor{})
	return quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: start}
}

// grant makes r on p and returns it with its results.
func grant(t *testing.T, p *Process, r lease.Request) lease.Request {
	t.Helper()
	rs := []lease.Request{r}
	if err := p.Lease(context.Background(), rs); err != nil {
		t.Fatalf("lease %+v: %v", r, err)
	}
	return rs[0]
}

func settle(t *testing.T, p *Process, s ...lease.Settlement) {
	t.Helper()
	if err := p.Settle(context.Background(), s); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

func report(t *testing.T, p *Process, s ...lease.Settlement) []lease.Settlement {
	t.Helper()
	if err := p.Report(context.Background(), s); err != nil {
		t.Fatalf("report: %v", err)
	}
	return s
}

func resolve(t *testing.T, p *Process, k quota.CounterKey, seq int64) lease.Resolution {
	t.Helper()
	d := []lease.Resolution{{Key: k, Seq: seq}}
	if err := p.Resolve(context.Background(), d); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return d[0]
}

// read returns k's admitted units as p reads them.
func read(t *testing.T, p *Process, k quota.CounterKey) int64 {
	t.Helper()
	used, _, err := p.Read(context.Background(), []quota.CounterKey{k}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return used[0]
}

// globalUsage returns api_calls's global usage in At's day.
func globalUsage(t *testing.T, p *Process) int64 {
	t.Helper()
	_, g, err := p.Read(context.Background(), nil, []quota.GlobalKey{global()})
	if err != nil {
		t.Fatal(err)
	}
	return g[0]
}

// mustHearNext waits for the next counter on ch, which must be k.
func mustHearNext(t *testing.T, ch <-chan quota.CounterKey, k quota.CounterKey, what string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != k {
			t.Fatalf("%s: heard of %+v, want %+v", what, got, k)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s of %v", what, k)
	}
}

// mustHear waits for k on ch.
func mustHear(t *testing.T, ch <-chan quota.CounterKey, k quota.CounterKey, what string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == k {
				return
			}
		case <-timeout:
			t.Fatalf("no %s of %v", what, k)
		}
	}
}

func grantsWithinBound(t *testing.T, s Store) {
	a := s.Process(t)
	k := key("acme")
	ask := lease.Request{Key: k, Seq: 1, Bound: 20, Need: 3, Extra: 5, InFlight: 3, Global: global()}
	if r := grant(t, a, ask); r.Granted != 8 || r.Used != 8 || r.Others != 0 || r.Lost {
		t.Fatalf("first grant: %+v, want 8 granted", r)
	}
	ask.Leased = true
	for i, want := range []struct{ granted, used int64 }{{8, 16}, {4, 20}, {0, 20}} {
		ask.Seq = int64(2 + i)
		if r := grant(t, a, ask); r.Granted != want.granted || r.Used != want.used {
			t.Errorf("grant %d: %+v, want %d granted, counter %d", ask.Seq, r, want.granted, want.used)
		}
	}
	if g := globalUsage(t, a); g != 20 {
		t.Errorf("global usage = %d, want the 20 units granted", g)
	}
	// A need above the bound is never granted, and creates nothing.
	other := key("globex")
	if r := grant(t, a, lease.Request{Key: other, Seq: 5, Bound: 2, Need: 3, Extra: 1}); r.Granted != 0 || r.Used != 0 || r.Lost {
		t.Errorf("need above the bound: %+v", r)
	}
	if n := s.Count(t, other); n != 0 {
		t.Errorf("the counter of a need above its bound counts %d", n)
	}
}

func batchOfGrants(t *testing.T, s Store) {
	a := s.Process(t)
	acme, globex := key("acme"), key("globex")
	grant(t, a, lease.Request{Key: acme, Seq: 1, Bound: 10, Need: 5, InFlight: 5})
	batch := []lease.Request{
		{Key: acme, Seq: 2, Bound: 10, Need: 3, Extra: 4, InFlight: 3, Leased: true}, // 5 left: takes them
		{Key: globex, Seq: 3, Bound: 2, Need: 3, Extra: 1},                           // the need above the bound
	}
	if err := a.Lease(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if r := batch[0]; r.Granted != 5 || r.Used != 10 || r.Lost || r.Gone {
		t.Errorf("acme in the batch: %+v, want 5 granted, counter 10", r)
	}
	if r := batch[1]; r.Granted != 0 || r.Used != 0 || r.Lost || r.Gone {
		t.Errorf("globex in the batch: %+v, want nothing granted", r)
	}
	if n, m := s.Count(t, acme), s.Count(t, globex); n != 10 || m != 0 {
		t.Errorf("counters %d and %d, want 10 and 0", n, m)
	}
	// The batch again, as a late copy: nothing.
	if err := a.Lease(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if batch[0].Granted != 0 || s.Count(t, acme) != 10 {
		t.Errorf("a late copy of the batch: %+v, counter %d; want nothing granted, 10", batch[0], s.Count(t, acme))
	}
}

func freshCounters(t *testing.T, s Store) {
	a := s.Process(t)
	nextDay := func(customer string) quota.CounterKey {
		k := key(customer)
		k.Start = k.Start.AddDate(0, 0, 1)
		return k
	}
	old, fresh, clamped, lost := key("acme"), key("globex"), nextDay("acme"), nextDay("globex")
	grant(t, a, lease.Request{Key: old, Seq: 1, Bound: 10, Need: 2, InFlight: 2})
	batch := []lease.Request{
		{Key: old, Seq: 2, Bound: 10, Need: 1, Extra: 3, InFlight: 1, Leased: true},
		{Key: fresh, Seq: 3, Bound: 10, Need: 1, Extra: 3, InFlight: 1, Global: global()},
		{Key: clamped, Seq: 4, Bound: 5, Need: 2, Extra: 9, InFlight: 2}, // the block cut at the bound
		{Key: lost, Seq: 5, Bound: 10, Need: 1, Leased: true},            // a lease of a counter that was not there
	}
	want := []struct {
		granted, used int64
		lost          bool
	}{{4, 6, false}, {4, 4, false}, {5, 5, false}, {0, 0, true}}
	// late: the batch is a late copy, whose answers tell only what it
	// granted (nothing).
	check := func(what string, late bool) {
		t.Helper()
		for i, r := range batch {
			w := want[i]
			if late {
				w.granted, r.Used = 0, w.used
			}
			if r.Granted != w.granted || r.Used != w.used || r.Lost != w.lost || r.Others != 0 || r.Gone {
				t.Errorf("%s, call %d: %+v; want %d granted, counter %d, lost %v", what, i, r, w.granted, w.used, w.lost)
			}
			if n := s.Count(t, r.Key); n != w.used {
				t.Errorf("%s, call %d: the counter counts %d, want %d", what, i, n, w.used)
			}
		}
		if g := globalUsage(t, a); g != 4 {
			t.Errorf("%s: global usage %d, want the 4 units granted on it", what, g)
		}
	}
	if err := a.Lease(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	check("the batch", false)
	// A late copy: nothing more (and the lost call still lost).
	if err := a.Lease(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	check("a late copy of the batch", true)
	// The counters created are leased as any other.
	if r := grant(t, a, lease.Request{Key: fresh, Seq: 6, Bound: 10, Need: 2, Extra: 2, InFlight: 2, Leased: true,
		Global: global()}); r.Granted != 4 || r.Used != 8 {
		t.Errorf("a grant on a counter the batch created: %+v, want 4 granted, counter 8", r)
	}
	if r := grant(t, a, lease.Request{Key: lost, Seq: 7, Bound: 10, Need: 1, InFlight: 1}); r.Granted != 1 || r.Used != 1 || r.Lost {
		t.Errorf("a new lease where one was lost: %+v, want 1 granted, counter 1", r)
	}
}

func settleOnce(t *testing.T, s Store) {
	a := s.Process(t)
	k := key("acme")
	grant(t, a, lease.Request{Key: k, Seq: 1, Bound: 20, Need: 3, Extra: 5, InFlight: 3, Global: global()})
	settle(t, a, lease.Settlement{Key: k, Seq: 2, Unused: 6, Global: global()})
	settle(t, a, lease.Settlement{Key: k, Seq: 3, Unused: 6, Global: global()})
	if n, g := s.Count(t, k), globalUsage(t, a); n != 2 || g != 2 {
		t.Errorf("after settling 6 of 8 twice: counter %d, global usage %d; want 2 and 2", n, g)
	}
	if r := grant(t, a, lease.Request{Key: k, Seq: 4, Bound: 20, Need: 1, Leased: true}); !r.Lost || r.Granted != 0 {
		t.Errorf("a grant on a settled lease: %+v, want lost", r)
	}
	// A new lease of the same counter begins.
	if r := grant(t, a, lease.Request{Key: k, Seq: 5, Bound: 20, Need: 1, Extra: 1, InFlight: 1}); r.Granted != 2 || r.Used != 4 {
		t.Errorf("a new lease: %+v, want 2 granted, counter 4", r)
	}
}

func lateCopies(t *testing.T, s Store) {
	a, b := s.Process(t), s.Process(t)
	k := key("acme")
	first := lease.Request{Key: k, Seq: 10, Bound: 100, Need: 1, Extra: 9, InFlight: 1}
	grant(t, a, first)
	// The same grant again, and an older one: nothing.
	for _, seq := range []int64{10, 9} {
		r := first
		r.Seq = seq
		if r = grant(t, a, r); r.Granted != 0 {
			t.Errorf("a late copy of grant %d granted %d", seq, r.Granted)
		}
	}
	report(t, a, lease.Settlement{Key: k, Seq: 11, Unused: 4})
	// An older report, and an older settlement: nothing.
	if set := report(t, a, lease.Settlement{Key: k, Seq: 10, Unused: 9}); set[0].Lost {
		t.Error("a late report finds the lease lost")
	}
	settle(t, a, lease.Settlement{Key: k, Seq: 9, Unused: 4})
	if n, used := s.Count(t, k), read(t, b, k); n != 10 || used != 6 {
		t.Errorf("after late copies: counter %d, read by another process %d; want 10 and 6 (a reports 4 unused)", n, used)
	}
}

func resolution(t *testing.T, s Store) {
	a := s.Process(t)
	k := key("acme")
	// A grant that was applied, its answer lost: asked twice, the same.
	grant(t, a, lease.Request{Key: k, Seq: 10, Bound: 100, Need: 2, Extra: 8, InFlight: 3})
	for range 2 {
		if d := resolve(t, a, k, 10); !d.Applied || !d.Leased || d.Granted != 10 || d.Unused != 11 {
			t.Errorf("resolution of an applied grant: %+v, want applied, leased, 10 granted, 11 unused", d)
		}
	}
	// A grant that never arrived: not applied, and fenced off, asked
	// twice the same; when it arrives, it grants nothing.
	for range 2 {
		if d := resolve(t, a, k, 11); d.Applied || !d.Leased || d.Unused != 11 {
			t.Errorf("resolution of a grant that never arrived: %+v, want not applied, the lease held with 11 unused", d)
		}
	}
	if r := grant(t, a, lease.Request{Key: k, Seq: 11, Bound: 100, Need: 1, Extra: 9, InFlight: 1, Leased: true}); r.Granted != 0 {
		t.Errorf("a fenced-off grant arrived and granted %d", r.Granted)
	}
	// The first grant of a counter that has no row yet, fenced off.
	other := key("globex")
	if d := resolve(t, a, other, 20); d.Applied || d.Leased {
		t.Errorf("resolution of a first grant that never arrived: %+v", d)
	}
	if r := grant(t, a, lease.Request{Key: other, Seq: 20, Bound: 100, Need: 1, Extra: 9, InFlight: 1}); r.Granted != 0 {
		t.Errorf("a fenced-off first grant arrived and granted %d", r.Granted)
	}
	// A settlement that was applied.
	settle(t, a, lease.Settlement{Key: k, Seq: 12, Unused: 8})
	if d := resolve(t, a, k, 12); !d.Applied || d.Leased {
		t.Errorf("resolution of an applied settlement: %+v, want applied, the lease ended", d)
	}
	if n, m := s.Count(t, k), s.Count(t, other); n != 2 || m != 0 {
		t.Errorf("counters %d and %d, want 2 (10 granted, 8 given back) and 0", n, m)
	}
}

func reportsAndRefunds(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := s.Process(t), s.Process(t)
	k := key("acme")
	grant(t, a, lease.Request{Key: k, Seq: 1, Bound: 100, Need: 1, Extra: 9, InFlight: 1})
	if used := read(t, b, k); used != 0 {
		t.Errorf("b reads %d while a reports all 10 unused, want 0", used)
	}
	if set := report(t, a, lease.Settlement{Key: k, Seq: 2, Unused: 4}); set[0].Lost {
		t.Fatal("report: lost")
	}
	if used := read(t, b, k); used != 6 {
		t.Errorf("b reads %d after a reported 4 unused of 10, want 6", used)
	}
	out := make([]quota.Outcome, 1)
	refund := []quota.Charge{{Customer: "acme", Metric: "api_calls", Cost: 100, At: At, Spans: []quota.Span{{Key: k}}, Out: out}}
	if err := b.GiveBack(ctx, refund); err != nil || out[0].Used != 6 {
		t.Fatalf("give back: %+v, %v; want 6 admitted before", out, err)
	}
	if n := s.Count(t, k); n != 4 {
		t.Errorf("counter = %d after the refund, want a's 4 still reserved", n)
	}
}

func resetEndsLeases(t *testing.T, s Store) {
	a := s.Process(t)
	k := key("acme")
	grant(t, a, lease.Request{Key: k, Seq: 5, Bound: 100, Need: 1, Extra: 9, InFlight: 1})
	s.Reset(t, "acme")
	if n := s.Count(t, k); n != 0 {
		t.Errorf("counter = %d after the reset", n)
	}
	if set := report(t, a, lease.Settlement{Key: k, Seq: 6, Unused: 4}); !set[0].Lost {
		t.Error("a report after the reset does not find the lease lost")
	}
	if r := grant(t, a, lease.Request{Key: k, Seq: 7, Bound: 100, Need: 1, Leased: true}); !r.Lost {
		t.Errorf("a grant on a reset lease: %+v, want lost", r)
	}
	if d := resolve(t, a, k, 8); d.Applied || d.Leased {
		t.Errorf("resolution after the reset: %+v, want not applied, no lease", d)
	}
	// A copy of the grant from before the reset arrives: nothing.
	if r := grant(t, a, lease.Request{Key: k, Seq: 5, Bound: 100, Need: 1, Extra: 9, InFlight: 1}); r.Granted != 0 {
		t.Errorf("a late copy from before the reset granted %d", r.Granted)
	}
	// A new lease begins.
	if r := grant(t, a, lease.Request{Key: k, Seq: 9, Bound: 100, Need: 1, Extra: 1, InFlight: 1}); r.Granted != 2 || r.Used != 2 {
		t.Errorf("a new lease after the reset: %+v, want 2 granted", r)
	}
}

// totalKey is customer's api_calls total: one counter, from the epoch.
func totalKey(customer string) quota.CounterKey {
	return quota.CounterKey{Customer: customer, Metric: "api_calls", Window: tiers.Total, Start: quota.TotalStart}
}

func setTotalEndsItsLeases(t *testing.T, s Store) {
	a := s.Process(t)
	k, day := totalKey("acme"), key("acme")
	grant(t, a, lease.Request{Key: k, Seq: 4, Bound: 100, Need: 1, Extra: 9, InFlight: 1})
	report(t, a, lease.Settlement{Key: k, Seq: 5, Unused: 8})
	grant(t, a, lease.Request{Key: day, Seq: 6, Bound: 100, Need: 1, Extra: 9, InFlight: 1})
	if before := s.SetTotal(t, "acme", 40); before != 2 {
		t.Errorf("the set replaced %d admitted units, want 2 (8 reported leased unused)", before)
	}
	if n := s.Count(t, k); n != 40 {
		t.Errorf("total = %d after the set, want 40", n)
	}
	if n := s.Count(t, day); n != 10 {
		t.Errorf("day = %d after the set of the total, want 10 as it was", n)
	}
	if set := report(t, a, lease.Settlement{Key: k, Seq: 7, Unused: 4}); !set[0].Lost {
		t.Error("a report after the set does not find the total's lease lost")
	}
	if set := report(t, a, lease.Settlement{Key: day, Seq: 8, Unused: 4}); set[0].Lost {
		t.Error("the set of the total ended the day's lease")
	}
	// A copy of the grant from before the set arrives: nothing.
	if r := grant(t, a, lease.Request{Key: k, Seq: 4, Bound: 100, Need: 1, Extra: 9, InFlight: 1}); r.Granted != 0 {
		t.Errorf("a late copy from before the set granted %d", r.Granted)
	}
	// A new lease begins from the count set.
	if r := grant(t, a, lease.Request{Key: k, Seq: 9, Bound: 100, Need: 1, Extra: 1, InFlight: 1}); r.Granted != 2 || r.Used != 42 {
		t.Errorf("a new lease after the set: %+v, want 2 granted, used 42", r)
	}
	// Set above the bound: nothing is granted, nothing lost.
	s.SetTotal(t, "acme", 150)
	if r := grant(t, a, lease.Request{Key: k, Seq: 10, Bound: 100, Need: 1, InFlight: 1}); r.Granted != 0 {
		t.Errorf("a grant above the bound: %+v, want none", r)
	}
	if n := s.Count(t, k); n != 150 {
		t.Errorf("total = %d after a refused grant, want 150", n)
	}
}

func recallLiveOnly(t *testing.T, s Store) {
	alive, dead, asker := s.Process(t), s.Process(t), s.Process(t)
	k := key("acme")
	grant(t, alive, lease.Request{Key: k, Seq: 1, Bound: 10, Need: 1, Extra: 3, InFlight: 1}) // 4 unused
	grant(t, dead, lease.Request{Key: k, Seq: 1, Bound: 10, Need: 1, Extra: 5, InFlight: 1})  // 6 unused
	dead.Kill()
	r := grant(t, asker, lease.Request{Key: k, Seq: 1, Bound: 10, Need: 2, Extra: 1, Recall: true})
	if r.Granted != 0 || r.Used != 10 || r.Others != 4 || !r.RecallHelps() {
		t.Fatalf("grant on a full counter: %+v, want nothing granted and the live holder's 4 units to recall", r)
	}
	mustHear(t, alive.Recalls, k, "recall")
	if n, err := asker.Recall(context.Background(), k); err != nil || n != 1 {
		t.Errorf("recall: %d leases (%v), want the live one", n, err)
	}
	// Reads count the dead process's units as used.
	if used := read(t, asker, k); used != 6 {
		t.Errorf("read = %d, want 6: the live holder's 4 unused are not admitted, the dead one's 6 stay counted", used)
	}
}

func freedNotices(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := s.Process(t), s.Process(t)
	k := key("acme")
	// a takes the whole bound and reports it used; b is refused with
	// nothing to recall.
	grant(t, a, lease.Request{Key: k, Seq: 1, Bound: 5, Need: 5, InFlight: 5})
	report(t, a, lease.Settlement{Key: k, Seq: 2, Unused: 0})
	refused := func(seq int64) {
		t.Helper()
		if r := grant(t, b, lease.Request{Key: k, Seq: seq, Bound: 5, Need: 1, Recall: true}); r.Granted != 0 || r.Others != 0 {
			t.Fatalf("b's grant: %+v, want refused with nothing to recall", r)
		}
	}
	refused(1)
	// A refund gives units back: b hears of it.
	refund := []quota.Charge{{Customer: "acme", Metric: "api_calls", Cost: 1, At: At, Spans: []quota.Span{{Key: k}},
		Out: make([]quota.Outcome, 1)}}
	if err := a.GiveBack(ctx, refund); err != nil {
		t.Fatal(err)
	}
	mustHear(t, b.Freed, k, "notice after a refund")
	// a takes that unit back and reports it unused; b is refused, with a
	// unit to recall this time; a reports it used, b is refused with
	// nothing to recall; a reports it unused again: b hears.
	grant(t, a, lease.Request{Key: k, Seq: 3, Bound: 5, Need: 1, InFlight: 1, Leased: true})
	report(t, a, lease.Settlement{Key: k, Seq: 4, Unused: 0})
	refused(2)
	report(t, a, lease.Settlement{Key: k, Seq: 5, Unused: 1})
	mustHear(t, b.Freed, k, "notice after a report of more unused units")
	// a reports it used; b is refused; a settles a unit: b hears.
	report(t, a, lease.Settlement{Key: k, Seq: 6, Unused: 0})
	refused(3)
	settle(t, a, lease.Settlement{Key: k, Seq: 7, Unused: 1})
	mustHear(t, b.Freed, k, "notice after a settlement")
	if n := s.Count(t, k); n != 4 {
		t.Errorf("counter = %d, want 4", n)
	}
}

func subjectsApart(t *testing.T, s Store) {
	a, b := s.Process(t), s.Process(t)
	own, sub, other := key("acme"), subjectKey("acme", subject1), subjectKey("acme", subject2)
	keys := []quota.CounterKey{own, sub, other}
	// One batch grants all three, each within its own bound, with the
	// same call number: each lease numbers its own calls. Only the
	// customer's counts in the metric's global window, as the lease pool
	// asks (a check's units count there once, with its customer's charge).
	batch := []lease.Request{
		{Key: own, Seq: 1, Bound: 100, Need: 2, Extra: 8, InFlight: 2, Global: global()},
		{Key: sub, Seq: 1, Bound: 5, Need: 1, Extra: 9, InFlight: 1},
		{Key: other, Seq: 1, Bound: 3, Need: 3, InFlight: 3},
	}
	if err := a.Lease(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ granted, used int64 }{{10, 10}, {5, 5}, {3, 3}} {
		if r := batch[i]; r.Granted != want.granted || r.Used != want.used || r.Others != 0 || r.Lost || r.Gone {
			t.Errorf("grant %d of the batch: %+v, want %d granted, counter %d", i, r, want.granted, want.used)
		}
	}
	steps := []struct {
		name string
		call func(t *testing.T)
		// Each counter (the customer's, the subject's, the other
		// subject's) as stored, and as b reads it (admitted units).
		count, read [3]int64
	}{
		{"the batch", func(*testing.T) {}, [3]int64{10, 5, 3}, [3]int64{0, 0, 0}},
		{"a report on the subject's lease", func(t *testing.T) {
			if set := report(t, a, lease.Settlement{Key: sub, Seq: 2, Unused: 2}); set[0].Lost {
				t.Error("the subject's lease lost")
			}
		}, [3]int64{10, 5, 3}, [3]int64{0, 3, 0}},
		{"a report on the customer's", func(t *testing.T) {
			if set := report(t, a, lease.Settlement{Key: own, Seq: 2, Unused: 4}); set[0].Lost {
				t.Error("the customer's lease lost")
			}
		}, [3]int64{10, 5, 3}, [3]int64{6, 3, 0}},
		{"a grant on the subject's lease, within its own bound", func(t *testing.T) {
			r := grant(t, a, lease.Request{Key: sub, Seq: 3, Bound: 8, Need: 1, Extra: 1, InFlight: 1, Leased: true})
			if r.Granted != 2 || r.Used != 7 {
				t.Errorf("grant: %+v, want 2 granted, counter 7", r)
			}
		}, [3]int64{10, 7, 3}, [3]int64{6, 5, 0}},
		{"a resolution of the subject's applied grant", func(t *testing.T) {
			if d := resolve(t, a, sub, 3); !d.Applied || !d.Leased || d.Granted != 2 || d.Unused != 2 {
				t.Errorf("resolution: %+v, want applied, leased, 2 granted, 2 unused", d)
			}
		}, [3]int64{10, 7, 3}, [3]int64{6, 5, 0}},
		{"a resolution fences off the customer's call 3; the subject's call 4 is made", func(t *testing.T) {
			if d := resolve(t, a, own, 3); d.Applied || !d.Leased || d.Unused != 4 {
				t.Errorf("resolution: %+v, want not applied, leased with 4 unused", d)
			}
			if r := grant(t, a, lease.Request{Key: own, Seq: 3, Bound: 100, Need: 1, InFlight: 1, Leased: true}); r.Granted != 0 {
				t.Errorf("the customer's fenced-off grant granted %d", r.Granted)
			}
			r := grant(t, a, lease.Request{Key: sub, Seq: 4, Bound: 8, Need: 1, InFlight: 1, Leased: true})
			if r.Granted != 1 || r.Used != 8 {
				t.Errorf("the subject's grant: %+v, want 1 granted, counter 8", r)
			}
		}, [3]int64{10, 8, 3}, [3]int64{6, 7, 0}},
		{"a settlement of the subject's lease gives back to it alone", func(t *testing.T) {
			settle(t, a, lease.Settlement{Key: sub, Seq: 5, Unused: 1})
		}, [3]int64{10, 7, 3}, [3]int64{6, 7, 0}},
		{"a late copy of that settlement; the customer's lease goes on, the subject's is ended", func(t *testing.T) {
			settle(t, a, lease.Settlement{Key: sub, Seq: 5, Unused: 1})
			if set := report(t, a, lease.Settlement{Key: own, Seq: 4, Unused: 3}); set[0].Lost {
				t.Error("the customer's lease lost")
			}
			if set := report(t, a, lease.Settlement{Key: sub, Seq: 6, Unused: 1}); !set[0].Lost {
				t.Error("a report on the settled subject's lease does not find it lost")
			}
		}, [3]int64{10, 7, 3}, [3]int64{7, 7, 0}},
		{"a refund of the subject's counter gives back its admitted units", func(t *testing.T) {
			if before := refund(t, b, sub, 100); before != 7 {
				t.Errorf("refund: %d admitted before, want 7", before)
			}
		}, [3]int64{10, 0, 3}, [3]int64{7, 0, 0}},
		{"a refund of the customer's counter leaves what a holds unused", func(t *testing.T) {
			if before := refund(t, b, own, 100); before != 7 {
				t.Errorf("refund: %d admitted before, want 7", before)
			}
		}, [3]int64{3, 0, 3}, [3]int64{0, 0, 0}},
	}
	for _, step := range steps {
		step.call(t)
		var count, reads [3]int64
		for i, k := range keys {
			count[i], reads[i] = s.Count(t, k), read(t, b, k)
		}
		if count != step.count || reads != step.read {
			t.Errorf("%s: counters %v, read %v; want %v, read %v", step.name, count, reads, step.count, step.read)
		}
		if g := globalUsage(t, b); g != 10 {
			t.Errorf("%s: global usage %d, want the customer's 10", step.name, g)
		}
	}
}

func subjectNotices(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := s.Process(t), s.Process(t)
	own, sub := key("acme"), subjectKey("acme", subject1)
	// a takes the whole bound of both and reports it used; b is refused
	// both with nothing to recall.
	for _, k := range []quota.CounterKey{own, sub} {
		grant(t, a, lease.Request{Key: k, Seq: 1, Bound: 5, Need: 5, InFlight: 5})
		report(t, a, lease.Settlement{Key: k, Seq: 2, Unused: 0})
		if r := grant(t, b, lease.Request{Key: k, Seq: 1, Bound: 5, Need: 1, Recall: true}); r.Granted != 0 || r.Others != 0 {
			t.Fatalf("b's grant of %v: %+v, want refused with nothing to recall", k, r)
		}
	}
	// A unit of the subject's comes back: b hears of the subject's
	// counter, not of the customer's; then the other way round.
	refund(t, a, sub, 1)
	mustHearNext(t, b.Freed, sub, "notice after a refund of the subject's")
	refund(t, a, own, 1)
	mustHearNext(t, b.Freed, own, "notice after a refund of the customer's")
	// a takes the subject's unit back and reports it unused: b, refused,
	// recalls it from a, which hears of the subject's counter.
	grant(t, a, lease.Request{Key: sub, Seq: 3, Bound: 5, Need: 1, InFlight: 1, Leased: true})
	r := grant(t, b, lease.Request{Key: sub, Seq: 2, Bound: 5, Need: 1, Recall: true})
	if r.Granted != 0 || r.Others != 1 || !r.RecallHelps() {
		t.Fatalf("b's grant of the subject's: %+v, want nothing granted and a's unit to recall", r)
	}
	mustHearNext(t, a.Recalls, sub, "recall of the subject's")
	if n, err := b.Recall(ctx, sub); err != nil || n != 1 {
		t.Errorf("recall of the subject's: %d leases (%v), want a's", n, err)
	}
	mustHearNext(t, a.Recalls, sub, "recall of the subject's")
	// a holds nothing unused of the customer's: nothing to recall there.
	if n, err := b.Recall(ctx, own); err != nil || n != 0 {
		t.Errorf("recall of the customer's: %d leases (%v), want none", n, err)
	}
	// And the other way round.
	grant(t, a, lease.Request{Key: own, Seq: 3, Bound: 5, Need: 1, InFlight: 1, Leased: true})
	if r := grant(t, b, lease.Request{Key: own, Seq: 2, Bound: 5, Need: 1, Recall: true}); r.Others != 1 {
		t.Fatalf("b's grant of the customer's: %+v, want a's unit to recall", r)
	}
	mustHearNext(t, a.Recalls, own, "recall of the customer's")
}

func resetEndsSubjectLeases(t *testing.T, s Store) {
	a := s.Process(t)
	keys := []quota.CounterKey{key("acme"), subjectKey("acme", subject1), subjectKey("acme", subject2),
		subjectKey("globex", subject1)}
	for _, k := range keys {
		grant(t, a, lease.Request{Key: k, Seq: 1, Bound: 100, Need: 1, Extra: 9, InFlight: 1})
	}
	s.Reset(t, "acme")
	for i, k := range keys {
		want, lost := int64(0), true
		if k.Customer == "globex" {
			want, lost = 10, false
		}
		if n := s.Count(t, k); n != want {
			t.Errorf("counter %d = %d after acme's reset, want %d", i, n, want)
		}
		if set := report(t, a, lease.Settlement{Key: k, Seq: 2, Unused: 4}); set[0].Lost != lost {
			t.Errorf("a report on lease %d after acme's reset: lost %v, want %v", i, set[0].Lost, lost)
		}
	}
	// A new lease of a subject's counter begins.
	if r := grant(t, a, lease.Request{Key: keys[1], Seq: 3, Bound: 100, Need: 1, Extra: 1, InFlight: 1}); r.Granted != 2 || r.Used != 2 {
		t.Errorf("a new lease after the reset: %+v, want 2 granted", r)
	}
}
