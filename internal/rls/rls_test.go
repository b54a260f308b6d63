package rls_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/rls"
	"github.com/quotad/quotad/internal/tiers"
)

// fakeKeys resolves the keys of a map; "broken" fails as a store would.
type fakeKeys map[string]string

func (k fakeKeys) Customer(_ context.Context, key string) (string, string, error) {
	if key == "broken" {
		return "", "", errors.New("keys store down")
	}
	if c, ok := k[key]; ok {
		return c, "key_" + key, nil
	}
	return "", "", fmt.Errorf("%w: no such key", tiers.ErrInvalidAPIKey)
}

var _ rls.Keys = fakeKeys{}

var now = time.Date(2026, 11, 22, 10, 0, 0, 250_000_000, time.UTC)

// fixture is a Service over a real engine on in-memory stores: "acme" may
// make 5 calls a minute and 100 a day; "tiny" 1 call a minute.
type fixture struct {
	svc    *rls.Service
	engine *quota.Engine
}

func newFixture(t *testing.T, rules *rls.Rules, tokens ...string) *fixture {
	t.Helper()
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutMetric("exports", nil)
	limit := func(m string, w tiers.Window, n int64) tiers.Limit {
		return tiers.Limit{Metric: m, Window: w, Limit: n, Mode: tiers.Hard}
	}
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{limit("api_calls", tiers.Minute, 5), limit("api_calls", tiers.Day, 100),
		limit("exports", tiers.Day, 3)})
	catalog.PutCustomer("tiny", tiers.Anchor{}, []tiers.Limit{limit("api_calls", tiers.Minute, 1)})
	catalog.PutMetric("seats", nil)
	catalog.PutCustomer("team", tiers.Anchor{}, []tiers.Limit{limit("seats", tiers.Total, 2)})
	ledger := quotafake.NewLedger()
	e := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		History: quotafake.NewHistory(), Clock: quotafake.NewClock(now), StoreTimeout: 30 * time.Second})
	svc := rls.New(rls.Options{Checker: e, Keys: fakeKeys{"key-acme": "acme"}, Rules: rules, Tokens: tokens,
		Now: func() time.Time { return now }})
	return &fixture{svc: svc, engine: e}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonrl.RateLimitDescriptor {
	d := &commonrl.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonrl.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withCost(d *commonrl.RateLimitDescriptor, n uint64) *commonrl.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func (f *fixture) used(t *testing.T, customer, metric string, w tiers.Window) int64 {
	t.Helper()
	_, usage, err := f.engine.Usage(context.Background(), customer, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if u.Metric == metric && u.Window == w {
			return u.Used
		}
	}
	return 0
}

func codesOf(res *rlsv3.RateLimitResponse) string {
	var s []string
	for _, st := range res.GetStatuses() {
		s = append(s, st.GetCode().String())
	}
	return res.GetOverallCode().String() + " [" + strings.Join(s, " ") + "]"
}

func TestShouldRateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rules string
		req   *rlsv3.RateLimitRequest
		want  string // overall [per descriptor]
		// acme's api_calls minute and exports day afterwards
		calls, exports int64
	}{
		{name: "one descriptor", req: &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}},
			want: "OK [OK]", calls: 1},
		{name: "metric entry beats the domain", req: &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme", "metric", "exports")}}, want: "OK [OK]", exports: 1},
		{name: "request hits_addend", req: &rlsv3.RateLimitRequest{Domain: "api_calls", HitsAddend: 4,
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}}, want: "OK [OK]", calls: 4},
		{name: "descriptor hits_addend beats the request's", req: &rlsv3.RateLimitRequest{Domain: "api_calls", HitsAddend: 4,
			Descriptors: []*commonrl.RateLimitDescriptor{withCost(desc("customer", "acme"), 2)}}, want: "OK [OK]", calls: 2},
		{name: "hits_addend 0 counts nothing", req: &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{withCost(desc("customer", "acme"), 0)}}, want: "OK [OK]"},
		{name: "two descriptors, both within", req: &rlsv3.RateLimitRequest{Descriptors: []*commonrl.RateLimitDescriptor{
			desc("customer", "acme", "metric", "api_calls"), desc("customer", "acme", "metric", "exports")}}, want: "OK [OK OK]", calls: 1, exports: 1},
		{name: "two descriptors, one over: none counted", req: &rlsv3.RateLimitRequest{Descriptors: []*commonrl.RateLimitDescriptor{
			desc("customer", "acme", "metric", "api_calls"), withCost(desc("customer", "acme", "metric", "exports"), 4)}}, want: "OVER_LIMIT [OK OVER_LIMIT]"},
		{name: "api key", req: &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{desc("api_key", "key-acme")}},
			want: "OK [OK]", calls: 1},
		{name: "unknown api key denies, none counted", req: &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{
			desc("customer", "acme"), desc("api_key", "key-nobody")}}, want: "OVER_LIMIT [OK OVER_LIMIT]"},
		{name: "unknown customer denies, none counted", req: &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{
			desc("customer", "acme"), desc("customer", "ghost")}}, want: "OVER_LIMIT [OK OVER_LIMIT]"},
		{name: "unknown metric denies", req: &rlsv3.RateLimitRequest{Domain: "nope", Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}},
			want: "OVER_LIMIT [OVER_LIMIT]"},
		{name: "unknown allowed", rules: "unknown: allow\n", req: &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{
			desc("customer", "acme"), desc("customer", "ghost"), desc("api_key", "key-nobody")}}, want: "OK [OK OK OK]", calls: 1},
		{name: "renamed entries", rules: "entries: {customer: tenant, metric: resource}\n", req: &rlsv3.RateLimitRequest{Domain: "x",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("tenant", "acme", "resource", "exports", "remote_address", "10.0.0.1")}}, want: "OK [OK]", exports: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rules := rls.DefaultRules()
			if tc.rules != "" {
				var err error
				if rules, err = rls.ParseRules([]byte(tc.rules)); err != nil {
					t.Fatal(err)
				}
			}
			f := newFixture(t, rules)
			res, err := f.svc.ShouldRateLimit(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := codesOf(res); got != tc.want {
				t.Errorf("codes %s, want %s", got, tc.want)
			}
			if got := f.used(t, "acme", "api_calls", tiers.Minute); got != tc.calls {
				t.Errorf("acme's api_calls/minute counts %d, want %d", got, tc.calls)
			}
			if got := f.used(t, "acme", "exports", tiers.Day); got != tc.exports {
				t.Errorf("acme's exports/day counts %d, want %d", got, tc.exports)
			}
		})
	}
}

