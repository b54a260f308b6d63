package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// MustOpen returns a store over a fresh schema.
func MustOpen(t testing.TB) *store.DB {
	t.Helper()
	db, _ := MustOpenSchema(t)
	return db
}

// MustOpenSchema returns a store over a fresh schema, and the schema.
func MustOpenSchema(t testing.TB) (*store.DB, *dbtest.Schema) {
	t.Helper()
	s := dbtest.New(t)
	db, err := store.New(context.Background(), s.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}

func ptr[T any](v T) *T { return &v }

// mustPut fails the test on a write's error.
func mustPut(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var usd = tiers.Price{Currency: "USD", Interval: "month"}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func write(actor string) tiers.Write { return tiers.Write{Actor: actor, At: t0} }

func TestMetricLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)

	m, created, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{
		Key: "api_calls", Description: "calls", Capacity: map[tiers.Window]int64{tiers.Day: 1000},
	})
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	if m.Version != 1 || m.Capacity[tiers.Day] != 1000 || !m.CreatedAt.Equal(t0) {
		t.Errorf("created metric = %+v", m)
	}

	m2, created, err := db.Catalog.PutMetric(ctx, tiers.Write{Actor: "ops", At: t0.Add(time.Minute),
		IfMatch: tiers.Precondition{Set: true, Versions: []int64{1}}}, tiers.Metric{Key: "api_calls"})
	if err != nil || created {
		t.Fatalf("replace: created=%v err=%v", created, err)
	}
	if m2.Version != 2 || len(m2.Capacity) != 0 || m2.Description != "" {
		t.Errorf("replaced metric = %+v, want version 2 with defaults", m2)
	}

	_, _, err = db.Catalog.PutMetric(ctx, tiers.Write{At: t0, IfMatch: tiers.Precondition{Set: true, Versions: []int64{1}}},
		tiers.Metric{Key: "api_calls"})
	if !errors.Is(err, tiers.ErrPreconditionFailed) {
		t.Errorf("stale If-Match: err = %v, want ErrPreconditionFailed", err)
	}

	if _, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "free", Name: "Free", Price: usd,
		Limits: []tiers.Limit{{Metric: "api_calls", Window: tiers.Day, Limit: 10, Mode: tiers.Hard}}}, false); err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog.DeleteMetric(ctx, write("ops"), "api_calls"); !errors.Is(err, tiers.ErrMetricInUse) {
		t.Errorf("delete used metric: err = %v, want ErrMetricInUse", err)
	}
	if err := db.Catalog.DeletePlan(ctx, write("ops"), "free"); err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog.DeleteMetric(ctx, write("ops"), "api_calls"); err != nil {
		t.Fatalf("delete unused metric: %v", err)
	}
	if _, err := db.Catalog.FindMetric(ctx, "api_calls"); !errors.Is(err, tiers.ErrMetricNotFound) {
		t.Errorf("find deleted: err = %v", err)
	}

	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action+" "+e.Resource)
	}
	want := []string{"delete metrics/api_calls", "delete plans/free", "create plans/free",
		"update metrics/api_calls", "create metrics/api_calls"}
	if len(actions) != len(want) {
		t.Fatalf("audit = %q, want %q", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Errorf("audit[%d] = %q, want %q", i, actions[i], want[i])
		}
	}
}

// putProLimits puts plan pro with limits, and fails t unless what the
// write returns and what FindPlan reads back have them all, unchanged.
func putProLimits(t *testing.T, db *store.DB, limits []tiers.Limit) {
	t.Helper()
	ctx := context.Background()
	saved, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd, Limits: limits}, false)
	mustPut(t, err)
	found, err := db.Catalog.FindPlan(ctx, "pro")
	mustPut(t, err)
	for _, p := range []tiers.Plan{saved, found} {
		if !reflect.DeepEqual(p.Limits, limits) {
			t.Errorf("plan limits read back =\n  %+v\nwant\n  %+v", p.Limits, limits)
		}
	}
}

func TestPlanRejectsUndeclaredMetric(t *testing.T) {
	t.Parallel()
	db := MustOpen(t)
	_, _, err := db.Catalog.PutPlan(context.Background(), write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd,
		Limits: []tiers.Limit{{Metric: "nope", Window: tiers.Day, Limit: 1, Mode: tiers.Hard}}}, false)
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "limits[0].metric" {
		t.Fatalf("err = %v, want validation error on limits[0].metric", err)
	}
}

func TestCustomerAccountAndOverrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	_, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "api_calls"})
	mustPut(t, err)
	_, _, err = db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd, Limits: []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Day, Limit: 100, Mode: tiers.Soft, OveragePercent: 20, OveragePriceMicros: ptr(int64(5))},
		{Metric: "api_calls", Window: tiers.Second, Limit: 5, Mode: tiers.Hard},
	}}, false)
	mustPut(t, err)

	_, _, err = db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "nope", Metadata: []byte(`{}`)})
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "plan" {
		t.Fatalf("unknown plan: err = %v", err)
	}
	c, created, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "pro",
		Metadata: []byte(`{"tier":"gold"}`), Anchor: tiers.Anchor{Day: 15}})
	mustPut(t, err)
	if !created || c.BillingAnchorDay == nil || *c.BillingAnchorDay != 15 || string(c.Metadata) != `{"tier": "gold"}` {
		t.Errorf("customer = %+v (metadata %s)", c, c.Metadata)
	}

	_, _, err = db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme",
		Limit: tiers.Limit{Metric: "nope", Window: tiers.Day, Limit: 1, Mode: tiers.Hard}})
	if !errors.Is(err, tiers.ErrMetricNotFound) {
		t.Errorf("override on undeclared metric: err = %v", err)
	}
	_, _, err = db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "ghost",
		Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 1, Mode: tiers.Hard}})
	if !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("override on missing customer: err = %v", err)
	}
	exp := t0.Add(24 * time.Hour)
	o, created, err := db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", ExpiresAt: &exp, Reason: "launch",
		Limit: tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 500, Mode: tiers.Elastic, Ceiling: ptr(int64(900))}})
	mustPut(t, err)
	if !created || o.Limit.Limit != 500 || *o.Ceiling != 900 || !o.ExpiresAt.Equal(exp) {
		t.Errorf("override = %+v", o)
	}

	a, err := db.Catalog.FindAccount(ctx, "acme")
	mustPut(t, err)
	if a.Plan.Key != "pro" || len(a.Plan.Limits) != 2 || len(a.Overrides) != 1 {
		t.Fatalf("account = %+v", a)
	}
	if l := a.Plan.Limits[0]; l.Mode != tiers.Soft || l.OveragePercent != 20 || *l.OveragePriceMicros != 5 {
		t.Errorf("plan limit read back = %+v", l)
	}
	eff := tiers.Effective(a.Plan, a.Overrides, t0)
	if len(eff) != 2 || eff[1].Source != tiers.FromOverride || eff[1].Limit.Limit != 500 {
		t.Errorf("effective = %+v", eff)
	}

	if err := db.Catalog.DeletePlan(ctx, write("ops"), "pro"); !errors.Is(err, tiers.ErrPlanInUse) {
		t.Errorf("delete plan in use: err = %v", err)
	}
	mustPut(t, db.Catalog.DeleteCustomer(ctx, write("ops"), "acme"))
	if _, err := db.Catalog.FindAccount(ctx, "acme"); !errors.Is(err, tiers.ErrCustomerNotFound) {
		t.Errorf("find deleted account: err = %v", err)
	}
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 10})
	mustPut(t, err)
	if len(events) != 3 || events[0].Action != "delete" || events[2].Resource != "customers/acme" {
		t.Errorf("customer audit = %+v", events)
	}
}

