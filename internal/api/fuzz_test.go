package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// FuzzDecodeRequest feeds arbitrary bytes, as the body, to every route that
// decodes one: POST /v1/check and /v1/refund and the four admin PUTs. For
// each it decodes the body into the route's request type and runs the
// route's validation, then serves the same body through the whole server
// (echo, middleware, error handler) and checks that the answer is the one
// the direct decode and validation call for.
//
// Properties, per route:
//   - decoding and validating never panic;
//   - a decode error is the package's client error: a 400
//     validation_failed problem about one field, never a 5xx;
//   - a validation error is a *tiers.ValidationError whose every entry
//     names its field, which becomes a 400 validation_failed problem;
//   - the server answers a bad body with exactly the problem the direct
//     decode or validation produced (413 when the body is too large), and a
//     good one with a 2xx whose body is the JSON encoding of what the
//     handler passed on, having passed on exactly the validated value;
//   - the server never answers 5xx and logs no error.
//
// What the decoder refuses (repeated or unknown keys, keys in another case,
// null) is the JSON library's and decodeNull's, and decode_test.go's tables
// hold it; this target does not state it again.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"customer":"acme","metric":"api_calls"}`))
	f.Add([]byte(`{"limits":[{"metric":"api_calls","window":"day","limit":10}]}`))
	f.Add([]byte(`{"limit":1,"expires_at":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"customer":"acme","metric":"api_calls","cost":null}`))
	f.Add([]byte(`{"customer":"acme","metric":"api_calls","cost":1,"cost":2}`))
	f.Add([]byte(`{"features":{"sso":true,"max_projects":10,"support":"priority"}}`))
	f.Add([]byte(`{"value": 10, "expires_at":"2030-01-01T00:00:00Z","reason":"trial"}`))
	f.Add([]byte(`{"value":1.5}`))
	f.Add([]byte(`{"value":null}`))
	f.Add([]byte(`{"features":{"sso":null,"Bad":""}}`))

	fs := newFuzzServer()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range fuzzRoutes {
			fs.run(t, r, body)
		}
	})
}

