package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/store"
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