// A total has no Envoy unit and never resets: its status names no
// duration until reset, and a denial by it no Retry-After.
func TestShouldRateLimitTotal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	req := &rlsv3.RateLimitRequest{Domain: "seats", Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "team")}}
	for i, want := range []string{"OK [OK]", "OK [OK]", "OVER_LIMIT [OVER_LIMIT]"} {
		res, err := f.svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := codesOf(res); got != want {
			t.Fatalf("check %d: codes %s, want %s", i, got, want)
		}
		st := res.GetStatuses()[0]
		if l := st.GetCurrentLimit(); l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_UNKNOWN || l.GetName() != "seats/total" ||
			st.GetDurationUntilReset() != nil {
			t.Errorf("check %d: status %v, want seats/total, unit UNKNOWN, no duration until reset", i, st)
		}
		for _, h := range res.GetResponseHeadersToAdd() {
			if h.GetKey() == "Retry-After" {
				t.Errorf("check %d: Retry-After %s on a total", i, h.GetValue())
			}
		}
	}
}

// A status names the most constraining window as Envoy's current limit;
// the headers are the HTTP check's.
func TestShouldRateLimitStatusAndHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	req := &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{withCost(desc("customer", "acme"), 3)}}
	res, err := f.svc.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	st := res.GetStatuses()[0]
	if l := st.GetCurrentLimit(); l.GetRequestsPerUnit() != 5 || l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE ||
		l.GetName() != "api_calls/minute" || st.GetLimitRemaining() != 2 {
		t.Errorf("status %v, want api_calls/minute 5 per MINUTE, 2 remaining", st)
	}
	// The minute's bucket ends at 10:01:00; now is 10:00:00.25.
	if d := st.GetDurationUntilReset().AsDuration(); d != 59750*time.Millisecond {
		t.Errorf("duration until reset %s, want 59.75s", d)
	}
	headers := func(res *rlsv3.RateLimitResponse) map[string]string {
		h := map[string]string{}
		for _, v := range res.GetResponseHeadersToAdd() {
			h[v.GetKey()] = v.GetValue()
		}
		return h
	}
	want := map[string]string{"Ratelimit-Policy": `"api_calls/minute";q=5;w=60, "api_calls/day";q=100;w=86400`,
		"Ratelimit": `"api_calls/minute";r=2;t=60`}
	if got := headers(res); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", got, want)
	}
	res, err = f.svc.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want["Ratelimit"] = `"api_calls/minute";r=2;t=60`
	want["Retry-After"] = "60"
	if got := headers(res); res.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("over the limit: %s, headers %v; want OVER_LIMIT, %v", codesOf(res), got, want)
	}
}

