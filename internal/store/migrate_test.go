package store_test

import (
	"context"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/migrations"
)

// The newest migration's down brings back what the one before it defined:
// the functions, views, columns, constraints and indexes of a schema
// migrated up to that one from nothing. Then the one before goes down and
// up again, and the newest applies again.
func TestNewestMigrationDownRestoresTheOneBefore(t *testing.T) {
	t.Parallel()
	db, s := MustOpenSchema(t)
	// The versions may have gaps (a number taken by work not merged yet).
	versions := MustVersions(t)
	if len(versions) < 3 {
		t.Fatalf("migrations %v: want at least three", versions)
	}
	last, before, beforeThat := versions[len(versions)-1], versions[len(versions)-2], versions[len(versions)-3]
	migrate := func(db *store.DB, v uint) {
		t.Helper()
		if err := db.Migrations().To(v); err != nil {
			t.Fatalf("migrate to %d: %v", v, err)
		}
	}
	migrate(db, before)
	down := MustDefinitions(t, s)
	e := dbtest.NewEmpty(t)
	fromNothing, err := store.New(context.Background(), e.Pool)
	if err != nil {
		t.Fatal(err)
	}
	migrate(fromNothing, before)
	fresh := MustDefinitions(t, e)
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		if down[name] != fresh[name] {
			t.Errorf("after migrating down, %s is\n%s\nwant\n%s", name, down[name], fresh[name])
		}
	}
	for name := range down {
		if _, ok := fresh[name]; !ok {
			t.Errorf("after migrating down, %s is left", name)
		}
	}
	migrate(db, beforeThat)
	migrate(db, before)
	migrate(db, last)
}

