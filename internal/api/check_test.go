package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// A check or refund without customer or metric says "is required", as the
// admin bodies do; a present but malformed value keeps the pattern it must
// match, and the other bad fields are still named.
func TestCheckAndRefundRequiredFields(t *testing.T) {
	const (
		required  = "is required"
		keyRule   = "must match ^[a-z0-9][a-z0-9_.-]{0,62}$"
		idRule    = "must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
		costRange = "must be an integer between 1 and 1000000000"
	)
	fs := newFuzzServer()
	for _, path := range []string{"/v1/check", "/v1/refund"} {
		for _, tc := range []struct {
			body string
			want []tiers.FieldError
		}{
			{`{"metric":"api_calls"}`, []tiers.FieldError{{Field: "customer", Message: required}}},
			{`{"customer":"acme"}`, []tiers.FieldError{{Field: "metric", Message: required}}},
			{`{}`, []tiers.FieldError{{Field: "customer", Message: required}, {Field: "metric", Message: required}}},
			{`{"customer":"","metric":""}`, []tiers.FieldError{{Field: "customer", Message: required}, {Field: "metric", Message: required}}},
			{`{"cost":0}`, []tiers.FieldError{{Field: "customer", Message: required}, {Field: "metric", Message: required}, {Field: "cost", Message: costRange}}},
			{`{"customer":"-acme"}`, []tiers.FieldError{{Field: "customer", Message: idRule}, {Field: "metric", Message: required}}},
			{`{"metric":"API"}`, []tiers.FieldError{{Field: "customer", Message: required}, {Field: "metric", Message: keyRule}}},
			{`{"customer":"-acme","metric":"API"}`, []tiers.FieldError{{Field: "customer", Message: idRule}, {Field: "metric", Message: keyRule}}},
		} {
			t.Run(path+" "+tc.body, func(t *testing.T) {
				rec := serveJSON(fs.srv, http.MethodPost, path, tc.body)
				var p Problem
				if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != http.StatusBadRequest {
					t.Fatalf("answered %d %s, want a 400 problem", rec.Code, rec.Body)
				}
				if p.Code != codeValidation || !reflect.DeepEqual(p.Errors, tc.want) {
					t.Errorf("problem %s %+v, want %s %+v", p.Code, p.Errors, codeValidation, tc.want)
				}
			})
		}
	}
}

// unencodableChecker allows every check with an answer encoding/json
// refuses: a reset time of year 10000.
type unencodableChecker struct{ fuzzChecker }

func (unencodableChecker) Check(context.Context, quota.Request) (quota.Decision, error) {
	d := benchDecision
	d.Limits = slices.Clone(d.Limits)
	d.Limits[1].ResetAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	return d, nil
}

// A check answer that cannot be encoded is a logged 500 problem, with none
// of the answer's headers, never a 200 without a body.
func TestUnencodableCheckAnswerIsA500(t *testing.T) {
	fs := &fuzzServer{}
	srv := New(Config{Checker: unencodableChecker{fuzzChecker{fs}}, Logger: slog.New(fuzzLog{fs})})
	rec := serveJSON(srv, http.MethodPost, "/v1/check", `{"customer":"acme","metric":"api_calls"}`)
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != http.StatusInternalServerError || p.Code != codeInternal {
		t.Fatalf("answered %d %q, want a 500 internal problem", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get(echo.HeaderContentType); ct != contentTypeProblemJSON {
		t.Errorf("Content-Type %q, want %q", ct, contentTypeProblemJSON)
	}
	for _, name := range []string{headerRateLimit, headerRateLimitPolicy, headerRetryAfter} {
		if v, ok := rec.Header()[name]; ok {
			t.Errorf("the problem carries the answer's %s: %q", name, v)
		}
	}
	if len(fs.errors) != 1 || !strings.Contains(fs.errors[0], errAnswerNotEncoded.Error()) {
		t.Errorf("logged %q, want the encoding failure", fs.errors)
	}
}
