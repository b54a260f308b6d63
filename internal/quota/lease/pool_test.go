package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// These tests put the lease pool in the interleavings a model test that
// runs one step at a time cannot reach: store calls that overlap checks in
// progress, and store calls that fail after committing.

var leaseAt = time.Date(2026, 11, 10, 10, 30, 0, 0, time.UTC)

// leaseSpan is acme's api_calls window w at leaseAt under a hard limit.
func leaseSpan(w tiers.Window, limit int64) quota.Span {
	start, end := quota.Bounds(w, leaseAt, tiers.Anchor{})
	return quota.Span{Key: quota.CounterKey{Customer: "acme", Metric: "api_calls", Window: w, Start: start}, End: end,
		Rule: quota.Rule{Mode: tiers.Hard, Limit: limit, Size: limit, Threshold: limit, Ceiling: tiers.MaxLimit}}
}

func leaseCharge(cost int64, spans ...quota.Span) *quota.Charge {
	return &quota.Charge{Customer: "acme", Metric: "api_calls", Cost: cost, At: leaseAt, Spans: spans}
}

// hookedLedger runs hooks inside the store calls of one process.
type hookedLedger struct {
	*quotafake.Ledger
	onLease  func(ctx context.Context, r *lease.Request)
	onTake   func()
	onSettle func(ctx context.Context, s []lease.Settlement) error // replaces Settle when set
}

func (h *hookedLedger) Lease(ctx context.Context, r []lease.Request) error {
	if h.onLease != nil {
		for i := range r {
			h.onLease(ctx, &r[i])
		}
	}
	return h.Ledger.Lease(ctx, r)
}

func (h *hookedLedger) Take(ctx context.Context, cs []quota.Charge) (bool, error) {
	if h.onTake != nil {
		h.onTake()
	}
	return h.Ledger.Take(ctx, cs)
}

func (h *hookedLedger) Settle(ctx context.Context, s []lease.Settlement) error {
	if h.onSettle != nil {
		return h.onSettle(ctx, s)
	}
	return h.Ledger.Settle(ctx, s)
}

func newHookedPool(l *quotafake.Ledger) (*hookedLedger, *lease.Pool) {
	h := &hookedLedger{Ledger: l}
	p := lease.NewPool(h, quotafake.NewClock(leaseAt))
	p.Wait = func(context.Context, int) error { return nil }
	return h, p
}

