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
