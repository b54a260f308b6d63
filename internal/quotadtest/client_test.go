package quotadtest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// collect reads a list to its end.
func collect[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		out = append(out, v)
	}
	return out
}

// mustCreated fails t unless a Put succeeded with the wanted created flag.
func mustCreated(t *testing.T, what string, created bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if created != want {
		t.Fatalf("%s: created = %v, want %v", what, created, want)
	}
}

// TestClientCatalog drives every catalog call of the client against quotad.
func TestClientCatalog(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	c := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()

	// Metrics: created, then replaced, each with a new ETag.
	m, created, err := c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{Description: "API calls"})
	mustCreated(t, "Metrics.Put api_calls", created, err, true)
	if m.Key != "api_calls" || m.Version != 1 || m.ETag != `"1"` || m.Description != "API calls" {
		t.Errorf("created metric = %+v, want api_calls version 1 ETag \"1\"", m)
	}
	m, created, err = c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{Description: "Calls", Capacity: quotad.Capacity{quotad.Day: 1000}}, quotad.IfMatch(m.ETag))
	mustCreated(t, "Metrics.Put api_calls again", created, err, false)
	if m.Version != 2 || m.ETag != `"2"` || m.Capacity[quotad.Day] != 1000 {
		t.Errorf("replaced metric = %+v, want version 2 ETag \"2\" capacity day 1000", m)
	}
	_, created, err = c.Metrics.Put(ctx, "exports", quotad.MetricSpec{})
	mustCreated(t, "Metrics.Put exports", created, err, true)

	// Plans.
	ceiling := int64(20)
	p, created, err := c.Plans.Put(ctx, "pro", quotad.PlanSpec{
		Name:  "Pro",
		Price: &quotad.Price{AmountCents: 4900, Currency: "EUR"},
		Limits: []quotad.Limit{
			{Metric: "api_calls", Window: quotad.Minute, Limit: 3},
			{Metric: "exports", Window: quotad.Day, Limit: 10, Mode: quotad.Elastic, Ceiling: &ceiling},
		},
	})
	mustCreated(t, "Plans.Put pro", created, err, true)
	if p.Name != "Pro" || p.Price == nil || p.Price.Currency != "EUR" || p.Price.Interval != "month" || len(p.Limits) != 2 ||
		p.Limits[0].Algorithm != quotad.SlidingWindow || p.Limits[1].Ceiling == nil || *p.Limits[1].Ceiling != 20 {
		t.Errorf("created plan = %+v", p)
	}
	// A plan read back can be written back as it is.
	got, err := c.Plans.Get(ctx, "pro")
	if err != nil {
		t.Fatal(err)
	}
	p2, created, err := c.Plans.Put(ctx, "pro", got.PlanSpec, quotad.IfMatch(got.ETag))
	mustCreated(t, "Plans.Put pro as read", created, err, false)
	if p2.Version != 2 || !slices.EqualFunc(p2.Limits, got.Limits, limitsEqual) {
		t.Errorf("plan written back = %+v, want version 2 and the same limits %+v", p2, got.Limits)
	}
	_, created, err = c.Plans.Put(ctx, "free", quotad.PlanSpec{})
	mustCreated(t, "Plans.Put free", created, err, true)

	// Customers.
	anchor := 15
	cu, created, err := c.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro", Name: "Acme", BillingAnchorDay: &anchor,
		Metadata: map[string]any{"crm": "42"}})
	mustCreated(t, "Customers.Put acme", created, err, true)
	if cu.ID != "acme" || cu.Plan != "pro" || cu.BillingAnchorDay == nil || *cu.BillingAnchorDay != 15 || cu.Metadata["crm"] != "42" || cu.ETag != `"1"` {
		t.Errorf("created customer = %+v", cu)
	}
	_, created, err = c.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro", Name: "Acme Inc"})
	mustCreated(t, "Customers.Put acme again", created, err, false)

	// Overrides.
	exp := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	o, created, err := c.Overrides.Put(ctx, "acme", "api_calls", quotad.Day, quotad.OverrideSpec{Limit: 500, Mode: quotad.Soft,
		OveragePercent: 10, ExpiresAt: &exp, Reason: "launch"})
	mustCreated(t, "PutOverride", created, err, true)
	if o.Customer != "acme" || o.Metric != "api_calls" || o.Window != quotad.Day || o.Limit != 500 || o.OveragePercent != 10 ||
		o.ExpiresAt == nil || !o.ExpiresAt.Equal(exp) || o.Expired || o.ETag != `"1"` {
		t.Errorf("created override = %+v", o)
	}
	o, created, err = c.Overrides.Put(ctx, "acme", "api_calls", quotad.Day, quotad.OverrideSpec{Limit: 600}, quotad.IfMatch(o.ETag))
	mustCreated(t, "Overrides.Put again", created, err, false)
	if o.Mode != quotad.Hard || o.Version != 2 {
		t.Errorf("replaced override = %+v, want hard, version 2", o)
	}
	if got, err := c.Overrides.Get(ctx, "acme", "api_calls", quotad.Day); err != nil || got.Limit != 600 || got.ETag != `"2"` {
		t.Errorf("Override = %+v, %v; want limit 600, ETag \"2\"", got, err)
	}
	if got := collect(t, c.Overrides.List(ctx, "acme")); len(got) != 1 || got[0].Limit != 600 || got[0].ETag != `"2"` {
		t.Errorf("Overrides = %+v, want the one override", got)
	}
	lim, err := c.Customers.Limits(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, l := range lim.Limits {
		sources = append(sources, fmt.Sprintf("%s/%s=%d:%s", l.Metric, l.Window, l.Limit.Limit, l.Source))
	}
	if want := []string{"api_calls/minute=3:plan", "api_calls/day=600:override", "exports/day=10:plan"}; lim.Plan != "pro" || !slices.Equal(sources, want) {
		t.Errorf("Limits = %s %v, want pro %v", lim.Plan, sources, want)
	}

	// Lists.
	var keys []string
	for _, m := range collect(t, c.Metrics.List(ctx)) {
		keys = append(keys, m.Key+m.ETag)
	}
	if want := []string{`api_calls"2"`, `exports"1"`}; !slices.Equal(keys, want) {
		t.Errorf("Metrics = %v, want %v", keys, want)
	}
	keys = nil
	for _, p := range collect(t, c.Plans.List(ctx)) {
		keys = append(keys, p.Key+p.ETag)
	}
	if want := []string{`free"1"`, `pro"2"`}; !slices.Equal(keys, want) {
		t.Errorf("Plans = %v, want %v", keys, want)
	}

	// Errors.
	errTests := []struct {
		name string
		call func() error
		want []error
	}{
		{"unknown metric", func() error { _, err := c.Metrics.Get(ctx, "nope"); return err }, []error{quotad.ErrMetricNotFound, quotad.ErrNotFound}},
		{"unknown plan", func() error { _, err := c.Plans.Get(ctx, "nope"); return err }, []error{quotad.ErrPlanNotFound, quotad.ErrNotFound}},
		{"unknown customer", func() error { _, err := c.Customers.Get(ctx, "nope"); return err }, []error{quotad.ErrCustomerNotFound, quotad.ErrNotFound}},
		{"unknown override", func() error { _, err := c.Overrides.Get(ctx, "acme", "exports", quotad.Hour); return err },
			[]error{quotad.ErrOverrideNotFound, quotad.ErrNotFound}},
		{"stale If-Match", func() error {
			_, _, err := c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{}, quotad.IfMatch(`"1"`))
			return err
		}, []error{quotad.ErrPreconditionFailed}},
		{"If-Match on a missing resource", func() error {
			_, _, err := c.Customers.Put(ctx, "globex", quotad.CustomerSpec{Plan: "free"}, quotad.IfMatch("*"))
			return err
		}, []error{quotad.ErrPreconditionFailed}},
		{"stale If-Match on delete", func() error { return c.Overrides.Delete(ctx, "acme", "api_calls", quotad.Day, quotad.IfMatch(`"1"`)) },
			[]error{quotad.ErrPreconditionFailed}},
		{"plan in use", func() error { return c.Plans.Delete(ctx, "pro") }, []error{quotad.ErrConflict}},
		{"metric in use", func() error { return c.Metrics.Delete(ctx, "exports") }, []error{quotad.ErrConflict}},
		{"undeclared metric in a plan", func() error {
			_, _, err := c.Plans.Put(ctx, "bad", quotad.PlanSpec{Limits: []quotad.Limit{{Metric: "nope", Window: quotad.Day, Limit: 1}}})
			return err
		}, []error{quotad.ErrValidation}},
		{"check token on an admin call", func() error {
			_, err := quotad.New(s.URL, quotad.WithToken(s.CheckToken)).Metrics.Get(ctx, "api_calls")
			return err
		}, []error{quotad.ErrForbidden}},
		{"wrong token", func() error {
			_, err := quotad.New(s.URL, quotad.WithToken("wrong")).Usage(ctx, "acme")
			return err
		}, []error{quotad.ErrUnauthorized}},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want %v", err, want)
				}
			}
		})
	}
	var prob *quotad.Problem
	_, _, err = c.Plans.Put(ctx, "bad", quotad.PlanSpec{Limits: []quotad.Limit{{Metric: "nope", Window: quotad.Day, Limit: 1}}})
	if !errors.As(err, &prob) || prob.Status != 400 || len(prob.Errors) == 0 || prob.Errors[0].Field != "limits[0].metric" {
		t.Errorf("undeclared metric: %#v, want a 400 naming limits[0].metric", prob)
	}

	// Deletes, conditional and not.
	o, err = c.Overrides.Get(ctx, "acme", "api_calls", quotad.Day)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		del  func() error
	}{
		{"override", func() error { return c.Overrides.Delete(ctx, "acme", "api_calls", quotad.Day, quotad.IfMatch(o.ETag)) }},
		{"customer", func() error { return c.Customers.Delete(ctx, "acme", quotad.IfMatch("*")) }},
		{"plan", func() error { return c.Plans.Delete(ctx, "pro") }},
		{"metric", func() error { return c.Metrics.Delete(ctx, "exports", quotad.IfMatch(`"1"`)) }},
	}
	for _, st := range steps {
		if err := st.del(); err != nil {
			t.Fatalf("delete %s: %v", st.name, err)
		}
	}
	if _, err := c.Customers.Get(ctx, "acme"); !errors.Is(err, quotad.ErrCustomerNotFound) {
		t.Errorf("Customer after delete: err = %v, want ErrCustomerNotFound", err)
	}

	// Operations.
	if err := c.Healthz(ctx); err != nil {
		t.Errorf("Healthz = %v", err)
	}
	if err := c.Readyz(ctx); err != nil {
		t.Errorf("Readyz = %v", err)
	}
}

