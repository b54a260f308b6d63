package store_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/migrations"
)

// The newest migration's down brings back the schema of the one before it:
// its functions, views, columns, constraints and indexes are those of a
// schema migrated up to that one from nothing; then the one before goes
// down too, and up again brings back the same schema as a fresh database's
// (its dump). While the baseline is the only migration, the one before it
// is no migration at all: its down must leave nothing but golang-migrate's
// own table, at no version.
func TestNewestMigrationDownRestoresTheOneBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	want := MustDump(t, s)
	// The versions may have gaps (a number taken by work not merged yet).
	versions := MustVersions(t)
	before := versions[:len(versions)-1]
	e := dbtest.NewEmpty(t)
	if len(before) > 0 {
		fromNothing, err := store.New(ctx, e.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if err := fromNothing.Migrations().To(before[len(before)-1]); err != nil {
			t.Fatalf("migrate a fresh schema to %d: %v", before[len(before)-1], err)
		}
	}
	fresh := schemaDefinitions(t, e)
	if err := db.Migrations().Down(ctx); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	down := schemaDefinitions(t, s)
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		if down[name] != fresh[name] {
			t.Errorf("after migrating down, %s is\n%s\nwant\n%s", name, down[name], fresh[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(down)) {
		if _, ok := fresh[name]; !ok {
			t.Errorf("after migrating down, %s is left", name)
		}
	}
	wantState := store.MigrationState{}
	if len(before) > 0 {
		wantState.Version = before[len(before)-1]
	}
	if st, err := db.Migrations().Version(ctx); err != nil || st != wantState {
		t.Errorf("after migrating down: %+v, %v; want %+v", st, err, wantState)
	}
	if len(before) > 0 {
		if err := db.Migrations().Down(ctx); err != nil {
			t.Fatalf("migrate down again: %v", err)
		}
	}
	if err := db.Migrations().Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	if got := MustDump(t, s); got != want {
		t.Errorf("migrated down and up again, the schema differs from a fresh one's (- fresh, + again):\n%s", lineDiff(want, got))
	}
}

// schemaDefinitions returns MustDefinitions of s without golang-migrate's
// own table, which no migration makes or drops.
func schemaDefinitions(t testing.TB, s *dbtest.Schema) map[string]string {
	t.Helper()
	defs := MustDefinitions(t, s)
	maps.DeleteFunc(defs, func(name, _ string) bool { return strings.Contains(name, "schema_migrations") })
	return defs
}

// Up and Down refuse a schema older than the baseline (made here by hand,
// at version 20, as the migrations before the baseline left theirs) with
// ErrPredatesBaseline, and leave it as it was.
func TestMigrationsRefuseASchemaOlderThanTheBaseline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.NewEmpty(t)
	db, err := store.New(ctx, s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO schema_migrations VALUES (20, false)`); err != nil {
		t.Fatal(err)
	}
	if !store.PredatesBaseline(20) || store.PredatesBaseline(0) || store.PredatesBaseline(store.BaselineVersion) {
		t.Errorf("PredatesBaseline: want only versions 1 to %d", store.BaselineVersion-1)
	}
	for name, migrate := range map[string]func(context.Context) error{"up": db.Migrations().Up, "down": db.Migrations().Down} {
		if err := migrate(ctx); !errors.Is(err, store.ErrPredatesBaseline) {
			t.Errorf("migrate %s: %v, want ErrPredatesBaseline", name, err)
		}
	}
	if st, err := db.Migrations().Version(ctx); err != nil || st != (store.MigrationState{Version: 20}) {
		t.Errorf("after the refusals: %+v, %v; want version 20, not dirty", st, err)
	}
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
