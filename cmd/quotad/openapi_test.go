package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/quotad/quotad/internal/api"
	"github.com/quotad/quotad/internal/npmtest"
)

// specPath is openapi.yaml at the module root, seen from this package.
var specPath = filepath.Join("..", "..", "openapi.yaml")

// MustLoadSpec loads openapi.yaml with every $ref resolved.
func MustLoadSpec(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		t.Fatalf("load %s: %v", specPath, err)
	}
	return doc
}

func TestOpenAPISpecValid(t *testing.T) {
	t.Parallel()
	doc := MustLoadSpec(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml does not validate: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	// Every operation either needs no token or says which roles it admits.
	for _, op := range specOperations(doc) {
		roles, open := op.roles()
		switch {
		case open && len(roles) > 0:
			t.Errorf("%s needs no token but lists roles %v", op, roles)
		case !open && len(roles) == 0:
			t.Errorf("%s needs a token but lists no x-quotad-roles", op)
		case !open && !slices.Contains(roles, "admin"):
			t.Errorf("%s does not admit the admin role; an admin token may do everything", op)
		}
	}
}

// openapi.yaml passes Spectral's standard OpenAPI rules (.spectral.yaml
// at the module root) without an error or a warning, nor an info or a
// hint.
func TestOpenAPISpectral(t *testing.T) {
	t.Parallel()
	root := filepath.Dir(specPath) // the module root
	out, err := npmtest.RunBin(t, root, "spectral", "lint", "--ruleset", ".spectral.yaml", "--fail-severity", "hint",
		"--format", "text", filepath.Base(specPath))
	if err != nil {
		t.Fatalf("spectral lint %s: %v\n%s", specPath, err, out)
	}
}

// specOp is one operation of openapi.yaml.
type specOp struct {
	Method, Path string
	Op           *openapi3.Operation
	Doc          *openapi3.T
}

func (o specOp) String() string { return o.Method + " " + o.Path }

// roles returns the operation's x-quotad-roles, and whether it needs no
// token at all (security: []).
func (o specOp) roles() (roles []string, open bool) {
	if o.Op.Security != nil && len(*o.Op.Security) == 0 {
		open = true
	}
	if list, ok := o.Op.Extensions["x-quotad-roles"].([]any); ok {
		for _, r := range list {
			roles = append(roles, fmt.Sprint(r))
		}
	}
	return roles, open
}

// specOperations lists openapi.yaml's operations, sorted.
func specOperations(doc *openapi3.T) []specOp {
	var out []specOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out = append(out, specOp{Method: method, Path: path, Op: op, Doc: doc})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// serverRoutes lists the server's routes as "METHOD /path/{param}".
func serverRoutes() map[string]bool {
	out := map[string]bool{}
	for _, r := range api.New(api.Config{}).Routes() {
		// echo files routes it adds on its own (RouteNotFound handlers, the
		// catch-all a group gets when it has middleware) under pseudo-methods
		// named echo_*. They are not part of the API; quotad registers none
		// today, but they must not count if echo adds them.
		if strings.HasPrefix(r.Method, "echo_") {
			continue
		}
		path := echoParam.ReplaceAllString(r.Path, "{$1}")
		// echo's wildcard, the rest of the path, is {path} in the document.
		if rest, ok := strings.CutSuffix(path, "/*"); ok {
			path = rest + "/{path}"
		}
		out[r.Method+" "+path] = true
	}
	return out
}

func TestOpenAPIRouteParity(t *testing.T) {
	t.Parallel()
	doc := MustLoadSpec(t)
	documented := map[string]bool{}
	for _, op := range specOperations(doc) {
		documented[op.String()] = true
	}
	registered := serverRoutes()
	var undocumented, unregistered []string
	for r := range registered {
		if !documented[r] {
			undocumented = append(undocumented, r)
		}
	}
	for r := range documented {
		if !registered[r] {
			unregistered = append(unregistered, r)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unregistered)
	for _, r := range undocumented {
		t.Errorf("route %s is registered but not in openapi.yaml", r)
	}
	for _, r := range unregistered {
		t.Errorf("operation %s is in openapi.yaml but the server does not register it", r)
	}
}

// specValidator checks real exchanges against openapi.yaml.
type specValidator struct {
	doc    *openapi3.T
	router routers.Router
}

// MustSpecValidator loads openapi.yaml for checking traffic. Two changes
// make it stricter than the published document, never looser:
//   - servers are dropped, so that any host matches (the test server
//     listens on a free port);
//   - every object schema with declared properties and no word on others
//     is closed (additionalProperties: false). The published document
//     leaves responses open so that fields may be added later without
//     breaking clients, but today a field the server sends and the
//     document does not name is a mismatch.
func MustSpecValidator(t testing.TB) *specValidator {
	t.Helper()
	doc := MustLoadSpec(t)
	doc.Servers = nil
	seen := map[*openapi3.Schema]bool{}
	for _, ref := range doc.Components.Schemas {
		closeSchema(ref, seen)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					closeSchema(mt.Schema, seen)
				}
			}
		}
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router from openapi.yaml: %v", err)
	}
	return &specValidator{doc: doc, router: router}
}

// closeSchema closes ref and the schemas below it. allOf branches are left
// alone: they constrain part of an object whose other fields another branch
// names.
func closeSchema(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		no := false
		s.AdditionalProperties.Has = &no
	}
	for _, p := range s.Properties {
		closeSchema(p, seen)
	}
	closeSchema(s.Items, seen)
	closeSchema(s.AdditionalProperties.Schema, seen)
}

var filterOptions = &openapi3filter.Options{
	// Tokens are the server's business; the tests send wrong ones on purpose.
	AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	IncludeResponseStatus: true,
	MultiError:            true,
	// kin-openapi would put a property's default in place of a null before
	// validating ("cost": null would pass as 1); the server refuses null
	// where a field is not nullable, and so must the document.
	SkipSettingDefaults: true,
}

// apiCall is one request to send, as testServer.do takes it.
type apiCall struct {
	Method, Path, Body string
	// Headers come in name, value pairs; an empty value removes the header.
	// Without an Authorization header the admin token is sent, and a body
	// is sent as application/json unless a Content-Type is given.
	Headers []string
}

func (c apiCall) String() string { return c.Method + " " + c.Path }

func (c apiCall) request(base string) (*http.Request, error) {
	var body io.Reader
	if c.Body != "" {
		body = strings.NewReader(c.Body)
	}
	req, err := http.NewRequest(c.Method, base+c.Path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if c.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(c.Headers); i += 2 {
		if c.Headers[i+1] == "" {
			req.Header.Del(c.Headers[i])
			continue
		}
		req.Header.Set(c.Headers[i], c.Headers[i+1])
	}
	return req, nil
}

// sendCall sends c to s and reads the answer in full.
func sendCall(t testing.TB, s *testServer, c apiCall) response {
	t.Helper()
	req, err := c.request(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return mustSend(t, http.DefaultClient, req)
}

// requestInput finds c's operation and returns the input to validate c
// against it; it fails when c names no operation of the document.
func (v *specValidator) requestInput(base string, c apiCall) (*openapi3filter.RequestValidationInput, error) {
	req, err := c.request(base)
	if err != nil {
		return nil, err
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return nil, err
	}
	return &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route, Options: filterOptions,
	}, nil
}

// input returns the input to validate c against operation ("METHOD
// /template"), or against the operation the router finds when operation is
// "".
func (v *specValidator) input(base string, c apiCall, operation string) (*openapi3filter.RequestValidationInput, error) {
	if operation == "" {
		return v.requestInput(base, c)
	}
	method, tmpl, _ := strings.Cut(operation, " ")
	item := v.doc.Paths.Value(tmpl)
	if item == nil || item.GetOperation(method) == nil {
		return nil, fmt.Errorf("openapi.yaml has no operation %s", operation)
	}
	req, err := c.request(base)
	if err != nil {
		return nil, err
	}
	// Pair the template's segments with the request path's.
	params := map[string]string{}
	want, got := strings.Split(tmpl, "/"), strings.Split(req.URL.EscapedPath(), "/")
	if len(want) != len(got) {
		return nil, fmt.Errorf("%s does not fit %s", c, operation)
	}
	for i, seg := range want {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			params[seg[1:len(seg)-1]] = got[i]
		} else if seg != got[i] {
			return nil, fmt.Errorf("%s does not fit %s", c, operation)
		}
	}
	route := &routers.Route{Spec: v.doc, Path: tmpl, PathItem: item, Method: method, Operation: item.GetOperation(method)}
	return &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: filterOptions}, nil
}

// mustMatchRequest fails the test unless openapi.yaml refuses the request
// of in, c, when the server refused it (bad, answering status), and
// accepts it otherwise.
func mustMatchRequest(t testing.TB, in *openapi3filter.RequestValidationInput, c apiCall, bad bool, status int) {
	t.Helper()
	switch err := openapi3filter.ValidateRequest(context.Background(), in); {
	case bad && err == nil:
		t.Errorf("%s: openapi.yaml accepts this request, which the server refuses with %d", c, status)
	case !bad && err != nil:
		t.Errorf("%s: request does not match openapi.yaml: %v", c, err)
	}
}

// validateResponse checks r, the answer to c, against c's operation: its
// status must be documented, and its headers and body must match.
func (v *specValidator) validateResponse(base string, c apiCall, r response) error {
	in, err := v.requestInput(base, c)
	if err != nil {
		return err
	}
	return v.validateAnswer(in, r)
}

// validateOutside checks r, the answer to a request that belongs to no
// operation (unknown route, wrong method), against the named response of
// components.
func (v *specValidator) validateOutside(base string, c apiCall, r response, name string) error {
	ref := v.doc.Components.Responses[name]
	if ref == nil {
		return fmt.Errorf("openapi.yaml has no components.responses.%s", name)
	}
	req, err := c.request(base)
	if err != nil {
		return err
	}
	if _, _, err := v.router.FindRoute(req); err == nil {
		return fmt.Errorf("%s names an operation of openapi.yaml", c)
	}
	return v.validateComponent(req, c, r, ref)
}

