package forwardauth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func digest(key string) string {
	d := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(d[:])
}

// header builds a header from name, value pairs.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestResolveDefaults(t *testing.T) {
	t.Parallel()
	r := Default()
	tests := []struct {
		name    string
		header  http.Header
		want    Call
		wantErr error
		wantHdr string // the header a *HeaderError names
	}{
		{"customer and metric", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"),
			Call{Customer: "acme", Metric: "api_calls", Cost: 1}, nil, ""},
		{"with cost", header("x-quotad-customer", "acme", "x-quotad-metric", "api_calls", "x-quotad-cost", "25"),
			Call{Customer: "acme", Metric: "api_calls", Cost: 25}, nil, ""},
		{"largest cost", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", "1000000000"),
			Call{Customer: "acme", Metric: "m", Cost: MaxCost}, nil, ""},
		{"no customer", header("X-Quotad-Metric", "api_calls"), Call{}, nil, "X-Quotad-Customer"},
		{"no metric", header("X-Quotad-Customer", "acme"), Call{}, nil, "X-Quotad-Metric"},
		{"cost 0", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", "0"), Call{}, nil, "X-Quotad-Cost"},
		{"cost above the bound", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", "1000000001"), Call{}, nil, "X-Quotad-Cost"},
		{"cost with a sign", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", "+3"), Call{}, nil, "X-Quotad-Cost"},
		{"cost not a number", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", "ten"), Call{}, nil, "X-Quotad-Cost"},
		{"empty cost", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", ""), Call{}, nil, "X-Quotad-Cost"},
		{"two costs", header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m", "X-Quotad-Cost", "1", "X-Quotad-Cost", "2"), Call{}, nil, "X-Quotad-Cost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(Request{Method: http.MethodGet, Header: tt.header})
			checkResolve(t, got, err, tt.want, tt.wantErr, tt.wantHdr)
		})
	}
}

func checkResolve(t *testing.T, got Call, err error, want Call, wantErr error, wantHdr string) {
	t.Helper()
	var he *HeaderError
	switch {
	case wantHdr != "":
		if !errors.As(err, &he) || he.Header != wantHdr {
			t.Fatalf("error = %v, want a HeaderError on %s", err, wantHdr)
		}
	case wantErr != nil:
		if !errors.Is(err, wantErr) {
			t.Fatalf("error = %v, want %v", err, wantErr)
		}
	case err != nil:
		t.Fatalf("error = %v, want %+v", err, want)
	case got != want:
		t.Errorf("got %+v, want %+v", got, want)
	}
}

const routesFile = `
headers:
  api_key: x-api-key
  method: X-Original-Method
  uri: X-Original-URI
api_keys:
  plain-key-1: acme
  "sha256:` + "%s" + `": bob
routes:
  - match: POST /v1/completions
    metric: llm_calls
    cost: 5
  - match: /v1/exports/
    metric: exports
    cost: 10
  - match: GET /v1/items/{id}
    metric: reads
  - match: /v1/
    metric: api_calls
`

func mustParse(t *testing.T, text string) *Rules {
	t.Helper()
	r, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

func TestResolveRoutes(t *testing.T) {
	t.Parallel()
	r := mustParse(t, strings.Replace(routesFile, "%s", digest("secret-of-bob")[len("sha256:"):], 1))
	key := func(k, method, uri string) http.Header {
		return header("X-Api-Key", k, "X-Original-Method", method, "X-Original-URI", uri)
	}
	tests := []struct {
		name    string
		req     Request
		want    Call
		wantErr error
		wantHdr string
	}{
		{"plain key, exact route", Request{Method: "GET", Header: key("plain-key-1", "POST", "/v1/completions")},
			Call{Customer: "acme", Metric: "llm_calls", Cost: 5, Route: "POST /v1/completions"}, nil, ""},
		{"digested key", Request{Method: "GET", Header: key("secret-of-bob", "POST", "/v1/completions?stream=1")},
			Call{Customer: "bob", Metric: "llm_calls", Cost: 5, Route: "POST /v1/completions"}, nil, ""},
		{"the digest itself is no key", Request{Method: "GET", Header: key(digest("secret-of-bob"), "GET", "/v1/x")},
			Call{APIKey: digest("secret-of-bob"), Metric: "api_calls", Cost: 1, Route: "/v1/"}, nil, ""},
		{"other method falls to the prefix", Request{Method: "GET", Header: key("plain-key-1", "GET", "/v1/completions")},
			Call{Customer: "acme", Metric: "api_calls", Cost: 1, Route: "/v1/"}, nil, ""},
		{"prefix", Request{Method: "GET", Header: key("plain-key-1", "DELETE", "/v1/exports/7/file")},
			Call{Customer: "acme", Metric: "exports", Cost: 10, Route: "/v1/exports/"}, nil, ""},
		{"prefix without its slash", Request{Method: "GET", Header: key("plain-key-1", "GET", "/v1/exports")},
			Call{Customer: "acme", Metric: "exports", Cost: 10, Route: "/v1/exports/"}, nil, ""},
		{"dot segments are cleaned", Request{Method: "GET", Header: key("plain-key-1", "POST", "/v1/items/../completions")},
			Call{Customer: "acme", Metric: "llm_calls", Cost: 5, Route: "POST /v1/completions"}, nil, ""},
		{"wildcard, HEAD as GET", Request{Method: "GET", Header: key("plain-key-1", "HEAD", "/v1/items/42")},
			Call{Customer: "acme", Metric: "reads", Cost: 1, Route: "GET /v1/items/{id}"}, nil, ""},
		{"no route", Request{Method: "GET", Header: key("plain-key-1", "GET", "/healthz")},
			Call{}, ErrNoRoute, ""},
		{"envoy suffix wins over headers", Request{Method: "POST", Suffix: "/v1/completions?x=1", Header: key("plain-key-1", "GET", "/elsewhere")},
			Call{Customer: "acme", Metric: "llm_calls", Cost: 5, Route: "POST /v1/completions"}, nil, ""},
		{"envoy root", Request{Method: "GET", Suffix: "/", Header: key("plain-key-1", "", "")},
			Call{}, ErrNoRoute, ""},
		{"no key", Request{Method: "GET", Header: header("X-Original-Method", "GET", "X-Original-URI", "/v1/x")},
			Call{}, ErrNoKey, ""},
		{"customer header is not read with keys", Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Original-Method", "GET", "X-Original-URI", "/v1/x")},
			Call{}, ErrNoKey, ""},
		{"unknown key: left to quotad's issued keys", Request{Method: "GET", Header: key("guess", "GET", "/v1/x")},
			Call{APIKey: "guess", Metric: "api_calls", Cost: 1, Route: "/v1/"}, nil, ""},
		{"metric header is not read with routes", Request{Method: "GET", Header: header("X-Api-Key", "plain-key-1", "X-Quotad-Metric", "api_calls")},
			Call{}, nil, "X-Original-Method"},
		{"no uri", Request{Method: "GET", Header: header("X-Api-Key", "plain-key-1", "X-Original-Method", "GET")},
			Call{}, nil, "X-Original-Uri"},
		{"absolute uri", Request{Method: "GET", Header: key("plain-key-1", "GET", "http://example.com/v1/x")},
			Call{}, nil, "X-Original-Uri"},
		{"bad method", Request{Method: "GET", Header: key("plain-key-1", "GE T", "/v1/x")},
			Call{}, nil, "X-Original-Method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(tt.req)
			checkResolve(t, got, err, tt.want, tt.wantErr, tt.wantHdr)
		})
	}
}

func TestResolveUnmatchedAllow(t *testing.T) {
	t.Parallel()
	r := mustParse(t, "routes:\n  - {match: 'POST /v1/jobs', metric: jobs}\nunmatched: allow\n")
	tests := []struct {
		name, method, uri string
		want              Call
	}{
		{"matched", "POST", "/v1/jobs", Call{Customer: "acme", Metric: "jobs", Cost: 1, Route: "POST /v1/jobs"}},
		{"unmatched passes", "GET", "/v1/jobs", Call{Pass: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(Request{Method: "GET", Header: header(
				"X-Quotad-Customer", "acme", "X-Forwarded-Method", tt.method, "X-Forwarded-Uri", tt.uri)})
			checkResolve(t, got, err, tt.want, nil, "")
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
	}{
		{"unknown field", "header:\n  customer: X-C\n", `line 1: unknown field "header" at the top level: want one of headers, api_keys, routes, unmatched`},
		{"unknown header field", "headers:\n  customer: X-C\n  api_kye: X-Key\n", `line 3: unknown field "api_kye" in headers: want one of customer, metric, cost, api_key, subject, method, uri`},
		{"unknown route field", "routes:\n  - {match: /x, metric: m}\n  - {match: /y, metrc: m}\n", `line 3: unknown field "metrc" in routes[1]: want one of match, metric, cost`},
		{"bad header name", "headers:\n  customer: 'X C'\n", "headers.customer"},
		{"keys without header", "api_keys:\n  k: acme\n", "headers.api_key"},
		{"bad digest", "headers: {api_key: X-Key}\napi_keys:\n  'sha256:abc': acme\n", "64 hex digits"},
		{"bad customer", "headers: {api_key: X-Key}\napi_keys:\n  k: 'no spaces'\n", "not a valid customer id"},
		{"one key, two customers", "headers: {api_key: X-Key}\napi_keys:\n  k: acme\n  '" + digest("k") + "': bob\n", "maps to both"},
		{"duplicate key", "headers: {api_key: X-Key}\napi_keys:\n  k: acme\n  k: bob\n", "already defined"},
		{"bad metric", "routes:\n  - {match: /x, metric: API}\n", "routes[0]: metric"},
		{"cost 0", "routes:\n  - {match: /x, metric: m, cost: 0}\n", "routes[0]: cost 0"},
		{"host in pattern", "routes:\n  - {match: example.com/x, metric: m}\n", "want [METHOD ]/path"},
		{"method and host", "routes:\n  - {match: GET example.com/x, metric: m}\n", "want [METHOD ]/path"},
		{"bad pattern", "routes:\n  - {match: '/x/{', metric: m}\n", "routes[0]: match"},
		{"conflicting routes", "routes:\n  - {match: 'GET /a/{x}', metric: m}\n  - {match: 'GET /{y}/b', metric: m}\n", "routes[1]: match \"GET /{y}/b\": matches the same requests"},
		{"same route twice", "routes:\n  - {match: /a, metric: m}\n  - {match: /a, metric: n}\n", "routes[1]"},
		{"bad unmatched", "routes:\n  - {match: /a, metric: m}\nunmatched: maybe\n", "want deny or allow"},
		{"unmatched without routes", "unmatched: allow\n", "no routes"},
		{"two documents", "headers: {}\n---\nheaders: {}\n", "one YAML document"},
		{"not yaml", "headers: [\n", "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// headers.api_key without api_keys: every key is left to the keys quotad
// issued.
func TestResolveIssuedKeysOnly(t *testing.T) {
	t.Parallel()
	r := mustParse(t, "headers:\n  api_key: X-Api-Key\n")
	allow := mustParse(t, "headers:\n  api_key: X-Api-Key\nroutes:\n  - {match: /v1/, metric: m}\nunmatched: allow\n")
	deny := mustParse(t, "headers:\n  api_key: X-Api-Key\nroutes:\n  - {match: /v1/, metric: m}\n")
	uri := func(k, u string) http.Header {
		return header("X-Api-Key", k, "X-Forwarded-Method", "GET", "X-Forwarded-Uri", u)
	}
	tests := []struct {
		name    string
		req     Request
		want    Call
		wantErr error
	}{
		{"key", Request{Method: "GET", Header: header("X-Api-Key", "qk_abc", "X-Quotad-Metric", "m")},
			Call{APIKey: "qk_abc", Metric: "m", Cost: 1}, nil},
		{"no key", Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m")},
			Call{}, ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(tt.req)
			checkResolve(t, got, err, tt.want, tt.wantErr, "")
		})
	}
	// The key stays to be resolved when no route matches, allowed or not.
	if got, err := allow.Resolve(Request{Method: "GET", Header: uri("qk_abc", "/elsewhere")}); err != nil || got != (Call{Pass: true, APIKey: "qk_abc"}) {
		t.Errorf("unmatched, allowed: %+v, %v", got, err)
	}
	if got, err := deny.Resolve(Request{Method: "GET", Header: uri("qk_abc", "/elsewhere")}); !errors.Is(err, ErrNoRoute) || got.APIKey != "qk_abc" {
		t.Errorf("unmatched, denied: %+v, %v", got, err)
	}
}

// The subject comes from the header the rules name, and from no header
// without one: a client must not choose its own subject.
func TestResolveSubject(t *testing.T) {
	t.Parallel()
	named := mustParse(t, "headers:\n  subject: X-End-User\n")
	keys := mustParse(t, "headers:\n  api_key: X-Api-Key\n  subject: X-End-User\napi_keys:\n  sk-acme: acme\nroutes:\n  - {match: /v1/, metric: m, cost: 2}\n")
	tests := []struct {
		name  string
		rules *Rules
		req   Request
		want  Call
	}{
		{"no subject header named", Default(), Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m",
			"X-Quotad-Subject", "u", "X-End-User", "u")}, Call{Customer: "acme", Metric: "m", Cost: 1}},
		{"the header named", named, Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m",
			"x-end-user", "user@example.com")}, Call{Customer: "acme", Metric: "m", Cost: 1, Subject: "user@example.com"}},
		{"the header named, absent", named, Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Quotad-Metric", "m")},
			Call{Customer: "acme", Metric: "m", Cost: 1}},
		{"a file's key, with routes", keys, Request{Method: "GET", Header: header("X-Api-Key", "sk-acme", "X-End-User", "10.0.0.7",
			"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/v1/items")}, Call{Customer: "acme", Metric: "m", Cost: 2, Subject: "10.0.0.7", Route: "/v1/"}},
		{"an issued key", keys, Request{Method: "GET", Suffix: "/v1/x", Header: header("X-Api-Key", "qk_abc", "X-End-User", "u")},
			Call{APIKey: "qk_abc", Metric: "m", Cost: 2, Subject: "u", Route: "/v1/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rules.Resolve(tt.req)
			checkResolve(t, got, err, tt.want, nil, "")
		})
	}
	if _, err := Parse([]byte("headers:\n  subject: \"X End User\"\n")); err == nil || !strings.Contains(err.Error(), "headers.subject") {
		t.Errorf("a bad subject header name: %v", err)
	}
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       Headers
	}{
		{"empty file", "", Headers{Customer: "X-Quotad-Customer", Metric: "X-Quotad-Metric", Cost: "X-Quotad-Cost",
			Method: "X-Forwarded-Method", URI: "X-Forwarded-Uri"}},
		{"renamed, canonical", "headers: {customer: x-tenant, metric: x-meter, cost: x-units, uri: x-original-uri}\n",
			Headers{Customer: "X-Tenant", Metric: "X-Meter", Cost: "X-Units", Method: "X-Forwarded-Method", URI: "X-Original-Uri"}},
		{"a subject header", "headers: {subject: x-end-user}\n", Headers{Customer: "X-Quotad-Customer", Metric: "X-Quotad-Metric",
			Cost: "X-Quotad-Cost", Subject: "X-End-User", Method: "X-Forwarded-Method", URI: "X-Forwarded-Uri"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.text).Headers(); got != tt.want {
				t.Errorf("Headers() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("headers: {customer: X-Tenant}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load(good)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := r.Headers().Customer; got != "X-Tenant" {
		t.Errorf("customer header = %q, want X-Tenant", got)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("headers: {customr: X-Tenant}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing.yaml")} {
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "forward-auth config") {
			t.Errorf("Load(%s) error = %v, want a forward-auth config error", filepath.Base(path), err)
		}
	}
}
