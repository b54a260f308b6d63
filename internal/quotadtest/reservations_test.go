package quotadtest_test

import (
	"errors"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// TestClientReservations drives the client's reservation calls against
// quotad, at a hard day limit of 100 llm_tokens: reserve, a denial that
// holds nothing, an idempotent commit and a conflicting one, a release, a
// commit beyond the limit (over), and an expiry (410).
func TestClientReservations(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	c := quotad.New(s.URL, quotad.WithToken(s.CheckToken))
	ctx := t.Context()
	if _, _, err := admin.Metrics.Put(ctx, "llm_tokens", quotad.MetricSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Plans.Put(ctx, "llm", quotad.PlanSpec{Limits: []quotad.Limit{{Metric: "llm_tokens", Window: quotad.Day, Limit: 100}}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"acme", "beta"} {
		if _, _, err := admin.Customers.Put(ctx, id, quotad.CustomerSpec{Plan: "llm"}); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(customer string, cost int64, ttl int) *quotad.Reservation {
		t.Helper()
		res, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: customer, Metric: "llm_tokens", Cost: cost, TTLSeconds: ttl})
		if err != nil {
			t.Fatalf("reserve %d for %s: %v", cost, customer, err)
		}
		return res
	}
	state := func(id string) string {
		t.Helper()
		r, err := c.Reservation(ctx, id)
		if err != nil {
			t.Fatalf("reservation %s: %v", id, err)
		}
		return r.State
	}

	first := reserve("acme", 60, 0)
	if !first.Allowed || first.ID == "" || first.Cost != 60 || first.Customer != "acme" || !first.ExpiresAt.After(time.Now().Add(-time.Minute)) {
		t.Fatalf("reserve 60 = %+v, want allowed with an id and an expiry", first)
	}
	if len(first.Limits) != 1 || first.Limits[0].Used != 60 || first.RateLimitPolicy == "" {
		t.Errorf("reserve 60: limits %+v, RateLimit-Policy %q; want the day window at 60 used, and the header", first.Limits, first.RateLimitPolicy)
	}
	if denied := reserve("acme", 50, 0); denied.Allowed || denied.ID != "" || denied.RetryAfter == nil || *denied.RetryAfter < 1 {
		t.Errorf("reserve 50 beside 60 held = %+v, want denied with a retry_after, no id", denied)
	}
	if got := state(first.ID); got != quotad.ReservationHeld {
		t.Errorf("state = %q, want held", got)
	}

	for i := range 2 {
		st, err := c.Commit(ctx, first.ID, 20)
		if err != nil {
			t.Fatalf("commit %d: %v", i+1, err)
		}
		if st.Reserved != 60 || st.Committed != 20 || st.Released != 40 || st.Over != 0 {
			t.Errorf("commit %d = %+v, want reserved 60, committed 20, released 40, over 0", i+1, st)
		}
	}
	if _, err := c.Commit(ctx, first.ID, 21); !errors.Is(err, quotad.ErrConflict) {
		t.Errorf("commit at another cost: err = %v, want ErrConflict", err)
	}
	if got := state(first.ID); got != quotad.ReservationCommitted {
		t.Errorf("state = %q, want committed", got)
	}

	// 20 used: 70 more fit, and go back.
	second := reserve("acme", 70, 0)
	if !second.Allowed {
		t.Fatalf("reserve 70 beside 20 used = %+v, want allowed", second)
	}
	if err := c.Release(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if got := state(second.ID); got != quotad.ReservationReleased {
		t.Errorf("state = %q, want released", got)
	}

	// 80 reserved, 95 used: 15 beyond the hard limit, and the day is over.
	third := reserve("acme", 80, 0)
	if !third.Allowed {
		t.Fatalf("reserve 80 beside 20 used = %+v, want allowed", third)
	}
	st, err := c.Commit(ctx, third.ID, 95)
	if err != nil {
		t.Fatal(err)
	}
	if st.Reserved != 80 || st.Committed != 95 || st.Released != 0 || st.Over != 15 {
		t.Errorf("commit of 95 = %+v, want reserved 80, committed 95, released 0, over 15", st)
	}
	if res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "llm_tokens"}); err != nil || res.Allowed {
		t.Errorf("check after going over = %+v, %v; want denied", res, err)
	}

	// A reservation left alone expires: quotad releases it, and its commit
	// is 410.
	short := reserve("beta", 10, 1)
	if !short.Allowed {
		t.Fatalf("reserve 10 for beta = %+v, want allowed", short)
	}
	deadline := time.Now().Add(30 * time.Second) // a bound, not a measurement
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for state(short.ID) != quotad.ReservationExpired {
		if time.Now().After(deadline) {
			t.Fatalf("reservation %s is still %q 30 s after its ttl of 1 s", short.ID, state(short.ID))
		}
		<-tick.C
	}
	if _, err := c.Commit(ctx, short.ID, 10); !errors.Is(err, quotad.ErrReservationExpired) {
		t.Errorf("commit after expiry: err = %v, want ErrReservationExpired", err)
	}
}
