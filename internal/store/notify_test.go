package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// A listener that reconnects while an earlier session of its process
// still holds the process's advisory lock (the server has not seen that
// session's connection go silent) ends that session and takes the lock:
// it listens only holding it, so that the process never passes for dead
// while it runs, and it does not wait for the server to notice.
func TestListenerListensOnlyHoldingTheLock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, s := MustOpenSchema(t)
	connected := make(chan struct{}, 1)
	failed := make(chan error, 16)
	proceed := make(chan struct{})
	first := true
	l := db.Listener(func(store.Notification) {}, func() {}, func(err error) {
		select {
		case failed <- err:
		default:
		}
		if first { // the test lets the listener connect again
			first = false
			select {
			case <-proceed:
			case <-ctx.Done():
			}
		}
	})
	l.Connected = connected
	go l.Run(ctx)
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case err := <-failed:
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
		}
	}
	wait("connection", connected)

	// The listening session and the process's key.
	var pid, key int32
	err := s.Pool.QueryRow(ctx, `
		SELECT pid, objid::bigint::bit(32)::integer FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = (quotad_lock_class()::bigint & 4294967295)::oid`).Scan(&pid, &key)
	if err != nil {
		t.Fatal(err)
	}
	// The session ends; before the listener connects again, another
	// session, standing for one of this process's that the server has not
	// seen end yet, takes the lock.
	if _, err := s.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not notice its session end")
	}
	stale, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close(ctx)
	if _, err := stale.Exec(ctx, `SELECT pg_advisory_lock(quotad_lock_class(), $1)`, key); err != nil {
		t.Fatal(err)
	}
	var stalePID int32
	if err := stale.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&stalePID); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	select {
	case <-connected:
	case err := <-failed:
		t.Fatalf("listener failed with %v, want it to take the lock over", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the listener did not connect again")
	}
	var holder int32
	err = s.Pool.QueryRow(ctx, `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = (quotad_lock_class()::bigint & 4294967295)::oid
		  AND objid::bigint::bit(32)::integer = $1`, key).Scan(&holder)
	if err != nil {
		t.Fatal(err)
	}
	if holder == stalePID || holder == pid {
		t.Errorf("the lock is held by session %d, want the listener's new one (the stale one was %d)", holder, stalePID)
	}
	if err := stale.Ping(ctx); err == nil {
		t.Error("the stale session still answers, want it ended")
	}
	var alive bool
	if err := s.Pool.QueryRow(ctx, `SELECT quotad_holder_alive($1)`, key).Scan(&alive); err != nil || !alive {
		t.Errorf("process alive: %v (%v), want true", alive, err)
	}
}

