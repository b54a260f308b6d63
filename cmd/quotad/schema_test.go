package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
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
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"start", []string{"quotad"}},
		{"start --no-migrate", []string{"quotad", "--no-migrate"}},
		{"migrate up", []string{"quotad", "migrate", "up"}},
		{"migrate down", []string{"quotad", "migrate", "down"}},
	} {
		getenv := func(k string) string {
			return map[string]string{
				"QUOTAD_DATABASE_URL": schema.URL,
				"QUOTAD_LISTEN":       "127.0.0.1:0",
				"QUOTAD_DB_WAIT":      "0s",
			}[k]
		}
		// A quotad that started would serve until the deadline.
		runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var out bytes.Buffer
		err := run(runCtx, tc.args, getenv, &out)
		cancel()
		if err == nil {
			t.Errorf("%s: no error, want a refusal\n%s", tc.name, out.String())
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "no migration") {
			t.Errorf("%s: %v\nwant no golang-migrate error", tc.name, err)
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
