package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// A customer_not_found problem names the id it looked for, whether the id
// came in the path or in the body.
func TestCustomerNotFoundNamesTheID(t *testing.T) {
	fs := newFuzzServer()
	fs.srv = New(Config{
		Catalog: tiers.NewService(fuzzStore{fs}, fuzzStore{fs}, func() time.Time { return fuzzNow }, nil),
		Checker: failingChecker{fuzzChecker{fs}},
		Logger:  slog.New(fuzzLog{fs}),
	})
	tests := []struct {
		name, method, path, body, want string
	}{
		{"check", http.MethodPost, "/v1/check", `{"customer":"c-404","metric":"m"}`, `no customer has the id "c-404"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			fs.srv.ServeHTTP(rec, req)
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("status %d, body %s: %v", rec.Code, rec.Body, err)
			}
			if rec.Code != http.StatusNotFound || p.Code != codeCustomerNotFound || p.Detail != tt.want {
				t.Errorf("got %d %s %q, want 404 %s %q", rec.Code, p.Code, p.Detail, codeCustomerNotFound, tt.want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != contentTypeProblemJSON {
				t.Errorf("Content-Type %q, want %q", ct, contentTypeProblemJSON)
			}
		})
	}
	// The routes under /v1/customers/:customer, whichever of them.
	t.Run("path", func(t *testing.T) {
		rec := httptest.NewRecorder()
		c := echo.New().NewContext(newRequest(http.MethodGet, "/v1/customers/ghost/limits", nil), rec)
		c.SetParamNames("customer")
		c.SetParamValues("ghost")
		fs.srv.errorHandler(fmt.Errorf("find customer: %w", tiers.ErrCustomerNotFound), c)
		var p Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("status %d, body %s: %v", rec.Code, rec.Body, err)
		}
		want := `no customer has the id "ghost"`
		if rec.Code != http.StatusNotFound || p.Code != codeCustomerNotFound || p.Detail != want {
			t.Errorf("got %d %s %q, want 404 %s %q", rec.Code, p.Code, p.Detail, codeCustomerNotFound, want)
		}
	})
}

// An invalid API key is one 403 whatever made it invalid, and its detail
// does not say which.
func TestInvalidAPIKeyProblem(t *testing.T) {
	p, known := toProblem(fmt.Errorf("resolve key qk_AbCdEf: %w", tiers.ErrInvalidAPIKey))
	if !known || p.Status != http.StatusForbidden || p.Code != codeInvalidAPIKey {
		t.Fatalf("got %v %d %s, want known 403 %s", known, p.Status, p.Code, codeInvalidAPIKey)
	}
	if strings.Contains(p.Detail, "qk_") {
		t.Errorf("detail %q names the key", p.Detail)
	}
}
