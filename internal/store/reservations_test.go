package store_test

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// reserveFixture is an engine over PostgreSQL, on a manual clock, for
// customer acme on a plan with the given limits of api_calls.
func reserveFixture(t *testing.T, at time.Time, leases bool, limits ...tiers.Limit) (*quota.Engine, *quotafake.Clock, *store.DB) {
	t.Helper()
	db := MustOpen(t)
	ctx := context.Background()
	for i := range limits {
		limits[i].Metric = "api_calls"
		if limits[i].Mode == 0 {
			limits[i].Mode = tiers.Hard
		}
	}
	if _, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: limits}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "p", Metadata: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	clock := quotafake.NewClock(at)
	e := quota.New(quota.Options{Catalog: tiers.NewCache(db.Catalog, 0), Counts: db.Ledger, Requests: db.Ledger, Maintenance: db.Ledger, Audits: db.Audit,
		History: db.History, Clock: clock,
		Leases: leasesOf(leases, db.Ledger, clock), Reservations: db.Reservations, StoreTimeout: 30 * time.Second})
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e, clock, db
}

// usageByWindow reads acme's usage of api_calls by window.
func usageByWindow(t *testing.T, e *quota.Engine) map[tiers.Window]int64 {
	t.Helper()
	_, us, err := e.Usage(context.Background(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[tiers.Window]int64{}
	for _, u := range us {
		out[u.Window] = u.Used
	}
	return out
}

func mustReserve(t *testing.T, e *quota.Engine, cost int64, ttl time.Duration) quota.ReserveResult {
	t.Helper()
	r, err := e.Reserve(context.Background(), quota.ReserveRequest{Customer: "acme", Metric: "api_calls", Cost: cost, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || r.ID == "" {
		t.Fatalf("reserve of %d denied: %+v", cost, r)
	}
	return r
}

// A held reservation expires on the engine's clock: not a millisecond
// before its expiry, and at it, everything goes back, once; a commit then
// is ErrReservationExpired.
func TestReservationExpiresOnTheEngineClock(t *testing.T) {
	t.Parallel()
	for _, leases := range []bool{false, true} {
		t.Run(map[bool]string{false: "ledger", true: "leases"}[leases], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e, clock, _ := reserveFixture(t, day0.Add(10*time.Hour), leases, tiers.Limit{Window: tiers.Day, Limit: 1000})
			r := mustReserve(t, e, 100, time.Minute)
			if got := usageByWindow(t, e)[tiers.Day]; got != 100 {
				t.Fatalf("day usage while held = %d, want 100", got)
			}
			clock.Advance(time.Minute - time.Millisecond)
			if n, err := e.ExpireReservations(ctx); err != nil || n != 0 {
				t.Fatalf("sweep before the expiry released %d (%v)", n, err)
			}
			if rsv, err := e.Reservation(ctx, r.ID); err != nil || rsv.State != quota.ReservationHeld {
				t.Fatalf("before the expiry: %+v %v, want held", rsv, err)
			}
			clock.Advance(time.Millisecond)
			if n, err := e.ExpireReservations(ctx); err != nil || n != 1 {
				t.Fatalf("sweep at the expiry released %d (%v), want 1", n, err)
			}
			if n, err := e.ExpireReservations(ctx); err != nil || n != 0 {
				t.Fatalf("a second sweep released %d (%v), want 0", n, err)
			}
			if rsv, err := e.Reservation(ctx, r.ID); err != nil || rsv.State != quota.ReservationExpired {
				t.Fatalf("after the expiry: %+v %v, want expired", rsv, err)
			}
			if got := usageByWindow(t, e)[tiers.Day]; got != 0 {
				t.Errorf("day usage after expiry = %d, want 0", got)
			}
			if _, err := e.Commit(ctx, r.ID, 10); !errors.Is(err, tiers.ErrReservationExpired) {
				t.Errorf("commit after expiry: %v, want ErrReservationExpired", err)
			}
			if err := e.ReleaseReservation(ctx, r.ID); err != nil {
				t.Errorf("release after expiry: %v, want nothing to do", err)
			}
			if got := usageByWindow(t, e)[tiers.Day]; got != 0 {
				t.Errorf("day usage after a late commit and release = %d, want 0", got)
			}
		})
	}
}

// A commit counts in the window instances that held the estimate, only
// while they are current: a minute that rolled over before the commit
// neither gets units back nor counts the extra, and the day, still
// current, keeps exactly the actual cost.
func TestReservationCommitAfterShortWindowRolledOver(t *testing.T) {
	t.Parallel()
	limits := func() []tiers.Limit {
		return []tiers.Limit{{Window: tiers.Minute, Limit: 1000, Algorithm: tiers.FixedWindow}, {Window: tiers.Day, Limit: 10000}}
	}
	for _, tc := range []struct {
		name             string
		after            time.Duration // from 10:00:30 to the commit
		actual           int64
		minute, day      int64 // usage after the commit
		released, over   int64
		reservedInMinute bool
	}{
		{name: "same minute, less", after: 10 * time.Second, actual: 40, minute: 40, day: 40, released: 60},
		{name: "same minute, more", after: 10 * time.Second, actual: 150, minute: 150, day: 150},
		{name: "minute rolled over, less", after: 40 * time.Second, actual: 40, minute: 0, day: 40, released: 60},
		{name: "minute rolled over, more", after: 40 * time.Second, actual: 150, minute: 0, day: 150},
		{name: "minute rolled over, nothing", after: 40 * time.Second, actual: 0, minute: 0, day: 0, released: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, clock, _ := reserveFixture(t, day0.Add(10*time.Hour+30*time.Second), true, limits()...)
			r := mustReserve(t, e, 100, time.Hour)
			if got := usageByWindow(t, e); got[tiers.Minute] != 100 || got[tiers.Day] != 100 {
				t.Fatalf("usage while held = %v, want 100 in both", got)
			}
			clock.Advance(tc.after)
			res, err := e.Commit(context.Background(), r.ID, tc.actual)
			if err != nil {
				t.Fatal(err)
			}
			if res.Committed != tc.actual || res.Released != tc.released || res.Over != tc.over {
				t.Errorf("commit = %+v, want committed %d, released %d, over %d", res, tc.actual, tc.released, tc.over)
			}
			if got := usageByWindow(t, e); got[tiers.Minute] != tc.minute || got[tiers.Day] != tc.day {
				t.Errorf("usage after the commit = %v, want minute %d, day %d", got, tc.minute, tc.day)
			}
		})
	}
}

// Reserves share statements: concurrent reserves are stored in fewer
// inserts than reserves.
func TestReservationInsertsBatch(t *testing.T) {
	t.Parallel()
	e, _, _ := reserveFixture(t, day0.Add(10*time.Hour), true, tiers.Limit{Window: tiers.Day, Limit: 1_000_000})
	const n = 200
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := e.Reserve(context.Background(), quota.ReserveRequest{Customer: "acme", Metric: "api_calls", Cost: 1, TTL: time.Minute})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := e.Stats().ReservationInserts
	t.Logf("%d reserves in %d statements", st.Calls, st.Batches)
	if st.Calls != n || st.Batches >= n {
		t.Errorf("%d reserves stored in %d statements, want %d in fewer", st.Calls, st.Batches, n)
	}
	if got := usageByWindow(t, e)[tiers.Day]; got != n {
		t.Errorf("day usage = %d, want %d", got, n)
	}
}

// History counts committed units: the estimate while held, the actual
// cost once committed, nothing once released; a soft window meters the
// units a commit counted beyond its limit as overage, and over reports
// only what went beyond what a check could have been admitted up to.
func TestReservationHistoryCountsCommittedUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, _ := reserveFixture(t, day0.Add(10*time.Hour), true,
		tiers.Limit{Window: tiers.Day, Limit: 100, Mode: tiers.Soft, OveragePercent: 50})
	history := func() (used, overage int64) {
		t.Helper()
		days, err := e.History(ctx, "acme", "api_calls", day0, day0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			used, overage = used+d.Used, overage+d.Overage
		}
		return used, overage
	}
	a := mustReserve(t, e, 90, time.Hour)
	if used, overage := history(); used != 90 || overage != 0 {
		t.Fatalf("history while held = %d used, %d overage; want 90, 0", used, overage)
	}
	// 130 committed at a soft limit of 100 (+50 %): 30 units of overage,
	// none beyond the threshold of 150.
	res, err := e.Commit(ctx, a.ID, 130)
	if err != nil {
		t.Fatal(err)
	}
	if res.Over != 0 {
		t.Errorf("over = %d, want 0 (130 is within the soft threshold of 150)", res.Over)
	}
	if used, overage := history(); used != 130 || overage != 30 {
		t.Errorf("history after the commit = %d used, %d overage; want 130, 30", used, overage)
	}
	// A released reservation leaves nothing in history.
	c := mustReserve(t, e, 1, time.Hour)
	if err := e.ReleaseReservation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if used, _ := history(); used != 130 {
		t.Errorf("history after a release = %d used, want 130", used)
	}
	// Another 10 held, then committed at 40: 170 counted, 20 beyond 150.
	b := mustReserve(t, e, 10, time.Hour)
	if res, err = e.Commit(ctx, b.ID, 40); err != nil {
		t.Fatal(err)
	}
	if res.Over != 20 {
		t.Errorf("over = %d, want 20 (170 counted, threshold 150)", res.Over)
	}
	if used, overage := history(); used != 170 || overage != 70 {
		t.Errorf("history after the second commit = %d used, %d overage; want 170, 70", used, overage)
	}
	if got := usageByWindow(t, e)[tiers.Day]; got != 170 {
		t.Errorf("day usage = %d, want 170", got)
	}
}

// A reservation's subject and its windows (each with the metric and
// subject of its counter, or neither, as windows kept before pools and
// subjects were) come back from every read as they were stored.
func TestReservationSubjectRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	at := day0.Add(10 * time.Hour)
	minute := at.Truncate(time.Minute)
	const subject = "org/7:jane.doe@example.com"
	held := func(id, subject, requestID string, windows ...quota.ReservedWindow) quota.Reservation {
		return quota.Reservation{ID: id, Customer: "acme", Metric: "api_calls", Subject: subject, Cost: 5,
			State: quota.ReservationHeld, ExpiresAt: at.Add(time.Minute), CreatedAt: at, RequestID: requestID,
			Windows: windows, Answer: []byte(`{"allowed": true}`)}
	}
	tests := []struct {
		name string
		rsv  quota.Reservation
	}{
		{"the customer's own, windows naming no counter", held("rsv_own", "", "",
			quota.ReservedWindow{Window: tiers.Minute, Start: minute, End: minute.Add(time.Minute)},
			quota.ReservedWindow{Window: tiers.Day, Start: day0, End: day0.AddDate(0, 0, 1)})},
		{"a subject's, windows of the customer and of the subject", held("rsv_subject", subject, "req-1",
			quota.ReservedWindow{Metric: "api_calls", Window: tiers.Day, Start: day0, End: day0.AddDate(0, 0, 1)},
			quota.ReservedWindow{Metric: "api_calls", Subject: subject, Window: tiers.Minute, Start: minute,
				End: minute.Add(time.Minute)},
			quota.ReservedWindow{Metric: "api_calls", Subject: subject, Window: tiers.Day, Start: day0,
				End: day0.AddDate(0, 0, 1)})},
		{"a subject's drawing on a credit pool", held("rsv_pool", "key_0123456789abcdef", "req-2",
			quota.ReservedWindow{Metric: "credits", Window: tiers.Month, Start: day0, End: day0.AddDate(0, 1, 0)},
			quota.ReservedWindow{Metric: "api_calls", Subject: "key_0123456789abcdef", Window: tiers.Hour, Start: at,
				End: at.Add(time.Hour)})},
	}
	ins := make([]quota.ReservationInsert, len(tests))
	for i, tt := range tests {
		ins[i].Reservation = tt.rsv
	}
	if err := db.Reservations.InsertReservations(ctx, ins); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.Reservations.Reservation(ctx, tt.rsv.ID)
			if err != nil || !reflect.DeepEqual(got, tt.rsv) {
				t.Errorf("Reservation(%s) = %+v, %v\nwant %+v", tt.rsv.ID, got, err, tt.rsv)
			}
			if tt.rsv.RequestID != "" {
				got, err := db.Reservations.ReservationByRequestID(ctx, "acme", tt.rsv.RequestID)
				if err != nil || got == nil || !reflect.DeepEqual(*got, tt.rsv) {
					t.Errorf("ReservationByRequestID(%s) = %+v, %v\nwant %+v", tt.rsv.RequestID, got, err, tt.rsv)
				}
			}
			// A request id used again finds the reservation, subject and all.
			again := []quota.ReservationInsert{{Reservation: held("rsv_again", "", tt.rsv.RequestID)}}
			if tt.rsv.RequestID != "" {
				if err := db.Reservations.InsertReservations(ctx, again); err != nil {
					t.Fatal(err)
				}
				if f := again[0].Found; f == nil || !reflect.DeepEqual(*f, tt.rsv) {
					t.Errorf("a reservation's request id used again found %+v\nwant %+v", f, tt.rsv)
				}
			}
			// Finished, it is returned as it was held.
			tr := []quota.ReservationTransition{{ID: tt.rsv.ID, State: quota.ReservationReleased, At: at}}
			if err := db.Reservations.TransitionReservations(ctx, tr); err != nil {
				t.Fatal(err)
			}
			if s := tr[0].Finished; s == nil || !reflect.DeepEqual(*s, tt.rsv) {
				t.Errorf("the released reservation was held as %+v\nwant %+v", s, tt.rsv)
			}
		})
	}
}

