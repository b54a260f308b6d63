package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// With RefundRequiresRequestID, a refund without a request_id is a 403
// unless an admin token makes it without an API key; without the option,
// every token may refund without one. The audit log's actor is the
// token's name, or the API key's id for a refund by key.
func TestRefundRequiresRequestID(t *testing.T) {
	const (
		bare    = `{"customer":"acme","metric":"api_calls","cost":5}`
		named   = `{"customer":"acme","metric":"api_calls","cost":5,"request_id":"c1"}`
		byKey   = `{"api_key":"qk_fuzz","metric":"api_calls","cost":5}`
		keyName = `{"api_key":"qk_fuzz","metric":"api_calls","cost":5,"request_id":"c1"}`
	)
	tests := []struct {
		name      string
		required  bool
		token     string
		body      string
		want      int
		wantActor string
	}{
		{"off: a check token without request_id", false, "chk", bare, http.StatusOK, "gw"},
		{"off: by key without request_id", false, "chk", byKey, http.StatusOK, fuzzKeyID},
		{"on: a check token without request_id", true, "chk", bare, http.StatusForbidden, ""},
		{"on: by key without request_id", true, "chk", byKey, http.StatusForbidden, ""},
		{"on: by key with an admin token, without request_id", true, "adm", byKey, http.StatusForbidden, ""},
		{"on: an admin token without request_id", true, "adm", bare, http.StatusOK, "ops"},
		{"on: a check token with a request_id", true, "chk", named, http.StatusOK, "gw"},
		{"on: by key with a request_id", true, "chk", keyName, http.StatusOK, fuzzKeyID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var passed *quota.RefundRequest
			srv := New(Config{
				Checker: checkerFunc{refund: func(r quota.RefundRequest) (quota.RefundResult, error) {
					passed = &r
					return quota.RefundResult{Refunded: r.Cost}, nil
				}},
				Tokens:                  []Token{{Name: "gw", Secret: "chk", Role: RoleCheck}, {Name: "ops", Secret: "adm", Role: RoleAdmin}},
				KeyResolver:             fuzzKeys{},
				RefundRequiresRequestID: tt.required,
			})
			req := httptest.NewRequest(http.MethodPost, "/v1/refund", strings.NewReader(tt.body))
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
			req.Header.Set(echo.HeaderAuthorization, "Bearer "+tt.token)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if tt.want != http.StatusOK {
				p := mustProblem(t, rec, tt.want)
				if p.Code != codeForbidden || !strings.Contains(p.Detail, "request_id") {
					t.Errorf("problem %s %q, want %s naming request_id", p.Code, p.Detail, codeForbidden)
				}
				if passed != nil {
					t.Errorf("refund passed on: %+v", *passed)
				}
				return
			}
			if rec.Code != http.StatusOK {
				t.Fatalf("answered %d %s, want 200", rec.Code, rec.Body)
			}
			if passed == nil || passed.Actor != tt.wantActor {
				t.Errorf("passed on %+v, want actor %q", passed, tt.wantActor)
			}
		})
	}
}

// A refund naming no check is a 404 check_not_found; one of a check
// refunded before, or of a metric the check did not charge, a 409.
func TestRefundOfNoCheck(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
		code string
	}{
		{tiers.ErrCheckNotFound, http.StatusNotFound, codeCheckNotFound},
		{tiers.ErrConflict, http.StatusConflict, codeConflict},
	} {
		srv := New(Config{Checker: checkerFunc{refund: func(quota.RefundRequest) (quota.RefundResult, error) {
			return quota.RefundResult{}, tt.err
		}}})
		p := mustProblem(t, serveJSON(srv, http.MethodPost, "/v1/refund",
			`{"customer":"acme","metric":"api_calls","cost":5,"request_id":"nope"}`), tt.want)
		if p.Code != tt.code || p.Detail == "" {
			t.Errorf("%v: problem %s %q, want %s with a detail", tt.err, p.Code, p.Detail, tt.code)
		}
	}
}
