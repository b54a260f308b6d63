package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// authTap stands between a gateway and quotad's forward-auth: it records
// the original request URI each authorization request names, and quotad's
// answer to it.
type authTap struct {
	mu   sync.Mutex
	seen []tapped
}

type tapped struct {
	uri    string // X-Forwarded-Uri as quotad got it
	status int
	code   string // the problem's code
}

// MustStartTap starts an authTap in front of the quotad at target until
// the test ends, and returns it and its URL.
func MustStartTap(t testing.TB, target string) (*authTap, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tap := &authTap{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		ModifyResponse: func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			tap.mu.Lock()
			defer tap.mu.Unlock()
			tap.seen = append(tap.seen, tapped{resp.Request.Header.Get("X-Forwarded-Uri"), resp.StatusCode,
				problemCode(response{Body: body})})
			return nil
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return tap, srv.URL
}

// since returns what the tap saw after the first n authorization requests.
func (a *authTap) since(n int) []tapped {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]tapped(nil), a.seen[n:]...)
}

func (a *authTap) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.seen)
}

// pathVariants are requests that an upstream may serve as one of the
// expensive routes of the documented route table (POST /v1/completions,
// llm_calls at cost 10; /v1/exports/, exports): through any gateway,
// each must be charged as that route, or refused (by quotad, 400
// path_not_canonical, or by the gateway itself); none may be charged as
// api_calls, none may pass unchecked.
var pathVariants = []struct {
	method, target string
	metric         string // the expensive route's
	// charged says the variant is harmless: the gateway must pass it on,
	// and quotad must charge it.
	charged bool
}{
	{"POST", "/v1/completions", "llm_calls", true},
	{"POST", "/v1/completions/", "llm_calls", true},
	{"POST", "/v1/completions/?stream=1", "llm_calls", true},
	{"POST", "/V1/Completions", "llm_calls", true},
	{"POST", "/v1/%63ompletions", "llm_calls", true},
	{"POST", "//v1//completions", "llm_calls", true},
	{"POST", "/v1/completions;x", "llm_calls", false},
	{"POST", "/v1/completions/.", "llm_calls", false},
	{"POST", "/v1/x/../completions", "llm_calls", false},
	{"GET", "/v1/exports/a", "exports", true},
	{"GET", "/v1/exports", "exports", true},
	{"GET", "/V1/exports/a", "exports", true},
	{"GET", "/V1/EXPORTS/A?next=/v1/x", "exports", true},
	{"GET", "/v1/%65xports/a", "exports", true},
	{"GET", "/v1/exports%2Fa", "exports", false},
	{"GET", "/v1/exports%2fa", "exports", false},
	{"GET", "/v1/x/%2e%2e/exports/a", "exports", false},
	{"GET", "/v1/x/%2E%2E/exports/a", "exports", false},
	{"GET", "/v1/x/.%2e/exports/a", "exports", false},
	{"GET", "/v1/x/../exports/a", "exports", false},
	{"GET", "/v1/./exports/a", "exports", false},
	{"GET", "/v1/exports;x/a", "exports", false},
	{"GET", "/v1/exports%3Bx/a", "exports", false},
	{"GET", "/v1/exports%252Fa", "exports", false},
	{"GET", `/v1\exports\a`, "exports", false},
	{"GET", "/v1/exports%5Ca", "exports", false},
	{"GET", "/v1/exports%00/a", "exports", false},
}

// pathGateway is a gateway in front of quotad, for
// testForwardAuthPaths.
type pathGateway struct {
	name string
	// start starts the gateway with docs/gateways.md's block, forwarding
	// authorization requests to quotad and requests to app, and returns
	// the address it listens on.
	start func(t *testing.T, quotad, app string) string
}