// A reservation of a subject counts in the subject's windows and the
// customer's, gives back to both, and its request id, used again with the
// same subject, is the same reservation.
func TestReservationOfASubject(t *testing.T) {
	t.Parallel()
	for _, leases := range []bool{false, true} {
		t.Run(map[bool]string{false: "ledger", true: "leases"}[leases], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e, db := subjectFixture(t, day0.Add(10*time.Hour), leases)
			const u1, u2 = "org/7:jane.doe@example.com", "10.0.0.1"
			r := quota.ReserveRequest{Customer: "acme", Metric: "api_calls", Cost: 3, Subject: u1, TTL: time.Hour,
				RequestID: "req-1"}
			first, err := e.Reserve(ctx, r)
			if err != nil || !first.Allowed {
				t.Fatalf("reserve: %+v, %v", first, err)
			}
			again, err := e.Reserve(ctx, r)
			if err != nil || !again.Replayed || again.ID != first.ID {
				t.Errorf("the reserve again: %+v, %v; want reservation %s replayed", again, err, first.ID)
			}
			rsv, err := db.Reservations.Reservation(ctx, first.ID)
			if err != nil {
				t.Fatal(err)
			}
			var subjects []string
			for _, w := range rsv.Windows {
				subjects = append(subjects, w.Subject)
			}
			slices.Sort(subjects)
			if rsv.Subject != u1 || !slices.Equal(subjects, []string{"", u1}) {
				t.Errorf("stored: subject %q, windows %+v; want %q, a window of the customer's and one of the subject's",
					rsv.Subject, rsv.Windows, u1)
			}
			// u1 is full (3 of 3); u2 is not.
			for _, c := range []struct {
				subject string
				allowed bool
			}{{u1, false}, {u2, true}} {
				d, err := e.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, Subject: c.subject})
				if err != nil || d.Allowed != c.allowed {
					t.Errorf("check of %q: %+v, %v; want allowed %v", c.subject, d, err, c.allowed)
				}
			}
			if _, err := e.Commit(ctx, first.ID, 1); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				subject         string
				customer, owned int64 // the customer's day usage, the subject's
			}{{u1, 2, 1}, {u2, 2, 1}} {
				_, us, err := e.Usage(ctx, "acme", c.subject)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				for _, u := range us {
					got[u.Subject] = u.Used
				}
				if want := map[string]int64{"": c.customer, c.subject: c.owned}; !maps.Equal(got, want) {
					t.Errorf("usage seen by %q: %v, want %v", c.subject, got, want)
				}
			}
		})
	}
}

// subjectFixture is an engine over PostgreSQL for customer acme, whose
// api_calls are limited to 10 a day, and to 3 a day for each of its
// subjects.
func subjectFixture(t *testing.T, at time.Time, leases bool) (*quota.Engine, *store.DB) {
	t.Helper()
	ctx := context.Background()
	db := MustOpen(t)
	if _, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Day, Limit: 10, Mode: tiers.Hard},
		{Metric: "api_calls", Window: tiers.Day, Limit: 3, Mode: tiers.Hard, Per: tiers.PerSubject},
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "p", Metadata: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	clock := quotafake.NewClock(at)
	e := quota.New(quota.Options{Catalog: tiers.NewCache(db.Catalog, 0), Counts: db.Ledger, Requests: db.Ledger, Maintenance: db.Ledger, Audits: db.Audit,
		History: db.History, Clock: clock,
		Leases: leasesOf(leases, db.Ledger, clock), Reservations: db.Reservations, StoreTimeout: 30 * time.Second})
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e, db
}

// leasesOf returns a lease pool over s when on, nil otherwise.
func leasesOf(on bool, s lease.Store, clock quota.Clock) quota.Leases {
	if !on {
		return nil
	}
	return lease.NewPool(s, clock)
}
