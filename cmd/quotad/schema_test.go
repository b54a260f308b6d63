package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quotadtest"
	"github.com/quotad/quotad/internal/store"
)

// A database at a version older than the baseline (here 20, made by hand
// as the migrations before the baseline would have left its version) is
// refused at start-up, with or without --no-migrate, and by quotad
// migrate up and down, in a sentence that names the baseline and the
// quotad to migrate it with, not golang-migrate's "no migration found";
// and nothing is changed in it.
func TestStartRefusesASchemaOlderThanTheBaseline(t *testing.T) {
	t.Parallel()
	const old = 20
	if !store.PredatesBaseline(old) {
		t.Fatalf("schema %d does not predate the baseline %d", old, store.BaselineVersion)
	}
	schema := dbtest.NewEmpty(t)
	ctx := t.Context()
	if _, err := schema.Pool.Exec(ctx, `CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO schema_migrations VALUES (`+fmt.Sprint(old)+`, false)`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("schema %d predates the baseline %d", old, store.BaselineVersion),
		"commit " + store.BeforeBaseline,
	}
	for _, args := range [][]string{{}, {"--no-migrate"}, {"migrate", "up"}, {"migrate", "down"}} {
		out, err := runOn(t, schema, args...)
		if err == nil {
			t.Errorf("quotad %v: no error, want a refusal\n%s", args, out)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("quotad %v: %v\nwant it to say %q", args, err, w)
			}
		}
		if strings.Contains(err.Error(), "no migration") {
			t.Errorf("quotad %v: %v\nwant no golang-migrate error", args, err)
		}
	}
	var version int
	var dirty, made bool
	err := schema.Pool.QueryRow(ctx, `SELECT version, dirty, to_regclass('customers') IS NOT NULL FROM schema_migrations`).
		Scan(&version, &dirty, &made)
	if err != nil || version != old || dirty || made {
		t.Errorf("after the refusals: version %d, dirty %t, tables made %t (%v); want %d, untouched", version, dirty, made, err, old)
	}
}

// runOn runs quotad with args on schema, as main does, and returns its
// error and what it wrote. A start that is not refused serves until the
// test's deadline: these tests expect it to return at once.
func runOn(t *testing.T, schema *dbtest.Schema, args ...string) (string, error) {
	t.Helper()
	vars := map[string]string{
		"QUOTAD_DATABASE_URL": schema.URL,
		"QUOTAD_LISTEN":       "127.0.0.1:0",
		"QUOTAD_DB_WAIT":      "0s",
		"QUOTAD_DB_MAX_CONNS": "2",
		"QUOTAD_ADMIN_TOKENS": "ops:" + adminToken,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, append([]string{"quotad"}, args...), func(k string) string { return vars[k] }, &out)
	if ctx.Err() != nil {
		t.Fatalf("quotad %v did not return: it served\n%s", args, out.String())
	}
	return out.String(), err
}