// With other forms of the rate limit headers asked for, an answer asks
// Envoy to add those, describing the same window: the minute, of 5.
func TestShouldRateLimitHeaderForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	svc := rls.New(rls.Options{Checker: f.engine, Now: func() time.Time { return now },
		RateLimitHeaders: rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X})
	req := &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{withCost(desc("customer", "acme"), 3)}}
	unix := func(h, m, s int) string { return fmt.Sprint(time.Date(2026, 11, 22, h, m, s, 0, time.UTC).Unix()) }
	for _, want := range []string{
		// Allowed: the minute resets at 10:01:00; now is 10:00:00.25.
		"Ratelimit-Policy: 5;w=60, 100;w=86400\nRatelimit: limit=5, remaining=2, reset=60\n" +
			"Ratelimit-Limit: 5\nRatelimit-Remaining: 2\nRatelimit-Reset: 60\n" +
			"X-Ratelimit-Limit: 5\nX-Ratelimit-Remaining: 2\nX-Ratelimit-Reset: " + unix(10, 1, 0) + "\n",
		// Denied: the same check passes in 60 s, at 10:01:00.25.
		"Ratelimit-Policy: 5;w=60, 100;w=86400\nRatelimit: limit=5, remaining=2, reset=60\n" +
			"Ratelimit-Limit: 5\nRatelimit-Remaining: 2\nRatelimit-Reset: 60\n" +
			"X-Ratelimit-Limit: 5\nX-Ratelimit-Remaining: 2\nX-Ratelimit-Reset: " + unix(10, 1, 1) + "\n" +
			"Retry-After: 60\n",
	} {
		res, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for _, h := range res.GetResponseHeadersToAdd() {
			fmt.Fprintf(&got, "%s: %s\n", h.GetKey(), h.GetValue())
		}
		if got.String() != want {
			t.Errorf("%s: headers\n%s\nwant\n%s", codesOf(res), got.String(), want)
		}
	}
}

// A look (hits_addend 0) says what remains now, counting nothing, and is
// over the limit only when nothing remains. In a domain that counts over
// the limit, hits are counted even when over it, and answered OVER_LIMIT;
// elsewhere they are not counted.
func TestShouldRateLimitLookAndCountOverLimit(t *testing.T) {
	t.Parallel()
	rules, err := rls.ParseRules([]byte("domains:\n  api_calls:\n    count_over_limit: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		domain    string
		hits      uint64
		want      string
		remaining uint32 // of the minute (5), the most constraining window
		used      int64  // acme's api_calls minute afterwards
	}
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"counted over the limit", []call{
			{"api_calls", 0, "OK [OK]", 5, 0},
			{"api_calls", 0, "OK [OK]", 5, 0},
			{"api_calls", 3, "OK [OK]", 2, 3},
			{"api_calls", 0, "OK [OK]", 2, 3},
			{"api_calls", 0, "OK [OK]", 2, 3},
			{"api_calls", 4, "OVER_LIMIT [OVER_LIMIT]", 0, 7},
			{"api_calls", 0, "OVER_LIMIT [OVER_LIMIT]", 0, 7},
			{"api_calls", 1, "OVER_LIMIT [OVER_LIMIT]", 0, 8},
		}},
		{"not counted over the limit elsewhere", []call{
			{"other", 3, "OK [OK]", 2, 3},
			{"other", 4, "OVER_LIMIT [OVER_LIMIT]", 2, 3},
			{"other", 0, "OK [OK]", 2, 3},
			{"other", 2, "OK [OK]", 0, 5},
			{"other", 0, "OVER_LIMIT [OVER_LIMIT]", 0, 5},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, rules)
			for i, c := range tc.calls {
				res, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: c.domain,
					Descriptors: []*commonrl.RateLimitDescriptor{withCost(desc("customer", "acme", "metric", "api_calls"), c.hits)}})
				if err != nil {
					t.Fatal(err)
				}
				st := res.GetStatuses()[0]
				if got := codesOf(res); got != c.want || st.GetLimitRemaining() != c.remaining {
					t.Errorf("call %d (%d hits): %s, %d remaining; want %s, %d", i, c.hits, got, st.GetLimitRemaining(), c.want, c.remaining)
				}
				if got := f.used(t, "acme", "api_calls", tiers.Minute); got != c.used {
					t.Errorf("call %d (%d hits): the minute counts %d, want %d", i, c.hits, got, c.used)
				}
			}
		})
	}
}

func TestShouldRateLimitRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, "chk", "adm")
	ok := &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}}
	auth := func(v ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(append([]string{}, v...)...))
	}
	many := make([]*commonrl.RateLimitDescriptor, quota.MaxItems+1)
	for i := range many {
		many[i] = desc("customer", "acme")
	}
	negative := desc("customer", "acme")
	negative.IsNegativeHits = true
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *rlsv3.RateLimitRequest
		want codes.Code
	}{
		{"no token", context.Background(), ok, codes.Unauthenticated},
		{"wrong token", auth("authorization", "Bearer nope"), ok, codes.Unauthenticated},
		{"not bearer", auth("authorization", "Basic chk"), ok, codes.Unauthenticated},
		{"check token", auth("authorization", "Bearer chk"), ok, codes.OK},
		{"admin token", auth("authorization", "Bearer adm"), ok, codes.OK},
		{"no descriptors", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls"}, codes.InvalidArgument},
		{"too many descriptors", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: many}, codes.InvalidArgument},
		{"empty entries", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{{}}}, codes.InvalidArgument},
		{"empty value", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "")}}, codes.InvalidArgument},
		{"no customer", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("path", "/x")}}, codes.InvalidArgument},
		{"customer and key", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme", "api_key", "key-acme")}}, codes.InvalidArgument},
		{"customer twice", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme", "customer", "tiny")}}, codes.InvalidArgument},
		{"no metric, no domain", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}}, codes.InvalidArgument},
		{"huge descriptor hits_addend", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{withCost(desc("customer", "acme"), quota.MaxCost+1)}}, codes.InvalidArgument},
		{"huge request hits_addend", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls", HitsAddend: quota.MaxCost + 1,
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}}, codes.InvalidArgument},
		{"negative hits", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{negative}}, codes.InvalidArgument},
		{"malformed customer id", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme corp")}}, codes.InvalidArgument},
		{"malformed domain as metric", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "Edge Proxy",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("customer", "acme")}}, codes.InvalidArgument},
		{"unknown key, malformed metric", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "Not A Metric",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("api_key", "key-nobody")}}, codes.InvalidArgument},
		{"keys store down", auth("authorization", "Bearer chk"), &rlsv3.RateLimitRequest{Domain: "api_calls",
			Descriptors: []*commonrl.RateLimitDescriptor{desc("api_key", "broken")}}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.ShouldRateLimit(tc.ctx, tc.req)
			if got := status.Code(err); got != tc.want {
				t.Errorf("code %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}

// Limits per subject count each subject apart: the subject entry's, or,
// by API key without one, the key's id; the customer-wide limit is
// shared. A metric with limits per subject wants a subject.
func TestShouldRateLimitSubjects(t *testing.T) {
	t.Parallel()
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Minute, Limit: 3, Mode: tiers.Hard},
		{Metric: "api_calls", Window: tiers.Minute, Limit: 1, Mode: tiers.Hard, Per: tiers.PerSubject},
	})
	ledger := quotafake.NewLedger()
	e := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		History: quotafake.NewHistory(), Clock: quotafake.NewClock(now), StoreTimeout: 30 * time.Second})
	svc := rls.New(rls.Options{Checker: e, Keys: fakeKeys{"one": "acme", "two": "acme"}, Now: func() time.Time { return now }})
	ctx := context.Background()
	ask := func(d ...*commonrl.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
		return svc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: d})
	}
	for _, tc := range []struct {
		name string
		d    *commonrl.RateLimitDescriptor
		want string
	}{
		{"alice's first", desc("customer", "acme", "subject", "alice"), "OK [OK]"},
		{"alice's second", desc("customer", "acme", "subject", "alice"), "OVER_LIMIT [OVER_LIMIT]"},
		{"bob's first, apart", desc("customer", "acme", "subject", "bob"), "OK [OK]"},
		{"key one: its id is the subject", desc("api_key", "one"), "OK [OK]"},
		{"key one again", desc("api_key", "one"), "OVER_LIMIT [OVER_LIMIT]"},
		{"key one's id, named", desc("customer", "acme", "subject", "key_one"), "OVER_LIMIT [OVER_LIMIT]"},
		{"key two, with a subject entry: the customer's 3 are used", desc("api_key", "two", "subject", "carol"), "OVER_LIMIT [OVER_LIMIT]"},
		{"a new subject past the customer's limit", desc("customer", "acme", "subject", "dave"), "OVER_LIMIT [OVER_LIMIT]"},
	} {
		res, err := ask(tc.d)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := codesOf(res); got != tc.want {
			t.Errorf("%s: codes %s, want %s", tc.name, got, tc.want)
		}
	}
	_, err := ask(desc("customer", "acme", "subject", "erin"), desc("customer", "acme"))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `descriptors[1]: metric "api_calls" has limits per subject`) {
		t.Errorf("no subject: %v, want InvalidArgument naming descriptors[1]", err)
	}
}