// A limit's algorithm and burst survive a round trip through plans,
// overrides and accounts, each as it was written: the default is no
// algorithm, and a token bucket without burst has none.
func TestLimitAlgorithmsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	for _, m := range []string{"api_calls", "exports"} {
		_, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: m})
		mustPut(t, err)
	}
	limits := []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Second, Limit: 50, Mode: tiers.Hard},
		{Metric: "api_calls", Window: tiers.Minute, Limit: 600, Mode: tiers.Soft, OveragePercent: 10, Algorithm: tiers.FixedWindow},
		{Metric: "exports", Window: tiers.Second, Limit: tiers.MaxLogLimit, Mode: tiers.Hard, Algorithm: tiers.SlidingLog},
		{Metric: "exports", Window: tiers.Minute, Limit: 10, Mode: tiers.Elastic, Algorithm: tiers.TokenBucket, Burst: ptr[int64](25)},
		{Metric: "api_calls", Window: tiers.Day, Limit: 100000, Mode: tiers.Hard},
	}
	putProLimits(t, db, limits)
	// A replace writes every limit again: a token bucket may lose its burst.
	limits[3] = tiers.Limit{Metric: "exports", Window: tiers.Minute, Limit: 10, Mode: tiers.Hard, Algorithm: tiers.TokenBucket}
	limits[1].Algorithm = tiers.SlidingWindow
	_, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "pro", Name: "Pro", Price: usd, Limits: limits}, false)
	mustPut(t, err)
	plans, _, err := db.Catalog.FindPlans(ctx, tiers.Page{Limit: 10})
	mustPut(t, err)
	if len(plans) != 1 || !reflect.DeepEqual(plans[0].Limits, limits) {
		t.Errorf("plans after replace = %+v, want limits %+v", plans, limits)
	}

	_, _, err = db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "pro", Metadata: []byte(`{}`)})
	mustPut(t, err)
	bucket := tiers.Limit{Metric: "api_calls", Window: tiers.Second, Limit: 5, Mode: tiers.Hard,
		Algorithm: tiers.TokenBucket, Burst: ptr[int64](tiers.MaxLimit)}
	o, _, err := db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", Limit: bucket})
	mustPut(t, err)
	if !reflect.DeepEqual(o.Limit, bucket) {
		t.Errorf("override = %+v, want %+v", o.Limit, bucket)
	}
	// Replaced by an override naming no algorithm: the default, no burst.
	plain := tiers.Limit{Metric: "api_calls", Window: tiers.Second, Limit: 5, Mode: tiers.Hard}
	o, _, err = db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", Limit: plain})
	mustPut(t, err)
	if !reflect.DeepEqual(o.Limit, plain) {
		t.Errorf("replaced override = %+v, want %+v", o.Limit, plain)
	}
	log := tiers.Limit{Metric: "exports", Window: tiers.Minute, Limit: 7, Mode: tiers.Hard, Algorithm: tiers.SlidingLog}
	_, _, err = db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", Limit: log})
	mustPut(t, err)

	a, err := db.Catalog.FindAccount(ctx, "acme")
	mustPut(t, err)
	if !reflect.DeepEqual(a.Plan.Limits, limits) {
		t.Errorf("account plan limits = %+v, want %+v", a.Plan.Limits, limits)
	}
	if len(a.Overrides) != 2 || !reflect.DeepEqual(a.Overrides[0].Limit, plain) || !reflect.DeepEqual(a.Overrides[1].Limit, log) {
		t.Errorf("account overrides = %+v, want %+v and %+v", a.Overrides, plain, log)
	}
	list, _, err := db.Catalog.FindOverrides(ctx, "acme", tiers.Page{Limit: 10})
	mustPut(t, err)
	if len(list) != 2 || !reflect.DeepEqual(list[1].Limit, log) {
		t.Errorf("overrides = %+v", list)
	}
	one, err := db.Catalog.FindOverride(ctx, "acme", log.Key())
	mustPut(t, err)
	if !reflect.DeepEqual(one.Limit, log) {
		t.Errorf("override = %+v, want %+v", one.Limit, log)
	}
}

// The schema refuses what validation refuses, whoever writes: an unknown
// algorithm, an algorithm on a long window, a burst without a token bucket
// or out of range, a sliding log above its largest limit.
func TestLimitAlgorithmConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	if _, _, err := db.Catalog.PutMetric(ctx, write("ops"), tiers.Metric{Key: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "c", Plan: "p", Metadata: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		window    string
		limit     int64
		algorithm any // nil or a string
		burst     any // nil or an int64
		ok        bool
	}{
		{"default", "second", 10, nil, nil, true},
		{"default named", "minute", 10, "sliding_window", nil, true},
		{"fixed window", "second", 10, "fixed_window", nil, true},
		{"sliding log at its largest limit", "minute", 10000, "sliding_log", nil, true},
		{"token bucket", "second", 10, "token_bucket", nil, true},
		{"token bucket with burst 1", "second", 10, "token_bucket", int64(1), true},
		{"token bucket with burst 2^53-1", "minute", 0, "token_bucket", int64(9007199254740991), true},
		{"long window without algorithm", "day", 10, nil, nil, true},

		{"unknown algorithm", "second", 10, "leaky_bucket", nil, false},
		{"algorithm on a long window", "hour", 10, "fixed_window", nil, false},
		{"default named on a long window", "month", 10, "sliding_window", nil, false},
		{"burst without algorithm", "second", 10, nil, int64(5), false},
		{"burst with another algorithm", "second", 10, "fixed_window", int64(5), false},
		{"burst 0", "second", 10, "token_bucket", int64(0), false},
		{"burst above 2^53-1", "second", 10, "token_bucket", int64(9007199254740992), false},
		{"sliding log above its largest limit", "second", 10001, "sliding_log", nil, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, q := range []string{
				`INSERT INTO plan_limits (plan_key, metric, quota_window, position, limit_value, mode, algorithm, burst)
				 VALUES ('p', 'm', $1, ` + fmt.Sprint(i) + `, $2, 'hard', $3, $4)`,
				`INSERT INTO overrides (customer_id, metric, quota_window, limit_value, mode, algorithm, burst, created_at, updated_at)
				 VALUES ('c', 'm', $1, $2, 'hard', $3, $4, now(), now())`,
			} {
				tx, err := s.Pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				_, err = tx.Exec(ctx, q, tc.window, tc.limit, tc.algorithm, tc.burst)
				_ = tx.Rollback(ctx)
				var pgErr *pgconn.PgError
				switch {
				case tc.ok && err != nil:
					t.Errorf("refused: %v\n%s", err, q)
				case !tc.ok && (!errors.As(err, &pgErr) || pgErr.Code != "23514"):
					t.Errorf("err = %v, want a check violation\n%s", err, q)
				}
			}
		})
	}
}