// setSchemaVersion writes schema's golang-migrate row as a migration would
// have left it (the table may have no row: the baseline's down leaves none).
func setSchemaVersion(t *testing.T, schema *dbtest.Schema, v uint, dirty bool) {
	t.Helper()
	if _, err := schema.Pool.Exec(context.Background(), `DELETE FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Pool.Exec(context.Background(), `INSERT INTO schema_migrations (version, dirty) VALUES ($1, $2)`, int64(v), dirty); err != nil {
		t.Fatal(err)
	}
}

// A quotad older than the schema (a newer one migrated it) refuses to
// start, with or without --no-migrate, in one sentence that says so and
// what to do; so do its migrate up and down, which lack the newer
// migrations' files; migrate version reads the schema all the same.
func TestStartRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	newer := store.SchemaVersion + 1
	setSchemaVersion(t, schema, newer, false)
	want := fmt.Sprintf("the database schema is at version %d, newer than this quotad (%s), which carries schema %d: "+
		"run a quotad that carries schema %d or later (quotad version prints the schema a binary carries), "+
		"or first roll the schema back to %d with the newer quotad's `quotad migrate down`, once per version above %d "+
		`(see "Upgrading and rolling back" in docs/operations.md)`,
		newer, version, store.SchemaVersion, newer, store.SchemaVersion, store.SchemaVersion)
	for _, args := range [][]string{{}, {"--no-migrate"}, {"serve", "--migrate"}, {"migrate", "up"}, {"migrate", "down"}} {
		out, err := runOn(t, schema, args...)
		if err == nil || err.Error() != want {
			t.Errorf("quotad %v: error\n%v\nwant\n%s\n%s", args, err, want, out)
		}
		if strings.Contains(out, "listening") {
			t.Errorf("quotad %v listened:\n%s", args, out)
		}
	}
	out, err := runOn(t, schema, "migrate", "version")
	if want := fmt.Sprintf("schema version %d (dirty: false); this binary carries %d\n", newer, store.SchemaVersion); err != nil || !strings.HasSuffix(out, want) {
		t.Errorf("migrate version: %v, printed %q, want it to end %q", err, out, want)
	}
	// Nothing was written: the schema is still the newer one's.
	if st := mustSchemaState(t, schema); st != (store.MigrationState{Version: newer}) {
		t.Errorf("schema after the refusals: %+v, want version %d", st, newer)
	}
}

// A schema a failed migration left dirty is refused with a sentence that
// says what to do, which does it: migrate force, then a start migrates.
func TestStartRefusesDirtySchema(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	// Migration SchemaVersion failed on its way up: PostgreSQL rolled it
	// back, golang-migrate left its row dirty (the baseline's: on a
	// database with nothing in it).
	if _, err := runOn(t, schema, "migrate", "down"); err != nil {
		t.Fatal(err)
	}
	v, before := store.SchemaVersion, prevVersion(store.SchemaVersion)
	setSchemaVersion(t, schema, v, true)
	want := fmt.Sprintf("the database schema is dirty at version %d: a migration to version %d failed or was interrupted, "+
		"and as each migration runs in one transaction the schema is still at the version before it (%d when migrating up, %d when migrating down): "+
		"once the migration's error is understood, record that version with `quotad migrate force VERSION` and start again",
		v, v, before, v+1)
	for _, args := range [][]string{{}, {"--no-migrate"}, {"migrate", "up"}, {"migrate", "down"}} {
		if _, err := runOn(t, schema, args...); err == nil || err.Error() != want {
			t.Errorf("quotad %v: error\n%v\nwant\n%s", args, err, want)
		}
	}
	for _, f := range []uint{store.SchemaVersion + 1, store.BaselineVersion - 1} {
		if _, err := runOn(t, schema, "migrate", "force", fmt.Sprint(f)); err == nil {
			t.Errorf("migrate force %d succeeded: this binary does not carry it", f)
		}
	}
	out, err := runOn(t, schema, "migrate", "force", fmt.Sprint(before))
	if want := fmt.Sprintf("schema version %d (dirty: false)", before); err != nil || !strings.Contains(out, want) {
		t.Fatalf("migrate force %d: %v, printed %q, want %q", before, err, out, want)
	}
	out, err = runOn(t, schema, "migrate", "up")
	if want := fmt.Sprintf("schema version %d (dirty: false)", v); err != nil || !strings.Contains(out, want) {
		t.Fatalf("migrate up: %v, printed %q, want %q", err, out, want)
	}
}

// With --no-migrate, a schema older than the binary is refused too (the
// migration job has not run yet), in a sentence that says so; without
// it, the same start migrates. The older schema is the newest migration's
// down: while the baseline is the newest, no schema at all (version 0).
func TestNoMigrateRefusesOlderSchema(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	if _, err := runOn(t, schema, "migrate", "down"); err != nil {
		t.Fatal(err)
	}
	older := prevVersion(store.SchemaVersion)
	want := fmt.Sprintf("the database schema is at version %d, older than this quotad (%s), which needs schema %d, and --no-migrate is set: "+
		"run `quotad migrate up` with this quotad first (or start it without --no-migrate)",
		older, version, store.SchemaVersion)
	if _, err := runOn(t, schema, "--no-migrate"); err == nil || err.Error() != want {
		t.Errorf("quotad --no-migrate: error\n%v\nwant\n%s", err, want)
	}
	if st := mustSchemaState(t, schema); st != (store.MigrationState{Version: older}) {
		t.Errorf("schema after the refusal: %+v, want version %d", st, older)
	}
	s := MustStartServer(t, schema, nil)
	s.mustDo(200, "GET", "/readyz", "", "Authorization", "")
	if st := mustSchemaState(t, schema); st != (store.MigrationState{Version: store.SchemaVersion}) {
		t.Errorf("schema after a start: %+v, want version %d", st, store.SchemaVersion)
	}
}

// A process that runs when a newer quotad migrates the schema under it (a
// rolling upgrade) stays ready: only a start is refused.
func TestRunningProcessStaysReadyOnNewerSchema(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	s := MustStartServer(t, schema, nil)
	setSchemaVersion(t, schema, store.SchemaVersion+1, false)
	s.mustDo(200, "GET", "/readyz", "", "Authorization", "")
}

func mustSchemaState(t *testing.T, schema *dbtest.Schema) store.MigrationState {
	t.Helper()
	db, err := store.New(context.Background(), schema.Pool)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Migrations().Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Two processes migrating an empty schema at once both succeed: one
// migrates, the other waits for its lock and finds nothing left to do.
func TestTwoProcessesMigrateAtOnce(t *testing.T) {
	t.Parallel()
	schema := dbtest.NewEmpty(t)
	getenv := func(k string) string {
		return map[string]string{"QUOTAD_DATABASE_URL": schema.URL, "QUOTAD_DB_WAIT": "0s", "QUOTAD_DB_MAX_CONNS": "2"}[k]
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			var out bytes.Buffer
			err := run(context.Background(), []string{"quotad", "migrate", "up"}, getenv, &out)
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, out.String())
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("migrate up: %v", err)
		}
	}
	if st := mustSchemaState(t, schema); st != (store.MigrationState{Version: store.SchemaVersion}) {
		t.Errorf("schema: %+v, want version %d", st, store.SchemaVersion)
	}
}

// A process started with --no-migrate while a migration job is under way
// (the schema dirty, the job holding the migrations' lock) waits for the
// job, then starts on the schema it left.
func TestNoMigrateWaitsForAMigrationUnderWay(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	ctx := context.Background()
	job, err := schema.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Release()
	var dbName, schemaName string
	if err := job.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&dbName, &schemaName); err != nil {
		t.Fatal(err)
	}
	// golang-migrate's lock, as its PostgreSQL drivers name it.
	lock, err := database.GenerateAdvisoryLockId(dbName, schemaName, "schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, lock); err != nil {
		t.Fatal(err)
	}
	setSchemaVersion(t, schema, store.SchemaVersion, true)

	vars := map[string]string{
		"QUOTAD_DATABASE_URL": schema.URL, "QUOTAD_LISTEN": "127.0.0.1:0", "QUOTAD_DB_WAIT": "0s",
		"QUOTAD_DB_MAX_CONNS": "4", "QUOTAD_ADMIN_TOKENS": "ops:" + adminToken, "QUOTAD_DRAIN_TIMEOUT": "0s",
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs := quotadtest.NewLogTail()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"quotad", "--no-migrate"}, func(k string) string { return vars[k] }, logs)
	}()
	waiting := func() bool {
		var n int
		err := job.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`, lock).Scan(&n)
		return err == nil && n > 0
	}
	eventually(t, waiting, "quotad --no-migrate to wait for the migrations' lock")
	// The job ends well.
	setSchemaVersion(t, schema, store.SchemaVersion, false)
	if _, err := job.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, lock); err != nil {
		t.Fatal(err)
	}
	select {
	case <-logs.Addr:
	case err := <-done:
		t.Fatalf("quotad exited: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("quotad did not start once the migration was done\n%s", logs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("quotad stopped with error: %v\n%s", err, logs)
	}
}