// validateComponent checks r, the answer to c (sent as req), against ref,
// a components.responses entry: an answer any operation may give.
func (v *specValidator) validateComponent(req *http.Request, c apiCall, r response, ref *openapi3.ResponseRef) error {
	op := &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(r.Status, ref))}
	route := &routers.Route{Spec: v.doc, Path: c.Path, Method: c.Method, Operation: op}
	return v.validateAnswer(&openapi3filter.RequestValidationInput{Request: req, Route: route, Options: filterOptions}, r)
}

func (v *specValidator) validateAnswer(in *openapi3filter.RequestValidationInput, r response) error {
	if r.Status == http.StatusNoContent && len(r.Body) > 0 {
		return fmt.Errorf("204 with a body: %s", r.Body)
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 r.Status,
		Header:                 r.Header,
		Body:                   io.NopCloser(bytes.NewReader(r.Body)),
		Options:                filterOptions,
	})
}

// problemCode returns the code of a problem document, or "".
func problemCode(r response) string {
	var p struct{ Code string }
	_ = json.Unmarshal(r.Body, &p)
	return p.Code
}

// samplePath fills an operation's path parameters with valid values.
func samplePath(path string) string {
	if path == "/console/{path}" {
		return "/console/app.css" // the console's files are its own, not items
	}
	return strings.NewReplacer(
		"{customer}", "acme", "{metric}", "api_calls", "{plan}", "pro", "{window}", "day", "{path}", "items",
	).Replace(path)
}

// TestOpenAPIRoles calls every operation without a token, with an unknown
// token and with a check token: the answers must be the ones x-quotad-roles
// and security promise, in the documented shape.
func TestOpenAPIRoles(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	v := MustSpecValidator(t)
	registered := serverRoutes()
	for _, op := range specOperations(v.doc) {
		if !registered[op.String()] {
			continue // TestOpenAPIRouteParity reports it
		}
		roles, open := op.roles()
		path := samplePath(op.Path)
		t.Run(op.String(), func(t *testing.T) {
			type attempt struct {
				name   string
				token  string
				want   int // 0: anything but 401 and 403
				wantCd string
			}
			var attempts []attempt
			switch {
			case open:
				attempts = []attempt{{"no token", "", http.StatusOK, ""}}
			default:
				attempts = []attempt{
					{"no token", "", http.StatusUnauthorized, "unauthorized"},
					{"unknown token", "Bearer nope", http.StatusUnauthorized, "unauthorized"},
					{"basic auth", "Basic " + adminToken, http.StatusUnauthorized, "unauthorized"},
				}
				if slices.Contains(roles, "check") {
					attempts = append(attempts, attempt{"check token", "Bearer " + checkToken, 0, ""})
				} else {
					attempts = append(attempts, attempt{"check token", "Bearer " + checkToken, http.StatusForbidden, "forbidden"})
				}
			}
			for _, a := range attempts {
				c := apiCall{Method: op.Method, Path: path, Headers: []string{"Authorization", a.token}}
				r := sendCall(t, s, c)
				switch {
				case a.want == 0 && (r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden):
					t.Errorf("%s: status %d, want the operation to run\n%s", a.name, r.Status, r.Body)
				case a.want != 0 && r.Status != a.want:
					t.Errorf("%s: status %d, want %d\n%s", a.name, r.Status, a.want, r.Body)
				case a.wantCd != "" && op.Method != http.MethodHead && problemCode(r) != a.wantCd: // HEAD answers have no body
					t.Errorf("%s: code %q, want %q", a.name, problemCode(r), a.wantCd)
				}
				if err := v.validateResponse(s.URL, c, r); err != nil {
					t.Errorf("%s: answer does not match openapi.yaml: %v\n%s", a.name, err, r.Body)
				}
			}
		})
	}
}

// apiCase is one request of TestOpenAPITraffic and what must come of it.
type apiCase struct {
	name string
	apiCall
	want int
	// code is the problem code of an error answer.
	code string
	// bad marks a request that breaks openapi.yaml itself (a schema,
	// pattern, bound or content type): the document must reject it too.
	// Any other request must validate, even one the server refuses for
	// reasons no schema can tell (a missing resource, an If-Match).
	bad bool
	// lenient explains why the document cannot judge this request, which
	// the server refuses: its request is then not validated.
	lenient string
	// outside names the components.responses entry describing an answer
	// that belongs to no operation (unknown route, wrong method).
	outside string
	// operation, "METHOD /path/{template}", names the operation the request
	// is for when OpenAPI's path matching would pick another path item
	// (a concrete path beats a templated one of the same shape).
	operation string
	// check inspects the answer further.
	check func(t *testing.T, r response)
}

