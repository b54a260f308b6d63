package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"

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
				req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(tc.body)))
				req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
				rec := httptest.NewRecorder()
				fs.srv.ServeHTTP(rec, req)
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
