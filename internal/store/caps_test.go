package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// capped is one kind of object with a cap, as the store creates, replaces
// and deletes it; i numbers the objects.
type capped struct {
	name    string
	table   string
	caps    tiers.Caps
	kind    tiers.CapKind
	setup   func(t *testing.T, db *store.DB)
	create  func(ctx context.Context, db *store.DB, i int) error
	replace func(ctx context.Context, db *store.DB, i int) error // nil: no replacing
	remove  func(ctx context.Context, db *store.DB, i int) error
}

func keyID(i int) string { return fmt.Sprintf("key_%016d", i) }

var cappedKinds = []capped{
	{
		name: "customers", table: "customers", caps: tiers.Caps{Customers: 3}, kind: tiers.CapCustomers,
		setup: func(t *testing.T, db *store.DB) { mustCustomers(t, db) },
		create: func(ctx context.Context, db *store.DB, i int) error {
			_, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: fmt.Sprint("c", i), Plan: "p", Metadata: []byte(`{}`)})
			return err
		},
		replace: func(ctx context.Context, db *store.DB, i int) error {
			_, created, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: fmt.Sprint("c", i), Plan: "p", Name: "again", Metadata: []byte(`{}`)})
			if err == nil && created {
				err = errors.New("created, not replaced")
			}
			return err
		},
		remove: func(ctx context.Context, db *store.DB, i int) error {
			return db.Catalog.DeleteCustomer(ctx, write("ops"), fmt.Sprint("c", i))
		},
	},
	{
		name: "keys per customer", table: "api_keys", caps: tiers.Caps{KeysPerCustomer: 3}, kind: tiers.CapKeysPerCustomer,
		// globex's keys do not count against acme's cap; an expired key
		// of acme's does not either.
		setup: func(t *testing.T, db *store.DB) {
			mustCustomers(t, db, "acme", "globex")
			for i := range 4 {
				mustCreateKey(t, db, "globex", fmt.Sprintf("key_G%015d", i), nil)
			}
			before, expired := write("ops"), t0.Add(-time.Second)
			before.At = t0.Add(-time.Hour)
			if _, err := db.Keys.CreateKey(context.Background(), before, keys.Key{ID: "key_EXPIRED000000000", Customer: "acme",
				Prefix: "qk_12345", ExpiresAt: &expired}, keys.DigestOf("expired")); err != nil {
				t.Fatal(err)
			}
		},
		create: func(ctx context.Context, db *store.DB, i int) error {
			_, err := db.Keys.CreateKey(ctx, write("ops"), keys.Key{ID: keyID(i), Customer: "acme", Prefix: "qk_12345"},
				keys.DigestOf(keyID(i)))
			return err
		},
		remove: func(ctx context.Context, db *store.DB, i int) error {
			_, err := db.Keys.RevokeKey(ctx, write("ops"), keyID(i))
			return err
		},
	},
	{
		name: "webhooks", table: "webhooks", caps: tiers.Caps{Webhooks: 3}, kind: tiers.CapWebhooks,
		create: func(ctx context.Context, db *store.DB, i int) error {
			_, _, err := db.Webhooks.PutWebhook(ctx, write("ops"), webhooks.Webhook{ID: fmt.Sprint("w", i), URL: "https://hooks.example.com/",
				Events: []webhooks.EventType{webhooks.LimitReached}, Secret: secretA}, true)
			return err
		},
		replace: func(ctx context.Context, db *store.DB, i int) error {
			_, created, err := db.Webhooks.PutWebhook(ctx, write("ops"), webhooks.Webhook{ID: fmt.Sprint("w", i), URL: "https://hooks.example.com/again",
				Events: []webhooks.EventType{webhooks.LimitReached}, Secret: secretA}, true)
			if err == nil && created {
				err = errors.New("created, not replaced")
			}
			return err
		},
		remove: func(ctx context.Context, db *store.DB, i int) error {
			return db.Webhooks.DeleteWebhook(ctx, write("ops"), fmt.Sprint("w", i))
		},
	},
}