// Limits per subject beside customer-wide ones on the same metric and
// window, in plans and overrides: each is read back with its per, found by
// its key, listed and paged in order (the customer's first), and deleted
// alone.
func TestLimitsPerSubjectRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustPutMetrics(t, db.Catalog, "api_calls", "tokens")
	limits := []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Day, Limit: 1000, Mode: tiers.Hard, Per: tiers.PerSubject},
		{Metric: "api_calls", Window: tiers.Day, Limit: 100000, Mode: tiers.Hard},
		{Metric: "api_calls", Window: tiers.Second, Limit: 5, Mode: tiers.Hard, Algorithm: tiers.TokenBucket,
			Burst: ptr[int64](10), Per: tiers.PerSubject},
	}
	putProLimits(t, db, limits)
	_, _, err := db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "acme", Plan: "pro", Metadata: []byte(`{}`)})
	mustPut(t, err)

	perSubject := tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 300, Mode: tiers.Hard, Per: tiers.PerSubject}
	customerWide := tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: 200000, Mode: tiers.Soft, OveragePercent: 5}
	tokens := tiers.Limit{Metric: "tokens", Window: tiers.Hour, Limit: 9, Mode: tiers.Hard, Per: tiers.PerSubject}
	for _, l := range []tiers.Limit{perSubject, customerWide, tokens} {
		o, created, err := db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", Limit: l})
		mustPut(t, err)
		if !created || !reflect.DeepEqual(o.Limit, l) {
			t.Errorf("override = %+v (created %v), want %+v", o.Limit, created, l)
		}
	}
	// A replace finds the one per subject, not the customer's.
	perSubject.Limit = 400
	o, created, err := db.Catalog.PutOverride(ctx, write("ops"), tiers.Override{Customer: "acme", Limit: perSubject})
	mustPut(t, err)
	if created || o.Version != 2 || !reflect.DeepEqual(o.Limit, perSubject) {
		t.Errorf("replaced override = %+v (created %v), want version 2 of %+v", o, created, perSubject)
	}
	for _, l := range []tiers.Limit{perSubject, customerWide} {
		one, err := db.Catalog.FindOverride(ctx, "acme", l.Key())
		mustPut(t, err)
		if !reflect.DeepEqual(one.Limit, l) {
			t.Errorf("FindOverride(%s) = %+v, want %+v", l.Key(), one.Limit, l)
		}
	}

	want := []tiers.Limit{customerWide, perSubject, tokens}
	list, _, err := db.Catalog.FindOverrides(ctx, "acme", tiers.Page{Limit: 10})
	mustPut(t, err)
	if got := overrideLimits(list); !reflect.DeepEqual(got, want) {
		t.Errorf("overrides =\n  %+v\nwant\n  %+v", got, want)
	}
	var paged []tiers.Override
	for after := ""; ; {
		page, more, err := db.Catalog.FindOverrides(ctx, "acme", tiers.Page{Limit: 1, After: after})
		mustPut(t, err)
		paged = append(paged, page...)
		if !more {
			break
		}
		after = page[len(page)-1].Key().String()
	}
	if got := overrideLimits(paged); !reflect.DeepEqual(got, want) {
		t.Errorf("overrides page by page =\n  %+v\nwant\n  %+v", got, want)
	}
	a, err := db.Catalog.FindAccount(ctx, "acme")
	mustPut(t, err)
	accounts, err := db.Catalog.FindAccounts(ctx, []string{"acme"})
	mustPut(t, err)
	for name, a := range map[string]tiers.Account{"FindAccount": a, "FindAccounts": accounts["acme"]} {
		if !reflect.DeepEqual(a.Plan.Limits, limits) || !reflect.DeepEqual(overrideLimits(a.Overrides), want) {
			t.Errorf("%s = plan %+v, overrides %+v", name, a.Plan.Limits, overrideLimits(a.Overrides))
		}
	}

	mustPut(t, db.Catalog.DeleteOverride(ctx, write("ops"), "acme", perSubject.Key()))
	if _, err := db.Catalog.FindOverride(ctx, "acme", perSubject.Key()); !errors.Is(err, tiers.ErrOverrideNotFound) {
		t.Errorf("deleted override: err = %v, want ErrOverrideNotFound", err)
	}
	if _, err := db.Catalog.FindOverride(ctx, "acme", customerWide.Key()); err != nil {
		t.Errorf("the customer-wide override went with the one per subject: %v", err)
	}

	// The audit log names an override per subject as its URL does, and
	// its images show per.
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Customer: "acme", Limit: 100})
	mustPut(t, err)
	var resources []string
	for _, e := range events {
		resources = append(resources, e.Action+" "+e.Resource)
	}
	wantResources := []string{
		"delete customers/acme/overrides/api_calls/day?per=subject",
		"update customers/acme/overrides/api_calls/day?per=subject",
		"create customers/acme/overrides/tokens/hour?per=subject",
		"create customers/acme/overrides/api_calls/day",
		"create customers/acme/overrides/api_calls/day?per=subject",
		"create customers/acme",
	}
	if !reflect.DeepEqual(resources, wantResources) {
		t.Errorf("audit =\n  %q\nwant\n  %q", resources, wantResources)
	}
	var before map[string]any
	if err := json.Unmarshal(events[0].Before, &before); err != nil {
		t.Fatal(err)
	}
	if before["per"] != "subject" || before["limit"] != float64(400) {
		t.Errorf("audit image of the deleted override = %s, want per subject, limit 400", events[0].Before)
	}
	planEvents, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 100})
	mustPut(t, err)
	for _, e := range planEvents {
		if e.Resource == "plans/pro" && !strings.Contains(string(e.After), `"per": "subject"`) {
			t.Errorf("audit image of the plan shows no limit per subject: %s", e.After)
		}
	}
}

