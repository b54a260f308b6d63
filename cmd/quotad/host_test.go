package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// Without tokens, quotad answers only requests whose Host names loopback:
// a web page whose host name is rebound to 127.0.0.1 (DNS rebinding) is
// refused on the API, the console and forward-auth alike. With tokens, any
// Host is answered: the token decides.
func TestHostWithoutTokens(t *testing.T) {
	t.Parallel()
	open := MustStartServer(t, nil, map[string]string{"QUOTAD_ADMIN_TOKENS": "", "QUOTAD_CHECK_TOKENS": ""})
	guarded := MustStartServer(t, nil, nil)
	v := MustSpecValidator(t)
	refused := v.doc.Components.Responses["MisdirectedRequest"]
	if refused == nil {
		t.Fatal("openapi.yaml has no components.responses.MisdirectedRequest")
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(open.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fwd := []string{"X-Quotad-Customer", "acme", "X-Quotad-Metric", "api_calls"}
	calls := []apiCall{
		{"PUT", "/v1/metrics/pwned", `{}`, nil},
		{"GET", "/v1/metrics", "", nil},
		{"POST", "/v1/check", `{"customer": "acme", "metric": "api_calls"}`, nil},
		{"GET", "/v1/forward-auth", "", fwd},
		{"GET", "/console/", "", nil},
	}
	for _, c := range calls {
		for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:" + port, "localhost.attacker.example:" + port} {
			c := c
			c.Headers = append([]string{"Authorization", "", "Host", host}, c.Headers...)
			r := open.do(c.Method, c.Path, c.Body, c.Headers...)
			if r.Status != http.StatusMisdirectedRequest || problemCode(r) != "misdirected_request" {
				t.Errorf("%s, Host %s, no tokens: answered %d %s, want 421 misdirected_request", c, host, r.Status, r.Body)
				continue
			}
			req, err := c.request(open.URL)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.validateComponent(req, c, r, refused); err != nil {
				t.Errorf("%s, Host %s: answer does not match MisdirectedRequest: %v", c, host, err)
			}
		}
		if c.Method == "PUT" {
			if r := open.do("GET", c.Path, "", "Authorization", ""); r.Status != http.StatusNotFound {
				t.Errorf("GET %s: status %d, want 404: a refused PUT made it\n%s", c.Path, r.Status, r.Body)
			}
		}
		for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost"} {
			h := append([]string{"Authorization", "", "Host", host}, c.Headers...)
			if r := open.do(c.Method, c.Path, c.Body, h...); r.Status == http.StatusMisdirectedRequest || r.Status >= 500 {
				t.Errorf("%s, Host %s, no tokens: answered %d %s, want it served", c, host, r.Status, r.Body)
			}
		}
		h := append([]string{"Host", "quotad.example.com"}, c.Headers...)
		if r := guarded.do(c.Method, c.Path, c.Body, h...); r.Status == http.StatusMisdirectedRequest || r.Status >= 500 {
			t.Errorf("%s, Host quotad.example.com, with tokens: answered %d %s, want it served", c, r.Status, r.Body)
		}
	}
}
