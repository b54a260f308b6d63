package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quotad/quotad/internal/tiers"
)

// rate is a credit rate of metric at credits per per units.
func rate(metric string, credits, per int64) tiers.CreditRate {
	return tiers.CreditRate{Metric: metric, Credits: credits, Per: per}
}

// MustPutMetrics declares plain metrics.
func MustPutMetrics(t testing.TB, db interface {
	PutMetric(context.Context, tiers.Write, tiers.Metric) (tiers.Metric, bool, error)
}, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, _, err := db.PutMetric(context.Background(), write("ops"), tiers.Metric{Key: k}); err != nil {
			t.Fatalf("put metric %s: %v", k, err)
		}
	}
}

// A pool's schema survives a round trip in its order; the metrics it names
// read it back as their Draws, and so do lists; a replace rewrites it.
func TestCreditSchemaRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustPutMetrics(t, db.Catalog, "images", "gpt4_tokens", "audio")
	schema := []tiers.CreditRate{rate("images", 10, 1), rate("gpt4_tokens", 3, 100)}
	saved, created, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "credits", CreditSchema: schema})
	if err != nil || !created {
		t.Fatalf("put pool: created=%v err=%v", created, err)
	}
	found, err := db.Catalog.FindMetric(ctx, "credits")
	mustPut(t, err)
	for _, m := range []tiers.Metric{saved, found} {
		if !reflect.DeepEqual(m.CreditSchema, schema) || m.Draws != nil {
			t.Errorf("pool read back: schema %+v, draws %+v; want %+v and none", m.CreditSchema, m.Draws, schema)
		}
	}

	wantDraws := map[string]*tiers.Draw{
		"audio":       nil,
		"credits":     nil,
		"gpt4_tokens": {Pool: "credits", Credits: 3, Per: 100},
		"images":      {Pool: "credits", Credits: 10, Per: 1},
	}
	list, _, err := db.Catalog.FindMetrics(ctx, tiers.Page{Limit: 10})
	mustPut(t, err)
	for _, m := range list {
		one, err := db.Catalog.FindMetric(ctx, m.Key)
		mustPut(t, err)
		if !reflect.DeepEqual(one.Draws, wantDraws[m.Key]) || !reflect.DeepEqual(m.Draws, wantDraws[m.Key]) {
			t.Errorf("%s draws: found %+v, listed %+v; want %+v", m.Key, one.Draws, m.Draws, wantDraws[m.Key])
		}
		if m.Key != "credits" && (m.CreditSchema == nil || len(m.CreditSchema) != 0) {
			t.Errorf("%s schema = %#v, want empty, not nil (shown [])", m.Key, m.CreditSchema)
		}
	}

	// A replace: audio joins, images leaves, the order is the new one.
	schema = []tiers.CreditRate{rate("audio", 1, 60), rate("gpt4_tokens", 5, 100)}
	saved, _, err = db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "credits", CreditSchema: schema})
	mustPut(t, err)
	if !reflect.DeepEqual(saved.CreditSchema, schema) {
		t.Errorf("replaced schema = %+v, want %+v", saved.CreditSchema, schema)
	}
	images, err := db.Catalog.FindMetric(ctx, "images")
	mustPut(t, err)
	audio, err := db.Catalog.FindMetric(ctx, "audio")
	mustPut(t, err)
	if images.Draws != nil || !reflect.DeepEqual(audio.Draws, &tiers.Draw{Pool: "credits", Credits: 1, Per: 60}) {
		t.Errorf("after replace: images draws %+v, audio %+v", images.Draws, audio.Draws)
	}

	// The audit images show the schema, never the draws.
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 1})
	mustPut(t, err)
	var after map[string]any
	if err := json.Unmarshal(events[0].After, &after); err != nil {
		t.Fatal(err)
	}
	wantSchema := []any{
		map[string]any{"metric": "audio", "credits": float64(1), "per": float64(60)},
		map[string]any{"metric": "gpt4_tokens", "credits": float64(5), "per": float64(100)},
	}
	if !reflect.DeepEqual(after["credit_schema"], wantSchema) {
		t.Errorf("audit image credit_schema = %v, want %v", after["credit_schema"], wantSchema)
	}
	if _, ok := after["draws"]; ok {
		t.Errorf("audit image shows draws: %s", events[0].After)
	}

	// Emptied, the pool is a plain metric again and frees its metrics.
	saved, _, err = db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "credits"})
	mustPut(t, err)
	tokens, err := db.Catalog.FindMetric(ctx, "gpt4_tokens")
	mustPut(t, err)
	if len(saved.CreditSchema) != 0 || tokens.Draws != nil {
		t.Errorf("emptied pool: schema %+v, gpt4_tokens draws %+v", saved.CreditSchema, tokens.Draws)
	}
}