func overrideLimits(list []tiers.Override) []tiers.Limit {
	out := make([]tiers.Limit, len(list))
	for i, o := range list {
		out[i] = o.Limit
	}
	return out
}

// The schema refuses a per that is no scope, and two limits of one
// metric+window+per, whoever writes; a customer-wide limit and one per
// subject on a metric+window are two rows.
func TestLimitPerConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, s := MustOpenSchema(t)
	MustPutMetrics(t, db.Catalog, "m")
	_, _, err := db.Catalog.PutPlan(ctx, write("ops"), tiers.Plan{Key: "p", Name: "P", Price: usd}, false)
	mustPut(t, err)
	_, _, err = db.Catalog.PutCustomer(ctx, write("ops"), tiers.Customer{ID: "c", Plan: "p", Metadata: []byte(`{}`)})
	mustPut(t, err)
	tests := []struct {
		name     string
		pers     []any // the per of each row written, nil for the default
		wantCode string
	}{
		{"default", []any{nil}, ""},
		{"customer and subject", []any{"customer", "subject"}, ""},
		{"default and subject", []any{nil, "subject"}, ""},
		{"unknown per", []any{"user"}, "23514"},
		{"per in upper case", []any{"SUBJECT"}, "23514"},
		{"two customer-wide", []any{nil, "customer"}, "23505"},
		{"two per subject", []any{"subject", "subject"}, "23505"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, q := range []string{
				`INSERT INTO plan_limits (plan_key, metric, quota_window, position, limit_value, mode, per)
				 VALUES ('p', 'm', 'day', $1, 1, 'hard', coalesce($2, 'customer'))`,
				`INSERT INTO overrides (customer_id, metric, quota_window, limit_value, mode, per, created_at, updated_at)
				 SELECT 'c', 'm', 'day', 1, 'hard', coalesce($2, 'customer'), now(), now() WHERE $1::int >= 0`,
			} {
				tx, err := s.Pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i, per := range tc.pers {
					if _, err = tx.Exec(ctx, q, i, per); err != nil {
						break
					}
				}
				_ = tx.Rollback(ctx)
				var pgErr *pgconn.PgError
				switch {
				case tc.wantCode == "" && err != nil:
					t.Errorf("refused: %v\n%s", err, q)
				case tc.wantCode != "" && (!errors.As(err, &pgErr) || pgErr.Code != tc.wantCode):
					t.Errorf("err = %v, want SQLSTATE %s\n%s", err, tc.wantCode, q)
				}
			}
		})
	}
}