// TestOpenAPITraffic sends real requests, in order, covering every
// operation with its successes and errors, and checks each request and
// answer against openapi.yaml.
func TestOpenAPITraffic(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	v := MustSpecValidator(t)

	future := time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339)
	today := time.Now().UTC().Format(time.DateOnly)
	lastMonth := time.Now().UTC().AddDate(0, 0, -time.Now().UTC().Day()).Format("2006-01")
	big := `{"description":"` + strings.Repeat("x", 70<<10) + `"}`
	noToken := []string{"Authorization", ""}
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	ifMatch := func(tag string) []string { return []string{"If-Match", tag} }

	// fwd gives forward-auth's customer, metric and cost headers ("": not
	// sent), then more headers.
	fwd := func(customer, metric, cost string, more ...string) []string {
		return append([]string{"X-Quotad-Customer", customer, "X-Quotad-Metric", metric, "X-Quotad-Cost", cost}, more...)
	}

	// The next_cursor of the last answer, for a "{next}" in the next path.
	var next string

	hasHeader := func(name string, want bool) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			if got := r.Header.Get(name) != ""; got != want {
				t.Errorf("header %s present = %t, want %t (%q)", name, got, want, r.Header.Get(name))
			}
		}
	}
	hasField := func(name string, want bool) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			var m map[string]any
			if err := json.Unmarshal(r.Body, &m); err != nil {
				t.Fatalf("body: %v", err)
			}
			if _, got := m[name]; got != want {
				t.Errorf("field %s present = %t, want %t", name, got, want)
			}
		}
	}
	field := func(name string, want any) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			var m map[string]any
			if err := json.Unmarshal(r.Body, &m); err != nil {
				t.Fatalf("body: %v", err)
			}
			if got := m[name]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	}
	all := func(fs ...func(*testing.T, response)) func(*testing.T, response) {
		return func(t *testing.T, r response) {
			for _, f := range fs {
				f(t, r)
			}
		}
	}
	header := func(name, want string) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			if got := r.Header.Get(name); got != want {
				t.Errorf("header %s = %q, want %q", name, got, want)
			}
		}
	}

	cases := []apiCase{
		// Operations and routing.
		{name: "healthz", apiCall: apiCall{"GET", "/healthz", "", noToken}, want: 200},
		{name: "readyz", apiCall: apiCall{"GET", "/readyz", "", noToken}, want: 200},
		{name: "prometheus metrics", apiCall: apiCall{"GET", "/metrics", "", noToken}, want: 200},
		{name: "unknown route", apiCall: apiCall{"GET", "/v1/nothing", "", nil}, want: 404, code: "not_found", outside: "RouteNotFound"},
		{name: "unknown route below a resource", apiCall: apiCall{"GET", "/v1/customers/acme/nothing", "", nil}, want: 404, code: "not_found", outside: "RouteNotFound"},
		{name: "wrong method", apiCall: apiCall{"POST", "/v1/metrics/api_calls", "{}", nil}, want: 405, code: "method_not_allowed", outside: "MethodNotAllowed",
			check: hasHeader("Allow", true)},
		{name: "wrong method on a list", apiCall: apiCall{"PATCH", "/v1/plans", "", nil}, want: 405, code: "method_not_allowed", outside: "MethodNotAllowed"},
		{name: "no token", apiCall: apiCall{"GET", "/v1/metrics", "", noToken}, want: 401, code: "unauthorized",
			check: hasHeader("WWW-Authenticate", true)},
		{name: "unknown token", apiCall: apiCall{"PUT", "/v1/metrics/m", "{}", []string{"Authorization", "Bearer nope"}}, want: 401, code: "unauthorized"},
		{name: "check token on admin route", apiCall: apiCall{"PUT", "/v1/metrics/m", "{}", asCheck}, want: 403, code: "forbidden"},

		// Metrics.
		{name: "create metric", apiCall: apiCall{"PUT", "/v1/metrics/api_calls", `{"description":"API calls","capacity":{"second":5000,"day":10000000}}`, nil}, want: 201,
			check: all(hasHeader("Location", true), field("version", 1))},
		{name: "replace metric if match", apiCall: apiCall{"PUT", "/v1/metrics/api_calls", `{"description":"API calls","capacity":{"second":5000,"day":10000000}}`, ifMatch(`"1"`)}, want: 200,
			check: all(hasHeader("Location", false), field("version", 2))},
		{name: "replace metric if match any", apiCall: apiCall{"PUT", "/v1/metrics/api_calls", `{"description":"API calls","capacity":{"second":5000,"day":10000000}}`, ifMatch("*")}, want: 200},
		{name: "create metric with defaults", apiCall: apiCall{"PUT", "/v1/metrics/llm_tokens", `{}`, nil}, want: 201,
			check: field("capacity", map[string]any{})},
		{name: "create metric with nulls", apiCall: apiCall{"PUT", "/v1/metrics/exports", `{"description":null,"capacity":null}`, nil}, want: 201},
		{name: "create metric with charset", apiCall: apiCall{"PUT", "/v1/metrics/history", `{}`, []string{"Content-Type", "application/json; charset=utf-8"}}, want: 201},
		{name: "metric stale if match", apiCall: apiCall{"PUT", "/v1/metrics/api_calls", `{}`, ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "metric weak if match", apiCall: apiCall{"PUT", "/v1/metrics/api_calls", `{}`, ifMatch(`W/"3"`)}, want: 412, code: "precondition_failed"},
		{name: "if match on missing metric", apiCall: apiCall{"PUT", "/v1/metrics/ghost", `{}`, ifMatch("*")}, want: 412, code: "precondition_failed"},
		{name: "metric bad key", apiCall: apiCall{"PUT", "/v1/metrics/Bad_Key", `{}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric bad capacity window", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"capacity":{"fortnight":1}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric negative capacity", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"capacity":{"day":-1}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric capacity above 2^53-1", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"capacity":{"day":9007199254740992}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric null capacity entry", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"capacity":{"day":null}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric unknown field", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"unit":"calls"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric description too long", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"description":"` + strings.Repeat("é", 2001) + `"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric wrong type", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{"description":5}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric body not an object", apiCall: apiCall{"PUT", "/v1/metrics/m2", `[]`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric body not json", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric two objects", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{}{}`, nil}, want: 400, code: "validation_failed",
			lenient: "not one JSON text, but kin-openapi reads only the first value"},
		{name: "metric text body", apiCall: apiCall{"PUT", "/v1/metrics/m2", `{}`, []string{"Content-Type", "text/plain"}}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "metric no body", apiCall: apiCall{"PUT", "/v1/metrics/m2", "", nil}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "metric body too large", apiCall: apiCall{"PUT", "/v1/metrics/m2", big, nil}, want: 413, code: "payload_too_large", bad: true},
		{name: "list metrics", apiCall: apiCall{"GET", "/v1/metrics", "", nil}, want: 200, check: all(hasHeader("ETag", false), hasField("next_cursor", false))},
		{name: "list metrics page", apiCall: apiCall{"GET", "/v1/metrics?limit=2", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "list metrics next page", apiCall: apiCall{"GET", "/v1/metrics?limit=2&cursor={next}", "", nil}, want: 200},
		{name: "list metrics limit 0", apiCall: apiCall{"GET", "/v1/metrics?limit=0", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "list metrics limit 1001", apiCall: apiCall{"GET", "/v1/metrics?limit=1001", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "list metrics limit not a number", apiCall: apiCall{"GET", "/v1/metrics?limit=ten", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "list metrics bad cursor", apiCall: apiCall{"GET", "/v1/metrics?cursor=garbage", "", nil}, want: 400, code: "validation_failed"},
		{name: "get metric", apiCall: apiCall{"GET", "/v1/metrics/api_calls", "", nil}, want: 200, check: hasHeader("ETag", true)},
		{name: "get missing metric", apiCall: apiCall{"GET", "/v1/metrics/ghost", "", nil}, want: 404, code: "metric_not_found"},
		{name: "get metric bad key", apiCall: apiCall{"GET", "/v1/metrics/-x", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric usage", apiCall: apiCall{"GET", "/v1/metrics/api_calls/usage", "", nil}, want: 200},
		{name: "metric usage without capacity", apiCall: apiCall{"GET", "/v1/metrics/llm_tokens/usage", "", nil}, want: 200},
		{name: "metric usage of missing metric", apiCall: apiCall{"GET", "/v1/metrics/ghost/usage", "", nil}, want: 404, code: "metric_not_found"},
		{name: "metric usage bad key", apiCall: apiCall{"GET", "/v1/metrics/-x/usage", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "metric usage with check token", apiCall: apiCall{"GET", "/v1/metrics/api_calls/usage", "", asCheck}, want: 403, code: "forbidden"},
		{name: "create metric drawing on a pool", apiCall: apiCall{"PUT", "/v1/metrics/images", `{}`, nil}, want: 201,
			check: field("credit_schema", []any{})},
		{name: "create credit pool", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"description":"Credits","credit_schema":[{"metric":"images","credits":10},{"metric":"exports","credits":3,"per":100}]}`, nil}, want: 201,
			check: field("credit_schema", []any{map[string]any{"metric": "images", "credits": 10, "per": 1}, map[string]any{"metric": "exports", "credits": 3, "per": 100}})},
		{name: "replace credit pool as returned", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"description":"Credits","capacity":{},"credit_schema":[{"metric":"images","credits":10,"per":1},{"metric":"exports","credits":3,"per":null}]}`, ifMatch(`"1"`)}, want: 200,
			check: field("version", 2)},
		{name: "credit pool naming an undeclared metric", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"ghost","credits":1}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "credit pool naming itself", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"credits","credits":1}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "credit pool naming a metric twice", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"images","credits":1},{"metric":"images","credits":2}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "second pool naming a metric that draws on a pool", apiCall: apiCall{"PUT", "/v1/metrics/bonus", `{"credit_schema":[{"metric":"images","credits":1}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "second pool naming a pool", apiCall: apiCall{"PUT", "/v1/metrics/bonus", `{"credit_schema":[{"metric":"credits","credits":1}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "pool schema on a metric that draws on a pool", apiCall: apiCall{"PUT", "/v1/metrics/images", `{"credit_schema":[{"metric":"history","credits":1}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "credit pool with zero credits", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"images","credits":0}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "credit pool with per above 2^53-1", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"images","credits":1,"per":9007199254740992}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "credit pool without credits", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"images"}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "credit pool with an unknown rate field", apiCall: apiCall{"PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"images","credits":1,"cost":1}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "get credit pool", apiCall: apiCall{"GET", "/v1/metrics/credits", "", nil}, want: 200, check: field("version", 2)},

		// Plans.
		{name: "create plan", apiCall: apiCall{"PUT", "/v1/plans/pro", `{"name":"Pro","description":"For teams",
			"price":{"amount_cents":4900,"currency":"USD","interval":"month"},
			"limits":[{"metric":"api_calls","window":"second","limit":50},
			          {"metric":"api_calls","window":"day","limit":100000,"mode":"soft","overage_percent":20,"overage_price_micros":1000},
			          {"metric":"llm_tokens","window":"month","limit":1000000,"mode":"elastic","ceiling":2000000}]}`, nil}, want: 201,
			check: hasHeader("Location", true)},
		{name: "replace plan as returned", apiCall: apiCall{"PUT", "/v1/plans/pro", `{"name":"Pro","description":"For teams",
			"price":{"amount_cents":4900,"currency":"USD","interval":"month"},
			"limits":[{"metric":"api_calls","window":"second","limit":50,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null},
			          {"metric":"api_calls","window":"day","limit":100000,"mode":"soft","overage_percent":20,"overage_price_micros":1000,"ceiling":null},
			          {"metric":"llm_tokens","window":"month","limit":1000000,"mode":"elastic","overage_percent":0,"overage_price_micros":null,"ceiling":2000000}]}`,
			ifMatch(`"1"`)}, want: 200},
		{name: "create plan with defaults", apiCall: apiCall{"PUT", "/v1/plans/free", `{}`, nil}, want: 201, check: field("name", "free")},
		{name: "create plan with features", apiCall: apiCall{"PUT", "/v1/plans/business", `{"name":"Business","features":{"sso":true,"max_projects":10,"support":"priority","audit_log":false}}`, nil}, want: 201},
		{name: "replace plan with features as returned", apiCall: apiCall{"PUT", "/v1/plans/business", `{"name":"Business","description":"","price":{"amount_cents":0,"currency":"USD","interval":"month"},"limits":[],"features":{"sso":true,"max_projects":10,"support":"priority","audit_log":false}}`, ifMatch(`"1"`)}, want: 200},
		{name: "plan feature float", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"features":{"seats":1.5}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan feature null", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"features":{"sso":null}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan feature empty string", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"features":{"support":""}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan feature bad key", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"features":{"Sso":true}}`, nil}, want: 400, code: "validation_failed", lenient: "a JSON schema cannot constrain an object's keys in OpenAPI 3.0"},
		{name: "create small plan", apiCall: apiCall{"PUT", "/v1/plans/tiny", `{"name":"Tiny","price":null,"limits":[{"metric":"api_calls","window":"month","limit":2}]}`, nil}, want: 201},
		{name: "plan undeclared metric", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"ghost","window":"day","limit":1}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan duplicate limit", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1},{"metric":"api_calls","window":"day","limit":2}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan overage on hard", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"overage_percent":5}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan ceiling below limit", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":10,"mode":"elastic","ceiling":5}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan limit missing", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day"}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan bad window", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"year","limit":1}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan bad mode", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"mode":"strict"}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan overage percent above 1000", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"mode":"soft","overage_percent":1001}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan limit above 2^53-1", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":9007199254740992}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan fractional limit", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1.5}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan bad currency", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"price":{"currency":"usd"}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan bad interval", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"price":{"interval":"quarter"}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan blank name", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"name":"   "}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan null limit entry", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[null]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan unknown limit field", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"weight":5}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "create plan with every algorithm", apiCall: apiCall{"PUT", "/v1/plans/rates", `{"name":"Rates","limits":[
			{"metric":"api_calls","window":"second","limit":10,"algorithm":"sliding_window"},
			{"metric":"api_calls","window":"minute","limit":300,"algorithm":"fixed_window","burst":null},
			{"metric":"history","window":"second","limit":10000,"algorithm":"sliding_log"},
			{"metric":"history","window":"minute","limit":6000,"algorithm":"token_bucket","burst":500},
			{"metric":"history","window":"day","limit":100000,"algorithm":null,"burst":null}]}`, nil}, want: 201},
		{name: "plan unknown algorithm", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"second","limit":1,"algorithm":"leaky_bucket"}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan algorithm on a long window", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"algorithm":"sliding_window"}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan burst without token bucket", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"second","limit":1,"burst":5}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan burst 0", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"second","limit":1,"algorithm":"token_bucket","burst":0}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan burst above 2^53-1", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"second","limit":1,"algorithm":"token_bucket","burst":9007199254740992}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "plan sliding log above 10000", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"second","limit":10001,"algorithm":"sliding_log"}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan stale if match", apiCall: apiCall{"PUT", "/v1/plans/pro", `{}`, ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "plan text body", apiCall: apiCall{"PUT", "/v1/plans/bad", `{}`, []string{"Content-Type", "text/plain"}}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "plan body too large", apiCall: apiCall{"PUT", "/v1/plans/bad", big, nil}, want: 413, code: "payload_too_large", bad: true},
		{name: "list plans", apiCall: apiCall{"GET", "/v1/plans", "", nil}, want: 200},
		{name: "list plans page", apiCall: apiCall{"GET", "/v1/plans?limit=1", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "list plans next page", apiCall: apiCall{"GET", "/v1/plans?limit=1&cursor={next}", "", nil}, want: 200},
		{name: "list plans bad cursor", apiCall: apiCall{"GET", "/v1/plans?cursor=YWJj", "", nil}, want: 400, code: "validation_failed"},
		{name: "get plan", apiCall: apiCall{"GET", "/v1/plans/pro", "", nil}, want: 200, check: hasHeader("ETag", true)},
		{name: "get missing plan", apiCall: apiCall{"GET", "/v1/plans/ghost", "", nil}, want: 404, code: "plan_not_found"},
		{name: "get plan bad key", apiCall: apiCall{"GET", "/v1/plans/PRO", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "create plan with limits per subject", apiCall: apiCall{"PUT", "/v1/plans/team", `{"name":"Team","limits":[
			{"metric":"api_calls","window":"day","limit":1000},
			{"metric":"api_calls","window":"day","limit":100,"per":"subject"},
			{"metric":"api_calls","window":"second","limit":5,"per":"customer"}]}`, nil}, want: 201},
		{name: "replace plan with limits per subject as returned", apiCall: apiCall{"PUT", "/v1/plans/team", `{"name":"Team","limits":[
			{"metric":"api_calls","window":"day","limit":1000,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null},
			{"metric":"api_calls","window":"day","per":"subject","limit":100,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null},
			{"metric":"api_calls","window":"second","limit":5,"mode":"hard","overage_percent":0,"overage_price_micros":null,"ceiling":null,"algorithm":"sliding_window"}]}`, ifMatch(`"1"`)}, want: 200},
		{name: "plan two limits per subject on one metric+window", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"per":"subject"},{"metric":"api_calls","window":"day","limit":2,"per":"subject"}]}`, nil}, want: 400, code: "validation_failed"},
		{name: "plan unknown per", apiCall: apiCall{"PUT", "/v1/plans/bad", `{"limits":[{"metric":"api_calls","window":"day","limit":1,"per":"user"}]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "get plan with limits per subject", apiCall: apiCall{"GET", "/v1/plans/team", "", nil}, want: 200},

		// Customers.
		{name: "create customer", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro","name":"Acme","billing_anchor_day":15,"metadata":{"crm":{"id":42}}}`, nil}, want: 201,
			check: hasHeader("Location", true)},
		{name: "replace customer", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro","name":"Acme","billing_anchor_day":null,"metadata":null}`, ifMatch(`"1"`)}, want: 200,
			check: all(field("billing_anchor_day", nil), field("metadata", map[string]any{}))},
		{name: "create customer with id punctuation", apiCall: apiCall{"PUT", "/v1/customers/user@example.com:1", `{"plan":"free"}`, nil}, want: 201},
		{name: "create customer on small plan", apiCall: apiCall{"PUT", "/v1/customers/bob", `{"plan":"tiny"}`, nil}, want: 201},
		{name: "customer unknown plan", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"ghost"}`, nil}, want: 400, code: "validation_failed"},
		{name: "customer without plan", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"name":"Acme"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "customer anchor day 29", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro","billing_anchor_day":29}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "customer anchor day as text", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro","billing_anchor_day":"15"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "customer metadata not an object", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro","metadata":[1]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "customer bad id", apiCall: apiCall{"PUT", "/v1/customers/-acme", `{"plan":"pro"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "customer name too long", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro","name":"` + strings.Repeat("n", 201) + `"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "customer stale if match", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro"}`, ifMatch(`"9"`)}, want: 412, code: "precondition_failed"},
		{name: "customer text body", apiCall: apiCall{"PUT", "/v1/customers/acme", `{"plan":"pro"}`, []string{"Content-Type", "text/plain"}}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "customer body too large", apiCall: apiCall{"PUT", "/v1/customers/acme", big, nil}, want: 413, code: "payload_too_large", bad: true},
		{name: "list customers", apiCall: apiCall{"GET", "/v1/customers", "", nil}, want: 200},
		{name: "list customers on plan", apiCall: apiCall{"GET", "/v1/customers?plan=pro&limit=100", "", nil}, want: 200},
		{name: "list customers page", apiCall: apiCall{"GET", "/v1/customers?limit=1", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "list customers next page", apiCall: apiCall{"GET", "/v1/customers?limit=1&cursor={next}", "", nil}, want: 200},
		{name: "list customers on missing plan", apiCall: apiCall{"GET", "/v1/customers?plan=ghost", "", nil}, want: 200},
		{name: "list customers bad plan", apiCall: apiCall{"GET", "/v1/customers?plan=Pro!", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "get customer", apiCall: apiCall{"GET", "/v1/customers/acme", "", nil}, want: 200, check: hasHeader("ETag", true)},
		{name: "get missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost", "", nil}, want: 404, code: "customer_not_found"},
		{name: "get customer bad id", apiCall: apiCall{"GET", "/v1/customers/_x", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "limits", apiCall: apiCall{"GET", "/v1/customers/acme/limits", "", nil}, want: 200},
		{name: "limits of missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/limits", "", nil}, want: 404, code: "customer_not_found"},
		{name: "limits bad id", apiCall: apiCall{"GET", "/v1/customers/_x/limits", "", nil}, want: 400, code: "validation_failed", bad: true},

		// Overrides.
		{name: "create override", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day",
			`{"limit":5000,"mode":"soft","overage_percent":10,"ceiling":null,"expires_at":"` + future + `","reason":"launch week"}`, nil}, want: 201,
			check: all(hasHeader("Location", true), field("expired", false))},
		{name: "replace override", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":6000}`, ifMatch(`"1"`)}, want: 200,
			check: all(field("mode", "hard"), field("expires_at", nil))},
		{name: "create elastic override", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/minute", `{"limit":100,"mode":"elastic","ceiling":200}`, nil}, want: 201},
		{name: "create override on new window", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/llm_tokens/week", `{"limit":0,"reason":"paused"}`, nil}, want: 201},
		{name: "create token bucket override", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/second", `{"limit":10,"algorithm":"token_bucket","burst":20}`, nil}, want: 201},
		{name: "override unknown algorithm", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/second", `{"limit":10,"algorithm":"leaky"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override algorithm on a long window", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":10,"algorithm":"fixed_window"}`, nil}, want: 400, code: "validation_failed"},
		{name: "override burst without token bucket", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/second", `{"limit":10,"burst":20}`, nil}, want: 400, code: "validation_failed"},
		{name: "override expiry in the past", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1,"expires_at":"2000-01-01T00:00:00Z"}`, nil}, want: 400, code: "validation_failed"},
		{name: "override expiry not a time", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1,"expires_at":"tomorrow"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override without limit", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"mode":"hard"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override negative limit", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":-1}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override reason too long", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1,"reason":"` + strings.Repeat("r", 501) + `"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override bad window", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/fortnight", `{"limit":1}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override ceiling on soft", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1,"mode":"soft","ceiling":5}`, nil}, want: 400, code: "validation_failed"},
		{name: "override of missing customer", apiCall: apiCall{"PUT", "/v1/customers/ghost/overrides/api_calls/day", `{"limit":1}`, nil}, want: 404, code: "customer_not_found"},
		{name: "override of undeclared metric", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/ghost/day", `{"limit":1}`, nil}, want: 404, code: "metric_not_found"},
		{name: "override stale if match", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1}`, ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "override text body", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1}`, []string{"Content-Type", "text/plain"}}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "override body too large", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", big, nil}, want: 413, code: "payload_too_large", bad: true},
		{name: "list overrides", apiCall: apiCall{"GET", "/v1/customers/acme/overrides", "", nil}, want: 200},
		{name: "list overrides page", apiCall: apiCall{"GET", "/v1/customers/acme/overrides?limit=1", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "list overrides next page", apiCall: apiCall{"GET", "/v1/customers/acme/overrides?limit=1&cursor={next}", "", nil}, want: 200},
		{name: "list overrides of missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/overrides", "", nil}, want: 404, code: "customer_not_found"},
		{name: "get override", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/day", "", nil}, want: 200, check: hasHeader("ETag", true)},
		{name: "get missing override", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/hour", "", nil}, want: 404, code: "override_not_found"},
		{name: "get override of undeclared metric", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/ghost/day", "", nil}, want: 404, code: "metric_not_found"},
		{name: "get override of missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/overrides/api_calls/day", "", nil}, want: 404, code: "customer_not_found"},

		// Features: acme is on pro, which grants none.
		{name: "create feature override", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"value":true,"expires_at":"` + future + `","reason":"pilot"}`, nil}, want: 201,
			check: all(hasHeader("Location", true), field("version", 1), field("expired", false))},
		{name: "replace feature override", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"value":"sso-only","expires_at":null,"reason":null}`, ifMatch(`"1"`)}, want: 200,
			check: field("value", "sso-only")},
		{name: "feature override stale if match", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"value":true}`, ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "feature override without value", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"reason":"x"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "feature override value object", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"value":{}}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "feature override expiry in the past", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"value":true,"expires_at":"2000-01-01T00:00:00Z"}`, nil}, want: 400, code: "validation_failed"},
		{name: "feature override bad key", apiCall: apiCall{"PUT", "/v1/customers/acme/features/SSO", `{"value":true}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "feature override of missing customer", apiCall: apiCall{"PUT", "/v1/customers/ghost/features/sso", `{"value":true}`, nil}, want: 404, code: "customer_not_found"},
		{name: "feature override text body", apiCall: apiCall{"PUT", "/v1/customers/acme/features/sso", `{"value":true}`, []string{"Content-Type", "text/plain"}}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "list features", apiCall: apiCall{"GET", "/v1/customers/acme/features", "", nil}, want: 200},
		{name: "list features of missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/features", "", nil}, want: 404, code: "customer_not_found"},
		{name: "check feature", apiCall: apiCall{"POST", "/v1/features/check", `{"customer":"acme","feature":"sso"}`, asCheck}, want: 200,
			check: all(field("allowed", true), field("value", "sso-only"))},
		{name: "check feature nothing grants", apiCall: apiCall{"POST", "/v1/features/check", `{"customer":"acme","feature":"sandbox"}`, asCheck}, want: 200,
			check: all(field("allowed", false), field("value", false))},
		{name: "check feature of missing customer", apiCall: apiCall{"POST", "/v1/features/check", `{"customer":"ghost","feature":"sso"}`, asCheck}, want: 404, code: "customer_not_found"},
		{name: "check feature without customer", apiCall: apiCall{"POST", "/v1/features/check", `{"feature":"sso"}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check feature unknown key", apiCall: apiCall{"POST", "/v1/features/check", `{"api_key":"qk_nope","feature":"sso"}`, asCheck}, want: 403, code: "invalid_api_key"},
		{name: "delete feature override", apiCall: apiCall{"DELETE", "/v1/customers/acme/features/sso", "", nil}, want: 204},
		{name: "delete missing feature override", apiCall: apiCall{"DELETE", "/v1/customers/acme/features/sso", "", nil}, want: 404, code: "feature_override_not_found"},
		{name: "get override bad window", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/days", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "create override per subject", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit":50}`, nil}, want: 201,
			check: all(header("Location", "/v1/customers/acme/overrides/api_calls/day?per=subject"), field("per", "subject"), field("version", 1))},
		{name: "replace override per subject, the body agreeing", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit":60,"per":"subject"}`, ifMatch(`"1"`)}, want: 200,
			check: field("limit", 60)},
		{name: "override body per contradicting the query", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit":1,"per":"customer"}`, nil}, want: 400, code: "validation_failed"},
		{name: "override body per without the query", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":1,"per":"subject"}`, nil}, want: 400, code: "validation_failed"},
		{name: "override unknown per", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day?per=user", `{"limit":1}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "override body unknown per", apiCall: apiCall{"PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit":1,"per":"user"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "get override per subject", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/day?per=subject", "", nil}, want: 200,
			check: all(field("per", "subject"), field("limit", 60), hasHeader("ETag", true))},
		{name: "get customer-wide override by its per", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/day?per=customer", "", nil}, want: 200,
			check: all(hasField("per", false), field("limit", 6000))},
		{name: "get override unknown per", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/day?per=users", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "get missing override per subject", apiCall: apiCall{"GET", "/v1/customers/acme/overrides/api_calls/hour?per=subject", "", nil}, want: 404, code: "override_not_found"},
		{name: "list overrides with one per subject", apiCall: apiCall{"GET", "/v1/customers/acme/overrides?limit=2", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "list overrides after one per subject", apiCall: apiCall{"GET", "/v1/customers/acme/overrides?limit=2&cursor={next}", "", nil}, want: 200},
		{name: "limits with an override per subject", apiCall: apiCall{"GET", "/v1/customers/acme/limits", "", nil}, want: 200},
		{name: "delete override per subject stale if match", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/day?per=subject", "", ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "delete override per subject", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/day?per=subject", "", ifMatch(`"2"`)}, want: 204},
		{name: "delete missing override per subject", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/day?per=subject", "", nil}, want: 404, code: "override_not_found"},
		{name: "delete override unknown per", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/day?per=Subject", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "limits with overrides", apiCall: apiCall{"GET", "/v1/customers/acme/limits", "", nil}, want: 200},
		{name: "delete override stale if match", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/minute", "", ifMatch(`"7"`)}, want: 412, code: "precondition_failed"},
		{name: "delete override", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/minute", "", ifMatch(`"1"`)}, want: 204},
		{name: "delete missing override", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/api_calls/minute", "", nil}, want: 404, code: "override_not_found"},
		{name: "delete override bad metric", apiCall: apiCall{"DELETE", "/v1/customers/acme/overrides/API/day", "", nil}, want: 400, code: "validation_failed", bad: true},

		// Check, refund, usage.
		{name: "check", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls"}`, asCheck}, want: 200,
			check: all(field("allowed", true), field("retry_after", 0), hasHeader("RateLimit", true), hasHeader("RateLimit-Policy", true), hasHeader("Retry-After", false))},
		{name: "check with every field", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":1,"dry_run":false,"request_id":"r-1"}`, nil}, want: 200},
		{name: "check replay", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":1,"request_id":"r-1"}`, asCheck}, want: 200},
		{name: "check replay with another cost", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":2,"request_id":"r-1"}`, asCheck}, want: 409, code: "conflict"},
		{name: "check denied", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","dry_run":true}`, asCheck}, want: 429, code: "quota_exceeded",
			check: all(field("allowed", false), hasHeader("Retry-After", true), hasHeader("RateLimit", true))},
		{name: "check that can never pass", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":3}`, asCheck}, want: 429,
			code: "cost_exceeds_limit", check: all(field("retry_after", nil), hasHeader("Retry-After", false), hasHeader("RateLimit", false), hasHeader("RateLimit-Policy", true))},
		{name: "check without limits", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"llm_tokens","cost":1000}`, asCheck}, want: 200,
			check: all(field("limits", []any{}), hasHeader("RateLimit", false))},
		{name: "check above every window", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"api_calls","cost":7000}`, asCheck}, want: 429,
			code: "cost_exceeds_limit", check: field("retry_after", nil)},
		{name: "create customer for overage", apiCall: apiCall{"PUT", "/v1/customers/carol", `{"plan":"pro"}`, nil}, want: 201},
		{name: "create soft override", apiCall: apiCall{"PUT", "/v1/customers/carol/overrides/api_calls/day", `{"limit":10,"mode":"soft","overage_percent":50,"overage_price_micros":250}`, nil}, want: 201},
		{name: "check into overage", apiCall: apiCall{"POST", "/v1/check", `{"customer":"carol","metric":"api_calls","cost":12}`, asCheck}, want: 200,
			check: field("overage", true)},
		{name: "check missing customer", apiCall: apiCall{"POST", "/v1/check", `{"customer":"ghost","metric":"api_calls"}`, asCheck}, want: 404, code: "customer_not_found"},
		{name: "check undeclared metric", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"ghost"}`, asCheck}, want: 404, code: "metric_not_found"},
		// Forward-auth: carol has used 12 of her soft day limit of 10 (+50 %).
		{name: "forward-auth allowed", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "api_calls", "", asCheck...)}, want: 200,
			check: all(hasHeader("RateLimit", true), hasHeader("RateLimit-Policy", true), hasHeader("Retry-After", false), hasHeader("X-Quotad-Customer", true))},
		{name: "forward-auth with the admin token", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "api_calls", "1")}, want: 200},
		{name: "forward-auth denied", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "api_calls", "5", asCheck...)}, want: 429, code: "quota_exceeded",
			check: all(hasHeader("Retry-After", true), hasHeader("RateLimit", true), hasHeader("RateLimit-Policy", true))},
		{name: "forward-auth that can never pass", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "api_calls", "20", asCheck...)}, want: 429, code: "cost_exceeds_limit",
			check: all(hasHeader("Retry-After", false), hasHeader("RateLimit", false))},
		{name: "forward-auth without limits", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "exports", "", asCheck...)}, want: 200,
			check: hasHeader("RateLimit", false)},
		{name: "forward-auth with a path", apiCall: apiCall{"POST", "/v1/forward-auth/items", "", fwd("carol", "api_calls", "1", asCheck...)}, want: 200},
		{name: "forward-auth HEAD with a path, denied", apiCall: apiCall{"HEAD", "/v1/forward-auth/items", "", fwd("carol", "api_calls", "5", asCheck...)}, want: 429,
			check: hasHeader("Retry-After", true)},
		{name: "forward-auth without customer", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("", "api_calls", "", asCheck...)}, want: 400, code: "validation_failed"},
		{name: "forward-auth without metric", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "", "", asCheck...)}, want: 400, code: "validation_failed"},
		{name: "forward-auth bad customer", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("-carol", "api_calls", "", asCheck...)}, want: 400, code: "validation_failed", bad: true},
		{name: "forward-auth cost 0", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "api_calls", "0", asCheck...)}, want: 400, code: "validation_failed", bad: true},
		{name: "forward-auth missing customer", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("ghost", "api_calls", "", asCheck...)}, want: 404, code: "customer_not_found"},
		{name: "forward-auth undeclared metric", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "ghost", "", asCheck...)}, want: 404, code: "metric_not_found"},
		{name: "forward-auth without token", apiCall: apiCall{"GET", "/v1/forward-auth", "", fwd("carol", "api_calls", "", noToken...)}, want: 401, code: "unauthorized"},
		{name: "check cost 0", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":0}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check cost above 10^9", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":1000000001}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check without customer", apiCall: apiCall{"POST", "/v1/check", `{"metric":"api_calls"}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check bad metric key", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"API"}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check request id too long", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","request_id":"` + strings.Repeat("i", 201) + `"}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check null cost", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":null}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check null dry_run", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","dry_run":null}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check repeated key", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","cost":1,"cost":2}`, asCheck}, want: 400, code: "validation_failed",
			lenient: "a repeated key is outside JSON Schema: kin-openapi sees only the last"},
		{name: "check unknown field", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls","weight":1}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check text body", apiCall: apiCall{"POST", "/v1/check", `{}`, append([]string{"Content-Type", "text/plain"}, asCheck...)}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "check body too large", apiCall: apiCall{"POST", "/v1/check", big, asCheck}, want: 413, code: "payload_too_large", bad: true},
		{name: "check without token", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","metric":"api_calls"}`, noToken}, want: 401, code: "unauthorized"},
		{name: "refund", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","cost":1,"request_id":"r-1"}`, asCheck}, want: 200},
		{name: "refund replay", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","cost":1,"request_id":"r-1"}`, asCheck}, want: 200,
			check: field("refunded", 0)},
		{name: "refund replay with another cost", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","cost":2,"request_id":"r-1"}`, asCheck}, want: 409, code: "conflict"},
		{name: "refund naming no check", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","cost":1,"request_id":"f-1"}`, asCheck}, want: 404, code: "check_not_found"},
		{name: "refund default cost", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls"}`, nil}, want: 200},
		{name: "refund missing customer", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"ghost","metric":"api_calls"}`, asCheck}, want: 404, code: "customer_not_found"},
		{name: "refund undeclared metric", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"ghost"}`, asCheck}, want: 404, code: "metric_not_found"},
		{name: "refund cost 0", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","cost":0}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "refund null request id", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","request_id":null}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "refund unknown field", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"bob","metric":"api_calls","dry_run":true}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "refund text body", apiCall: apiCall{"POST", "/v1/refund", `{}`, append([]string{"Content-Type", "text/plain"}, asCheck...)}, want: 415, code: "unsupported_media_type", bad: true},
		{name: "refund body too large", apiCall: apiCall{"POST", "/v1/refund", big, asCheck}, want: 413, code: "payload_too_large", bad: true},
		{name: "usage", apiCall: apiCall{"GET", "/v1/customers/acme/usage", "", nil}, want: 200},
		{name: "usage with check token", apiCall: apiCall{"GET", "/v1/customers/bob/usage", "", asCheck}, want: 200},
		{name: "usage of missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/usage", "", asCheck}, want: 404, code: "customer_not_found"},
		{name: "usage bad id", apiCall: apiCall{"GET", "/v1/customers/a%20b/usage", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "reset usage", apiCall: apiCall{"DELETE", "/v1/customers/bob/usage/api_calls", "", nil}, want: 204},
		{name: "reset usage of metric named history", apiCall: apiCall{"DELETE", "/v1/customers/bob/usage/history", "", nil}, want: 204,
			operation: "DELETE /v1/customers/{customer}/usage/{metric}"},
		{name: "reset usage with check token", apiCall: apiCall{"DELETE", "/v1/customers/bob/usage/api_calls", "", asCheck}, want: 403, code: "forbidden"},
		{name: "reset usage of missing customer", apiCall: apiCall{"DELETE", "/v1/customers/ghost/usage/api_calls", "", nil}, want: 404, code: "customer_not_found"},
		{name: "reset usage of undeclared metric", apiCall: apiCall{"DELETE", "/v1/customers/bob/usage/ghost", "", nil}, want: 404, code: "metric_not_found"},
		{name: "reset usage bad metric", apiCall: apiCall{"DELETE", "/v1/customers/bob/usage/Ghost", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "history", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history", "", nil}, want: 200},
		{name: "history of one metric and range", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history?metric=api_calls&from=" + today + "&to=" + today, "", nil}, want: 200},
		{name: "history of unknown customer", apiCall: apiCall{"GET", "/v1/customers/ghost/usage/history", "", nil}, want: 200, check: field("days", []any{})},
		{name: "history bad from", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history?from=2026-13-01", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "history bad to", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history?to=yesterday", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "statement", apiCall: apiCall{"GET", "/v1/customers/bob/statement?period=" + lastMonth, "", nil}, want: 200},
		{name: "statement as CSV", apiCall: apiCall{"GET", "/v1/customers/bob/statement?period=" + lastMonth, "", []string{"Accept", "text/csv"}}, want: 200},
		{name: "statement of unknown customer", apiCall: apiCall{"GET", "/v1/customers/ghost/statement?period=" + lastMonth, "", nil}, want: 404, code: "customer_not_found"},
		{name: "statement bad period", apiCall: apiCall{"GET", "/v1/customers/bob/statement?period=2026-13-01", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "statement of a future period", apiCall: apiCall{"GET", "/v1/customers/bob/statement?period=2999-01", "", nil}, want: 400, code: "validation_failed"},
		{name: "statements", apiCall: apiCall{"GET", "/v1/statements?period=" + lastMonth + "&limit=1", "", nil}, want: 200},
		{name: "statements as CSV", apiCall: apiCall{"GET", "/v1/statements?period=" + lastMonth, "", []string{"Accept", "text/csv"}}, want: 200},
		{name: "statements without period", apiCall: apiCall{"GET", "/v1/statements", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "history to before from", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history?from=2026-02-01&to=2026-01-01", "", nil}, want: 400, code: "validation_failed"},
		{name: "history bad metric", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history?metric=API", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "history with check token", apiCall: apiCall{"GET", "/v1/customers/bob/usage/history", "", asCheck}, want: 403, code: "forbidden"},

		// Deletes and conflicts.
		{name: "delete metric in use by plan", apiCall: apiCall{"DELETE", "/v1/metrics/api_calls", "", nil}, want: 409, code: "conflict"},
		{name: "drop plan limits on llm_tokens", apiCall: apiCall{"PUT", "/v1/plans/pro", `{"name":"Pro","limits":[{"metric":"api_calls","window":"second","limit":50}]}`, nil}, want: 200},
		{name: "delete metric used only by override", apiCall: apiCall{"DELETE", "/v1/metrics/llm_tokens", "", nil}, want: 409, code: "conflict"},
		{name: "delete metric named by a credit pool", apiCall: apiCall{"DELETE", "/v1/metrics/images", "", nil}, want: 409, code: "conflict"},
		{name: "delete credit pool", apiCall: apiCall{"DELETE", "/v1/metrics/credits", "", ifMatch(`"2"`)}, want: 204},
		{name: "delete metric its pool's deletion freed", apiCall: apiCall{"DELETE", "/v1/metrics/images", "", nil}, want: 204},
		{name: "delete metric stale if match", apiCall: apiCall{"DELETE", "/v1/metrics/exports", "", ifMatch(`"5"`)}, want: 412, code: "precondition_failed"},
		{name: "delete metric", apiCall: apiCall{"DELETE", "/v1/metrics/exports", "", ifMatch(`"1"`)}, want: 204},
		{name: "delete missing metric", apiCall: apiCall{"DELETE", "/v1/metrics/exports", "", nil}, want: 404, code: "metric_not_found"},
		{name: "delete metric bad key", apiCall: apiCall{"DELETE", "/v1/metrics/EXPORTS", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "delete plan in use", apiCall: apiCall{"DELETE", "/v1/plans/pro", "", nil}, want: 409, code: "conflict"},
		{name: "delete customer stale if match", apiCall: apiCall{"DELETE", "/v1/customers/user@example.com:1", "", ifMatch(`"2"`)}, want: 412, code: "precondition_failed"},
		{name: "delete customer", apiCall: apiCall{"DELETE", "/v1/customers/user@example.com:1", "", ifMatch(`"1"`)}, want: 204},
		{name: "delete missing customer", apiCall: apiCall{"DELETE", "/v1/customers/user@example.com:1", "", nil}, want: 404, code: "customer_not_found"},
		{name: "delete customer bad id", apiCall: apiCall{"DELETE", "/v1/customers/@x", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "delete plan stale if match", apiCall: apiCall{"DELETE", "/v1/plans/free", "", ifMatch(`"2"`)}, want: 412, code: "precondition_failed"},
		{name: "delete plan", apiCall: apiCall{"DELETE", "/v1/plans/free", "", ifMatch("*")}, want: 204},
		{name: "delete missing plan", apiCall: apiCall{"DELETE", "/v1/plans/free", "", nil}, want: 404, code: "plan_not_found"},
		{name: "delete plan bad key", apiCall: apiCall{"DELETE", "/v1/plans/.free", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "history of deleted customer", apiCall: apiCall{"GET", "/v1/customers/user@example.com:1/usage/history", "", nil}, want: 200},

		// Webhooks.
		{name: "create webhook", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://billing.example.com/hooks","thresholds":[100,80]}`, nil}, want: 201,
			check: all(hasField("secret", true), hasHeader("ETag", true), field("thresholds", []any{80, 100}))},
		{name: "get webhook", apiCall: apiCall{"GET", "/v1/webhooks/billing", "", nil}, want: 200, check: all(hasField("secret", false), hasField("secret_hint", true))},
		{name: "create a second webhook", apiCall: apiCall{"PUT", "/v1/webhooks/audit", `{"url":"https://audit.example.com/hooks"}`, nil}, want: 201},
		{name: "list webhooks", apiCall: apiCall{"GET", "/v1/webhooks", "", nil}, want: 200, check: all(hasField("webhooks", true), hasField("next_cursor", false))},
		{name: "list webhooks page", apiCall: apiCall{"GET", "/v1/webhooks?limit=1", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "webhook at a private address", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"http://10.0.0.1/hooks"}`, nil}, want: 400, code: "validation_failed"},
		{name: "replace webhook keeps its secret", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://billing.example.com/v2","events":["usage.limit_reached"]}`, ifMatch(`"1"`)}, want: 200,
			check: all(hasField("secret", false), field("version", 2))},
		{name: "replace webhook with a secret", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://billing.example.com/v2","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, nil}, want: 200,
			check: all(hasField("secret", false), field("secret_hint", "whsec_MfKQ…"))},
		{name: "webhook stale if match", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://billing.example.com/"}`, ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "webhook unknown event", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://x.example/","events":["usage.nope"]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "webhook threshold out of range", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://x.example/","thresholds":[0]}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "webhook url with password", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://u:p@x.example/"}`, nil}, want: 400, code: "validation_failed"},
		{name: "webhook short secret", apiCall: apiCall{"PUT", "/v1/webhooks/billing", `{"url":"https://x.example/","secret":"whsec_c2hvcnQ="}`, nil}, want: 400, code: "validation_failed"},
		{name: "webhook deliveries", apiCall: apiCall{"GET", "/v1/webhooks/billing/deliveries?limit=10", "", nil}, want: 200},
		{name: "webhook deliveries bad cursor", apiCall: apiCall{"GET", "/v1/webhooks/billing/deliveries?cursor=bm9wZQ", "", nil}, want: 400, code: "validation_failed"},
		{name: "missing webhook", apiCall: apiCall{"GET", "/v1/webhooks/nobody", "", nil}, want: 404, code: "not_found"},
		{name: "deliveries of missing webhook", apiCall: apiCall{"GET", "/v1/webhooks/nobody/deliveries", "", nil}, want: 404, code: "not_found"},
		{name: "webhook bad id", apiCall: apiCall{"GET", "/v1/webhooks/Billing", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "webhook with check token", apiCall: apiCall{"GET", "/v1/webhooks/billing", "", asCheck}, want: 403, code: "forbidden"},
		{name: "delete webhook stale if match", apiCall: apiCall{"DELETE", "/v1/webhooks/billing", "", ifMatch(`"1"`)}, want: 412, code: "precondition_failed"},
		{name: "delete webhook", apiCall: apiCall{"DELETE", "/v1/webhooks/billing", "", ifMatch(`"3"`)}, want: 204},
		{name: "delete missing webhook", apiCall: apiCall{"DELETE", "/v1/webhooks/billing", "", nil}, want: 404, code: "not_found"},

		// API keys. {key_id} and {api_key} stand for the last key created.
		{name: "create key", apiCall: apiCall{"POST", "/v1/customers/bob/keys", `{"name":"ci","expires_at":"` + future + `"}`, nil}, want: 201,
			check: all(hasField("key", true), hasHeader("Location", true), field("customer", "bob"), field("last_used_at", nil))},
		{name: "create key without a body's fields", apiCall: apiCall{"POST", "/v1/customers/bob/keys", `{"expires_at":null}`, nil}, want: 201,
			check: field("expires_at", nil)},
		{name: "get key", apiCall: apiCall{"GET", "/v1/keys/{key_id}", "", nil}, want: 200, check: all(hasField("key", false), hasField("prefix", true))},
		{name: "list keys", apiCall: apiCall{"GET", "/v1/customers/bob/keys", "", nil}, want: 200, check: all(hasField("keys", true), hasField("next_cursor", false))},
		{name: "list keys page", apiCall: apiCall{"GET", "/v1/customers/bob/keys?limit=1", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "list keys next page", apiCall: apiCall{"GET", "/v1/customers/bob/keys?limit=1&cursor={next}", "", nil}, want: 200},
		{name: "check by key", apiCall: apiCall{"POST", "/v1/check", `{"api_key":"{api_key}","metric":"api_calls"}`, asCheck}, want: 200, check: field("customer", "bob")},
		{name: "refund by key", apiCall: apiCall{"POST", "/v1/refund", `{"api_key":"{api_key}","metric":"api_calls"}`, asCheck}, want: 200, check: field("customer", "bob")},
		{name: "check by customer and key", apiCall: apiCall{"POST", "/v1/check", `{"customer":"bob","api_key":"{api_key}","metric":"api_calls"}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check by unknown key", apiCall: apiCall{"POST", "/v1/check", `{"api_key":"qk_nope","metric":"api_calls"}`, asCheck}, want: 403, code: "invalid_api_key"},
		{name: "refund by unknown key", apiCall: apiCall{"POST", "/v1/refund", `{"api_key":"qk_nope","metric":"api_calls"}`, asCheck}, want: 403, code: "invalid_api_key"},
		{name: "key in the past", apiCall: apiCall{"POST", "/v1/customers/bob/keys", `{"expires_at":"2001-01-01T00:00:00Z"}`, nil}, want: 400, code: "validation_failed"},
		{name: "key unknown field", apiCall: apiCall{"POST", "/v1/customers/bob/keys", `{"scope":"all"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "key name too long", apiCall: apiCall{"POST", "/v1/customers/bob/keys", `{"name":"` + strings.Repeat("n", 101) + `"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "key of missing customer", apiCall: apiCall{"POST", "/v1/customers/ghost/keys", `{}`, nil}, want: 404, code: "customer_not_found"},
		{name: "keys of missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/keys", "", nil}, want: 404, code: "customer_not_found"},
		{name: "key with check token", apiCall: apiCall{"POST", "/v1/customers/bob/keys", `{}`, asCheck}, want: 403, code: "forbidden"},
		{name: "revoke key", apiCall: apiCall{"DELETE", "/v1/keys/{key_id}", "", nil}, want: 204},
		{name: "revoked key", apiCall: apiCall{"GET", "/v1/keys/{key_id}", "", nil}, want: 200},
		{name: "revoked keys listed", apiCall: apiCall{"GET", "/v1/customers/bob/keys?include_revoked=true", "", nil}, want: 200},
		{name: "revoke revoked key", apiCall: apiCall{"DELETE", "/v1/keys/{key_id}", "", nil}, want: 404, code: "key_not_found"},
		{name: "check by revoked key", apiCall: apiCall{"POST", "/v1/check", `{"api_key":"{api_key}","metric":"api_calls"}`, asCheck}, want: 403, code: "invalid_api_key"},
		{name: "missing key", apiCall: apiCall{"GET", "/v1/keys/key_AAAAAAAAAAAAAAAA", "", nil}, want: 404, code: "key_not_found"},

		// Audit.
		{name: "audit", apiCall: apiCall{"GET", "/v1/audit", "", nil}, want: 200},
		{name: "audit of customer", apiCall: apiCall{"GET", "/v1/audit?customer=acme&limit=2", "", nil}, want: 200, check: hasField("next_cursor", true)},
		{name: "audit next page", apiCall: apiCall{"GET", "/v1/audit?customer=acme&limit=2&cursor={next}", "", nil}, want: 200},
		{name: "audit of deleted customer", apiCall: apiCall{"GET", "/v1/audit?customer=user@example.com:1", "", nil}, want: 200},
		{name: "audit bad customer", apiCall: apiCall{"GET", "/v1/audit?customer=-x", "", nil}, want: 400, code: "validation_failed", bad: true},
		{name: "audit bad cursor", apiCall: apiCall{"GET", "/v1/audit?cursor=bm9wZQ", "", nil}, want: 400, code: "validation_failed"},
		{name: "audit limit too large", apiCall: apiCall{"GET", "/v1/audit?limit=5000", "", nil}, want: 400, code: "validation_failed", bad: true},

		// What if.
		{name: "what if", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[{"metric":"api_calls","window":"day","limit":1},{"metric":"api_calls","window":"second","limit":1}],"price":{"amount_cents":100},"from":"2026-01-01","to":"2026-01-31"}`, nil}, want: 200,
			check: all(hasField("total", true), hasField("not_replayed", true))},
		{name: "what if named", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[],"from":"2026-01-01","to":"2026-01-31","customers":["acme"],"price":null}`, nil}, want: 200},
		{name: "what if from after to", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[],"from":"2026-02-01","to":"2026-01-31"}`, nil}, want: 400, code: "validation_failed"},
		{name: "what if bad date", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[],"from":"2026-02-1","to":"2026-01-31"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "what if bad limit", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[{"metric":"api_calls","window":"fortnight","limit":1}],"from":"2026-01-01","to":"2026-01-31"}`, nil}, want: 400, code: "validation_failed", bad: true},
		{name: "what if unknown plan", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"gold","limits":[],"from":"2026-01-01","to":"2026-01-31"}`, nil}, want: 404, code: "plan_not_found"},
		{name: "what if unknown customer", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[],"from":"2026-01-01","to":"2026-01-31","customers":["ghost"]}`, nil}, want: 404, code: "customer_not_found"},
		{name: "what if with check token", apiCall: apiCall{"POST", "/v1/what-if", `{"plan":"pro","limits":[],"from":"2026-01-01","to":"2026-01-31"}`, asCheck}, want: 403, code: "forbidden"},

		// Holders of leases.
		{name: "holders", apiCall: apiCall{"GET", "/v1/admin/holders", "", nil}, want: 200},
		{name: "release unknown holder", apiCall: apiCall{"POST", "/v1/admin/holders/12/release", "", nil}, want: 404, code: "not_found"},
		{name: "release bad holder", apiCall: apiCall{"POST", "/v1/admin/holders/x12/release", "", nil}, want: 400, code: "validation_failed", bad: true},
	}

	var keyID, apiKey string // of the last key created
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("two cases are named %q", tc.name)
		}
		seen[tc.name] = true
		cursor := next
		next = ""
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.Path, "{next}") {
				if cursor == "" {
					t.Fatalf("the case before gave no next_cursor to follow")
				}
				tc.Path = strings.ReplaceAll(tc.Path, "{next}", cursor)
			}
			tc.Path = strings.ReplaceAll(tc.Path, "{key_id}", keyID)
			tc.Body = strings.ReplaceAll(tc.Body, "{api_key}", apiKey)
			r := sendCall(t, s, tc.apiCall)
			if r.Status != tc.want {
				t.Errorf("%s: status %d, want %d\n%s", tc.apiCall, r.Status, tc.want, r.Body)
			}
			if got := problemCode(r); got != tc.code {
				t.Errorf("%s: problem code %q, want %q", tc.apiCall, got, tc.code)
			}
			if tc.outside != "" {
				if err := v.validateOutside(s.URL, tc.apiCall, r, tc.outside); err != nil {
					t.Errorf("%s: answer does not match openapi.yaml: %v\n%s", tc.apiCall, err, r.Body)
				}
			} else {
				in, err := v.input(s.URL, tc.apiCall, tc.operation)
				if err != nil {
					t.Fatalf("%s: %v", tc.apiCall, err)
				}
				if tc.lenient == "" {
					mustMatchRequest(t, in, tc.apiCall, tc.bad, r.Status)
				}
				if err := v.validateAnswer(in, r); err != nil {
					t.Errorf("%s: answer does not match openapi.yaml: %v\n%s", tc.apiCall, err, r.Body)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			var page struct {
				Next *string `json:"next_cursor"`
				ID   string  `json:"id"`
				Key  string  `json:"key"`
			}
			if json.Unmarshal(r.Body, &page) == nil && page.Next != nil {
				next = *page.Next
			}
			if page.Key != "" && tc.Method == http.MethodPost {
				keyID, apiKey = page.ID, page.Key
			}
		})
	}
}

// Forward-auth with routes: a request that matches a route is checked, one
// that matches none under `unmatched: allow` passes without a check and
// without headers, one whose path has no canonical form is 400; every
// answer as openapi.yaml documents it.
func TestOpenAPIForwardAuthRoutes(t *testing.T) {
	t.Parallel()
	routes := "routes:\n  - match: POST /v1/jobs\n    metric: api_calls\nunmatched: allow\n"
	s := mustStartForwardAuth(t, routes)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":5}]`, "acme")
	v := MustSpecValidator(t)
	for _, c := range []struct {
		name         string
		method, uri  string
		want         int
		wantCustomer string
	}{
		{"a route", "POST", "/v1/jobs", http.StatusOK, "acme"},
		{"no route, allowed unchecked", "GET", "/v1/other", http.StatusOK, ""},
		{"a path without a canonical form", "POST", "/v1/x/%2e%2e/jobs", http.StatusBadRequest, ""},
	} {
		call := apiCall{"GET", "/v1/forward-auth", "", []string{"Authorization", "Bearer " + checkToken,
			"X-Quotad-Customer", "acme", "X-Forwarded-Method", c.method, "X-Forwarded-Uri", c.uri}}
		r := sendCall(t, s, call)
		if r.Status != c.want || r.Header.Get("X-Quotad-Customer") != c.wantCustomer {
			t.Errorf("%s: %d, X-Quotad-Customer %q; want %d, %q", c.name, r.Status, r.Header.Get("X-Quotad-Customer"), c.want, c.wantCustomer)
		}
		if c.want == http.StatusBadRequest && problemCode(r) != "path_not_canonical" {
			t.Errorf("%s: %s, want a path_not_canonical problem", c.name, r.Body)
		}
		if err := v.validateResponse(s.URL, call, r); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// Checks of items, subjects and credit pools, their refunds, reservations
// and usage: every request and answer as openapi.yaml documents them (the
// shapes TestOpenAPITraffic's catalog has none of).
func TestOpenAPIItemsAndSubjects(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	v := MustSpecValidator(t)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/exports", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/llm_tokens", `{}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/credits", `{"credit_schema":[{"metric":"llm_tokens","credits":3,"per":2}]}`)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":5},{"metric":"api_calls","window":"minute","limit":2,"per":"subject"},
		{"metric":"exports","window":"day","limit":1},{"metric":"credits","window":"day","limit":10}]`, "acme")
	k := MustCreateKey(t, s, "acme", `{}`)
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	many := `{"customer":"acme","items":[` + strings.Repeat(`{"metric":"exports"},`, 16) + `{"metric":"exports"}]}`
	for _, tc := range []apiCase{
		{name: "check of items", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","subject":"alice"},{"metric":"exports"},{"metric":"llm_tokens","cost":3}],"request_id":"i-1"}`, asCheck}, want: 200},
		{name: "check of items, replayed", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","subject":"alice"},{"metric":"exports"},{"metric":"llm_tokens","cost":3}],"request_id":"i-1"}`, asCheck}, want: 200},
		{name: "check of items, denied", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","subject":"alice","cost":1},{"metric":"exports"}]}`, asCheck}, want: 429, code: "quota_exceeded"},
		{name: "check of items that can never pass", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"api_calls","subject":"bob"},{"metric":"exports","cost":2}]}`, asCheck}, want: 429, code: "cost_exceeds_limit"},
		{name: "check with a subject", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"api_calls","subject":"alice"}`, asCheck}, want: 200},
		{name: "check of a pool's metric", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"llm_tokens","cost":1}`, asCheck}, want: 200},
		{name: "check by key, its id the subject", apiCall: apiCall{"POST", "/v1/check", `{"api_key":"` + k.Key + `","metric":"api_calls"}`, asCheck}, want: 200},
		{name: "check without the subject required", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, asCheck}, want: 400, code: "subject_required"},
		{name: "check of an item without the subject required", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"exports"},{"metric":"api_calls"}]}`, asCheck}, want: 400, code: "subject_required"},
		{name: "check of items with metric", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"exports","items":[{"metric":"exports"}]}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check of items with cost", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","cost":1,"items":[{"metric":"exports"}]}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check of 17 items", apiCall: apiCall{"POST", "/v1/check", many, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check of no items", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[]}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check of an item twice", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"exports"},{"metric":"exports","cost":2}]}`, asCheck}, want: 400, code: "validation_failed"},
		{name: "check of an item with a bad subject", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"exports","subject":"a b"}]}`, asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "check of an undeclared item", apiCall: apiCall{"POST", "/v1/check", `{"customer":"acme","items":[{"metric":"exports"},{"metric":"ghost"}]}`, asCheck}, want: 404, code: "metric_not_found"},
		{name: "refund with a subject", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","subject":"alice"}`, asCheck}, want: 200},
		{name: "refund of a pool's metric", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"acme","metric":"llm_tokens","cost":2}`, asCheck}, want: 200},
		{name: "refund without the subject required", apiCall: apiCall{"POST", "/v1/refund", `{"customer":"acme","metric":"api_calls"}`, asCheck}, want: 400, code: "subject_required"},
		{name: "usage of a subject", apiCall: apiCall{"GET", "/v1/customers/acme/usage?subject=alice", "", asCheck}, want: 200},
		{name: "usage of a key's id", apiCall: apiCall{"GET", "/v1/customers/acme/usage?subject=" + k.ID, "", asCheck}, want: 200},
		{name: "usage of a bad subject", apiCall: apiCall{"GET", "/v1/customers/acme/usage?subject=a%20b", "", asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "entitlements", apiCall: apiCall{"GET", "/v1/customers/acme/entitlements", "", asCheck}, want: 200},
		{name: "entitlements of a subject", apiCall: apiCall{"GET", "/v1/customers/acme/entitlements?subject=alice", "", asCheck}, want: 200},
		{name: "entitlements of a bad subject", apiCall: apiCall{"GET", "/v1/customers/acme/entitlements?subject=a%20b", "", asCheck}, want: 400, code: "validation_failed", bad: true},
		{name: "entitlements of a missing customer", apiCall: apiCall{"GET", "/v1/customers/ghost/entitlements", "", asCheck}, want: 404, code: "customer_not_found"},
		{name: "reserve with a subject", apiCall: apiCall{"POST", "/v1/reservations", `{"customer":"acme","metric":"llm_tokens","cost":1,"subject":"alice"}`, asCheck}, want: 201},
		{name: "reserve without the subject required", apiCall: apiCall{"POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":1}`, asCheck}, want: 400, code: "subject_required"},
		{name: "forward-auth without the subject required", apiCall: apiCall{"GET", "/v1/forward-auth", "", append([]string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"}, asCheck...)}, want: 400, code: "subject_required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sendCall(t, s, tc.apiCall)
			if r.Status != tc.want || problemCode(r) != tc.code {
				t.Fatalf("%s: %d %q, want %d %q\n%s", tc.apiCall, r.Status, problemCode(r), tc.want, tc.code, r.Body)
			}
			in, err := v.input(s.URL, tc.apiCall, "")
			if err != nil {
				t.Fatal(err)
			}
			mustMatchRequest(t, in, tc.apiCall, tc.bad, r.Status)
			if err := v.validateAnswer(in, r); err != nil {
				t.Errorf("%s: answer does not match openapi.yaml: %v\n%s", tc.apiCall, err, r.Body)
			}
		})
	}
	// A reservation of a subject's units, read back.
	reserve := apiCall{"POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":1,"subject":"carol"}`, asCheck}
	r := sendCall(t, s, reserve)
	var held struct{ ID string }
	if err := json.Unmarshal(r.Body, &held); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("%s: %d %s", reserve, r.Status, r.Body)
	}
	get := apiCall{"GET", "/v1/reservations/" + held.ID, "", asCheck}
	r = sendCall(t, s, get)
	if err := v.validateResponse(s.URL, get, r); err != nil || r.JSON(t)["subject"] != "carol" {
		t.Errorf("%s: %v\n%s", get, err, r.Body)
	}
}

// With --ratelimit-headers draft7,legacy,x, the answers of checks,
// reservations and forward-auth carry those forms, describing the same
// window, as openapi.yaml documents them.
func TestOpenAPIRateLimitHeaderForms(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{"QUOTAD_RATELIMIT_HEADERS": "draft7,legacy,x"})
	v := MustSpecValidator(t)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"minute","limit":3},{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	fwd := append([]string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"}, asCheck...)
	for _, tc := range []struct {
		name      string
		call      apiCall
		want      int
		remaining string
		retry     bool
	}{
		{"check", apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, asCheck}, 200, "2", false},
		{"reserve", apiCall{"POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":1}`, asCheck}, 201, "1", false},
		{"forward-auth", apiCall{"GET", "/v1/forward-auth", "", fwd}, 200, "0", false},
		{"check, denied", apiCall{"POST", "/v1/check", `{"customer":"acme","metric":"api_calls"}`, asCheck}, 429, "0", true},
		{"reserve, denied", apiCall{"POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":1}`, asCheck}, 429, "0", true},
		{"forward-auth, denied", apiCall{"GET", "/v1/forward-auth", "", fwd}, 429, "0", true},
	} {
		r := sendCall(t, s, tc.call)
		if r.Status != tc.want {
			t.Fatalf("%s: %d, want %d\n%s", tc.name, r.Status, tc.want, r.Body)
		}
		if err := v.validateResponse(s.URL, tc.call, r); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		// The minute, which has the fewest left, in every form; never
		// draft 10's.
		reset := r.Header.Get("RateLimit-Reset")
		if tc.retry {
			reset = r.Header.Get("Retry-After")
		}
		for name, want := range map[string]string{
			"RateLimit-Policy":      "3;w=60, 100;w=86400",
			"RateLimit":             "limit=3, remaining=" + tc.remaining + ", reset=" + reset,
			"RateLimit-Limit":       "3",
			"RateLimit-Remaining":   tc.remaining,
			"X-RateLimit-Limit":     "3",
			"X-RateLimit-Remaining": tc.remaining,
		} {
			if got := r.Header.Get(name); got != want {
				t.Errorf("%s: %s = %q, want %q", tc.name, name, got, want)
			}
		}
		if n, err := strconv.Atoi(reset); err != nil || n < 1 || n > 60 {
			t.Errorf("%s: RateLimit-Reset %q, want 1 to 60 s", tc.name, reset)
		}
		if x, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); err != nil || x <= time.Now().Unix() || x > time.Now().Unix()+61 {
			t.Errorf("%s: X-RateLimit-Reset %q, want a Unix time within the next minute", tc.name, r.Header.Get("X-RateLimit-Reset"))
		}
	}
}