// MustVersions returns the versions of the migration files, ascending.
func MustVersions(t testing.TB) []uint {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint]bool{}
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseUint(n, 10, 32); ok && err == nil {
			seen[uint(v)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Migrating below 13 drops what a quotad of 12 cannot read: limits per
// subject and credit pools; customer-wide limits stay as they were.
func TestMigrateDownDropsLimitsPerSubject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	MustPutMetrics(t, db.Catalog, "m", "pool")
	_, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "pool", CreditSchema: []tiers.CreditRate{rate("m", 1, 1)}})
	mustPut(t, err)
	_, _, err = db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: []tiers.Limit{
		{Metric: "m", Window: tiers.Day, Limit: 10, Mode: tiers.Hard},
		{Metric: "m", Window: tiers.Day, Limit: 1, Mode: tiers.Hard, Per: tiers.PerSubject},
	}}, false)
	mustPut(t, err)
	_, _, err = db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "c", Plan: "p", Metadata: []byte(`{}`)})
	mustPut(t, err)
	for _, per := range []tiers.Per{tiers.PerCustomer, tiers.PerSubject} {
		_, _, err = db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "c",
			Limit: tiers.Limit{Metric: "m", Window: tiers.Day, Limit: 5, Mode: tiers.Hard, Per: per}})
		mustPut(t, err)
	}
	if err := db.Migrations().To(12); err != nil {
		t.Fatalf("migrate to 12: %v", err)
	}
	var limits, overrides int
	var rates bool
	err = s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM plan_limits), (SELECT count(*) FROM overrides),
		to_regclass('credit_rates') IS NOT NULL`).Scan(&limits, &overrides, &rates)
	if err != nil || limits != 1 || overrides != 1 || rates {
		t.Errorf("after migrating down: %d plan limits, %d overrides, credit_rates %v (%v); want 1, 1, gone",
			limits, overrides, rates, err)
	}
	if err := db.Migrations().Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	p, err := db.Catalog.FindPlan(ctx, "p")
	mustPut(t, err)
	if len(p.Limits) != 1 || p.Limits[0].Per != tiers.PerCustomer {
		t.Errorf("plan after the round trip = %+v", p.Limits)
	}
}

// Migration 000014 (counters per subject): the counters, leases and
// reservations from before it are the customers' own. Migrated down, the
// subjects' counters go with their leases, and a held reservation keeps
// only the windows of its customer's counters; the customers' own
// counters, leases and reservations stay as they were.
func TestCountersPerSubjectMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	MustSeed(t, db, nil, "acme")
	const subject = "org/7:jane.doe@example.com"
	migrate := func(v uint) {
		t.Helper()
		if err := db.Migrations().To(v); err != nil {
			t.Fatalf("migrate to %d: %v", v, err)
		}
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	const (
		dayWindow     = `{"window": "day", "start": "2026-11-22T00:00:00Z", "end": "2026-11-23T00:00:00Z"}`
		ownWindow     = `{"metric": "api_calls", "window": "day", "start": "2026-11-22T00:00:00Z", "end": "2026-11-23T00:00:00Z"}`
		subjectWindow = `{"metric": "api_calls", "subject": "` + subject + `", "window": "day", "start": "2026-11-22T00:00:00Z", "end": "2026-11-23T00:00:00Z"}`
	)
	insertReservation := func(id, state, windows string) {
		t.Helper()
		var committed *int64
		if state == "committed" {
			committed = ptr(int64(3))
		}
		exec(`INSERT INTO reservations (id, customer_id, metric, cost, state, committed, expires_at, created_at,
			windows, answer) VALUES ($1, 'acme', 'api_calls', 3, $2, $3, $4, $4, $5, '{}')`,
			id, state, committed, day0.Add(time.Hour), windows)
	}

	// Before: a counter, a lease of it and a reservation, as 000013 kept
	// them.
	migrate(13)
	exec(`INSERT INTO usage_counters (customer_id, metric, quota_window, window_start, used)
		VALUES ('acme', 'api_calls', 'day', $1, 5)`, day0)
	exec(`INSERT INTO counter_leases (customer_id, metric, quota_window, window_start, holder, unused, seq)
		VALUES ('acme', 'api_calls', 'day', $1, 7, 2, 1)`, day0)
	insertReservation("rsv_before", "held", "["+dayWindow+"]")

	migrate(14)
	own, sub := subjectSpan("acme", "", 10), subjectSpan("acme", subject, 10)
	if got := MustRaw(t, s, own.Key); got != 5 {
		t.Errorf("the customer's counter from before, read as its own: %d, want 5", got)
	}
	if rsv, err := db.Reservations.Reservation(ctx, "rsv_before"); err != nil || rsv.Subject != "" {
		t.Errorf("the reservation from before: %+v, %v; want the customer's own", rsv, err)
	}
	// The subject's counter, a lease of it, and reservations of the
	// subject: one held, one committed.
	if ok, out := MustTake(t, db.Ledger, &quota.Charge{Customer: "acme", Metric: "api_calls", Subject: subject, Cost: 3,
		At: day0, Spans: []quota.Span{sub}}); !ok {
		t.Fatal(out)
	}
	exec(`INSERT INTO counter_leases (customer_id, metric, subject, quota_window, window_start, holder, unused, seq)
		VALUES ('acme', 'api_calls', $1, 'day', $2, 7, 1, 1)`, subject, day0)
	insertReservation("rsv_held", "held", "["+ownWindow+", "+subjectWindow+", "+dayWindow+"]")
	insertReservation("rsv_committed", "committed", "["+ownWindow+", "+subjectWindow+"]")
	exec(`UPDATE reservations SET subject = $1 WHERE id IN ('rsv_held', 'rsv_committed')`, subject)

	migrate(13)
	var counters, leases int
	var used, unused int64
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), sum(used) FROM usage_counters`).Scan(&counters, &used); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), sum(unused) FROM counter_leases`).Scan(&leases, &unused); err != nil {
		t.Fatal(err)
	}
	if counters != 1 || used != 5 || leases != 1 || unused != 2 {
		t.Errorf("after migrating down: %d counters of %d units, %d leases of %d unused; want the customer's: 1 of 5, 1 of 2",
			counters, used, leases, unused)
	}
	for _, tt := range []struct {
		id, windows string
	}{
		{"rsv_before", "[" + dayWindow + "]"},
		{"rsv_held", "[" + ownWindow + ", " + dayWindow + "]"},          // the subject's window goes with its counter
		{"rsv_committed", "[" + ownWindow + ", " + subjectWindow + "]"}, // settled: gives back nothing more
	} {
		var same bool
		var got string
		err := s.Pool.QueryRow(ctx, `SELECT windows = $2::jsonb, windows::text FROM reservations WHERE id = $1`,
			tt.id, tt.windows).Scan(&same, &got)
		if err != nil || !same {
			t.Errorf("after migrating down, %s's windows are %s (%v), want %s", tt.id, got, err, tt.windows)
		}
	}
	migrate(14)
	if got := MustRaw(t, s, own.Key); got != 5 {
		t.Errorf("migrated up again: the customer's counter %d, want 5", got)
	}
}
