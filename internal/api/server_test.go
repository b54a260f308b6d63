package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// A panic in a handler is a logged 500 problem that names nothing
// internal, and the server goes on serving.
func TestPanicIsALogged500(t *testing.T) {
	fs := newFuzzServer() // its checker panics on a usage read
	for range 2 {
		fs.errors = nil
		rec := httptest.NewRecorder()
		fs.srv.ServeHTTP(rec, newRequest(http.MethodGet, "/v1/customers/acme/usage", nil))
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
		req := newRequest(method, path, strings.NewReader(body))
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
		`quotad_checks_total{decision="rejected"} 1`,
		`quotad_check_duration_seconds_count 4`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `decision="denied"`) || strings.Contains(body, `decision="error"`) {
		t.Errorf("/metrics has a series for a decision never made")
	}
}

// failingChecker fails every check of customer "c-<status>" with an error
// answered with that status.
type failingChecker struct{ fuzzChecker }

func (c failingChecker) Check(ctx context.Context, r quota.Request) (quota.Decision, error) {
	switch r.Customer {
	case "c-404":
		return quota.Decision{}, tiers.ErrCustomerNotFound
	case "c-409":
		return quota.Decision{}, tiers.ErrConflict
	case "c-503":
		return quota.Decision{}, tiers.ErrUnavailable
	case "c-500":
		return quota.Decision{}, errors.New("disk on fire")
	}
	return c.fuzzChecker.Check(ctx, r)
}

// quotad_checks_total tells checks refused for their input (4xx) from
// checks quotad failed to decide (5xx).
func TestChecksTotalRejectedAndError(t *testing.T) {
	fs := newFuzzServer()
	srv := New(Config{Checker: failingChecker{fuzzChecker{fs}}, Logger: slog.New(fuzzLog{fs})})
	bodies := []struct {
		body   string
		status int
	}{
		{`{"customer":"acme","metric":"m"}`, http.StatusOK},
		{`{"customer":"acme"}`, http.StatusBadRequest},
		{`{"customer":"acme","metric":"m","cost":"x"}`, http.StatusBadRequest},
		{`{"customer":"c-404","metric":"m"}`, http.StatusNotFound},
		{`{"customer":"c-409","metric":"m"}`, http.StatusConflict},
		{`{"customer":"c-503","metric":"m"}`, http.StatusServiceUnavailable},
		{`{"customer":"c-500","metric":"m"}`, http.StatusInternalServerError},
	}
	for _, b := range bodies {
		req := newRequest(http.MethodPost, "/v1/check", strings.NewReader(b.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != b.status {
			t.Errorf("%s: status %d, want %d", b.body, rec.Code, b.status)
		}
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, newRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`quotad_checks_total{decision="allowed"} 1`,
		`quotad_checks_total{decision="rejected"} 4`,
		`quotad_checks_total{decision="error"} 2`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The request log says its duration's unit: milliseconds, as a number.
func TestRequestLogDurationInMilliseconds(t *testing.T) {
	fs := newFuzzServer()
	var logs strings.Builder
	srv := New(Config{Checker: fuzzChecker{fs},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	req := newRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"customer":"acme","metric":"m"}`))
	req.Header.Set("Content-Type", "application/json")
	srv.ServeHTTP(httptest.NewRecorder(), req)
	var found bool
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] != "request" {
			continue
		}
		found = true
		ms, ok := rec["duration_ms"].(float64)
		if !ok || ms < 0 || ms > 60_000 {
			t.Errorf("duration_ms = %v, want milliseconds as a number", rec["duration_ms"])
		}
		if _, ok := rec["duration"]; ok {
			t.Errorf("the request log has a duration without a unit: %s", line)
		}
	}
	if !found {
		t.Fatalf("no request log line in:\n%s", logs.String())
	}
}
