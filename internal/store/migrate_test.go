package store_test

import (
	"context"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/migrations"
)

// The newest migration's down brings back what the one before it defined:
// the functions and views of a schema migrated up to that one afresh. Then
// it applies again.
func TestNewestMigrationDownRestoresTheOneBefore(t *testing.T) {
	t.Parallel()
	db, s := MustOpenSchema(t)
	// The versions may have gaps (a number taken by work not merged yet).
	versions := MustVersions(t)
	if len(versions) < 3 {
		t.Fatalf("migrations %v: want at least three", versions)
	}
	last, before, beforeThat := versions[len(versions)-1], versions[len(versions)-2], versions[len(versions)-3]
	migrate := func(v uint) {
		t.Helper()
		if err := db.MigrateTo(v); err != nil {
			t.Fatalf("migrate to %d: %v", v, err)
		}
	}
	migrate(before)
	down := MustDefinitions(t, s)
	migrate(beforeThat)
	migrate(before)
	fresh := MustDefinitions(t, s)
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
	migrate(last)
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

// MustDefinitions returns the definitions of the schema's functions and
// views, by name.
func MustDefinitions(t testing.TB, s *dbtest.Schema) map[string]string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `
		SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')', pg_get_functiondef(p.oid)
		FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace
		UNION ALL
		SELECT 'view ' || viewname, definition FROM pg_views WHERE schemaname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return defs
}

// Migrating below 13 drops what a quotad of 12 cannot read: limits per
// subject and credit pools; customer-wide limits stay as they were.
func TestMigrateDownDropsLimitsPerSubject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	MustPutMetrics(t, db, "m", "pool")
	_, _, err := db.PutMetric(ctx, write("ops"), tiers.Metric{Key: "pool", CreditSchema: []tiers.CreditRate{rate("m", 1, 1)}})
	mustPut(t, err)
	_, _, err = db.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd, Limits: []tiers.Limit{
		{Metric: "m", Window: tiers.Day, Limit: 10, Mode: tiers.Hard},
		{Metric: "m", Window: tiers.Day, Limit: 1, Mode: tiers.Hard, Per: tiers.PerSubject},
	}})
	mustPut(t, err)
	_, _, err = db.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "c", Plan: "p", Metadata: []byte(`{}`)})
	mustPut(t, err)
	for _, per := range []tiers.Per{tiers.PerCustomer, tiers.PerSubject} {
		_, _, err = db.PutOverride(ctx, write("ops"), tiers.Override{Customer: "c",
			Limit: tiers.Limit{Metric: "m", Window: tiers.Day, Limit: 5, Mode: tiers.Hard, Per: per}})
		mustPut(t, err)
	}
	if err := db.MigrateTo(12); err != nil {
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
	if err := db.MigrateUp(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	p, err := db.FindPlan(ctx, "p")
	mustPut(t, err)
	if len(p.Limits) != 1 || p.Limits[0].Per != tiers.PerCustomer {
		t.Errorf("plan after the round trip = %+v", p.Limits)
	}
}
