package main

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Malformed admin requests: each must get the expected 4xx problem document,
// never a 5xx, and no answer may reveal SQL or Go internals.

// leaks are fragments of database errors, Go panics and stack traces that
// no answer may contain.
var leaks = []string{
	"SQLSTATE", "pq:", "pgx", "pgconn", "postgres", "syntax error at", "violates", "constraint",
	"relation ", "goroutine ", "panic", "runtime.", "runtime/", ".go:", "internal error", "json: ",
	"reflect", "unmarshal", "Unmarshal", "invalid character",
}

// MustNotLeak fails t if body contains a fragment of SQL or Go internals.
func MustNotLeak(t testing.TB, body []byte) {
	t.Helper()
	for _, l := range leaks {
		if strings.Contains(string(body), l) {
			t.Errorf("answer contains %q:\n%s", l, body)
		}
	}
}

// cursorOf builds a cursor the way the server encodes them, around after.
func cursorOf(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c1:" + after))
}

// badRequest is one malformed request and the problem it must get.
type badRequest struct {
	name    string
	method  string
	path    string
	body    string
	headers []string
	// chunked sends the body without a Content-Length.
	chunked bool
	want    int
	code    string
	// field must be named in errors (400 only); "" for problems with the
	// body as a whole, which need only some entry.
	field string
	// message, when set, is the message the entry naming field must carry.
	message string
}