// The rules of credit pools that span metrics, checked in the write's
// transaction: each refusal is a *tiers.ValidationError naming the field
// (a 400), and writes nothing; deletes answer 409 while a pool names the
// metric.
func TestCreditPoolRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustPutMetrics(t, db.Catalog, "gpt4_tokens", "images", "audio", "video")
	pool := func(key string, rates ...tiers.CreditRate) func() error {
		return func() error {
			_, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: key, CreditSchema: rates})
			return err
		}
	}
	del := func(key string) func() error {
		return func() error { return db.Catalog.DeleteMetric(ctx, write("ops"), key) }
	}

	steps := []struct {
		name      string
		do        func() error
		wantField string // the field a *tiers.ValidationError names; "" for success
		wantErr   error  // a sentinel instead
	}{
		{name: "a pool", do: pool("credits", rate("gpt4_tokens", 3, 100), rate("images", 10, 1))},
		{name: "an undeclared metric", do: pool("bonus", rate("audio", 1, 1), rate("ghost", 1, 1)), wantField: "credit_schema[1].metric"},
		{name: "a metric that draws on another pool", do: pool("bonus", rate("images", 1, 1)), wantField: "credit_schema[0].metric"},
		{name: "a pool named by a pool", do: pool("bonus", rate("credits", 1, 1)), wantField: "credit_schema[0].metric"},
		{name: "a metric that draws on a pool given a schema", do: pool("images", rate("audio", 1, 1)), wantField: "credit_schema"},
		{name: "a second pool of free metrics", do: pool("minutes", rate("audio", 1, 60))},
		{name: "a pool emptied of a metric", do: pool("credits", rate("gpt4_tokens", 3, 100))},
		{name: "the metric taken by another pool", do: pool("minutes", rate("audio", 1, 60), rate("images", 2, 1))},
		{name: "a metric named by a pool cannot go", do: del("images"), wantErr: tiers.ErrMetricInUse},
		{name: "a pool can go, with its schema", do: del("minutes")},
		{name: "the metrics it named are free", do: pool("credits", rate("gpt4_tokens", 3, 100), rate("images", 1, 1), rate("audio", 1, 1))},
		{name: "a plain metric can go", do: del("video")},
		{name: "a pool made a plain metric", do: pool("credits")},
		{name: "then its metrics can go", do: del("images")},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 1})
			mustPut(t, err)
			err = st.do()
			var ve *tiers.ValidationError
			switch {
			case st.wantErr != nil:
				if !errors.Is(err, st.wantErr) {
					t.Fatalf("err = %v, want %v", err, st.wantErr)
				}
			case st.wantField != "":
				if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != st.wantField {
					t.Fatalf("err = %v, want a validation error on %s", err, st.wantField)
				}
			case err != nil:
				t.Fatalf("err = %v, want success", err)
			}
			after, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 1})
			mustPut(t, err)
			if wrote := after[0].ID != before[0].ID; wrote != (st.wantErr == nil && st.wantField == "") {
				t.Errorf("audited a write: %v", wrote)
			}
		})
	}
}