// TestClientLimitsPerSubjectAndCreditPools drives the client's calls of
// limits per subject and credit pools against quotad: what is written is
// read back, and a plan, override or metric read can be written back.
func TestClientLimitsPerSubjectAndCreditPools(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	c := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()
	for _, m := range []string{"gpt4_tokens", "images"} {
		if _, _, err := c.Metrics.Put(ctx, m, quotad.MetricSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	pool, _, err := c.Metrics.Put(ctx, "credits", quotad.MetricSpec{CreditSchema: []quotad.CreditRate{
		{Metric: "gpt4_tokens", Credits: 3, Per: 100}, {Metric: "images", Credits: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []quotad.CreditRate{{Metric: "gpt4_tokens", Credits: 3, Per: 100}, {Metric: "images", Credits: 10, Per: 1}}
	if !slices.Equal(pool.CreditSchema, want) {
		t.Errorf("pool = %+v, want schema %+v", pool, want)
	}
	read, err := c.Metrics.Get(ctx, "credits")
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := c.Metrics.Put(ctx, "credits", read.MetricSpec, quotad.IfMatch(read.ETag)); err != nil || created {
		t.Errorf("pool written back: created %v, %v", created, err)
	}
	_, _, err = c.Metrics.Put(ctx, "bonus", quotad.MetricSpec{CreditSchema: []quotad.CreditRate{{Metric: "images", Credits: 1}}})
	var p *quotad.Problem
	if !errors.As(err, &p) || !errors.Is(err, quotad.ErrValidation) || len(p.Errors) != 1 || p.Errors[0].Field != "credit_schema[0].metric" {
		t.Errorf("a second pool of images: %v, want a validation problem naming credit_schema[0].metric", err)
	}

	limits := []quotad.Limit{
		{Metric: "gpt4_tokens", Window: quotad.Day, Limit: 100000},
		{Metric: "gpt4_tokens", Window: quotad.Day, Limit: 5000, Per: quotad.PerSubject},
	}
	plan, _, err := c.Plans.Put(ctx, "team", quotad.PlanSpec{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Limits) != 2 || plan.Limits[0].Per != "" || plan.Limits[1].Per != quotad.PerSubject {
		t.Errorf("plan limits = %+v, want the customer's, then one per subject", plan.Limits)
	}
	if _, _, err := c.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "team"}); err != nil {
		t.Fatal(err)
	}
	o, created, err := c.Overrides.PutPer(ctx, "acme", "gpt4_tokens", quotad.Day, quotad.PerSubject, quotad.OverrideSpec{Limit: 9000})
	mustCreated(t, "PutOverridePer", created, err, true)
	if o.Per != quotad.PerSubject || o.ETag != `"1"` {
		t.Errorf("override = %+v, want per subject, ETag \"1\"", o)
	}
	if _, err := c.Overrides.Get(ctx, "acme", "gpt4_tokens", quotad.Day); !errors.Is(err, quotad.ErrOverrideNotFound) {
		t.Errorf("the customer-wide override: %v, want ErrOverrideNotFound", err)
	}
	got, err := c.Overrides.GetPer(ctx, "acme", "gpt4_tokens", quotad.Day, quotad.PerSubject)
	if err != nil || got.Limit != 9000 || got.ETag != `"1"` {
		t.Fatalf("Overrides.GetPer = %+v, %v", got, err)
	}
	_, created, err = c.Overrides.PutPer(ctx, "acme", "gpt4_tokens", quotad.Day, got.Per, got.OverrideSpec, quotad.IfMatch(got.ETag))
	mustCreated(t, "override written back", created, err, false)
	if list := collect(t, c.Overrides.List(ctx, "acme")); len(list) != 1 || list[0].Per != quotad.PerSubject {
		t.Errorf("overrides = %+v", list)
	}
	eff, err := c.Customers.Limits(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, l := range eff.Limits {
		shown = append(shown, fmt.Sprintf("%s/%s/%s=%d(%s)", l.Metric, l.Window, l.Per, l.Limit.Limit, l.Source))
	}
	if want := []string{"gpt4_tokens/day/=100000(plan)", "gpt4_tokens/day/subject=9000(override)"}; !slices.Equal(shown, want) {
		t.Errorf("limits = %q, want %q", shown, want)
	}
	if err := c.Overrides.DeletePer(ctx, "acme", "gpt4_tokens", quotad.Day, quotad.PerSubject, quotad.IfMatch(`"2"`)); err != nil {
		t.Errorf("Overrides.DeletePer: %v", err)
	}
}

// limitsEqual compares limits by what they send.
func limitsEqual(a, b quotad.Limit) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// mustCatalog declares api_calls (3 a minute) and exports (10 a day) on
// plan pro, and customer acme on it.
func mustCatalog(t *testing.T, c *quotad.Client) {
	t.Helper()
	ctx := t.Context()
	for _, m := range []string{"api_calls", "exports"} {
		if _, _, err := c.Metrics.Put(ctx, m, quotad.MetricSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Plans.Put(ctx, "pro", quotad.PlanSpec{Limits: []quotad.Limit{
		{Metric: "api_calls", Window: quotad.Minute, Limit: 3},
		{Metric: "exports", Window: quotad.Day, Limit: 10},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
}

func TestClientCheckAndUsage(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	c := quotad.New(s.URL, quotad.WithToken(s.CheckToken))
	ctx := t.Context()
	mustCatalog(t, admin)

	// Three allowed, the fourth denied: a result, not an error.
	for i := 1; i <= 4; i++ {
		res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"})
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		wantAllowed := i <= 3
		if res.Allowed != wantAllowed || len(res.Limits) != 1 || res.RateLimit == "" || res.RateLimitPolicy != `"api_calls/minute";q=3;w=60` {
			t.Errorf("check %d = %+v, want allowed %v with one window and RateLimit headers", i, res, wantAllowed)
		}
		if !wantAllowed && (res.RetryAfter == nil || *res.RetryAfter < 1 || res.Limits[0].State != "exceeded") {
			t.Errorf("denied check: retry_after %v, state %s; want >= 1, exceeded", res.RetryAfter, res.Limits[0].State)
		}
	}
	if _, err := c.Check(ctx, quotad.CheckRequest{Customer: "globex", Metric: "api_calls"}); !errors.Is(err, quotad.ErrCustomerNotFound) {
		t.Errorf("unknown customer: err = %v, want ErrCustomerNotFound", err)
	}
	if _, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "nope"}); !errors.Is(err, quotad.ErrMetricNotFound) {
		t.Errorf("undeclared metric: err = %v, want ErrMetricNotFound", err)
	}

	// A request_id replays the first answer and charges once; a repeat
	// with another cost is a conflict.
	first, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "exports", Cost: 2, RequestID: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "exports", Cost: 2, RequestID: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Allowed || first.Limits[0].Used != 2 || again.Limits[0].Used != 2 {
		t.Errorf("replay: first used %d, again used %d; want 2 and 2", first.Limits[0].Used, again.Limits[0].Used)
	}
	if _, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "exports", Cost: 3, RequestID: "job-1"}); !errors.Is(err, quotad.ErrConflict) {
		t.Errorf("replay with another cost: err = %v, want ErrConflict", err)
	}
	dry, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "exports", Cost: 5, DryRun: true})
	if err != nil || !dry.Allowed || dry.Limits[0].Used != 7 {
		t.Errorf("dry run = %+v, %v; want allowed, used 7", dry, err)
	}

	// Usage, with the check token.
	u, err := c.Usage(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int64{}
	for _, e := range u.Usage {
		used[e.Metric+"/"+e.Window] = e.Used
	}
	if want := map[string]int64{"api_calls/minute": 3, "exports/day": 2}; u.Plan != "pro" || fmt.Sprint(used) != fmt.Sprint(want) {
		t.Errorf("Usage = %v, want %v", used, want)
	}

	// A refund naming a check gives units back, once, and says how many.
	for i, want := range []int64{1, 0} {
		r, err := c.Refund(ctx, quotad.RefundRequest{Customer: "acme", Metric: "exports", Cost: 1, RequestID: "job-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Usage) != 1 || r.Usage[0].Used != 1 || r.Refunded != want || r.Usage[0].Refunded != want {
			t.Errorf("Refund #%d = %+v, want exports/day used 1, refunded %d", i+1, r, want)
		}
	}

	// History: today's totals.
	days, err := admin.Customers.UsageHistory(ctx, "acme", quotad.HistoryFilter{Metric: "api_calls", From: time.Now(), To: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Format("2006-01-02")
	if len(days) != 1 || days[0].Date != today || days[0].Used != 3 || days[0].Denied != 1 {
		t.Errorf("Customers.UsageHistory = %+v, want %s used 3 denied 1", days, today)
	}
	if days, err := admin.Customers.UsageHistory(ctx, "nobody", quotad.HistoryFilter{}); err != nil || len(days) != 0 {
		t.Errorf("Customers.UsageHistory of an unknown id = %v, %v; want none and no error", days, err)
	}
	if _, err := admin.Customers.UsageHistory(ctx, "acme", quotad.HistoryFilter{From: time.Now(), To: time.Now().AddDate(0, 0, -1)}); !errors.Is(err, quotad.ErrValidation) {
		t.Errorf("Customers.UsageHistory to before from: err = %v, want ErrValidation", err)
	}

	// A reset zeroes the windows.
	if err := admin.Customers.ResetUsage(ctx, "acme", "api_calls"); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"}); err != nil || !res.Allowed || res.Limits[0].Used != 1 {
		t.Errorf("check after reset = %+v, %v; want allowed, used 1", res, err)
	}
}

// Checks of items and subjects, and their refunds, reservations and usage,
// from the client against quotad: the request's shapes go out as quotad
// takes them, the answers come back whole.
func TestClientItemsAndSubjects(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	admin := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	c := quotad.New(s.URL, quotad.WithToken(s.CheckToken))
	ctx := t.Context()
	for _, m := range []string{"api_calls", "exports"} {
		if _, _, err := admin.Metrics.Put(ctx, m, quotad.MetricSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := admin.Plans.Put(ctx, "pro", quotad.PlanSpec{Name: "Pro", Limits: []quotad.Limit{
		{Metric: "api_calls", Window: quotad.Minute, Limit: 5},
		{Metric: "api_calls", Window: quotad.Minute, Limit: 2, Per: quotad.PerSubject},
		{Metric: "exports", Window: quotad.Minute, Limit: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Customers.Put(ctx, "acme", quotad.CustomerSpec{Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.Keys.Create(ctx, "acme", quotad.KeySpec{})
	if err != nil {
		t.Fatal(err)
	}

	res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Items: []quotad.CheckItem{{Metric: "api_calls", Subject: "alice"}, {Metric: "exports"}}})
	if err != nil || !res.Allowed || len(res.Items) != 2 || res.Items[0].Subject != "alice" || res.Items[0].Remaining == nil ||
		*res.Items[0].Remaining != 1 || len(res.Limits) != 3 || res.Limits[1].Subject != "alice" || res.Metric != "" {
		t.Fatalf("check of items = %+v, %v", res, err)
	}
	res, err = c.Check(ctx, quotad.CheckRequest{Customer: "acme", Items: []quotad.CheckItem{{Metric: "api_calls", Subject: "alice"}, {Metric: "exports"}}})
	if err != nil || res.Allowed || !res.Items[0].Allowed || res.Items[1].Allowed {
		t.Errorf("check of items, exports used = %+v, %v; want denied by exports alone", res, err)
	}
	if _, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"}); !errors.Is(err, quotad.ErrSubjectRequired) {
		t.Errorf("no subject: err = %v, want ErrSubjectRequired", err)
	}
	if res, err := c.Check(ctx, quotad.CheckRequest{APIKey: key.Key, Metric: "api_calls"}); err != nil || !res.Allowed || res.Limits[1].Subject != key.ID {
		t.Errorf("by key = %+v, %v; want the key's id as subject", res, err)
	}
	if _, err := c.Refund(ctx, quotad.RefundRequest{Customer: "acme", Metric: "api_calls", Subject: "alice"}); err != nil {
		t.Fatal(err)
	}
	u, err := c.SubjectUsage(ctx, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int64{}
	for _, e := range u.Usage {
		used[e.Metric+"/"+e.Window+"/"+e.Subject] = e.Used
	}
	if want := map[string]int64{"api_calls/minute/": 1, "api_calls/minute/alice": 0, "exports/minute/": 1}; fmt.Sprint(used) != fmt.Sprint(want) {
		t.Errorf("SubjectUsage = %v, want %v", used, want)
	}
}

func TestClientPagination(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	c := quotad.New(s.URL, quotad.WithToken(s.AdminToken))
	ctx := t.Context()
	for _, p := range []string{"free", "pro"} {
		if _, _, err := c.Plans.Put(ctx, p, quotad.PlanSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	var wantPro, wantAll []string
	for i := 7; i >= 1; i-- { // created out of order; listed by id
		id := fmt.Sprintf("cust-%02d", i)
		plan := "free"
		if i%2 == 1 {
			plan = "pro"
		}
		if _, _, err := c.Customers.Put(ctx, id, quotad.CustomerSpec{Plan: plan}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 7; i++ {
		id := fmt.Sprintf("cust-%02d", i)
		wantAll = append(wantAll, id)
		if i%2 == 1 {
			wantPro = append(wantPro, id)
		}
	}
	tests := []struct {
		name   string
		filter quotad.CustomerFilter
		want   []string
	}{
		{"all in one page", quotad.CustomerFilter{}, wantAll},
		{"pages of 2", quotad.CustomerFilter{PageSize: 2}, wantAll},
		{"pages of 1 on plan pro", quotad.CustomerFilter{Plan: "pro", PageSize: 1}, wantPro},
		{"pages of 3 on plan pro", quotad.CustomerFilter{Plan: "pro", PageSize: 3}, wantPro},
		{"search, pages of 1", quotad.CustomerFilter{Query: "UST-0", PageSize: 1}, wantAll},
		{"search on plan pro", quotad.CustomerFilter{Query: "cust-03", Plan: "pro"}, []string{"cust-03"}},
		{"search finding none", quotad.CustomerFilter{Query: "acme"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, cu := range collect(t, c.Customers.List(ctx, tt.filter)) {
				got = append(got, cu.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Customers = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := collectErr(c.Customers.List(ctx, quotad.CustomerFilter{PageSize: 5000})); !errors.Is(err, quotad.ErrValidation) {
		t.Errorf("page size 5000: err = %v, want ErrValidation", err)
	}

	// The audit log: every write, newest first, across pages.
	all := collect(t, c.Audit.List(ctx, quotad.AuditFilter{PageSize: 3}))
	if len(all) != 9 {
		t.Fatalf("audit events = %d, want 9 (2 plans, 7 customers)", len(all))
	}
	for i, ev := range all {
		if i > 0 && ev.ID >= all[i-1].ID {
			t.Errorf("event %d has id %d after %d: want newest first", i, ev.ID, all[i-1].ID)
		}
		if ev.Actor != quotadtest.AdminTokenName || ev.Action != "create" || ev.Before != nil || ev.After == nil {
			t.Errorf("event %d = %+v, want a create by %s", i, ev, quotadtest.AdminTokenName)
		}
	}
	if last := all[len(all)-1]; last.Resource != "plans/free" {
		t.Errorf("oldest event is about %s, want plans/free", last.Resource)
	}
	one := collect(t, c.Audit.List(ctx, quotad.AuditFilter{Customer: "cust-03", PageSize: 1}))
	if len(one) != 1 || one[0].Resource != "customers/cust-03" || one[0].After["plan"] != "pro" {
		t.Errorf("audit of cust-03 = %+v, want its creation on pro", one)
	}
}

func collectErr[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

func TestMiddlewareAgainstQuotad(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	mustCatalog(t, quotad.New(s.URL, quotad.WithToken(s.AdminToken)))
	c := quotad.New(s.URL, quotad.WithToken(s.CheckToken))

	var served int
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.Write([]byte("ok"))
	})
	open := c.Middleware(quotad.MiddlewareOptions{
		Customer: quotad.FromHeader("X-Customer"),
		Metric:   quotad.Static("api_calls"),
		// Generous: quotad runs under the race detector beside other
		// tests.
		Timeout: 5 * time.Second,
	})(handler)
	closed := c.Middleware(quotad.MiddlewareOptions{
		Customer:   quotad.FromHeader("X-Customer"),
		Metric:     quotad.Static("api_calls"),
		Timeout:    5 * time.Second,
		FailClosed: true,
	})(handler)
	serve := func(h http.Handler, customer string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Customer", customer)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	tests := []struct {
		name       string
		h          http.Handler
		customer   string
		stop       bool // stop quotad first
		wantStatus int
		wantRL     string // RateLimit header
		wantRetry  bool   // a Retry-After header
	}{
		{"first allowed", open, "acme", false, 200, `"api_calls/minute";r=2;t=`, false},
		{"second allowed", closed, "acme", false, 200, `"api_calls/minute";r=1;t=`, false},
		{"third allowed", open, "acme", false, 200, `"api_calls/minute";r=0;t=`, false},
		{"fourth denied", open, "acme", false, 429, `"api_calls/minute";r=0;t=`, true},
		{"unknown customer refused", open, "globex", false, 403, "", false},
		{"quotad stopped, fail open", open, "acme", true, 200, "", false},
		{"quotad stopped, fail closed", closed, "acme", true, 503, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stop {
				if err := s.Stop(); err != nil {
					t.Fatal(err)
				}
			}
			before := served
			rec := serve(tt.h, tt.customer)
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			if ran := served > before; ran != (tt.wantStatus == 200) {
				t.Errorf("handler ran = %v, want %v", ran, tt.wantStatus == 200)
			}
			rl := rec.Header().Get("RateLimit")
			if tt.wantRL == "" && rl != "" || tt.wantRL != "" && (len(rl) <= len(tt.wantRL) || rl[:len(tt.wantRL)] != tt.wantRL) {
				t.Errorf("RateLimit = %q, want %q<seconds>", rl, tt.wantRL)
			}
			if got := rec.Header().Get("Retry-After") != ""; got != tt.wantRetry {
				t.Errorf("Retry-After = %q, want one: %v", rec.Header().Get("Retry-After"), tt.wantRetry)
			}
			if tt.wantStatus != 200 && rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", rec.Header().Get("Content-Type"))
			}
		})
	}
}