// testForwardAuthPaths runs pathVariants through a real gateway in front
// of quotad configured with the forward-auth file of docs/gateways.md,
// under "unmatched: allow", the setting that let paths through unchecked.
func testForwardAuthPaths(t *testing.T, gw pathGateway) {
	s := mustStartForwardAuth(t, gatewayBlock(t, "yaml", map[string]string{"unmatched: deny": "unmatched: allow"}))
	for _, m := range []string{"api_calls", "llm_calls", "exports"} {
		s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/"+m, `{}`)
	}
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/gw", `{"name":"Gateway","limits":[
		{"metric":"api_calls","window":"day","limit":1000000},
		{"metric":"llm_calls","window":"day","limit":1000000},
		{"metric":"exports","window":"day","limit":1000000}]}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/globex", `{"plan":"gw"}`)
	usage := func() map[string]float64 {
		got := map[string]float64{}
		for _, u := range s.mustDo(http.StatusOK, "GET", "/v1/customers/globex/usage", "").JSON(t)["usage"].([]any) {
			u := u.(map[string]any)
			got[u["metric"].(string)] += u["used"].(float64)
		}
		return got
	}
	cost := map[string]float64{"llm_calls": 10, "exports": 1}

	app := &upstream{}
	appSrv := httptest.NewServer(app)
	t.Cleanup(appSrv.Close)
	tap, tapURL := MustStartTap(t, s.URL)
	addr := gw.start(t, tapURL, appSrv.URL)

	for _, v := range pathVariants {
		before, asked, reached := usage(), tap.count(), app.count()
		r := sendRaw(t, "http://"+addr, v.method+" "+v.target+" HTTP/1.1\r\nHost: "+addr+
			"\r\nX-Api-Key: sk-test-globex\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		after, seen := usage(), tap.since(asked)
		quotad := "not asked"
		if len(seen) > 0 {
			quotad = fmt.Sprintf("asked about %q: %d %s", seen[0].uri, seen[0].status, seen[0].code)
		}
		t.Logf("%s %s %s: quotad %s; client %d", gw.name, v.method, v.target, quotad, r.Status)

		if d := after["api_calls"] - before["api_calls"]; d != 0 {
			t.Errorf("%s %s: charged as api_calls (%v)", v.method, v.target, d)
		}
		charged := after[v.metric] - before[v.metric]
		switch {
		case r.Status == http.StatusOK && charged == cost[v.metric]:
			// Charged as the expensive route.
		case r.Status == http.StatusOK:
			t.Errorf("%s %s: 200, %s charged %v, want %v: passed unchecked or charged as another route (%s)",
				v.method, v.target, v.metric, charged, cost[v.metric], quotad)
		case v.charged:
			t.Errorf("%s %s: %d %s, want it charged as %s (%s)", v.method, v.target, r.Status, r.Body, v.metric, quotad)
		case len(seen) > 0 && (seen[0].status != http.StatusBadRequest || seen[0].code != "path_not_canonical" || r.Status != http.StatusBadRequest):
			t.Errorf("%s %s: client %d, quotad %s; want 400 path_not_canonical", v.method, v.target, r.Status, quotad)
		case len(seen) == 0 && (r.Status < 400 || r.Status > 499):
			t.Errorf("%s %s: %d from the gateway, want it refused with a 4xx", v.method, v.target, r.Status)
		case charged != 0:
			t.Errorf("%s %s: refused, yet %s charged %v", v.method, v.target, v.metric, charged)
		}
		if r.Status != http.StatusOK && app.count() != reached {
			t.Errorf("%s %s: refused (%d), yet it reached the upstream", v.method, v.target, r.Status)
		}
	}
}

// TestNginxForwardAuthPaths: through the nginx block of docs/gateways.md,
// no path variant dodges its route.
func TestNginxForwardAuthPaths(t *testing.T) {
	t.Parallel()
	testForwardAuthPaths(t, pathGateway{name: "nginx", start: func(t *testing.T, quotad, app string) string {
		block := gatewayBlock(t, "nginx", map[string]string{
			"http://app:3000":    app,
			"http://quotad:8080": quotad,
			"CHECK_TOKEN":        checkToken,
		})
		return strings.TrimPrefix(MustStartNginx(t, block), "http://")
	}})
}

// TestCaddyForwardAuthPaths: through the Caddyfile of docs/gateways.md,
// no path variant dodges its route.
func TestCaddyForwardAuthPaths(t *testing.T) {
	t.Parallel()
	testForwardAuthPaths(t, pathGateway{name: "caddy", start: func(t *testing.T, quotad, app string) string {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		MustStartCaddy(t, caddyBlock(t, addr, quotad, app), addr)
		return addr
	}})
}