func TestBadAdminInput(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/metrics/tokens", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{"limits":[{"metric":"api_calls","window":"day","limit":100}]}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan":"pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":5}`)
	auditBefore, _ := MustList(t, s, "/v1/audit", "events", "id")
	_, rsv := s.reserve(`{"customer":"acme","metric":"api_calls","cost":1}`)
	held := rsv.ID

	const (
		metric   = "/v1/metrics/m"
		plan     = "/v1/plans/p"
		customer = "/v1/customers/c"
		override = "/v1/customers/acme/overrides/api_calls/day"
		overSec  = "/v1/customers/acme/overrides/api_calls/second"
		maxMsg   = "must be at most 10000 with algorithm sliding_log"
		max53    = "9007199254740992" // 2^53, one above the largest limit
		v400     = "validation_failed"
		check    = "/v1/check"
		refund   = "/v1/refund"
		reserve  = "/v1/reservations"
		null     = "must not be null"
		twice    = "appears more than once"
		required = "is required"
		keysOf   = "/v1/customers/acme/keys"
	)
	past := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	lim := func(fields string) string { return `{"limits":[{"metric":"api_calls","window":"day",` + fields + `}]}` }
	limOn := func(window, fields string) string {
		return `{"limits":[{"metric":"api_calls","window":"` + window + `",` + fields + `}]}`
	}
	ovr := func(fields string) string { return `{` + fields + `}` }
	nest := func(opening, closing string, n int) string {
		return strings.Repeat(opening, n) + "1" + strings.Repeat(closing, n)
	}
	key64 := strings.Repeat("k", 64)
	id129 := strings.Repeat("c", 129)
	over64K := `{"description":"` + strings.Repeat("x", 64<<10-len(`{"description":""}`)+1) + `"}`
	text := []string{"Content-Type", "text/plain"}
	asJSON := []string{"Content-Type", "application/json"}

	cases := []badRequest{
		// Identifiers in paths.
		{name: "metric key upper case", method: "PUT", path: "/v1/metrics/API_calls", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key of 64 characters", method: "PUT", path: "/v1/metrics/" + key64, body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key starting with underscore", method: "PUT", path: "/v1/metrics/_calls", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key starting with dot", method: "GET", path: "/v1/metrics/.calls", want: 400, code: v400, field: "metric"},
		{name: "metric key with space", method: "PUT", path: "/v1/metrics/api%20calls", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key with encoded slash", method: "PUT", path: "/v1/metrics/a%2Fb", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key with encoded NUL", method: "PUT", path: "/v1/metrics/a%00b", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key with encoded percent", method: "PUT", path: "/v1/metrics/a%2561", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "metric key non-ASCII", method: "PUT", path: "/v1/metrics/caf%C3%A9", body: `{}`, want: 400, code: v400, field: "metric"},
		{name: "delete metric bad key", method: "DELETE", path: "/v1/metrics/Calls", want: 400, code: v400, field: "metric"},
		{name: "metric usage key upper case", method: "GET", path: "/v1/metrics/API_calls/usage", want: 400, code: v400, field: "metric"},
		{name: "metric usage key with encoded slash", method: "GET", path: "/v1/metrics/a%2Fb/usage", want: 400, code: v400, field: "metric"},
		{name: "metric usage key of 64 characters", method: "GET", path: "/v1/metrics/" + key64 + "/usage", want: 400, code: v400, field: "metric"},
		{name: "metric usage key non-ASCII", method: "GET", path: "/v1/metrics/caf%C3%A9/usage", want: 400, code: v400, field: "metric"},
		{name: "plan key upper case", method: "PUT", path: "/v1/plans/Pro", body: `{}`, want: 400, code: v400, field: "plan"},
		{name: "plan key with encoded slash", method: "GET", path: "/v1/plans/a%2F..%2Fb", want: 400, code: v400, field: "plan"},
		{name: "customer id with space", method: "PUT", path: "/v1/customers/acme%20inc", body: `{"plan":"pro"}`, want: 400, code: v400, field: "customer"},
		{name: "customer id starting with dash", method: "PUT", path: "/v1/customers/-acme", body: `{"plan":"pro"}`, want: 400, code: v400, field: "customer"},
		{name: "customer id of 129 characters", method: "PUT", path: "/v1/customers/" + id129, body: `{"plan":"pro"}`, want: 400, code: v400, field: "customer"},
		{name: "customer id with encoded slash", method: "GET", path: "/v1/customers/acme%2Fx", want: 400, code: v400, field: "customer"},
		{name: "customer id with encoded NUL", method: "GET", path: "/v1/customers/acme%00", want: 400, code: v400, field: "customer"},
		{name: "customer id with encoded hash", method: "DELETE", path: "/v1/customers/a%23b", want: 400, code: v400, field: "customer"},
		{name: "customer id double-encoded", method: "PUT", path: "/v1/customers/a%2541", body: `{"plan":"pro"}`, want: 400, code: v400, field: "customer"},
		{name: "limits of a bad id", method: "GET", path: "/v1/customers/acme%21/limits", want: 400, code: v400, field: "customer"},
		{name: "override window unknown", method: "PUT", path: "/v1/customers/acme/overrides/api_calls/fortnight", body: `{"limit":1}`, want: 400, code: v400, field: "window"},
		{name: "override window upper case", method: "GET", path: "/v1/customers/acme/overrides/api_calls/Day", want: 400, code: v400, field: "window"},
		{name: "override metric upper case", method: "DELETE", path: "/v1/customers/acme/overrides/API/day", want: 400, code: v400, field: "metric"},
		{name: "override customer bad", method: "PUT", path: "/v1/customers/_acme/overrides/api_calls/day", body: `{"limit":1}`, want: 400, code: v400, field: "customer"},

		// Bodies that are not one JSON object.
		{name: "empty body", method: "PUT", path: metric, headers: asJSON, want: 400, code: v400},
		{name: "blank body", method: "PUT", path: metric, body: " \n\t ", want: 400, code: v400},
		{name: "null body", method: "PUT", path: metric, body: `null`, want: 400, code: v400},
		{name: "array body", method: "PUT", path: metric, body: `[{}]`, want: 400, code: v400},
		{name: "string body", method: "PUT", path: metric, body: `"{}"`, want: 400, code: v400},
		{name: "number body", method: "PUT", path: metric, body: `42`, want: 400, code: v400},
		{name: "truncated JSON", method: "PUT", path: metric, body: `{"description":`, want: 400, code: v400},
		{name: "not JSON", method: "PUT", path: metric, body: `{description: 'x'}`, want: 400, code: v400},
		{name: "trailing object", method: "PUT", path: metric, body: `{}{}`, want: 400, code: v400},
		{name: "trailing garbage", method: "PUT", path: metric, body: `{} x`, want: 400, code: v400},
		{name: "trailing comma", method: "PUT", path: metric, body: `{"description":"x",}`, want: 400, code: v400},
		{name: "invalid UTF-8", method: "PUT", path: metric, body: "{\"description\":\"\xff\xfe\"}", want: 400, code: v400},
		{name: "byte order mark", method: "PUT", path: metric, body: "\uFEFF{}", want: 400, code: v400},
		{name: "nesting beyond the decoder's depth", method: "PUT", path: customer, body: `{"plan":"pro","metadata":` + nest("[", "]", 20000) + `}`, want: 400, code: v400},

		// Content type and size.
		{name: "text/plain", method: "PUT", path: metric, body: `{}`, headers: text, want: 415, code: "unsupported_media_type"},
		{name: "no content type", method: "PUT", path: metric, body: `{}`, headers: []string{"Content-Type", ""}, want: 415, code: "unsupported_media_type"},
		{name: "form encoding", method: "PUT", path: customer, body: `plan=pro`, headers: []string{"Content-Type", "application/x-www-form-urlencoded"}, want: 415, code: "unsupported_media_type"},
		{name: "xml", method: "PUT", path: plan, body: `<plan/>`, headers: []string{"Content-Type", "application/xml"}, want: 415, code: "unsupported_media_type"},
		{name: "malformed content type", method: "PUT", path: metric, body: `{}`, headers: []string{"Content-Type", "application/json; ="}, want: 415, code: "unsupported_media_type"},
		{name: "problem+json", method: "PUT", path: metric, body: `{}`, headers: []string{"Content-Type", "application/problem+json"}, want: 415, code: "unsupported_media_type"},
		{name: "merge-patch+json", method: "PUT", path: customer, body: `{"plan":"pro"}`, headers: []string{"Content-Type", "application/merge-patch+json"}, want: 415, code: "unsupported_media_type"},
		{name: "json look-alike", method: "PUT", path: override, body: `{"limit":1}`, headers: []string{"Content-Type", "application/jsonx"}, want: 415, code: "unsupported_media_type"},
		{name: "no body, no content type", method: "PUT", path: metric, want: 415, code: "unsupported_media_type"},
		{name: "64 KiB + 1", method: "PUT", path: metric, body: over64K, want: 413, code: "payload_too_large"},
		{name: "64 KiB + 1 chunked", method: "PUT", path: metric, body: over64K, chunked: true, want: 413, code: "payload_too_large"},
		{name: "1 MiB chunked", method: "PUT", path: plan, body: `{"name":"` + strings.Repeat("n", 1<<20) + `"}`, chunked: true, want: 413, code: "payload_too_large"},

		// Unknown fields.
		{name: "unknown metric field", method: "PUT", path: metric, body: `{"unit":"calls"}`, want: 400, code: v400, field: "unit"},
		{name: "unknown plan field", method: "PUT", path: plan, body: `{"name":"P","tier":1}`, want: 400, code: v400, field: "tier"},
		{name: "unknown price field", method: "PUT", path: plan, body: `{"price":{"amount":1}}`, want: 400, code: v400, field: "price.amount"},
		{name: "unknown limit field", method: "PUT", path: plan, body: lim(`"limit":1,"weight":2`), want: 400, code: v400, field: "limits[0].weight"},
		{name: "field name in another case", method: "PUT", path: customer, body: `{"Plan":"pro"}`, want: 400, code: v400, field: "Plan"},
		{name: "nested field name in another case", method: "PUT", path: plan, body: lim(`"Limit":1`), want: 400, code: v400, field: "limits[0].Limit"},
		{name: "unknown customer field", method: "PUT", path: customer, body: `{"plan":"pro","email":"x@y"}`, want: 400, code: v400, field: "email"},
		{name: "window in override body", method: "PUT", path: override, body: `{"limit":1,"window":"day"}`, want: 400, code: v400, field: "window"},
		{name: "server field sent back", method: "PUT", path: metric, body: `{"key":"m","version":1}`, want: 400, code: v400, field: "key"},

		// Metrics.
		{name: "description not a string", method: "PUT", path: metric, body: `{"description":5}`, want: 400, code: v400, field: "description"},
		{name: "description with NUL", method: "PUT", path: metric, body: `{"description":"a\u0000b"}`, want: 400, code: v400, field: "description"},
		{name: "description too long", method: "PUT", path: metric, body: `{"description":"` + strings.Repeat("d", 2001) + `"}`, want: 400, code: v400, field: "description"},
		{name: "capacity an array", method: "PUT", path: metric, body: `{"capacity":[5000]}`, want: 400, code: v400, field: "capacity"},
		{name: "capacity a number", method: "PUT", path: metric, body: `{"capacity":5000}`, want: 400, code: v400, field: "capacity"},
		{name: "capacity window unknown", method: "PUT", path: metric, body: `{"capacity":{"fortnight":5}}`, want: 400, code: v400, field: "capacity.fortnight"},
		{name: "capacity window upper case", method: "PUT", path: metric, body: `{"capacity":{"Day":5}}`, want: 400, code: v400, field: "capacity.Day"},
		{name: "capacity window empty", method: "PUT", path: metric, body: `{"capacity":{"":5}}`, want: 400, code: v400, field: "capacity."},
		{name: "capacity negative", method: "PUT", path: metric, body: `{"capacity":{"day":-1}}`, want: 400, code: v400, field: "capacity.day"},
		{name: "capacity 2^53", method: "PUT", path: metric, body: `{"capacity":{"day":` + max53 + `}}`, want: 400, code: v400, field: "capacity.day"},
		{name: "capacity 2^64", method: "PUT", path: metric, body: `{"capacity":{"day":18446744073709551616}}`, want: 400, code: v400, field: "capacity.day"},
		{name: "capacity a string", method: "PUT", path: metric, body: `{"capacity":{"day":"5"}}`, want: 400, code: v400, field: "capacity.day"},
		{name: "capacity a fraction", method: "PUT", path: metric, body: `{"capacity":{"day":1.5}}`, want: 400, code: v400, field: "capacity.day"},
		{name: "capacity null", method: "PUT", path: metric, body: `{"capacity":{"day":null}}`, want: 400, code: v400, field: "capacity.day"},
		{name: "credit schema an object", method: "PUT", path: metric, body: `{"credit_schema":{"metric":"api_calls","credits":1}}`, want: 400, code: v400, field: "credit_schema"},
		{name: "credit rate null", method: "PUT", path: metric, body: `{"credit_schema":[null]}`, want: 400, code: v400, field: "credit_schema[0]", message: null},
		{name: "credit rate a string", method: "PUT", path: metric, body: `{"credit_schema":["api_calls"]}`, want: 400, code: v400, field: "credit_schema[0]"},
		{name: "credit rate without metric", method: "PUT", path: metric, body: `{"credit_schema":[{"credits":1}]}`, want: 400, code: v400, field: "credit_schema[0].metric", message: required},
		{name: "credit rate metric null", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":null,"credits":1}]}`, want: 400, code: v400, field: "credit_schema[0].metric", message: null},
		{name: "credit rate metric a bad key", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"API","credits":1}]}`, want: 400, code: v400, field: "credit_schema[0].metric"},
		{name: "credit rate metric undeclared", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1},{"metric":"ghost","credits":1}]}`, want: 400, code: v400, field: "credit_schema[1].metric", message: `metric "ghost" is not declared`},
		{name: "credit rate naming its pool", method: "PUT", path: "/v1/metrics/tokens", body: `{"credit_schema":[{"metric":"tokens","credits":1}]}`, want: 400, code: v400, field: "credit_schema[0].metric"},
		{name: "credit rate twice", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1},{"metric":"api_calls","credits":1}]}`, want: 400, code: v400, field: "credit_schema[1].metric"},
		{name: "credits missing", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls"}]}`, want: 400, code: v400, field: "credit_schema[0].credits", message: required},
		{name: "credits null", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":null}]}`, want: 400, code: v400, field: "credit_schema[0].credits", message: null},
		{name: "credits 0", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":0}]}`, want: 400, code: v400, field: "credit_schema[0].credits"},
		{name: "credits 2^53", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":` + max53 + `}]}`, want: 400, code: v400, field: "credit_schema[0].credits"},
		{name: "credits a fraction", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":0.5}]}`, want: 400, code: v400, field: "credit_schema[0].credits"},
		{name: "credits a string", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":"3"}]}`, want: 400, code: v400, field: "credit_schema[0].credits"},
		{name: "credit rate per 0", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1,"per":0}]}`, want: 400, code: v400, field: "credit_schema[0].per"},
		{name: "credit rate per negative", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1,"per":-100}]}`, want: 400, code: v400, field: "credit_schema[0].per"},
		{name: "credit rate per 2^64", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1,"per":18446744073709551616}]}`, want: 400, code: v400, field: "credit_schema[0].per"},
		{name: "credit rate unknown field", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1,"pool":"m"}]}`, want: 400, code: v400, field: "credit_schema[0].pool"},
		{name: "credit rate field twice", method: "PUT", path: metric, body: `{"credit_schema":[{"metric":"api_calls","credits":1,"credits":2}]}`, want: 400, code: v400, field: "credit_schema[0].credits", message: twice},

		// Plans.
		{name: "name not a string", method: "PUT", path: plan, body: `{"name":["Pro"]}`, want: 400, code: v400, field: "name"},
		{name: "name blank", method: "PUT", path: plan, body: `{"name":"  "}`, want: 400, code: v400, field: "name"},
		{name: "name with NUL", method: "PUT", path: plan, body: `{"name":"P\u0000"}`, want: 400, code: v400, field: "name"},
		{name: "price a string", method: "PUT", path: plan, body: `{"price":"free"}`, want: 400, code: v400, field: "price"},
		{name: "amount negative", method: "PUT", path: plan, body: `{"price":{"amount_cents":-1}}`, want: 400, code: v400, field: "price.amount_cents"},
		{name: "amount 2^53", method: "PUT", path: plan, body: `{"price":{"amount_cents":` + max53 + `}}`, want: 400, code: v400, field: "price.amount_cents"},
		{name: "amount a fraction", method: "PUT", path: plan, body: `{"price":{"amount_cents":49.99}}`, want: 400, code: v400, field: "price.amount_cents"},
		{name: "currency lower case", method: "PUT", path: plan, body: `{"price":{"currency":"usd"}}`, want: 400, code: v400, field: "price.currency"},
		{name: "currency with NUL", method: "PUT", path: plan, body: `{"price":{"currency":"US\u0000"}}`, want: 400, code: v400, field: "price.currency"},
		{name: "interval unknown", method: "PUT", path: plan, body: `{"price":{"interval":"fortnight"}}`, want: 400, code: v400, field: "price.interval"},
		{name: "limits an object", method: "PUT", path: plan, body: `{"limits":{"metric":"api_calls"}}`, want: 400, code: v400, field: "limits"},
		{name: "limit entry a number", method: "PUT", path: plan, body: `{"limits":[5]}`, want: 400, code: v400, field: "limits[0]"},
		{name: "limit entry null", method: "PUT", path: plan, body: `{"limits":[null]}`, want: 400, code: v400, field: "limits[0]", message: null},
		{name: "limit metric missing", method: "PUT", path: plan, body: `{"limits":[{"window":"day","limit":1}]}`, want: 400, code: v400, field: "limits[0].metric"},
		{name: "limit metric upper case", method: "PUT", path: plan, body: `{"limits":[{"metric":"API","window":"day","limit":1}]}`, want: 400, code: v400, field: "limits[0].metric"},
		{name: "limit metric with NUL", method: "PUT", path: plan, body: `{"limits":[{"metric":"api\u0000","window":"day","limit":1}]}`, want: 400, code: v400, field: "limits[0].metric"},
		{name: "limit metric undeclared", method: "PUT", path: plan, body: `{"limits":[{"metric":"ghost","window":"day","limit":1}]}`, want: 400, code: v400, field: "limits[0].metric"},
		{name: "second limit metric undeclared", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":"day","limit":1},{"metric":"ghost","window":"day","limit":1}]}`, want: 400, code: v400, field: "limits[1].metric"},
		{name: "limit window missing", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","limit":1}]}`, want: 400, code: v400, field: "limits[0].window"},
		{name: "limit window unknown", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":"year","limit":1}]}`, want: 400, code: v400, field: "limits[0].window"},
		{name: "limit window a number", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":86400,"limit":1}]}`, want: 400, code: v400, field: "limits[0].window"},
		{name: "limit missing", method: "PUT", path: plan, body: lim(`"mode":"hard"`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit null", method: "PUT", path: plan, body: lim(`"limit":null`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit negative", method: "PUT", path: plan, body: lim(`"limit":-1`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit 2^53", method: "PUT", path: plan, body: lim(`"limit":` + max53), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit 2^63", method: "PUT", path: plan, body: lim(`"limit":9223372036854775808`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit -2^63", method: "PUT", path: plan, body: lim(`"limit":-9223372036854775808`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit in exponent form", method: "PUT", path: plan, body: lim(`"limit":1e3`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit a fraction", method: "PUT", path: plan, body: lim(`"limit":1.5`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit a string", method: "PUT", path: plan, body: lim(`"limit":"100"`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "limit a boolean", method: "PUT", path: plan, body: lim(`"limit":true`), want: 400, code: v400, field: "limits[0].limit"},
		{name: "mode unknown", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"strict"`), want: 400, code: v400, field: "limits[0].mode"},
		{name: "mode upper case", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"HARD"`), want: 400, code: v400, field: "limits[0].mode"},
		{name: "per unknown", method: "PUT", path: plan, body: lim(`"limit":1,"per":"user"`), want: 400, code: v400, field: "limits[0].per", message: "must be one of customer, subject"},
		{name: "per empty", method: "PUT", path: plan, body: lim(`"limit":1,"per":""`), want: 400, code: v400, field: "limits[0].per"},
		{name: "per upper case", method: "PUT", path: plan, body: lim(`"limit":1,"per":"SUBJECT"`), want: 400, code: v400, field: "limits[0].per"},
		{name: "per a boolean", method: "PUT", path: plan, body: lim(`"limit":1,"per":true`), want: 400, code: v400, field: "limits[0].per"},
		{name: "two customer-wide limits, one naming its per", method: "PUT", path: plan,
			body: `{"limits":[{"metric":"api_calls","window":"day","limit":1},{"metric":"api_calls","window":"day","limit":2,"per":"customer"}]}`,
			want: 400, code: v400, field: "limits[1]", message: "duplicates limits[0]: a metric+window+per appears at most once"},
		{name: "two limits per subject", method: "PUT", path: plan,
			body: `{"limits":[{"metric":"api_calls","window":"day","limit":1,"per":"subject"},{"metric":"api_calls","window":"day","limit":2,"per":"subject"}]}`,
			want: 400, code: v400, field: "limits[1]"},
		{name: "overage percent with hard", method: "PUT", path: plan, body: lim(`"limit":1,"overage_percent":10`), want: 400, code: v400, field: "limits[0].overage_percent"},
		{name: "overage percent with elastic", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"elastic","overage_percent":10`), want: 400, code: v400, field: "limits[0].overage_percent"},
		{name: "overage percent above 1000", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"soft","overage_percent":1001`), want: 400, code: v400, field: "limits[0].overage_percent"},
		{name: "overage percent negative", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"soft","overage_percent":-5`), want: 400, code: v400, field: "limits[0].overage_percent"},
		{name: "overage percent a fraction", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"soft","overage_percent":12.5`), want: 400, code: v400, field: "limits[0].overage_percent"},
		{name: "overage price with hard", method: "PUT", path: plan, body: lim(`"limit":1,"overage_price_micros":10`), want: 400, code: v400, field: "limits[0].overage_price_micros"},
		{name: "overage price with elastic", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"elastic","overage_price_micros":10`), want: 400, code: v400, field: "limits[0].overage_price_micros"},
		{name: "overage price negative", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"soft","overage_price_micros":-1`), want: 400, code: v400, field: "limits[0].overage_price_micros"},
		{name: "overage price 2^53", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"soft","overage_price_micros":` + max53), want: 400, code: v400, field: "limits[0].overage_price_micros"},
		{name: "ceiling with soft", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"soft","ceiling":5`), want: 400, code: v400, field: "limits[0].ceiling"},
		{name: "ceiling with hard", method: "PUT", path: plan, body: lim(`"limit":1,"ceiling":5`), want: 400, code: v400, field: "limits[0].ceiling"},
		{name: "ceiling below limit", method: "PUT", path: plan, body: lim(`"limit":10,"mode":"elastic","ceiling":9`), want: 400, code: v400, field: "limits[0].ceiling"},
		{name: "ceiling negative", method: "PUT", path: plan, body: lim(`"limit":0,"mode":"elastic","ceiling":-1`), want: 400, code: v400, field: "limits[0].ceiling"},
		{name: "ceiling 2^53", method: "PUT", path: plan, body: lim(`"limit":1,"mode":"elastic","ceiling":` + max53), want: 400, code: v400, field: "limits[0].ceiling"},
		{name: "algorithm unknown", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":"leaky_bucket"`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "algorithm empty", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":""`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "algorithm upper case", method: "PUT", path: plan, body: limOn("minute", `"limit":1,"algorithm":"FIXED_WINDOW"`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "algorithm a number", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":2`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "algorithm on hour", method: "PUT", path: plan, body: limOn("hour", `"limit":1,"algorithm":"fixed_window"`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "default algorithm named on day", method: "PUT", path: plan, body: lim(`"limit":1,"algorithm":"sliding_window"`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "token bucket on month", method: "PUT", path: plan, body: limOn("month", `"limit":1,"algorithm":"token_bucket","burst":5`), want: 400, code: v400, field: "limits[0].algorithm"},
		{name: "burst without algorithm", method: "PUT", path: plan, body: limOn("second", `"limit":1,"burst":5`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "burst on a long window", method: "PUT", path: plan, body: lim(`"limit":1,"burst":5`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "burst with sliding log", method: "PUT", path: plan, body: limOn("minute", `"limit":1,"algorithm":"sliding_log","burst":5`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "burst 0", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":"token_bucket","burst":0`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "elastic ceiling below the burst", method: "PUT", path: plan, body: limOn("second", `"limit":1,"mode":"elastic","ceiling":5,"algorithm":"token_bucket","burst":9`), want: 400, code: v400, field: "limits[0].ceiling"},
		{name: "burst negative", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":"token_bucket","burst":-1`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "burst 2^53", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":"token_bucket","burst":`+max53), want: 400, code: v400, field: "limits[0].burst"},
		{name: "burst a fraction", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":"token_bucket","burst":1.5`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "burst a string", method: "PUT", path: plan, body: limOn("second", `"limit":1,"algorithm":"token_bucket","burst":"5"`), want: 400, code: v400, field: "limits[0].burst"},
		{name: "sliding log above 10000", method: "PUT", path: plan, body: limOn("second", `"limit":10001,"algorithm":"sliding_log"`), want: 400, code: v400, field: "limits[0].limit", message: maxMsg},
		{name: "second limit's sliding log above 10000", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":"second","limit":1},{"metric":"api_calls","window":"minute","limit":60000,"algorithm":"sliding_log"}]}`, want: 400, code: v400, field: "limits[1].limit", message: maxMsg},
		{name: "duplicate metric and window", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":"day","limit":1},{"metric":"tokens","window":"day","limit":1},{"metric":"api_calls","window":"day","limit":2,"mode":"soft"}]}`, want: 400, code: v400, field: "limits[2]"},
		{name: "more than 500 limits", method: "PUT", path: plan, body: `{"limits":[` + strings.TrimSuffix(strings.Repeat(`{"metric":"api_calls","window":"day","limit":1},`, 501), ",") + `]}`, want: 400, code: v400, field: "limits"},

		// Customers.
		{name: "plan missing", method: "PUT", path: customer, body: `{"name":"C"}`, want: 400, code: v400, field: "plan"},
		{name: "plan empty", method: "PUT", path: customer, body: `{"plan":""}`, want: 400, code: v400, field: "plan"},
		{name: "plan null", method: "PUT", path: customer, body: `{"plan":null}`, want: 400, code: v400, field: "plan"},
		{name: "plan a number", method: "PUT", path: customer, body: `{"plan":5}`, want: 400, code: v400, field: "plan"},
		{name: "plan an object", method: "PUT", path: customer, body: `{"plan":{"key":"pro"}}`, want: 400, code: v400, field: "plan"},
		{name: "plan key invalid", method: "PUT", path: customer, body: `{"plan":"Pro"}`, want: 400, code: v400, field: "plan"},
		{name: "plan unknown", method: "PUT", path: customer, body: `{"plan":"ghost"}`, want: 400, code: v400, field: "plan"},
		{name: "plan unknown on replace", method: "PUT", path: "/v1/customers/acme", body: `{"plan":"ghost"}`, want: 400, code: v400, field: "plan"},
		{name: "anchor day 0", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":0}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "anchor day 29", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":29}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "anchor day 31", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":31}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "anchor day negative", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":-15}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "anchor day a string", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":"15"}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "anchor day a fraction", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":15.5}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "anchor day 2^64", method: "PUT", path: customer, body: `{"plan":"pro","billing_anchor_day":18446744073709551616}`, want: 400, code: v400, field: "billing_anchor_day"},
		{name: "customer name with NUL", method: "PUT", path: customer, body: `{"plan":"pro","name":"\u0000"}`, want: 400, code: v400, field: "name"},
		{name: "customer name too long", method: "PUT", path: customer, body: `{"plan":"pro","name":"` + strings.Repeat("é", 201) + `"}`, want: 400, code: v400, field: "name"},
		{name: "metadata an array", method: "PUT", path: customer, body: `{"plan":"pro","metadata":[1,2]}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata a string", method: "PUT", path: customer, body: `{"plan":"pro","metadata":"{}"}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata a number", method: "PUT", path: customer, body: `{"plan":"pro","metadata":1}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata value with NUL", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"k":"v\u0000"}}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata key with NUL", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"k\u0000":"v"}}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata NUL deep inside", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"a":[{"b":["\u0000"]}]}}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata nested 40 deep", method: "PUT", path: customer, body: `{"plan":"pro","metadata":` + nest(`{"a":`, `}`, 40) + `}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata arrays nested 40 deep", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"a":` + nest("[", "]", 40) + `}}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata number with a huge exponent", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"n":1e999999}}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata number with 20000 decimals", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"n":0.` + strings.Repeat("0", 20000) + `1}}`, want: 400, code: v400, field: "metadata"},
		{name: "metadata number with a tiny exponent", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"n":-0.0e-99999}}`, want: 400, code: v400, field: "metadata"},

		// Overrides.
		{name: "override limit missing", method: "PUT", path: override, body: ovr(`"mode":"soft"`), want: 400, code: v400, field: "limit"},
		{name: "override empty object", method: "PUT", path: override, body: `{}`, want: 400, code: v400, field: "limit"},
		{name: "override limit null", method: "PUT", path: override, body: ovr(`"limit":null`), want: 400, code: v400, field: "limit"},
		{name: "override limit negative", method: "PUT", path: override, body: ovr(`"limit":-100`), want: 400, code: v400, field: "limit"},
		{name: "override limit 2^53", method: "PUT", path: override, body: ovr(`"limit":` + max53), want: 400, code: v400, field: "limit"},
		{name: "override limit a string", method: "PUT", path: override, body: ovr(`"limit":"5000"`), want: 400, code: v400, field: "limit"},
		{name: "override mode unknown", method: "PUT", path: override, body: ovr(`"limit":1,"mode":"burst"`), want: 400, code: v400, field: "mode"},
		{name: "override mode a number", method: "PUT", path: override, body: ovr(`"limit":1,"mode":1`), want: 400, code: v400, field: "mode"},
		{name: "override overage percent without soft", method: "PUT", path: override, body: ovr(`"limit":1,"overage_percent":10`), want: 400, code: v400, field: "overage_percent"},
		{name: "override ceiling with soft", method: "PUT", path: override, body: ovr(`"limit":1,"mode":"soft","ceiling":5`), want: 400, code: v400, field: "ceiling"},
		{name: "override ceiling below limit", method: "PUT", path: override, body: ovr(`"limit":10,"mode":"elastic","ceiling":1`), want: 400, code: v400, field: "ceiling"},
		{name: "override price with elastic", method: "PUT", path: override, body: ovr(`"limit":1,"mode":"elastic","overage_price_micros":1`), want: 400, code: v400, field: "overage_price_micros"},
		{name: "override algorithm unknown", method: "PUT", path: overSec, body: ovr(`"limit":1,"algorithm":"gcra"`), want: 400, code: v400, field: "algorithm"},
		{name: "override algorithm on day", method: "PUT", path: override, body: ovr(`"limit":1,"algorithm":"token_bucket"`), want: 400, code: v400, field: "algorithm"},
		{name: "override default algorithm named on day", method: "PUT", path: override, body: ovr(`"limit":1,"algorithm":"sliding_window"`), want: 400, code: v400, field: "algorithm"},
		{name: "override burst without token bucket", method: "PUT", path: overSec, body: ovr(`"limit":1,"algorithm":"fixed_window","burst":5`), want: 400, code: v400, field: "burst"},
		{name: "override burst on day", method: "PUT", path: override, body: ovr(`"limit":1,"burst":5`), want: 400, code: v400, field: "burst"},
		{name: "override burst 0", method: "PUT", path: overSec, body: ovr(`"limit":1,"algorithm":"token_bucket","burst":0`), want: 400, code: v400, field: "burst"},
		{name: "override burst 2^53", method: "PUT", path: overSec, body: ovr(`"limit":1,"algorithm":"token_bucket","burst":` + max53), want: 400, code: v400, field: "burst"},
		{name: "override sliding log above 10000", method: "PUT", path: overSec, body: ovr(`"limit":10001,"algorithm":"sliding_log"`), want: 400, code: v400, field: "limit", message: maxMsg},
		{name: "expires in the past", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":"` + past + `"`), want: 400, code: v400, field: "expires_at"},
		{name: "expires at the epoch", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":"1970-01-01T00:00:00Z"`), want: 400, code: v400, field: "expires_at"},
		{name: "expires a date only", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":"2999-12-01"`), want: 400, code: v400, field: "expires_at"},
		{name: "expires without zone", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":"2999-12-01T00:00:00"`), want: 400, code: v400, field: "expires_at"},
		{name: "expires in words", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":"tomorrow"`), want: 400, code: v400, field: "expires_at"},
		{name: "expires a number", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":4102444800`), want: 400, code: v400, field: "expires_at"},
		{name: "expires month 13", method: "PUT", path: override, body: ovr(`"limit":1,"expires_at":"2999-13-01T00:00:00Z"`), want: 400, code: v400, field: "expires_at"},
		{name: "reason with NUL", method: "PUT", path: override, body: ovr(`"limit":1,"reason":"\u0000"`), want: 400, code: v400, field: "reason"},
		{name: "reason not a string", method: "PUT", path: override, body: ovr(`"limit":1,"reason":false`), want: 400, code: v400, field: "reason"},
		{name: "reason too long", method: "PUT", path: override, body: ovr(`"limit":1,"reason":"` + strings.Repeat("r", 501) + `"`), want: 400, code: v400, field: "reason"},
		{name: "override per unknown", method: "PUT", path: override + "?per=user", body: ovr(`"limit":1`), want: 400, code: v400, field: "per", message: "must be one of customer, subject"},
		{name: "override per empty", method: "PUT", path: override + "?per=", body: ovr(`"limit":1`), want: 400, code: v400, field: "per"},
		{name: "override per empty, text body", method: "PUT", path: override + "?per=", body: ovr(`"limit":1`), headers: text, want: 415, code: "unsupported_media_type"},
		{name: "override per unknown, text body", method: "PUT", path: override + "?per=user", body: ovr(`"limit":1`), headers: text, want: 415, code: "unsupported_media_type"},
		{name: "override per upper case", method: "GET", path: override + "?per=SUBJECT", want: 400, code: v400, field: "per"},
		{name: "override per empty on get", method: "GET", path: override + "?per", want: 400, code: v400, field: "per"},
		{name: "override per unknown on delete", method: "DELETE", path: override + "?per=subjects", want: 400, code: v400, field: "per"},
		{name: "override per and a bad window", method: "PUT", path: "/v1/customers/acme/overrides/api_calls/year?per=all", body: ovr(`"limit":1`), want: 400, code: v400, field: "window"},
		{name: "override body per against the default", method: "PUT", path: override, body: ovr(`"limit":1,"per":"subject"`), want: 400, code: v400, field: "per"},
		{name: "override body per against the query", method: "PUT", path: override + "?per=subject", body: ovr(`"limit":1,"per":"customer"`), want: 400, code: v400, field: "per"},
		{name: "override body per unknown", method: "PUT", path: override, body: ovr(`"limit":1,"per":"users"`), want: 400, code: v400, field: "per"},
		{name: "override body per a number", method: "PUT", path: override, body: ovr(`"limit":1,"per":1`), want: 400, code: v400, field: "per"},

		// Nulls: refused except where a field is nullable.
		{name: "check cost null", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":null}`, want: 400, code: v400, field: "cost", message: null},
		{name: "check dry_run null", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","dry_run":null}`, want: 400, code: v400, field: "dry_run", message: null},
		{name: "check request_id null", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","request_id":null}`, want: 400, code: v400, field: "request_id", message: null},
		{name: "check customer null", method: "POST", path: check, body: `{"customer":null,"metric":"api_calls"}`, want: 400, code: v400, field: "customer", message: null},
		{name: "check metric null", method: "POST", path: check, body: `{"customer":"acme","metric":null}`, want: 400, code: v400, field: "metric", message: null},
		{name: "refund cost null", method: "POST", path: refund, body: `{"customer":"acme","metric":"api_calls","cost":null}`, want: 400, code: v400, field: "cost", message: null},
		{name: "refund request_id null", method: "POST", path: refund, body: `{"customer":"acme","metric":"api_calls","request_id":null}`, want: 400, code: v400, field: "request_id", message: null},
		{name: "refund customer null", method: "POST", path: refund, body: `{"customer":null,"metric":"api_calls"}`, want: 400, code: v400, field: "customer", message: null},
		{name: "metric capacity entry null", method: "PUT", path: metric, body: `{"description":null,"capacity":{"day":null}}`, want: 400, code: v400, field: "capacity.day", message: null},
		{name: "plan second limit entry null", method: "PUT", path: plan, body: `{"name":null,"limits":[{"metric":"api_calls","window":"day","limit":1},null]}`, want: 400, code: v400, field: "limits[1]", message: null},
		{name: "limit metric null", method: "PUT", path: plan, body: `{"limits":[{"metric":null,"window":"day","limit":1}]}`, want: 400, code: v400, field: "limits[0].metric", message: null},
		{name: "limit window null", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":null,"limit":1,"mode":null}]}`, want: 400, code: v400, field: "limits[0].window", message: null},
		{name: "customer plan null beside nullable fields", method: "PUT", path: customer, body: `{"plan":null,"name":null,"billing_anchor_day":null,"metadata":null}`, want: 400, code: v400, field: "plan", message: null},
		{name: "override limit null beside nullable fields", method: "PUT", path: override, body: `{"limit":null,"mode":null,"ceiling":null,"expires_at":null,"reason":null}`, want: 400, code: v400, field: "limit", message: null},

		// Repeated keys: refused at any depth.
		{name: "check cost twice", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":1,"cost":2}`, want: 400, code: v400, field: "cost", message: twice},
		{name: "check customer twice", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","customer":"other"}`, want: 400, code: v400, field: "customer", message: twice},
		{name: "check key twice, once escaped", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":1,"\u0063ost":2}`, want: 400, code: v400, field: "cost", message: twice},
		{name: "check dry_run twice", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","dry_run":true,"dry_run":false}`, want: 400, code: v400, field: "dry_run", message: twice},
		{name: "refund cost twice", method: "POST", path: refund, body: `{"customer":"acme","metric":"api_calls","cost":2,"cost":1}`, want: 400, code: v400, field: "cost", message: twice},
		{name: "refund request_id twice", method: "POST", path: refund, body: `{"customer":"acme","metric":"api_calls","request_id":"a","request_id":"b"}`, want: 400, code: v400, field: "request_id", message: twice},
		{name: "metric description twice", method: "PUT", path: metric, body: `{"description":"a","description":"b"}`, want: 400, code: v400, field: "description", message: twice},
		{name: "metric capacity window twice", method: "PUT", path: metric, body: `{"capacity":{"day":1,"day":2}}`, want: 400, code: v400, field: "capacity.day", message: twice},
		{name: "plan name twice", method: "PUT", path: plan, body: `{"name":"A","name":"B"}`, want: 400, code: v400, field: "name", message: twice},
		{name: "second limit mode twice", method: "PUT", path: plan, body: `{"limits":[{"metric":"api_calls","window":"day","limit":1},{"metric":"tokens","window":"day","limit":1,"mode":"soft","mode":"hard"}]}`, want: 400, code: v400, field: "limits[1].mode", message: twice},
		{name: "price currency twice", method: "PUT", path: plan, body: `{"price":{"currency":"USD","currency":"EUR"}}`, want: 400, code: v400, field: "price.currency", message: twice},
		{name: "customer plan twice", method: "PUT", path: customer, body: `{"plan":"pro","plan":"pro"}`, want: 400, code: v400, field: "plan", message: twice},
		{name: "metadata key twice", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"a":1,"a":2}}`, want: 400, code: v400, field: "metadata.a", message: twice},
		{name: "nested metadata key twice", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"a":{"b":1,"b":null}}}`, want: 400, code: v400, field: "metadata.a.b", message: twice},
		{name: "metadata key twice in an array", method: "PUT", path: customer, body: `{"plan":"pro","metadata":{"l":[{},{"k":1,"k":1}]}}`, want: 400, code: v400, field: "metadata.l[1].k", message: twice},
		{name: "override limit twice", method: "PUT", path: override, body: `{"limit":1,"limit":100000}`, want: 400, code: v400, field: "limit", message: twice},
		{name: "override expires_at twice", method: "PUT", path: override, body: `{"limit":1,"expires_at":"2999-01-01T00:00:00Z","expires_at":"2999-02-01T00:00:00Z"}`, want: 400, code: v400, field: "expires_at", message: twice},

		// Checks and refunds: required fields and exact values.
		{name: "check without customer", method: "POST", path: check, body: `{"metric":"api_calls"}`, want: 400, code: v400, field: "customer", message: required},
		{name: "check without metric", method: "POST", path: check, body: `{"customer":"acme"}`, want: 400, code: v400, field: "metric", message: required},
		{name: "check with empty customer", method: "POST", path: check, body: `{"customer":"","metric":"api_calls"}`, want: 400, code: v400, field: "customer", message: required},
		{name: "check empty object", method: "POST", path: check, body: `{}`, want: 400, code: v400, field: "metric", message: required},
		{name: "check bad customer keeps its pattern", method: "POST", path: check, body: `{"customer":"-acme","metric":"api_calls"}`, want: 400, code: v400, field: "customer", message: "must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"},
		{name: "refund without customer", method: "POST", path: refund, body: `{"metric":"api_calls","cost":1}`, want: 400, code: v400, field: "customer", message: required},
		{name: "refund without metric", method: "POST", path: refund, body: `{"customer":"acme","cost":1}`, want: 400, code: v400, field: "metric", message: required},
		{name: "check cost in exponent form", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":1e3}`, want: 400, code: v400, field: "cost"},
		{name: "check cost a fraction", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":1.5}`, want: 400, code: v400, field: "cost"},
		{name: "check cost 2^63", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":9223372036854775808}`, want: 400, code: v400, field: "cost"},
		{name: "check cost a string", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","cost":"1"}`, want: 400, code: v400, field: "cost"},
		{name: "check dry_run a string", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","dry_run":"true"}`, want: 400, code: v400, field: "dry_run"},
		{name: "check customer a number", method: "POST", path: check, body: `{"customer":42,"metric":"api_calls"}`, want: 400, code: v400, field: "customer"},
		{name: "check key in upper case", method: "POST", path: check, body: `{"customer":"acme","METRIC":"api_calls"}`, want: 400, code: v400, field: "METRIC"},
		{name: "check key with long s", method: "POST", path: check, body: "{\"customer\":\"acme\",\"metric\":\"api_calls\",\"co\u017ft\":2}", want: 400, code: v400, field: "co\u017ft"},
		{name: "check trailing data", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls"} {}`, want: 400, code: v400},
		{name: "check invalid UTF-8", method: "POST", path: check, body: "{\"customer\":\"acme\xff\",\"metric\":\"api_calls\"}", want: 400, code: v400},
		{name: "refund cost a fraction", method: "POST", path: refund, body: `{"customer":"acme","metric":"api_calls","cost":2.0}`, want: 400, code: v400, field: "cost"},

		// Reservations: the estimate, the ttl, who, the actual cost, the id.
		{name: "reserve cost 0", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":0}`, want: 400, code: v400, field: "cost", message: "must be an integer between 1 and 1000000000"},
		{name: "reserve without cost", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls"}`, want: 400, code: v400, field: "cost", message: required},
		{name: "reserve cost null", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":null}`, want: 400, code: v400, field: "cost", message: null},
		{name: "reserve ttl_seconds 0", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":1,"ttl_seconds":0}`, want: 400, code: v400, field: "ttl_seconds", message: "must be an integer between 1 and 3600"},
		{name: "reserve ttl_seconds 3601", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":1,"ttl_seconds":3601}`, want: 400, code: v400, field: "ttl_seconds", message: "must be an integer between 1 and 3600"},
		{name: "reserve ttl_seconds a fraction", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":1,"ttl_seconds":1.5}`, want: 400, code: v400, field: "ttl_seconds"},
		{name: "reserve customer and api_key", method: "POST", path: reserve, body: `{"customer":"acme","api_key":"k","metric":"api_calls","cost":1}`, want: 400, code: v400, field: "api_key"},
		{name: "reserve neither customer nor api_key", method: "POST", path: reserve, body: `{"metric":"api_calls","cost":1}`, want: 400, code: v400, field: "customer"},
		{name: "reserve unknown field", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","estimate":1}`, want: 400, code: v400, field: "estimate"},
		{name: "reserve cost twice", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":1,"cost":2}`, want: 400, code: v400, field: "cost", message: twice},
		{name: "reserve without metric", method: "POST", path: reserve, body: `{"customer":"acme","cost":1}`, want: 400, code: v400, field: "metric", message: required},
		{name: "reserve unknown customer", method: "POST", path: reserve, body: `{"customer":"ghost","metric":"api_calls","cost":1}`, want: 404, code: "customer_not_found"},
		{name: "reserve with an api_key no one holds", method: "POST", path: reserve, body: `{"api_key":"qk_unknown","metric":"api_calls","cost":1}`, want: 403, code: "invalid_api_key"},
		{name: "commit cost -1", method: "POST", path: "/v1/reservations/" + held + "/commit", body: `{"cost":-1}`, want: 400, code: v400, field: "cost", message: "must be an integer between 0 and 1000000000"},
		{name: "commit cost 10^9+1", method: "POST", path: "/v1/reservations/" + held + "/commit", body: `{"cost":1000000001}`, want: 400, code: v400, field: "cost", message: "must be an integer between 0 and 1000000000"},
		{name: "commit without cost", method: "POST", path: "/v1/reservations/" + held + "/commit", body: `{}`, want: 400, code: v400, field: "cost", message: required},
		{name: "commit unknown field", method: "POST", path: "/v1/reservations/" + held + "/commit", body: `{"cost":1,"actual":1}`, want: 400, code: v400, field: "actual"},
		{name: "commit unknown id", method: "POST", path: "/v1/reservations/rsv_000000000000000000000000/commit", body: `{"cost":1}`, want: 404, code: "reservation_not_found"},
		{name: "commit id of another format", method: "POST", path: "/v1/reservations/acme/commit", body: `{"cost":1}`, want: 404, code: "reservation_not_found"},
		{name: "get unknown reservation", method: "GET", path: "/v1/reservations/rsv_000000000000000000000000", want: 404, code: "reservation_not_found"},
		{name: "get reservation id of another format", method: "GET", path: "/v1/reservations/RSV_1", want: 404, code: "reservation_not_found"},
		{name: "release unknown reservation", method: "DELETE", path: "/v1/reservations/rsv_ffffffffffffffffffffffff", want: 404, code: "reservation_not_found"},

		// API keys: their creation, and checks and refunds by key.
		{name: "key unknown field", method: "POST", path: keysOf, body: `{"nam":"ci"}`, want: 400, code: v400, field: "nam"},
		{name: "key expires_at past", method: "POST", path: keysOf, body: `{"expires_at":"` + past + `"}`, want: 400, code: v400, field: "expires_at", message: "must be in the future"},
		{name: "key expires_at not a time", method: "POST", path: keysOf, body: `{"expires_at":"tomorrow"}`, want: 400, code: v400},
		{name: "key expires_at a number", method: "POST", path: keysOf, body: `{"expires_at":1}`, want: 400, code: v400, field: "expires_at"},
		{name: "key expires_at twice", method: "POST", path: keysOf, body: `{"expires_at":"2999-01-01T00:00:00Z","expires_at":"2999-02-01T00:00:00Z"}`, want: 400, code: v400, field: "expires_at", message: twice},
		{name: "key name of 101 characters", method: "POST", path: keysOf, body: `{"name":"` + strings.Repeat("é", 101) + `"}`, want: 400, code: v400, field: "name", message: "must be at most 100 characters"},
		{name: "key name with a control character", method: "POST", path: keysOf, body: `{"name":"a\u0007b"}`, want: 400, code: v400, field: "name"},
		{name: "key name null", method: "POST", path: keysOf, body: `{"name":null}`, want: 400, code: v400, field: "name", message: null},
		{name: "key name a number", method: "POST", path: keysOf, body: `{"name":7}`, want: 400, code: v400, field: "name"},
		{name: "key name twice", method: "POST", path: keysOf, body: `{"name":"a","name":"b"}`, want: 400, code: v400, field: "name", message: twice},
		{name: "key body not an object", method: "POST", path: keysOf, body: `[]`, want: 400, code: v400},
		{name: "key body empty", method: "POST", path: keysOf, body: ``, headers: asJSON, want: 400, code: v400},
		{name: "key for unknown customer", method: "POST", path: "/v1/customers/nobody/keys", body: `{}`, want: 404, code: "customer_not_found"},
		{name: "key for bad customer id", method: "POST", path: "/v1/customers/-acme/keys", body: `{}`, want: 400, code: v400, field: "customer"},
		{name: "keys of unknown customer", method: "GET", path: "/v1/customers/nobody/keys", want: 404, code: "customer_not_found"},
		{name: "keys bad cursor", method: "GET", path: keysOf + "?cursor=" + cursorOf("x"), want: 400, code: v400, field: "cursor"},
		{name: "keys page limit 0", method: "GET", path: keysOf + "?limit=0", want: 400, code: v400, field: "limit"},
		{name: "unknown key id", method: "GET", path: "/v1/keys/key_AAAAAAAAAAAAAAAA", want: 404, code: "key_not_found"},
		{name: "malformed key id", method: "GET", path: "/v1/keys/nope", want: 404, code: "key_not_found"},
		{name: "revoke unknown key id", method: "DELETE", path: "/v1/keys/key_AAAAAAAAAAAAAAAA", want: 404, code: "key_not_found"},
		{name: "check by customer and api_key", method: "POST", path: check, body: `{"customer":"acme","api_key":"qk_x","metric":"api_calls"}`, want: 400, code: v400, field: "api_key"},
		{name: "check api_key null", method: "POST", path: check, body: `{"api_key":null,"metric":"api_calls"}`, want: 400, code: v400, field: "api_key", message: null},
		{name: "check api_key a number", method: "POST", path: check, body: `{"api_key":5,"metric":"api_calls"}`, want: 400, code: v400, field: "api_key"},
		{name: "check api_key twice", method: "POST", path: check, body: `{"api_key":"a","api_key":"b","metric":"api_calls"}`, want: 400, code: v400, field: "api_key", message: twice},
		{name: "check empty api_key", method: "POST", path: check, body: `{"api_key":"","metric":"api_calls"}`, want: 400, code: v400, field: "customer", message: required},
		{name: "check unknown api_key", method: "POST", path: check, body: `{"api_key":"qk_unknown","metric":"api_calls"}`, want: 403, code: "invalid_api_key"},
		{name: "refund by customer and api_key", method: "POST", path: refund, body: `{"customer":"acme","api_key":"qk_x","metric":"api_calls"}`, want: 400, code: v400, field: "api_key"},
		{name: "refund unknown api_key", method: "POST", path: refund, body: `{"api_key":"qk_unknown","metric":"api_calls"}`, want: 403, code: "invalid_api_key"},

		// Checks of items, and subjects.
		{name: "check of 17 items", method: "POST", path: check, body: `{"customer":"acme","items":[` + strings.Repeat(`{"metric":"api_calls"},`, 16) + `{"metric":"tokens"}]}`, want: 400, code: v400, field: "items", message: "must hold 1 to 16 items"},
		{name: "check of no items", method: "POST", path: check, body: `{"customer":"acme","items":[]}`, want: 400, code: v400, field: "items", message: "must hold 1 to 16 items"},
		{name: "check items null", method: "POST", path: check, body: `{"customer":"acme","items":null}`, want: 400, code: v400, field: "items", message: null},
		{name: "check items and metric", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","items":[{"metric":"tokens"}]}`, want: 400, code: v400, field: "metric"},
		{name: "check items and cost", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"tokens"}],"cost":2}`, want: 400, code: v400, field: "cost"},
		{name: "check items and subject", method: "POST", path: check, body: `{"customer":"acme","subject":"u","items":[{"metric":"tokens"}]}`, want: 400, code: v400, field: "subject"},
		{name: "check items naming a metric and subject twice", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"api_calls","subject":"u"},{"metric":"api_calls","subject":"u","cost":2}]}`, want: 400, code: v400, field: "items[1]"},
		{name: "check item without metric", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"api_calls"},{"cost":2}]}`, want: 400, code: v400, field: "items[1].metric", message: required},
		{name: "check item cost null", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"api_calls","cost":null}]}`, want: 400, code: v400, field: "items[0].cost", message: null},
		{name: "check item unknown field", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"api_calls","customer":"other"}]}`, want: 400, code: v400, field: "items[0].customer"},
		{name: "check item bad subject", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"api_calls","subject":"a b"}]}`, want: 400, code: v400, field: "items[0].subject"},
		{name: "check item undeclared metric", method: "POST", path: check, body: `{"customer":"acme","items":[{"metric":"api_calls"},{"metric":"ghost"}]}`, want: 404, code: "metric_not_found"},
		{name: "check bad subject", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","subject":"a\u0000b"}`, want: 400, code: v400, field: "subject"},
		{name: "check subject of 129 characters", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","subject":"` + id129 + `"}`, want: 400, code: v400, field: "subject"},
		{name: "check subject a number", method: "POST", path: check, body: `{"customer":"acme","metric":"api_calls","subject":7}`, want: 400, code: v400, field: "subject"},
		{name: "refund bad subject", method: "POST", path: refund, body: `{"customer":"acme","metric":"api_calls","subject":"a b"}`, want: 400, code: v400, field: "subject"},
		{name: "refund of items", method: "POST", path: refund, body: `{"customer":"acme","items":[{"metric":"api_calls"}]}`, want: 400, code: v400, field: "items"},
		{name: "reserve bad subject", method: "POST", path: reserve, body: `{"customer":"acme","metric":"api_calls","cost":1,"subject":"a b"}`, want: 400, code: v400, field: "subject"},
		{name: "usage of a bad subject", method: "GET", path: "/v1/customers/acme/usage?subject=a%20b", want: 400, code: v400, field: "subject"},
		{name: "usage of an empty subject", method: "GET", path: "/v1/customers/acme/usage?subject=", want: 400, code: v400, field: "subject"},

		// Query parameters.
		{name: "page limit 0", method: "GET", path: "/v1/metrics?limit=0", want: 400, code: v400, field: "limit"},
		{name: "page limit 1001", method: "GET", path: "/v1/plans?limit=1001", want: 400, code: v400, field: "limit"},
		{name: "page limit negative", method: "GET", path: "/v1/customers?limit=-1", want: 400, code: v400, field: "limit"},
		{name: "page limit empty", method: "GET", path: "/v1/metrics?limit=", want: 400, code: v400, field: "limit"},
		{name: "page limit a word", method: "GET", path: "/v1/audit?limit=ten", want: 400, code: v400, field: "limit"},
		{name: "page limit a fraction", method: "GET", path: "/v1/customers/acme/overrides?limit=1.5", want: 400, code: v400, field: "limit"},
		{name: "page limit 2^63", method: "GET", path: "/v1/metrics?limit=9223372036854775808", want: 400, code: v400, field: "limit"},
		{name: "cursor garbage", method: "GET", path: "/v1/metrics?cursor=garbage!", want: 400, code: v400, field: "cursor"},
		{name: "cursor empty", method: "GET", path: "/v1/plans?cursor=", want: 400, code: v400, field: "cursor"},
		{name: "cursor without our prefix", method: "GET", path: "/v1/metrics?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("m1")), want: 400, code: v400, field: "cursor"},
		{name: "cursor with NUL", method: "GET", path: "/v1/customers?cursor=" + cursorOf("a\x00b"), want: 400, code: v400, field: "cursor"},
		{name: "cursor naming an impossible key", method: "GET", path: "/v1/metrics?cursor=" + cursorOf("UPPER"), want: 400, code: v400, field: "cursor"},
		{name: "cursor of an impossible override", method: "GET", path: "/v1/customers/acme/overrides?cursor=" + cursorOf("api_calls/fortnight"), want: 400, code: v400, field: "cursor"},
		{name: "cursor of an override per customer, named", method: "GET", path: "/v1/customers/acme/overrides?cursor=" + cursorOf("api_calls/day/customer"), want: 400, code: v400, field: "cursor"},
		{name: "cursor of an impossible per", method: "GET", path: "/v1/customers/acme/overrides?cursor=" + cursorOf("api_calls/day/user"), want: 400, code: v400, field: "cursor"},
		{name: "audit cursor not an id", method: "GET", path: "/v1/audit?cursor=" + cursorOf("m1"), want: 400, code: v400, field: "cursor"},
		{name: "audit cursor zero", method: "GET", path: "/v1/audit?cursor=" + cursorOf("0"), want: 400, code: v400, field: "cursor"},
		{name: "audit cursor negative", method: "GET", path: "/v1/audit?cursor=" + cursorOf("-5"), want: 400, code: v400, field: "cursor"},
		{name: "customer filter bad plan", method: "GET", path: "/v1/customers?plan=Pro", want: 400, code: v400, field: "plan"},
		{name: "customer filter empty plan", method: "GET", path: "/v1/customers?plan=", want: 400, code: v400, field: "plan"},
		{name: "audit filter bad customer", method: "GET", path: "/v1/audit?customer=acme%20inc", want: 400, code: v400, field: "customer"},
		{name: "audit filter empty customer", method: "GET", path: "/v1/audit?customer=", want: 400, code: v400, field: "customer"},
	}
	if len(cases) < 60 {
		t.Fatalf("only %d cases", len(cases))
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.chunked {
				r = sendChunked(t, s, tc.method, tc.path, tc.body)
			} else {
				r = s.forT(t).do(tc.method, tc.path, tc.body, tc.headers...)
			}
			MustNotLeak(t, r.Body)
			p := MustProblem(t, r, tc.want, tc.code)
			if tc.want != http.StatusBadRequest {
				return
			}
			errs, _ := p["errors"].([]any)
			if len(errs) == 0 {
				t.Fatalf("400 without errors: %s", r.Body)
			}
			var fields []string
			for _, e := range errs {
				m, _ := e.(map[string]any)
				f, ok := m["field"].(string)
				if msg, _ := m["message"].(string); !ok || msg == "" {
					t.Errorf("error entry %v lacks a field or a message", e)
				}
				fields = append(fields, f)
			}
			if tc.field != "" && !slices.Contains(fields, tc.field) {
				t.Errorf("errors name %q, want %q among them\n%s", fields, tc.field, r.Body)
			}
			if tc.message != "" && !slices.ContainsFunc(errs, func(e any) bool {
				m, _ := e.(map[string]any)
				return m["field"] == tc.field && m["message"] == tc.message
			}) {
				t.Errorf("no entry says %s %q\n%s", tc.field, tc.message, r.Body)
			}
		})
	}

	t.Run("huge Content-Length", func(t *testing.T) {
		r := sendRaw(t, s.URL, "PUT /v1/metrics/m HTTP/1.1\r\nHost: quotad\r\nAuthorization: Bearer "+adminToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 1099511627776\r\nConnection: close\r\n\r\n{}")
		MustNotLeak(t, r.Body)
		MustProblem(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
	})
	t.Run("Content-Length above the body", func(t *testing.T) {
		r := sendRaw(t, s.URL, "PUT /v1/metrics/m HTTP/1.1\r\nHost: quotad\r\nAuthorization: Bearer "+adminToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 70000\r\nConnection: close\r\n\r\n{}")
		MustProblem(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
	})
	// Requests net/http refuses before quotad sees them: they get Go's own
	// plain 400, which is still no 5xx and reveals nothing.
	for _, target := range []string{"/v1/metrics/a\x00b", "/v1/metrics/%zz", "/v1/metrics/a b"} {
		t.Run("request line "+strconv.Quote(target), func(t *testing.T) {
			r := sendRaw(t, s.URL, "GET "+target+" HTTP/1.1\r\nHost: quotad\r\nAuthorization: Bearer "+adminToken+
				"\r\nConnection: close\r\n\r\n")
			if r.Status >= 500 || r.Status < 400 {
				t.Errorf("status = %d, want a 4xx", r.Status)
			}
			MustNotLeak(t, r.Body)
		})
	}

	// None of the refused requests wrote anything.
	if after, _ := MustList(t, s, "/v1/audit", "events", "id"); !slices.Equal(after, auditBefore) {
		t.Errorf("audit log changed: %v, was %v", after, auditBefore)
	}
	for _, path := range []string{"/v1/metrics", "/v1/plans", "/v1/customers"} {
		body := s.mustDo(200, "GET", path, "").JSON(t)
		for k, v := range body {
			if l, ok := v.([]any); ok && len(l) > 2 {
				t.Errorf("%s: %s has %d entries after bad input, want at most 2", path, k, len(l))
			}
		}
	}
	got := s.mustDo(200, "GET", override, "").JSON(t)
	if got["version"] != float64(1) || got["limit"] != float64(5) {
		t.Errorf("override changed by bad input: %v", got)
	}
}

// sendChunked sends body as the admin without a Content-Length, so that
// the server learns its size only by reading it.
func sendChunked(t testing.TB, s *testServer, method, path, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	if req.ContentLength != 0 || len(req.TransferEncoding) > 0 && req.TransferEncoding[0] != "chunked" {
		t.Fatalf("request would not be chunked")
	}
	return mustSend(t, http.DefaultClient, req)
}

// sendRaw writes raw to the server at base (http://host:port) as is and
// reads one answer: for requests net/http would refuse to send, or would
// clean or escape.
func sendRaw(t testing.TB, base, raw string) response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