// TestFuzzDecodeRequestLargeBodies runs the fuzz target's checks on bodies
// too large for its seed corpus, where they would slow every mutation:
// nesting around the decoder's depth limit (10,000 levels) and sizes around
// MaxBodyBytes.
func TestFuzzDecodeRequestLargeBodies(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"plan":"pro","metadata":{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`)
	}
	padded := func(size int) []byte {
		body := []byte(`{"plan":"pro","customer":"acme","metric":"api_calls","limit":1}`)
		return append(body, bytes.Repeat([]byte(" "), size-len(body))...)
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"nesting within the decoder's limit", nested(9000)},
		{"nesting beyond the decoder's limit", nested(10001)},
		{"body of MaxBodyBytes", padded(MaxBodyBytes)},
		{"body one byte over MaxBodyBytes", padded(MaxBodyBytes + 1)},
		{"integer of 60000 digits", []byte(`{"cost":` + strings.Repeat("9", 60000) + `}`)},
	}
	fs := newFuzzServer()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range fuzzRoutes {
				fs.run(t, r, c.body)
			}
		})
	}
}

// fuzzNow is the fuzzed server's clock: overrides must expire after it.
var fuzzNow = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

// fuzzRoute is one route that decodes a JSON body.
type fuzzRoute struct {
	name, method, path string
	status             int // the status of a good body
	// decode decodes body into the route's request type and validates it
	// as the handler and what it calls do, asserting the decode-level
	// properties. It returns what the handler passes to the checker or the
	// store, or the error it must answer with.
	decode func(t *testing.T, name string, body []byte) (passed any, err error)
	// answer is what the handler writes for passed.
	answer func(passed any) any
}

var fuzzRoutes = []fuzzRoute{
	{
		name: "check", method: http.MethodPost, path: "/v1/check", status: http.StatusOK,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(r checkRequest) (any, error) {
				q := quota.Request{Metric: r.Metric, Cost: fuzzCost(r.Cost), Subject: r.Subject,
					DryRun: r.DryRun, RequestID: r.RequestID}
				if r.Items != nil {
					// Items take the place of metric, cost and subject:
					// 1 to 16 of them.
					for _, f := range []struct {
						name  string
						given bool
					}{{"metric", r.Metric != ""}, {"cost", r.Cost != nil}, {"subject", r.Subject != ""},
						{"items", len(r.Items) == 0 || len(r.Items) > 16}} {
						if f.given {
							return nil, &tiers.ValidationError{Fields: []tiers.FieldError{{Field: f.name, Message: fuzzItemsMessage(f.name)}}}
						}
					}
					q.Cost = 0
					for _, it := range r.Items {
						q.Items = append(q.Items, quota.Item{Metric: it.Metric, Cost: fuzzCost(it.Cost), Subject: it.Subject})
					}
				}
				customer, keyID, err := fuzzIdentify(r.Customer, r.APIKey)
				if err != nil {
					return nil, err
				}
				q.Customer = customer
				// By key, the key's id is the subject of what names none.
				if q.Items == nil && q.Subject == "" {
					q.Subject = keyID
				}
				for i := range q.Items {
					if q.Items[i].Subject == "" {
						q.Items[i].Subject = keyID
					}
				}
				return q, q.Validate()
			})
		},
		answer: func(passed any) any {
			q := passed.(quota.Request)
			res := checkResponse{Allowed: true, Customer: q.Customer, Limits: []windowState{}}
			if q.Items == nil {
				res.Metric, res.Cost = &q.Metric, &q.Cost
			}
			for _, it := range q.Items {
				res.Items = append(res.Items, itemState{Metric: it.Metric, Subject: it.Subject, Cost: it.Cost, Allowed: true,
					Limits: []windowState{}})
			}
			return res
		},
	},
	{
		name: "refund", method: http.MethodPost, path: "/v1/refund", status: http.StatusOK,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(r refundRequest) (any, error) {
				customer, keyID, err := fuzzIdentify(r.Customer, r.APIKey)
				if err != nil {
					return nil, err
				}
				q := quota.RefundRequest{Customer: customer, Metric: r.Metric, Cost: fuzzCost(r.Cost),
					Subject: r.Subject, RequestID: r.RequestID, Actor: anonymous.Name}
				if q.Subject == "" {
					q.Subject = keyID
				}
				if keyID != "" {
					q.Actor = keyID
				}
				return q, q.Validate()
			})
		},
		answer: func(passed any) any {
			return refundAnswer{Customer: passed.(quota.RefundRequest).Customer, Usage: []usageEntry{}}
		},
	},
	{
		name: "set total", method: http.MethodPut, path: "/v1/customers/acme/usage/api_calls/total", status: http.StatusOK,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(r totalRequest) (any, error) {
				if r.Used == nil {
					return nil, tiers.Invalid("used", "is required")
				}
				q := fuzzTotal{Customer: "acme", Metric: "api_calls", Used: *r.Used}
				return q, quota.ValidateTotal(q.Customer, q.Metric, q.Used)
			})
		},
		answer: func(passed any) any {
			q := passed.(fuzzTotal)
			u := quota.Usage{Metric: q.Metric, Window: tiers.Total, Used: q.Used}
			return totalAnswer{Customer: q.Customer, usageEntry: toUsageEntries([]quota.Usage{u})[0]}
		},
	},
	{
		name: "key", method: http.MethodPost, path: "/v1/customers/acme/keys", status: http.StatusCreated,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(s keys.Spec) (any, error) {
				return s, s.Validate(fuzzNow)
			})
		},
		answer: func(passed any) any { return fuzzCreatedKey(passed.(keys.Spec)) },
	},
	{
		name: "metric", method: http.MethodPut, path: "/v1/metrics/api_calls", status: http.StatusCreated,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(s tiers.MetricSpec) (any, error) {
				return s.Validate("api_calls")
			})
		},
		answer: func(passed any) any { return passed },
	},
	{
		name: "plan", method: http.MethodPut, path: "/v1/plans/pro", status: http.StatusCreated,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(s tiers.PlanSpec) (any, error) {
				return s.Validate("pro")
			})
		},
		answer: func(passed any) any { return passed },
	},
	{
		name: "customer", method: http.MethodPut, path: "/v1/customers/acme", status: http.StatusCreated,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(s tiers.CustomerSpec) (any, error) {
				return s.Validate("acme", fuzzNow)
			})
		},
		answer: func(passed any) any { return passed },
	},
	{
		name: "override", method: http.MethodPut, path: "/v1/customers/acme/overrides/api_calls/day",
		status: http.StatusCreated,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(s tiers.OverrideSpec) (any, error) {
				return s.Validate("acme", "api_calls", "day", "", fuzzNow)
			})
		},
		answer: func(passed any) any { return passed },
	},
	{
		name: "feature", method: http.MethodPut, path: "/v1/customers/acme/features/sso",
		status: http.StatusCreated,
		decode: func(t *testing.T, name string, body []byte) (any, error) {
			return fuzzDecode(t, name, body, func(s tiers.FeatureOverrideSpec) (any, error) {
				return s.Validate("acme", "sso", fuzzNow)
			})
		},
		answer: func(passed any) any { return passed },
	},
}

// fuzzItemsMessage is what is said of a check of items that gives field
// beside its items (or, for "items", of too few or too many).
func fuzzItemsMessage(field string) string {
	if field == "items" {
		return "must hold 1 to 16 items"
	}
	return "is not taken with items: each item names its own"
}

// fuzzCost is the handlers' default: a check or refund without cost is of 1.
func fuzzCost(c *int64) int64 {
	if c == nil {
		return 1
	}
	return *c
}

// fuzzDecode decodes body into a T as decodeBody does, asserts the
// decode-level properties and returns what validate makes of the value.
func fuzzDecode[T any](t *testing.T, name string, body []byte, validate func(T) (any, error)) (any, error) {
	t.Helper()
	var v T
	if err := fuzzNoPanic(t, name+": decoding", func() error { return decodeJSON(body, &v) }); err != nil {
		assertDecodeError(t, name, err)
		return nil, err
	}
	var passed any
	var verr error
	fuzzNoPanic(t, name+": validating", func() error {
		passed, verr = validate(v)
		return nil
	})
	if verr != nil {
		if !errors.Is(verr, tiers.ErrInvalidAPIKey) {
			assertValidationError(t, name, verr)
		}
		return nil, verr
	}
	return passed, nil
}

// fuzzQuote quotes a body for a failure message, eliding the middle of a
// long one.
func fuzzQuote(body []byte) string {
	const keep = 200
	if len(body) <= 2*keep {
		return strconv.Quote(string(body))
	}
	return fmt.Sprintf("%q...(%d bytes)...%q", body[:keep], len(body)-2*keep, body[len(body)-keep:])
}

// fuzzNoPanic runs fn and fails the test, naming what, if it panics.
func fuzzNoPanic(t *testing.T, what string, fn func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s panicked: %v\n%s", what, r, debug.Stack())
		}
	}()
	return fn()
}

// assertDecodeError checks that a decode error is what decodeBody promises:
// a 400 validation_failed problem about exactly one field.
func assertDecodeError(t *testing.T, name string, err error) {
	t.Helper()
	var ae *apiError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: decode error %T (%v) is not an *apiError", name, err, err)
	}
	if ae.status != http.StatusBadRequest || ae.code != codeValidation ||
		len(ae.fields) != 1 || ae.fields[0].Message == "" {
		t.Fatalf("%s: decode error is not a 400 about one field: %+v", name, ae)
	}
	p, known := toProblem(err)
	if !known || p.Status != http.StatusBadRequest || p.Code != codeValidation ||
		p.Type != problemTypePrefix+codeValidation || !reflect.DeepEqual(p.Errors, ae.fields) {
		t.Fatalf("%s: decode error %v becomes problem %+v (known %v)", name, err, p, known)
	}
}

// assertValidationError checks that a validation error is a
// *tiers.ValidationError naming every bad field, answered with a 400.
func assertValidationError(t *testing.T, name string, err error) {
	t.Helper()
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		t.Fatalf("%s: validation error %T (%v) is not a *tiers.ValidationError with fields", name, err, err)
	}
	for _, fe := range ve.Fields {
		if fe.Field == "" || fe.Message == "" {
			t.Fatalf("%s: validation error has an entry without field or message: %+v", name, ve.Fields)
		}
	}
	p, known := toProblem(err)
	if !known || p.Status != http.StatusBadRequest || p.Code != codeValidation || !reflect.DeepEqual(p.Errors, ve.Fields) {
		t.Fatalf("%s: validation error %v becomes problem %+v (known %v)", name, err, p, known)
	}
}

// fuzzAPIKey is the one API key the fuzzed server knows, of customer
// acme; fuzzKeyID is its id.
const (
	fuzzAPIKey = "qk_fuzz"
	fuzzKeyID  = "key_FuzzFuzzFuzzFuzz"
)

// fuzzIdentify is what the handlers make of a check's or a refund's
// customer and api_key, with fuzzKeys resolving keys: the customer, and
// the key's id by key.
func fuzzIdentify(customer, apiKey string) (string, string, error) {
	switch {
	case apiKey == "":
		return customer, "", nil
	case customer != "":
		return "", "", tiers.Invalid("api_key", "give either customer or api_key, not both")
	case apiKey == fuzzAPIKey:
		return "acme", fuzzKeyID, nil
	}
	return "", "", tiers.ErrInvalidAPIKey
}

// fuzzKeys resolves fuzzAPIKey, and issues keys recording the spec.
type fuzzKeys struct{ fs *fuzzServer }

func (fuzzKeys) Customer(_ context.Context, key string) (string, string, error) {
	if key == fuzzAPIKey {
		return "acme", fuzzKeyID, nil
	}
	return "", "", tiers.ErrInvalidAPIKey
}

func (k fuzzKeys) CreateKey(_ context.Context, _ tiers.Write, _ string, spec keys.Spec) (keys.Created, error) {
	if err := spec.Validate(fuzzNow); err != nil {
		return keys.Created{}, err
	}
	k.fs.passed = spec
	return fuzzCreatedKey(spec), nil
}

func (fuzzKeys) Key(context.Context, string) (keys.Key, error) { panic("fuzzKeys: unexpected call") }
func (fuzzKeys) Keys(context.Context, string, keys.Filter) ([]keys.Key, bool, error) {
	panic("fuzzKeys: unexpected call")
}
func (fuzzKeys) RevokeKey(context.Context, tiers.Write, string) error {
	panic("fuzzKeys: unexpected call")
}

// fuzzCreatedKey is the key fuzzKeys issues for spec.
func fuzzCreatedKey(spec keys.Spec) keys.Created {
	return keys.Created{Key: keys.Key{ID: "key_AAAAAAAAAAAAAAAA", Customer: "acme", Name: spec.Name, Prefix: "qk_AAAAA",
		CreatedAt: fuzzNow, ExpiresAt: spec.ExpiresAt}, Secret: "qk_" + strings.Repeat("A", 32)}
}

// fuzzServer is a Server over the real tiers.Service, with a store and a
// checker that record what they are given.
type fuzzServer struct {
	srv    *Server
	passed any      // what the checker or the store last received
	errors []string // error-level log records
}

func newFuzzServer() *fuzzServer {
	fs := &fuzzServer{}
	fs.srv = New(withCatalog(Config{
		Checker: fuzzChecker{fs},
		Logger:  slog.New(fuzzLog{fs}),

		Keys:        fuzzKeys{fs},
		KeyResolver: fuzzKeys{fs},
	}, fs.catalog()))
	return fs
}

// catalog is the real tiers.Service over fs's store.
func (fs *fuzzServer) catalog() *tiers.Service {
	return tiers.NewService(fuzzStore{fs}, fuzzStore{fs}, func() time.Time { return fuzzNow }, nil)
}

// withCatalog is cfg with svc in every role of the catalog, as cmd/quotad
// configures it.
func withCatalog(cfg Config, svc *tiers.Service) Config {
	cfg.Metrics, cfg.Plans, cfg.Customers, cfg.Overrides, cfg.FeatureOverrides, cfg.Audit = svc, svc, svc, svc, svc, svc
	return cfg
}

// run serves body to route r and checks the answer against the direct
// decode and validation.
func (fs *fuzzServer) run(t *testing.T, r fuzzRoute, body []byte) {
	t.Helper()
	passed, err := r.decode(t, r.name, body)
	if len(body) > MaxBodyBytes {
		passed, err = nil, echo.ErrStatusRequestEntityTooLarge
	}

	fs.passed, fs.errors = nil, nil
	req := newRequest(r.method, r.path, bytes.NewReader(body))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	rec := httptest.NewRecorder()
	fs.srv.ServeHTTP(rec, req)
	res := rec.Result()
	got := rec.Body.Bytes()
	prefix := fmt.Sprintf("%s %s: answered %d", r.method, r.path, res.StatusCode)

	if res.StatusCode >= 500 || len(fs.errors) > 0 {
		t.Fatalf("%s, logging %q, to %s:\n%s", prefix, fs.errors, fuzzQuote(body), got)
	}
	if err != nil {
		want, _ := toProblem(err)
		var p Problem
		if res.StatusCode != want.Status || res.Header.Get(echo.HeaderContentType) != contentTypeProblemJSON ||
			json.Unmarshal(got, &p) != nil || !reflect.DeepEqual(p, want) {
			t.Fatalf("%s with %s, want problem %+v for %s", prefix, got, want, fuzzQuote(body))
		}
		if fs.passed != nil {
			t.Fatalf("%s but passed %#v on for %s", prefix, fs.passed, fuzzQuote(body))
		}
		return
	}
	if res.StatusCode != r.status {
		t.Fatalf("%s with %s, want %d for %s", prefix, got, r.status, fuzzQuote(body))
	}
	if !reflect.DeepEqual(fs.passed, passed) {
		t.Fatalf("%s, passing on\n%#v\nwant\n%#v\nfor %s", prefix, fs.passed, passed, fuzzQuote(body))
	}
	want, merr := json.Marshal(r.answer(passed))
	if merr != nil {
		t.Fatalf("%s but cannot encode its answer for %s: %v", prefix, fuzzQuote(body), merr)
	}
	if !bytes.Equal(got, append(want, '\n')) {
		t.Fatalf("%s with body\n%s\nwant\n%s\nfor %s", prefix, got, want, fuzzQuote(body))
	}
}

// fuzzStore is a tiers.Store whose puts succeed, creating what they are
// given; any other call panics, which the server answers with a 500 and
// the fuzz target reports.
type fuzzStore struct {
	fs *fuzzServer
}

var _ tiers.Store = fuzzStore{}

func (s fuzzStore) FindMetric(context.Context, string) (tiers.Metric, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindMetrics(context.Context, tiers.Page) ([]tiers.Metric, bool, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) DeleteMetric(context.Context, tiers.Write, string) error {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindPlan(context.Context, string) (tiers.Plan, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindPlans(context.Context, tiers.Page) ([]tiers.Plan, bool, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) DeletePlan(context.Context, tiers.Write, string) error {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindCustomer(context.Context, string) (tiers.Customer, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindCustomers(context.Context, tiers.CustomerFilter) ([]tiers.Customer, bool, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) DeleteCustomer(context.Context, tiers.Write, string) error {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindOverride(context.Context, string, tiers.LimitKey) (tiers.Override, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindOverrides(context.Context, string, tiers.Page) ([]tiers.Override, bool, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) DeleteOverride(context.Context, tiers.Write, string, tiers.LimitKey) error {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindAccount(context.Context, string) (tiers.Account, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindAuditEvents(context.Context, tiers.AuditFilter) ([]tiers.AuditEvent, bool, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) PutMetric(_ context.Context, _ tiers.Write, m tiers.Metric) (tiers.Metric, bool, error) {
	s.fs.passed = m
	return m, true, nil
}

func (s fuzzStore) PutPlan(_ context.Context, _ tiers.Write, p tiers.Plan, _ bool) (tiers.Plan, bool, error) {
	s.fs.passed = p
	return p, true, nil
}

func (s fuzzStore) FindPlanVersion(context.Context, string, int64) (tiers.PlanVersion, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindPlanVersions(context.Context, string, tiers.Page) ([]tiers.PlanVersion, bool, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) FindPlanMigration(context.Context, string, *int64, *int64) (tiers.PlanMigration, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) MigratePlan(context.Context, tiers.Write, string, *int64, int64) ([]tiers.VersionedCustomer, error) {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) PutCustomer(_ context.Context, _ tiers.Write, c tiers.Customer) (tiers.Customer, bool, error) {
	s.fs.passed = c
	return c, true, nil
}

func (s fuzzStore) DeleteFeatureOverride(context.Context, tiers.Write, string, string) error {
	panic("fuzzStore: unexpected call")
}

func (s fuzzStore) PutFeatureOverride(_ context.Context, _ tiers.Write, o tiers.FeatureOverride) (tiers.FeatureOverride, bool, error) {
	s.fs.passed = o
	return o, true, nil
}

func (s fuzzStore) PutOverride(_ context.Context, _ tiers.Write, o tiers.Override) (tiers.Override, bool, error) {
	s.fs.passed = o
	return o, true, nil
}

// fuzzChecker validates as quota.Engine does before anything else, and
// allows every valid check.
type fuzzChecker struct {
	fs *fuzzServer
}

var _ Checker = fuzzChecker{}

func (c fuzzChecker) Check(_ context.Context, r quota.Request) (quota.Decision, error) {
	if err := r.Validate(); err != nil {
		return quota.Decision{}, err
	}
	c.fs.passed = r
	d := quota.Decision{Allowed: true, Customer: r.Customer, Metric: r.Metric, Cost: r.Cost, Never: true}
	if r.Items != nil {
		d.Items = make([]quota.ItemResult, len(r.Items))
		for i, it := range r.Items {
			d.Items[i] = quota.ItemResult{Metric: it.Metric, Subject: it.Subject, Cost: it.Cost, Allowed: true}
		}
	}
	return d, nil
}

func (c fuzzChecker) Refund(_ context.Context, r quota.RefundRequest) (quota.RefundResult, error) {
	if err := r.Validate(); err != nil {
		return quota.RefundResult{}, err
	}
	c.fs.passed = r
	return quota.RefundResult{}, nil
}

func (fuzzChecker) Usage(context.Context, string, string) (tiers.Account, []quota.Usage, error) {
	panic("fuzzChecker: unexpected call")
}

func (fuzzChecker) Entitlements(context.Context, string, string) (quota.Entitlements, error) {
	panic("fuzzChecker: unexpected call")
}

func (fuzzChecker) MetricUsage(context.Context, string) (tiers.Metric, []quota.GlobalUsage, error) {
	panic("fuzzChecker: unexpected call")
}

func (fuzzChecker) Reset(context.Context, string, string, string) error {
	panic("fuzzChecker: unexpected call")
}

// fuzzTotal is what a set of a total passes on.
type fuzzTotal struct {
	Customer, Metric string
	Used             int64
}

func (c fuzzChecker) SetTotal(_ context.Context, _, customer, metric string, used int64) (quota.Usage, error) {
	if err := quota.ValidateTotal(customer, metric, used); err != nil {
		return quota.Usage{}, err
	}
	c.fs.passed = fuzzTotal{Customer: customer, Metric: metric, Used: used}
	return quota.Usage{Metric: metric, Window: tiers.Total, Used: used}, nil
}

func (fuzzChecker) History(context.Context, string, string, time.Time, time.Time) ([]quota.Day, error) {
	panic("fuzzChecker: unexpected call")
}

func (fuzzChecker) Today(context.Context, string) time.Time { return fuzzNow }

func (fuzzChecker) Stats() quota.Stats { return quota.Stats{} }

// fuzzLog records error-level log records: the server logs every 500 and
// every recovered panic at that level.
type fuzzLog struct {
	fs *fuzzServer
}

func (fuzzLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h fuzzLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.fs.errors = append(h.fs.errors, b.String())
	return nil
}

func (h fuzzLog) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h fuzzLog) WithGroup(string) slog.Handler { return h }
