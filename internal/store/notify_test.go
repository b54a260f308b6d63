package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/store"
)

// A listener that reconnects while its earlier session still holds the
// process's advisory lock does not listen without it: it fails, and
// connects again until it takes the lock, so that the process never
// passes for dead while it runs.
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
	close(proceed)
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "still holds") {
			t.Fatalf("listener failed with %v, want the lock held elsewhere", err)
		}
	case <-connected:
		t.Fatal("the listener listens without the process's lock")
	case <-time.After(10 * time.Second):
		t.Fatal("the listener neither failed nor connected")
	}
	// Once that session ends, the listener takes the lock.
	if err := stale.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the listener did not connect again")
	}
	var alive bool
	if err := s.Pool.QueryRow(ctx, `SELECT quotad_holder_alive($1)`, key).Scan(&alive); err != nil || !alive {
		t.Errorf("process alive: %v (%v), want true", alive, err)
	}
}