// Two writes that would break the rules together, each fine alone, race:
// one wins, the other is a *tiers.ValidationError, never a 5xx.
func TestCreditPoolRulesUnderRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	races := []struct {
		name string
		a, b tiers.Metric
	}{
		{"two pools name one metric",
			tiers.Metric{Key: "p1", CreditSchema: []tiers.CreditRate{rate("x", 1, 1)}},
			tiers.Metric{Key: "p2", CreditSchema: []tiers.CreditRate{rate("x", 2, 1)}}},
		{"a pool names a metric that becomes a pool",
			tiers.Metric{Key: "p1", CreditSchema: []tiers.CreditRate{rate("x", 1, 1)}},
			tiers.Metric{Key: "x", CreditSchema: []tiers.CreditRate{rate("y", 1, 1)}}},
		{"two pools name each other",
			tiers.Metric{Key: "p1", CreditSchema: []tiers.CreditRate{rate("p2", 1, 1)}},
			tiers.Metric{Key: "p2", CreditSchema: []tiers.CreditRate{rate("p1", 1, 1)}}},
	}
	for _, r := range races {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			for round := range 5 {
				db := MustOpen(t)
				MustPutMetrics(t, db.Catalog, "p1", "p2", "x", "y")
				start := make(chan struct{})
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for i, m := range []tiers.Metric{r.a, r.b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						_, _, errs[i] = db.Catalog.PutMetric(ctx, write("ops"), m)
					}()
				}
				close(start)
				wg.Wait()
				var ve *tiers.ValidationError
				ok := 0
				for _, err := range errs {
					switch {
					case err == nil:
						ok++
					case !errors.As(err, &ve):
						t.Fatalf("round %d: err = %v, want nil or a validation error", round, err)
					}
				}
				if ok != 1 {
					t.Fatalf("round %d: errors %v, want exactly one write to succeed", round, errs)
				}
			}
		})
	}
}

// The schema of credit_rates refuses what the rules refuse, whoever
// writes: bounds, self-reference, a metric in two pools, a pool or metric
// that is not declared.
func TestCreditRateConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	MustPutMetrics(t, db.Catalog, "pool", "other", "m", "n")
	if _, err := s.Pool.Exec(ctx, `INSERT INTO credit_rates (pool, metric, credits, position) VALUES ('other', 'n', 1, 0)`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		pool, metric string
		credits, per int64
		position     int
		wantCode     string // "" for accepted
	}{
		{"the bounds", "pool", "m", 9007199254740991, 9007199254740991, 0, ""},
		{"credits 1, per 1", "pool", "m", 1, 1, 0, ""},
		{"credits 0", "pool", "m", 0, 1, 0, "23514"},
		{"credits above 2^53-1", "pool", "m", 9007199254740992, 1, 0, "23514"},
		{"per 0", "pool", "m", 1, 0, 0, "23514"},
		{"per above 2^53-1", "pool", "m", 1, 9007199254740992, 0, "23514"},
		{"negative position", "pool", "m", 1, 1, -1, "23514"},
		{"a pool naming itself", "pool", "pool", 1, 1, 0, "23514"},
		{"a metric in two pools", "pool", "n", 1, 1, 0, "23505"},
		{"an undeclared metric", "pool", "ghost", 1, 1, 0, "23503"},
		{"an undeclared pool", "ghost", "m", 1, 1, 0, "23503"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := s.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			const q = `INSERT INTO credit_rates (pool, metric, credits, per, position) VALUES ($1, $2, $3, $4, $5)`
			_, err = tx.Exec(ctx, q, tc.pool, tc.metric, tc.credits, tc.per, tc.position)
			var pgErr *pgconn.PgError
			switch {
			case tc.wantCode == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantCode != "" && (!errors.As(err, &pgErr) || pgErr.Code != tc.wantCode):
				t.Errorf("err = %v, want SQLSTATE %s", err, tc.wantCode)
			}
		})
	}
	// Deleting a metric a pool names is refused; deleting the pool takes
	// its schema along.
	if _, err := s.Pool.Exec(ctx, `DELETE FROM metrics WHERE key = 'n'`); !isCode(err, "23503") {
		t.Errorf("delete a named metric: err = %v, want a foreign key violation", err)
	}
	if _, err := s.Pool.Exec(ctx, `DELETE FROM metrics WHERE key = 'other'`); err != nil {
		t.Fatalf("delete a pool: %v", err)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM credit_rates`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rates left after the pool's deletion: %d (%v), want 0", n, err)
	}
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}
