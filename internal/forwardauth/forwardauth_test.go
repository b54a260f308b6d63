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
  - match: /v1/sso/
    feature: sso
  - match: POST /v1/projects
    metric: projects
    feature: max_projects
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
		{"wildcard, HEAD as GET", Request{Method: "GET", Header: key("plain-key-1", "HEAD", "/v1/items/42")},
			Call{Customer: "acme", Metric: "reads", Cost: 1, Route: "GET /v1/items/{id}"}, nil, ""},
		{"route requiring a feature only", Request{Method: "GET", Header: key("plain-key-1", "GET", "/v1/sso/login")},
			Call{Customer: "acme", Feature: "sso", Route: "/v1/sso/"}, nil, ""},
		{"route requiring a feature and counting", Request{Method: "GET", Header: key("plain-key-1", "POST", "/v1/projects")},
			Call{Customer: "acme", Metric: "projects", Cost: 1, Feature: "max_projects", Route: "POST /v1/projects"}, nil, ""},
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

// documentedRoutes is the route table of docs/gateways.md, under
// "unmatched: allow", which let a path no route matched through unchecked.
const documentedRoutes = `
routes:
  - match: POST /v1/completions
    metric: llm_calls
    cost: 10
  - match: /v1/exports/
    metric: exports
  - match: /v1/
    metric: api_calls
unmatched: allow
`

