package store_test

import (
	"context"
	neturl "net/url"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/faulttest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/webhooks"
)

// openThroughProxy opens a store over a fresh schema, reached through a
// fault proxy; the schema's own pool reaches it directly.
func openThroughProxy(t *testing.T) (*store.DB, *faulttest.Proxy, *dbtest.Schema) {
	t.Helper()
	schema := dbtest.New(t)
	u, err := neturl.Parse(schema.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faulttest.Start(t, u.Host)
	u.Host = proxy.Addr()
	db, err := store.Open(context.Background(), u.String(), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, proxy, schema
}

// With PostgreSQL black-holed, the webhook worker's call to the outbox
// returns within its deadline, with an error, where it once waited in
// pgxpool.Acquire for ever (issue 31); and the end of the worker's context
// ends a call still waiting to claim at once.
func TestWebhookWorkerCallEndsWithPostgreSQLSilent(t *testing.T) {
	t.Parallel()
	db, proxy, _ := openThroughProxy(t)
	ctx := context.Background()
	outbox, err := db.OpenOutbox(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer outbox.Close()
	w := &webhooks.Worker{Outbox: outbox, Client: webhooks.NewClient(200*time.Millisecond, true),
		StoreTimeout: 300 * time.Millisecond}
	// A first call leaves a connection idle in the outbox's pool: the next
	// acquisition pings it, as the did.
	if found, err := w.DeliverOne(ctx); err != nil || found {
		t.Fatalf("first delivery: %v, %v; want nothing due", found, err)
	}
	proxy.BlackHole()
	defer proxy.Clear()

	bound := w.AttemptTimeout()
	if bound != 800*time.Millisecond {
		t.Fatalf("attempt timeout %s, want twice the store's and the client's: 800ms", bound)
	}
	start := time.Now()
	found, err := w.DeliverOne(ctx)
	took := time.Since(start)
	t.Logf("returned after %s: %v", took.Round(time.Millisecond), err)
	if err == nil || found {
		t.Errorf("delivery with PostgreSQL silent: %v, %v; want an error", found, err)
	}
	// The deadline, and a busy machine's slack to notice it.
	if took > bound+2*time.Second {
		t.Errorf("returned after %s, want within its deadline %s (and slack)", took, bound)
	}

	// The worker stops (its context ends) while a call waits to claim:
	// the call ends then, not at its deadline.
	w = &webhooks.Worker{Outbox: outbox, Client: webhooks.NewClient(time.Minute, true), StoreTimeout: time.Minute}
	stopped, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start = time.Now()
	go func() { _, err := w.DeliverOne(stopped); done <- err }()
	stop()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a call cut short by the worker's end reported no error")
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("a call ended %s after the worker's context, want at once", took)
		}
	case <-time.After(30 * time.Second): // far beyond, far below the call's own 2 min deadline
		t.Fatal("a call still waiting to claim outlived the worker's context")
	}
}

// With PostgreSQL black-holed, the engine's purge returns within a batch's
// deadline.
func TestPurgeEndsWithPostgreSQLSilent(t *testing.T) {
	t.Parallel()
	db, proxy, _ := openThroughProxy(t)
	ctx := context.Background()
	r := quota.Retention{BatchTimeout: 300 * time.Millisecond}
	if _, err := db.Ledger.Purge(ctx, day0, r); err != nil {
		t.Fatal(err)
	}
	proxy.BlackHole()
	defer proxy.Clear()
	start := time.Now()
	_, err := db.Ledger.Purge(ctx, day0, r)
	took := time.Since(start)
	t.Logf("returned after %s: %v", took.Round(time.Millisecond), err)
	if err == nil {
		t.Error("purge with PostgreSQL silent: no error")
	}
	if took > r.BatchTimeout+2*time.Second {
		t.Errorf("returned after %s, want within a batch's deadline %s (and slack)", took, r.BatchTimeout)
	}
}