// Without Keys, every key is unknown.
func TestNilKeysMeansUnknownKey(t *testing.T) {
	t.Parallel()
	svc := rls.New(rls.Options{Checker: newFixture(t, nil).engine})
	res, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "api_calls",
		Descriptors: []*commonrl.RateLimitDescriptor{desc("api_key", "key-acme")}})
	if err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("%v, %v; want OVER_LIMIT", res, err)
	}
}

func TestParseRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, err string }{
		{"empty", "", ""},
		{"full", "entries:\n  customer: tenant\n  api_key: key\n  metric: resource\nunknown: allow\n", ""},
		{"unknown field", "entries: {}\nunknwn: allow\n", `line 2: unknown field "unknwn" at the top level: want one of entries, unknown, domains`},
		{"domains", "domains:\n  llm_tokens: {count_over_limit: true}\n  api_calls:\n    count_over_limit: false\n", ""},
		{"domains not a mapping", "domains: [llm_tokens]\n", `line 1: domains: want a mapping of domain names to their settings (count_over_limit)`},
		{"domain not a mapping", "domains:\n  llm_tokens: true\n", `line 2: domains.llm_tokens: want a mapping with count_over_limit`},
		{"unknown domain field", "domains:\n  llm_tokens:\n    count_over_limt: true\n", `line 3: unknown field "count_over_limt" in domains.llm_tokens: want one of count_over_limit`},
		{"count_over_limit not a boolean", "domains:\n  llm_tokens:\n    count_over_limit: yes please\n", `line 3: domains.llm_tokens.count_over_limit: want true or false`},
		{"domain twice", "domains:\n  a: {}\n  a: {}\n", `line 3: domain "a" given twice`},
		{"unknown entry", "entries:\n  customer: c\n  metrc: m\n", `line 3: unknown field "metrc" in entries: want one of customer, api_key, metric, subject`},
		{"bad unknown", "unknown: maybe\n", `line 1: unknown: want deny or allow, got "maybe"`},
		{"empty entry key", "entries:\n  metric: \"\"\n", `line 2: entries.metric: want an entry key, got an empty one`},
		{"not a string", "entries:\n  metric: [a]\n", `line 2: entries.metric: want a string`},
		{"same key twice", "entries:\n  customer: c\n  metric: c\n", `entries: customer "c", api_key "api_key", metric "c" and subject "subject" must be four different keys`},
		{"duplicate field", "unknown: allow\nunknown: deny\n", `line 2: field "unknown" at the top level given twice`},
		{"entries not a mapping", "entries: customer\n", `line 1: entries: want a mapping with customer, api_key, metric, subject`},
		{"two documents", "unknown: allow\n---\nunknown: deny\n", "want one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rls.ParseRules([]byte(tc.yaml))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.err {
				t.Errorf("error %q, want %q", got, tc.err)
			}
		})
	}
}

func TestUnitNamesEveryWindow(t *testing.T) {
	t.Parallel()
	for _, w := range tiers.Windows {
		if !w.Resets() {
			// Envoy has no unit for a window that never ends.
			if u := rls.Unit(w); u != rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
				t.Errorf("window %s: unit %s, want UNKNOWN", w, u)
			}
			continue
		}
		if u := rls.Unit(w); u == rlsv3.RateLimitResponse_RateLimit_UNKNOWN || !strings.EqualFold(u.String(), w.String()) {
			t.Errorf("window %s: unit %s", w, u)
		}
	}
}