// A path an upstream may serve as a costlier route is charged as that
// route, or refused (*PathError): never charged as a cheaper one, never let
// through unchecked, whatever "unmatched" says.
func TestResolveCanonicalPath(t *testing.T) {
	t.Parallel()
	insensitive := mustParse(t, documentedRoutes)
	sensitive := mustParse(t, documentedRoutes+"case: sensitive\n")
	llm := Call{Customer: "acme", Metric: "llm_calls", Cost: 10, Route: "POST /v1/completions"}
	exports := Call{Customer: "acme", Metric: "exports", Cost: 1, Route: "/v1/exports/"}
	api := Call{Customer: "acme", Metric: "api_calls", Cost: 1, Route: "/v1/"}
	tests := []struct {
		name        string
		rules       *Rules
		method, uri string
		suffix      bool // the path comes appended to the forward-auth path (Envoy)
		want        Call
		refused     string // in the PathError's reason; the Call is then not looked at
	}{
		{"canonical", insensitive, "POST", "/v1/completions", false, llm, ""},
		{"trailing slash", insensitive, "POST", "/v1/completions/", false, llm, ""},
		{"trailing slash before the query", insensitive, "POST", "/v1/completions/?stream=1", false, llm, ""},
		{"the query plays no part", insensitive, "POST", "/v1/completions?next=/v1/x/../a;b%2F", false, llm, ""},
		{"empty segments", insensitive, "POST", "//v1//completions//", false, llm, ""},
		{"upper case", insensitive, "POST", "/V1/Completions", false, llm, ""},
		{"upper case, prefix", insensitive, "GET", "/V1/exports/a", false, exports, ""},
		{"encoded letter", insensitive, "POST", "/v1/%63ompletions", false, llm, ""},
		{"encoded upper-case letters", insensitive, "GET", "/v1/%45XPORTS/a", false, exports, ""},
		{"prefix without its slash", insensitive, "GET", "/v1/exports", false, exports, ""},
		{"prefix, trailing slash", insensitive, "GET", "/v1/exports/", false, exports, ""},
		{"dots within a segment", insensitive, "GET", "/v1/exports/a..b/c.json", false, exports, ""},
		{"an encoded space is data", insensitive, "GET", "/v1/exports/my%20file", false, exports, ""},
		{"so is a raw one", insensitive, "GET", "/v1/exports/my file", false, exports, ""},
		{"another method", insensitive, "GET", "/v1/completions/", false, api, ""},
		{"envoy, trailing slash and case", insensitive, "POST", "/V1/completions/", true, llm, ""},
		{"unmatched still passes", insensitive, "GET", "/Healthz/", false, Call{Pass: true}, ""},

		{"encoded slash", insensitive, "GET", "/v1/exports%2Fa", false, Call{}, `encoded "/"`},
		{"encoded slash, lower case", insensitive, "GET", "/v1/exports%2fa", false, Call{}, `encoded "/"`},
		{"encoded dot segment", insensitive, "GET", "/v1/x/%2e%2e/exports/a", false, Call{}, `encoded "."`},
		{"encoded dot segment, upper case", insensitive, "GET", "/v1/x/%2E%2E/exports/a", false, Call{}, `encoded "."`},
		{"half-encoded dot segment", insensitive, "GET", "/v1/x/.%2e/exports/a", false, Call{}, `encoded "."`},
		{"encoded dot within a segment", insensitive, "GET", "/v1/exports/a%2Ejson", false, Call{}, `encoded "."`},
		{"dot-dot segment", insensitive, "GET", "/v1/x/../exports/a", false, Call{}, `".." segment`},
		{"dot-dot at the end", insensitive, "GET", "/v1/exports/a/..", false, Call{}, `".." segment`},
		{"dot segment", insensitive, "GET", "/v1/./exports/a", false, Call{}, `"." segment`},
		{"dot segment at the end", insensitive, "POST", "/v1/completions/.", false, Call{}, `"." segment`},
		{"dot-dot, envoy", insensitive, "GET", "/v1/x/%2e%2e/exports/a", true, Call{}, `encoded "."`},
		{"parameter", insensitive, "GET", "/v1/exports;x/a", false, Call{}, `a ";"`},
		{"parameter at the end", insensitive, "POST", "/v1/completions;jsessionid=1", false, Call{}, `a ";"`},
		{"encoded parameter", insensitive, "GET", "/v1/exports%3Bx/a", false, Call{}, `";" encoded as %3B`},
		{"double encoding", insensitive, "GET", "/v1/exports%252Fa", false, Call{}, "encoded twice"},
		{"backslash", insensitive, "GET", `/v1\exports\a`, false, Call{}, "backslash"},
		{"encoded backslash", insensitive, "GET", "/v1/exports%5Ca", false, Call{}, "backslash encoded as %5C"},
		{"NUL", insensitive, "GET", "/v1/exports\x00/a", false, Call{}, "control character"},
		{"encoded NUL", insensitive, "GET", "/v1/exports%00/a", false, Call{}, "control character encoded as %00"},
		{"tab", insensitive, "GET", "/v1/exports\t/a", false, Call{}, "control character"},
		{"fragment", insensitive, "GET", "/v1/exports#a", false, Call{}, "#"},
		{"encoded question mark", insensitive, "GET", "/v1/exports%3Fa", false, Call{}, "?"},
		{"truncated escape", insensitive, "GET", "/v1/exports%2", false, Call{}, "malformed percent escape"},
		{"bad escape", insensitive, "GET", "/v1/exports%zz/a", false, Call{}, "malformed percent escape"},
		{"refused under the prefix too", insensitive, "GET", "/v1/exports/%2e%2e/a", false, Call{}, `encoded "."`},
		{"refused where no route matches", insensitive, "GET", "/other;x", false, Call{}, `a ";"`},

		{"sensitive: canonical", sensitive, "GET", "/v1/exports/a", false, exports, ""},
		{"sensitive: another case is another path", sensitive, "GET", "/v1/Exports/a", false, api, ""},
		{"sensitive: trailing slash", sensitive, "POST", "/v1/completions/", false, llm, ""},
		{"sensitive: still refused", sensitive, "GET", "/v1/exports%2Fa", false, Call{}, `encoded "/"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Forwarded-Method", tt.method, "X-Forwarded-Uri", tt.uri)}
			wantHeader := "X-Forwarded-Uri"
			if tt.suffix {
				req = Request{Method: tt.method, Suffix: tt.uri, Header: header("X-Quotad-Customer", "acme")}
				wantHeader = "path"
			}
			got, err := tt.rules.Resolve(req)
			if tt.refused == "" {
				checkResolve(t, got, err, tt.want, nil, "")
				return
			}
			var pe *PathError
			if !errors.As(err, &pe) || pe.Header != wantHeader || !strings.Contains(pe.Reason, tt.refused) {
				t.Fatalf("Resolve = %+v, %v; want a PathError on %s saying %q", got, err, wantHeader, tt.refused)
			}
			if got.Pass || got.Metric != "" {
				t.Errorf("refused, yet %+v", got)
			}
		})
	}
	// ("unmatched: deny" makes the unmatched case ErrNoRoute; the others are alike.)
	deny := mustParse(t, strings.Replace(documentedRoutes, "unmatched: allow", "unmatched: deny", 1)+"case: sensitive\n")
	_, err := deny.Resolve(Request{Method: "GET", Header: header("X-Quotad-Customer", "acme", "X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/V1/exports/a")})
	if !errors.Is(err, ErrNoRoute) {
		t.Errorf("case: sensitive, unmatched: deny, /V1/exports/a: %v, want ErrNoRoute", err)
	}
}

// A path that is canonical already costs no allocation to check.
func TestCanonicalPathAllocs(t *testing.T) {
	for _, p := range []string{"/", "/v1/completions", "/v1/exports/7/file.json", "/v1/items/{x}"} {
		var got string
		if n := testing.AllocsPerRun(100, func() { got, _ = canonicalPath(p, true) }); n != 0 || got != p {
			t.Errorf("canonicalPath(%q) = %q with %v allocations, want itself with none", p, got, n)
		}
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
		{"unknown field", "header:\n  customer: X-C\n", `line 1: unknown field "header" at the top level: want one of headers, api_keys, routes, unmatched, case`},
		{"unknown header field", "headers:\n  customer: X-C\n  api_kye: X-Key\n", `line 3: unknown field "api_kye" in headers: want one of customer, metric, cost, api_key, subject, method, uri`},
		{"unknown route field", "routes:\n  - {match: /x, metric: m}\n  - {match: /y, metrc: m}\n", `line 3: unknown field "metrc" in routes[1]: want one of match, metric, cost, feature`},
		{"bad header name", "headers:\n  customer: 'X C'\n", "headers.customer"},
		{"keys without header", "api_keys:\n  k: acme\n", "headers.api_key"},
		{"bad digest", "headers: {api_key: X-Key}\napi_keys:\n  'sha256:abc': acme\n", "64 hex digits"},
		{"bad customer", "headers: {api_key: X-Key}\napi_keys:\n  k: 'no spaces'\n", "not a valid customer id"},
		{"one key, two customers", "headers: {api_key: X-Key}\napi_keys:\n  k: acme\n  '" + digest("k") + "': bob\n", "maps to both"},
		{"duplicate key", "headers: {api_key: X-Key}\napi_keys:\n  k: acme\n  k: bob\n", "already defined"},
		{"bad metric", "routes:\n  - {match: /x, metric: API}\n", "routes[0]: metric"},
		{"cost 0", "routes:\n  - {match: /x, metric: m, cost: 0}\n", "routes[0]: cost 0"},
		{"neither metric nor feature", "routes:\n  - {match: /x}\n", "routes[0]: want a metric, a feature or both"},
		{"bad feature", "routes:\n  - {match: /x, feature: SSO}\n", "routes[0]: feature"},
		{"cost without metric", "routes:\n  - {match: /x, feature: sso, cost: 2}\n", "routes[0]: cost: the route counts no metric"},
		{"host in pattern", "routes:\n  - {match: example.com/x, metric: m}\n", "want [METHOD ]/path"},
		{"method and host", "routes:\n  - {match: GET example.com/x, metric: m}\n", "want [METHOD ]/path"},
		{"bad pattern", "routes:\n  - {match: '/x/{', metric: m}\n", "routes[0]: match"},
		{"conflicting routes", "routes:\n  - {match: 'GET /a/{x}', metric: m}\n  - {match: 'GET /{y}/b', metric: m}\n", "routes[1]: match \"GET /{y}/b\": matches the same requests"},
		{"same route twice", "routes:\n  - {match: /a, metric: m}\n  - {match: /a, metric: n}\n", "routes[1]"},
		{"bad unmatched", "routes:\n  - {match: /a, metric: m}\nunmatched: maybe\n", "want deny or allow"},
		{"unmatched without routes", "unmatched: allow\n", "no routes"},
		{"bad case", "routes:\n  - {match: /a, metric: m}\ncase: upper\n", "case: want insensitive or sensitive"},
		{"case without routes", "case: sensitive\n", "case: there are no routes"},
		{"routes differing in case only", "routes:\n  - {match: /v1/A, metric: m}\n  - {match: /v1/a, metric: n}\n", `routes[1]: match "/v1/a": matches the same requests`},
		{"encoded slash in a pattern", "routes:\n  - {match: '/v1/a%2Fb', metric: m}\n", `routes[0]: match "/v1/a%2Fb": the path must be written decoded`},
		{"encoded letter in a pattern", "routes:\n  - {match: '/v1/%61', metric: m}\n", "written decoded"},
		{"dot segment in a pattern", "routes:\n  - {match: 'POST /v1/x/../completions', metric: m}\n", `has a ".." segment`},
		{"dot in a pattern", "routes:\n  - {match: '/v1/./x', metric: m}\n", `has a "." segment`},
		{"parameter in a pattern", "routes:\n  - {match: '/v1/x;y', metric: m}\n", `has a ";", which some upstreams take for a parameter`},
		{"backslash in a pattern", "routes:\n  - {match: '/v1\\x', metric: m}\n", "has a backslash"},
		{"empty segment in a pattern", "routes:\n  - {match: 'GET /v1//x', metric: m}\n", "not canonical: write /v1/x"},
		{"query in a pattern", "routes:\n  - {match: '/v1/x?y=1', metric: m}\n", `has a "?" in the path`},
		{"trailing {$}", "routes:\n  - {match: '/v1/x/{$}', metric: m}\n", "trailing slash is not significant in a path: write /v1/x"},
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

// A canonical path is its own canonical form, and has none of what
// canonicalPath decodes, drops, folds or refuses.
func FuzzCanonicalPath(f *testing.F) {
	for _, p := range []string{"/", "/v1/completions", "//V1//Exports/", "/v1/%65xports/a%20b", "/v1/x/%2e%2e/a",
		"/v1/a;b", `/v1\a`, "/v1/%zz", "/v1/%252F", "/v1/./a", "/v1/%C3%A9t%C3%A9/"} {
		f.Add(p, true)
		f.Add(p, false)
	}
	f.Fuzz(func(t *testing.T, p string, fold bool) {
		canon, refused := canonicalPath(p, fold)
		if refused != "" {
			if canon != "" {
				t.Errorf("canonicalPath(%q) refused (%s), yet returned %q", p, refused, canon)
			}
			return
		}
		again, refused := canonicalPath(canon, fold)
		if refused != "" || again != canon {
			t.Errorf("canonicalPath(%q) = %q, whose own canonical form is %q (%s)", p, canon, again, refused)
		}
		if canon[0] != '/' || strings.Contains(canon, "//") || strings.Contains(canon, "%") ||
			len(canon) > 1 && strings.HasSuffix(canon, "/") || fold && lowerASCII(canon) != canon {
			t.Errorf("canonicalPath(%q) = %q: not canonical", p, canon)
		}
	})
}