// mustCapReached fails the test unless err is kind's cap.
func mustCapReached(t *testing.T, err error, kind tiers.CapKind) {
	t.Helper()
	var ce *tiers.CapError
	if !errors.Is(err, tiers.ErrCapReached) || !errors.As(err, &ce) || ce.Kind != kind || ce.Cap != 3 {
		t.Fatalf("err = %v, want the cap of 3 reached", err)
	}
}

// Up to the cap, creations pass; beyond it, they are refused and nothing
// is written; replacing an existing object at the cap passes; deleting one
// (revoking a key) frees its place.
func TestCaps(t *testing.T) {
	for _, k := range cappedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := MustOpen(t)
			if k.setup != nil {
				k.setup(t, db)
			}
			db.SetCaps(k.caps)
			for i := range 3 {
				if err := k.create(ctx, db, i); err != nil {
					t.Fatalf("creation %d of 3: %v", i, err)
				}
			}
			mustCapReached(t, k.create(ctx, db, 3), k.kind)
			if k.replace != nil {
				if err := k.replace(ctx, db, 1); err != nil {
					t.Errorf("replacing at the cap: %v", err)
				}
			}
			if err := k.remove(ctx, db, 1); err != nil {
				t.Fatal(err)
			}
			if err := k.create(ctx, db, 3); err != nil {
				t.Errorf("creation after a removal: %v", err)
			}
			mustCapReached(t, k.create(ctx, db, 4), k.kind)
			db.SetCaps(tiers.Caps{})
			if err := k.create(ctx, db, 4); err != nil {
				t.Errorf("creation with no cap: %v", err)
			}
		})
	}
}

// Concurrent creations at the cap: exactly the cap of them pass. A
// trigger holds every creation at its insert, behind an advisory lock the
// test holds, until all of them have counted (or wait to count): without
// the store's lock, each would count the one object that exists and pass.
func TestCapsConcurrent(t *testing.T) {
	const tries = 12
	for _, k := range cappedKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			setupDB, schema := MustOpenSchema(t)
			if k.setup != nil {
				k.setup(t, setupDB)
			}
			// A pool with a connection for every creation at once.
			cfg, err := pgxpool.ParseConfig(schema.URL)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = tries + 2
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			db, err := store.New(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			db.SetCaps(k.caps)
			if err := k.create(ctx, db, 100); err != nil { // one exists already
				t.Fatal(err)
			}

			gate, err := pgx.Connect(ctx, schema.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer gate.Close(ctx)
			key := rand.Int64N(1 << 31)
			for _, q := range []string{
				fmt.Sprintf(`CREATE FUNCTION test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NEW; END $$`, key),
				`CREATE TRIGGER test_gate BEFORE INSERT ON ` + k.table + ` FOR EACH ROW EXECUTE FUNCTION test_gate()`,
			} {
				if _, err := gate.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := gate.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
				t.Fatal(err)
			}

			var wg sync.WaitGroup
			results := make([]error, tries)
			for i := range tries {
				wg.Go(func() { results[i] = k.create(ctx, db, i) })
			}
			// Wait until every creation waits: at the gate, or for one
			// that waits (for one that waits...) at the gate.
			const blocked = `
				WITH RECURSIVE waiting (pid) AS (
				    SELECT pid FROM pg_locks
				    WHERE locktype = 'advisory' AND classid = 0 AND objid::int8 = $1 AND objsubid = 1 AND NOT granted
				    UNION
				    SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY (pg_blocking_pids(a.pid)))
				SELECT count(*) FROM waiting`
			deadline := time.Now().Add(time.Minute)
			for n := int64(0); n < tries; {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d creations wait after a minute", n, tries)
				}
				if err := gate.QueryRow(ctx, blocked, key).Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := gate.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Fatal(err)
			}
			wg.Wait()

			var made int
			for i, err := range results {
				switch {
				case err == nil:
					made++
				case !errors.Is(err, tiers.ErrCapReached):
					t.Errorf("creation %d: %v, want success or the cap", i, err)
				}
			}
			if made != 2 {
				t.Errorf("%d of %d concurrent creations passed beside the one that existed, want 2 (the cap of 3)", made, tries)
			}
			mustCapReached(t, k.create(ctx, db, 200), k.kind)
		})
	}
}
