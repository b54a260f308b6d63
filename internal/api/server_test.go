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