// A counter's key goes out in recall and freed notifications: it comes
// back as it went, whatever its subject holds (slashes included), and a
// key written before counters had subjects is the customer's own.
func TestCounterKeyPayloadRoundTrips(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	key := func(customer, subject string) quota.CounterKey {
		return quota.CounterKey{Customer: customer, Metric: "api_calls", Subject: subject, Window: tiers.Day, Start: day}
	}
	long := strings.Repeat("a/", tiers.MaxSubjectLen/2)
	tests := []struct {
		name    string
		key     quota.CounterKey
		payload string
	}{
		{"the customer's own", key("acme", ""), "acme/api_calls/day/1795305600"},
		{"a subject", key("acme", "u1"), "acme/api_calls/day/1795305600/u1"},
		{"a slash", key("acme", "/"), "acme/api_calls/day/1795305600//"},
		{"slashes only", key("acme", "///"), "acme/api_calls/day/1795305600////"},
		{"a path", key("acme", "org/42/user/7"), "acme/api_calls/day/1795305600/org/42/user/7"},
		{"leading and trailing slashes", key("acme", "/a/"), "acme/api_calls/day/1795305600//a/"},
		{"an e-mail address", key("acme", "jane.doe@example.com"), "acme/api_calls/day/1795305600/jane.doe@example.com"},
		{"an IPv6 address", key("acme", "2001:db8::1"), "acme/api_calls/day/1795305600/2001:db8::1"},
		{"an IPv4 network", key("acme", "10.0.0.0/8"), "acme/api_calls/day/1795305600/10.0.0.0/8"},
		{"every punctuation", key("acme", "-._:@/"), "acme/api_calls/day/1795305600/-._:@/"},
		{"looks like a key", key("acme", "acme/api_calls/day/1795305600"),
			"acme/api_calls/day/1795305600/acme/api_calls/day/1795305600"},
		{"the longest", key("acme", long), "acme/api_calls/day/1795305600/" + long},
		{"a customer with punctuation", key("org:acme@eu.1-x_y", "k/1"), "org:acme@eu.1-x_y/api_calls/day/1795305600/k/1"},
		{"a month", quota.CounterKey{Customer: "acme", Metric: "m.v2", Subject: "x", Window: tiers.Month,
			Start: time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC)}, "acme/m.v2/month/1794700800/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := store.CounterKeyString(tt.key); got != tt.payload {
				t.Errorf("CounterKeyString(%+v) = %q, want %q", tt.key, got, tt.payload)
			}
			got, ok := store.ParseCounterKey(tt.payload)
			if !ok || got != tt.key {
				t.Errorf("ParseCounterKey(%q) = %+v, %v; want %+v, true", tt.payload, got, ok, tt.key)
			}
		})
	}
}

// What CounterKeyString never writes is no key.
func TestParseCounterKeyRejects(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{
		"",
		"acme",
		"acme/api_calls/day",
		"acme/api_calls/day/",
		"acme/api_calls/day/1795305600/",      // a subject, empty
		"acme/api_calls/day/1795305600/a b",   // a subject, invalid
		"acme/api_calls/day/1795305600/é",     // a subject, invalid
		"acme/api_calls/day/1795305600/a\x00", // a subject, invalid
		"acme/api_calls/minute/1795305600",    // a short window
		"acme/api_calls/fortnight/1795305600", // no window
		"acme/api_calls/day/x",                // no start
		"acme/api_calls/day/+1795305600",      // a start as FormatInt never writes it
		"acme/api_calls/day/01795305600",      // the same
		"/api_calls/day/1795305600",           // no customer
		"acme//day/1795305600",                // no metric
		"acme/api_calls/day/1795305600/" + strings.Repeat("x", tiers.MaxSubjectLen+1),
	} {
		if k, ok := store.ParseCounterKey(payload); ok {
			t.Errorf("ParseCounterKey(%q) = %+v, want none", payload, k)
		}
	}
}

// Any valid key comes back as it went, and anything read back is spelled
// the one way CounterKeyString spells it.
func FuzzCounterKeyPayload(f *testing.F) {
	f.Add("acme", "api_calls", "", int64(1795305600), "acme/api_calls/day/1795305600")
	f.Add("acme", "api_calls", "a/b:c@d.e-f_g", int64(0), "acme/api_calls/week/-86400/u//")
	f.Add("c", "m", "/", int64(-1), "c/m/month/1/x/y")
	f.Add("acme", "seats", "", int64(0), "acme/seats/total/0")
	f.Fuzz(func(t *testing.T, customer, metric, subject string, start int64, payload string) {
		if k, ok := store.ParseCounterKey(payload); ok {
			if got := store.CounterKeyString(k); got != payload {
				t.Errorf("ParseCounterKey(%q) = %+v, written back as %q", payload, k, got)
			}
		}
		if !tiers.ValidCustomerID(customer) || !tiers.ValidKey(metric) || (subject != "" && !tiers.ValidSubject(subject)) {
			return
		}
		k := quota.CounterKey{Customer: customer, Metric: metric, Subject: subject, Window: tiers.Day,
			Start: time.Unix(start, 0).UTC()}
		if got, ok := store.ParseCounterKey(store.CounterKeyString(k)); !ok || got != k {
			t.Errorf("%+v read back as %+v, %v", k, got, ok)
		}
	})
}