func mustTake(t *testing.T, p *lease.Pool, c *quota.Charge) bool {
	t.Helper()
	ok, err := p.Take(context.Background(), quotafake.One(c, make([]quota.Outcome, len(c.Spans))))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// mustAdmitted closes p, settling every lease, and checks that the store
// then counts want units in k: those admitted.
func mustAdmitted(t *testing.T, p *lease.Pool, store interface{ Count(quota.CounterKey) int64 }, k quota.CounterKey, want int64) {
	t.Helper()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := store.Count(k); n != want {
		t.Errorf("the %s counts %d, every lease settled; want %d", k.Window, n, want)
	}
}

// A lease settled (here: recalled) while a check holds units of it in
// flight: the check is then denied in another window, and the units it
// puts back go to the store, which still counts them.
func TestLeaseSettledWhileUnitsInFlight(t *testing.T) {
	t.Parallel()
	h, pool := newHookedPool(quotafake.NewLedger())
	hour, day := leaseSpan(tiers.Hour, 1000), leaseSpan(tiers.Day, 5)
	h.onLease = func(_ context.Context, r *lease.Request) {
		if r.Key == day.Key {
			if err := pool.Yield(context.Background(), hour.Key); err != nil {
				t.Error(err)
			}
		}
	}
	if mustTake(t, pool, leaseCharge(10, hour, day)) {
		t.Fatal("a cost of 10 passed a day limit of 5")
	}
	mustAdmitted(t, pool, h, hour.Key, 0)
}

// Units a check puts back while another check's refill of the same lease
// is in flight are still there when the grant lands.
func TestLeaseRefillKeepsUnitsPutBack(t *testing.T) {
	t.Parallel()
	h, pool := newHookedPool(quotafake.NewLedger())
	hour, day := leaseSpan(tiers.Hour, 1000), leaseSpan(tiers.Day, 2)
	if !mustTake(t, pool, leaseCharge(1, hour)) { // the lease holds 10 more
		t.Fatal("the first check was denied")
	}
	dayAsked, dayGo := make(chan struct{}), make(chan struct{})
	hourAsked, hourGo := make(chan struct{}), make(chan struct{})
	h.onLease = func(_ context.Context, r *lease.Request) {
		switch r.Key {
		case day.Key:
			close(dayAsked)
			<-dayGo
		case hour.Key:
			close(hourAsked)
			<-hourGo
		}
	}
	first, second := make(chan bool), make(chan bool)
	go func() { first <- mustTake(t, pool, leaseCharge(5, hour, day)) }() // 5 hour units in flight, then denied by the day
	<-dayAsked
	go func() { second <- mustTake(t, pool, leaseCharge(8, hour)) }() // 5 left: refills
	<-hourAsked
	close(dayGo)
	if <-first {
		t.Fatal("a cost of 5 passed a day limit of 2")
	}
	close(hourGo) // the grant lands after the 5 units were put back
	if !<-second {
		t.Fatal("the refilling check was denied")
	}
	mustAdmitted(t, pool, h, hour.Key, 9)
}

// Undo gives units back where Take got them: to the ledger for a span it
// decided directly, even when that span ended within its limit (another
// process settled meanwhile).
func TestLeaseUndoGivesBackWhereUnitsCameFrom(t *testing.T) {
	t.Parallel()
	store := quotafake.NewStore()
	_, other := newHookedPool(store.Process()) // answers no recall
	h, pool := newHookedPool(store.Process())
	month := leaseSpan(tiers.Month, 1000)
	month.Rule = quota.Rule{Mode: tiers.Soft, Limit: 1000, Size: 1000, Threshold: 1100, Ceiling: tiers.MaxLimit}
	mustTake(t, other, leaseCharge(1, month))  // holds 10 unused
	mustTake(t, pool, leaseCharge(985, month)) // holds 4 unused: the counter is at 1000
	h.onTake = func() {
		if err := other.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}
	c := leaseCharge(5, month) // beyond the limit as leases see it: the ledger decides
	if !mustTake(t, pool, c) {
		t.Fatal("denied within the soft threshold")
	}
	before := store.Count(month.Key)
	if err := pool.Undo(context.Background(), quotafake.One(c, c.Out)); err != nil {
		t.Fatal(err)
	}
	if got := store.Count(month.Key); got != before-5 {
		t.Errorf("after undoing 5 units the month counts %d, want %d", got, before-5)
	}
}

// A reset told to this process (Forget) while its refill is in flight:
// the store granted the lease after the reset, so the grant goes back
// whole and the check starts again; nothing stays reserved.
func TestLeaseResetDuringRefill(t *testing.T) {
	t.Parallel()
	h, pool := newHookedPool(quotafake.NewLedger())
	day := leaseSpan(tiers.Day, 1000)
	resets := 0
	h.onLease = func(ctx context.Context, _ *lease.Request) {
		if resets == 0 {
			resets++
			if err := h.Ledger.Reset(ctx, "ops", "acme", "api_calls", leaseAt); err != nil {
				t.Error(err)
			}
			pool.Forget("acme", "api_calls")
		}
	}
	if !mustTake(t, pool, leaseCharge(1, day)) {
		t.Fatal("denied")
	}
	mustAdmitted(t, pool, h, day.Key, 1)
	if s := pool.Stats(); s.Leases != 0 || s.Units != 0 {
		t.Errorf("after Close: %+v, want no lease and no unit held", s)
	}
}

// A settlement that fails after the store committed it: the units it
// carried are not spent again (the store gave them back; another process
// may have them now), and the pool settles again before taking any.
func TestLeaseFailedSettlementIsNotSpent(t *testing.T) {
	t.Parallel()
	store := quotafake.NewStore()
	h, pool := newHookedPool(store.Process())
	rival := store.Process()
	day := leaseSpan(tiers.Day, 1000)
	if !mustTake(t, pool, leaseCharge(1, day)) { // holds 10 unused
		t.Fatal("denied")
	}
	h.onSettle = func(ctx context.Context, s []lease.Settlement) error {
		h.onSettle = nil
		if err := h.Ledger.Settle(ctx, s); err != nil {
			return err
		}
		return tiers.ErrUnavailable // the answer is lost after the commit
	}
	if err := pool.Yield(context.Background(), day.Key); !errors.Is(err, tiers.ErrUnavailable) {
		t.Fatalf("release: %v, want the settlement's failure", err)
	}
	if n := pool.Unused(day.Key); n != 0 {
		t.Errorf("after a failed settlement the pool offers %d units, want none", n)
	}
	if ok, err := rival.Take(context.Background(), quotafake.One(leaseCharge(999, day), make([]quota.Outcome, 1))); err != nil || !ok {
		t.Fatalf("another process took the rest: %v %v", ok, err)
	}
	if mustTake(t, pool, leaseCharge(1, day)) {
		t.Error("admitted a unit beyond a full hard limit")
	}
	mustAdmitted(t, pool, store, day.Key, 1000)
}

// A grant whose answer is lost after the store applied it: the check
// fails, and the pool learns what was granted before its next call on the
// lease, one round trip; the units serve the next checks, and none stays
// counted that no check was admitted from.
func TestLeaseLostGrantIsRecovered(t *testing.T) {
	t.Parallel()
	h, pool := newHookedPool(quotafake.NewLedger())
	day := leaseSpan(tiers.Day, 1000) // blocks of 10
	h.Faults = func(op quotafake.LeaseOp) quotafake.Fault {
		h.Faults = nil
		return quotafake.LoseAnswer
	}
	if _, err := pool.Take(context.Background(), quotafake.One(leaseCharge(1, day), make([]quota.Outcome, 1))); !errors.Is(err, tiers.ErrUnavailable) {
		t.Fatalf("take whose grant's answer was lost: %v, want unavailable", err)
	}
	if s := pool.Stats(); s.InDoubt != 1 {
		t.Fatalf("stats after the lost answer: %+v, want the lease in doubt", s)
	}
	if n := h.Count(day.Key); n != 11 {
		t.Fatalf("the store counts %d, want the 11 units it granted", n)
	}
	c := leaseCharge(11, day)
	if !mustTake(t, pool, c) {
		t.Fatal("denied")
	}
	if c.Trips != 1 {
		t.Errorf("the next check made %d store calls, want 1: the resolution, no new grant", c.Trips)
	}
	mustAdmitted(t, pool, h, day.Key, 11)
}

// A grant that reaches the store only after the pool gave up on it (a copy
// on a connection that went silent): the pool's resolution fenced it off,
// so it grants nothing when it arrives, and the units the pool asked for
// again are the only ones counted.
func TestLeaseLateGrantIsFencedOff(t *testing.T) {
	t.Parallel()
	store := quotafake.NewStore()
	h, pool := newHookedPool(store.Process())
	day := leaseSpan(tiers.Day, 1000)
	h.Faults = func(op quotafake.LeaseOp) quotafake.Fault {
		h.Faults = nil
		return quotafake.Delay
	}
	if _, err := pool.Take(context.Background(), quotafake.One(leaseCharge(1, day), make([]quota.Outcome, 1))); !errors.Is(err, tiers.ErrUnavailable) {
		t.Fatalf("take whose grant was held up: %v, want unavailable", err)
	}
	if !mustTake(t, pool, leaseCharge(1, day)) { // resolves (not applied: fenced), then grants 11
		t.Fatal("denied")
	}
	if n := store.DeliverLate(); n != 1 {
		t.Fatalf("%d late calls delivered, want the held-up grant", n)
	}
	if n := store.Count(day.Key); n != 11 {
		t.Errorf("the store counts %d after the late copy arrived, want the 11 of the second grant", n)
	}
	mustAdmitted(t, pool, h, day.Key, 1)
}

// A check waits for another check's refill of the same lease only as long
// as its context allows, then fails as an outage would; a check the lease
// holds enough for is admitted meanwhile.
func TestLeaseWaitEndsWithTheCheck(t *testing.T) {
	t.Parallel()
	h, pool := newHookedPool(quotafake.NewLedger())
	day := leaseSpan(tiers.Day, 1000)
	if !mustTake(t, pool, leaseCharge(1, day)) { // holds 10
		t.Fatal("denied")
	}
	asked, release := make(chan struct{}), make(chan struct{})
	h.onLease = func(context.Context, *lease.Request) {
		close(asked)
		<-release
	}
	refilled := make(chan bool)
	go func() { refilled <- mustTake(t, pool, leaseCharge(20, day)) }() // takes the 10, asks for 10 more
	<-asked
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := pool.Take(ctx, quotafake.One(leaseCharge(5, day), make([]quota.Outcome, 1))); !errors.Is(err, tiers.ErrUnavailable) {
		t.Errorf("a check behind a stuck refill: %v, want unavailable once its context ended", err)
	}
	close(release)
	if !<-refilled {
		t.Fatal("the refilling check was denied")
	}
	if !mustTake(t, pool, leaseCharge(5, day)) {
		t.Error("denied with units held")
	}
	mustAdmitted(t, pool, h, day.Key, 26)
}

// A hard counter the store refused with no other process holding units of
// it: the next checks that need more than the lease holds are denied
// without a store call, until the store says units came back (here: a
// refund by another process, once this one reported that it holds none
// unused); then the pool asks again.
func TestLeaseDeniesFromMemory(t *testing.T) {
	t.Parallel()
	store := quotafake.NewStore()
	l := store.Process()
	pool := lease.NewPool(l, quotafake.NewClock(leaseAt))
	l.OnFreed(pool.Freed)
	other := store.Process()
	day := leaseSpan(tiers.Day, 5)
	if !mustTake(t, pool, leaseCharge(5, day)) {
		t.Fatal("denied within the limit")
	}
	first := leaseCharge(1, day)
	if mustTake(t, pool, first) || first.Trips != 1 {
		t.Fatalf("the first check beyond the limit: %d store calls, want denied after 1", first.Trips)
	}
	for range 3 {
		c := leaseCharge(1, day)
		if mustTake(t, pool, c) || c.Trips != 0 {
			t.Fatalf("a check at a full counter: %d store calls, want denied from memory", c.Trips)
		}
	}
	if s := pool.Stats(); s.DeniedFromMemory != 3 {
		t.Errorf("DeniedFromMemory = %d, want 3", s.DeniedFromMemory)
	}
	if err := pool.Flush(context.Background(), leaseAt); err != nil { // reports 0 unused
		t.Fatal(err)
	}
	refund := leaseCharge(2, day)
	if err := other.GiveBack(context.Background(), quotafake.One(refund, make([]quota.Outcome, 1))); err != nil {
		t.Fatal(err)
	}
	again := leaseCharge(2, day)
	if !mustTake(t, pool, again) || again.Trips != 1 {
		t.Errorf("after a refund of 2: %d store calls, want admitted after asking", again.Trips)
	}
	mustAdmitted(t, pool, store, day.Key, 5)
}

// A set of a customer's charge and its subject's counts its units in the
// metric's global window once: the customer's charge lists the window,
// the subject's spans only name it (where spare capacity is measured). So
// the lease of the subject's counter counts none of its grants there,
// while the customer's counts its grant, cost and block, until settled.
func TestLeaseOfASubjectCountsNothingInGlobalWindows(t *testing.T) {
	t.Parallel()
	l := quotafake.NewLedger()
	pool := lease.NewPool(l, quotafake.NewClock(leaseAt))
	own := leaseSpan(tiers.Day, 1000) // blocks of 10
	g := quota.GlobalKey{Metric: "api_calls", Window: tiers.Day, Start: own.Key.Start}
	own.Global = g
	subject := own
	subject.Key.Subject = "alice"
	acme, alice := leaseCharge(3, own), leaseCharge(3, subject)
	acme.Globals, alice.Subject = []quota.GlobalKey{g}, "alice"
	set := []quota.Charge{*acme, *alice}
	for i := range set {
		set[i].Out = make([]quota.Outcome, 1)
	}
	if ok, err := pool.Take(context.Background(), set); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if got := l.Global(g); got != 13 {
		t.Errorf("global usage %d while acme's lease holds 10 unused, want 13: the set's 3 once, and acme's block", got)
	}
	mustAdmitted(t, pool, l, subject.Key, 3)
	if got := l.Global(g); got != 3 {
		t.Errorf("global usage %d, every lease settled; want the set's 3, once", got)
	}
}

// A process that may have been taken for dead (SuspectAll: its lock
// session was lost) spends nothing from its leases before the store says
// they still hold: a lease the others reclaimed meanwhile is dropped, and
// the check takes its units from the store. Every admitted unit stays
// counted.
func TestLeaseSuspectedAllIsNotSpentOnceReclaimed(t *testing.T) {
	t.Parallel()
	store := quotafake.NewStore()
	l := store.Process()
	_, pool := newHookedPool(l)
	day := leaseSpan(tiers.Day, 1000)
	// Another process runs: leases are reported.
	store.Process()
	if !mustTake(t, pool, leaseCharge(1, day)) { // holds 10 unused
		t.Fatal("denied")
	}
	// Idle, the lease reports its 10 unused (its check is answered).
	for range 4 {
		if err := pool.Flush(context.Background(), leaseAt); err != nil {
			t.Fatal(err)
		}
	}
	if held, unused := store.Lease(l, day.Key); !held || unused != 10 {
		t.Fatalf("reported: held %t, %d unused; want 10", held, unused)
	}
	store.Reclaim(l)
	pool.SuspectAll()
	if !mustTake(t, pool, leaseCharge(1, day)) {
		t.Fatal("denied")
	}
	mustAdmitted(t, pool, store, day.Key, 2)
}
