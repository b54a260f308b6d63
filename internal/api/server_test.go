package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A panic in a handler is a logged 500 problem that names nothing
// internal, and the server goes on serving.
func TestPanicIsALogged500(t *testing.T) {
	fs := newFuzzServer() // its checker panics on a usage read
	for range 2 {
		fs.errors = nil
		rec := httptest.NewRecorder()
		fs.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/customers/acme/usage", nil))
		var p Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != http.StatusInternalServerError || p.Code != codeInternal {
			t.Fatalf("answered %d %s, want a 500 internal problem", rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "fuzzChecker") {
			t.Errorf("the answer names the panic: %s", rec.Body)
		}
		if len(fs.errors) == 0 || !strings.HasPrefix(fs.errors[0], "panic in handler") {
			t.Errorf("logged %q, want the panic", fs.errors)
		}
	}
}

// The cached series are the registered ones: /metrics counts every request.
func TestMetricsCountRequests(t *testing.T) {
	fs := newFuzzServer()
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fs.srv.ServeHTTP(rec, req)
		return rec
	}
	for range 3 {
		serve(http.MethodPost, "/v1/check", `{"customer":"acme","metric":"api_calls"}`)
	}
	serve(http.MethodPost, "/v1/check", `{"customer":"acme"}`)
	serve(http.MethodGet, "/v1/nothing", "")
	body := serve(http.MethodGet, "/metrics", "").Body.String()
	for _, want := range []string{
		`quotad_http_requests_total{method="POST",route="/v1/check",status="200"} 3`,
		`quotad_http_requests_total{method="POST",route="/v1/check",status="400"} 1`,
		`quotad_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`quotad_http_request_duration_seconds_count{route="/v1/check"} 4`,
		`quotad_http_request_duration_seconds_count{route="unmatched"} 1`,
		`quotad_checks_total{decision="allowed"} 3`,
		`quotad_checks_total{decision="error"} 1`,
		`quotad_check_duration_seconds_count 4`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `decision="denied"`) {
		t.Errorf("/metrics has a series for a decision never made")
	}
}
