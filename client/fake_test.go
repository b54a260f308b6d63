package quotad_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// fakeQuotad stands in for quotad in examples and tests: customer acme
// (whose API key is qk_acme) may use limit api_calls per minute, nothing
// else is known, and the customers c01..c05 are on plan pro.
type fakeQuotad struct {
	mu    sync.Mutex
	limit int64
	used  int64
	// calls counts the requests by "METHOD path".
	calls map[string]int
	// reservations by id (reservations_fake_test.go).
	reservations map[string]*fakeReservation
}

func newFakeQuotad(limit int64) (*fakeQuotad, *httptest.Server) {
	f := &fakeQuotad{limit: limit, calls: map[string]int{}, reservations: map[string]*fakeReservation{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/check", f.check)
	mux.HandleFunc("GET /v1/customers", f.customers)
	mux.HandleFunc("PUT /v1/metrics/{metric}", f.putMetric)
	f.handleReservations(mux)
	return f, httptest.NewServer(f.count(mux))
}

func (f *fakeQuotad) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls[r.Method+" "+r.URL.Path]++
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *fakeQuotad) check(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Customer, Metric string
		APIKey           string `json:"api_key"`
		Cost             int64
	}
	json.NewDecoder(r.Body).Decode(&req)
	if req.Cost == 0 {
		req.Cost = 1
	}
	if req.APIKey != "" {
		if req.APIKey != "qk_acme" {
			writeFakeProblem(w, http.StatusForbidden, "invalid_api_key")
			return
		}
		req.Customer = "acme"
	}
	if req.Customer != "acme" {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"urn:quotad:problem:customer_not_found","title":"Not Found","status":404,` +
			`"detail":"no such customer","code":"customer_not_found"}`))
		return
	}
	f.mu.Lock()
	allowed := f.used+req.Cost <= f.limit
	if allowed {
		f.used += req.Cost
	}
	used := f.used
	f.mu.Unlock()
	status, state, retry := http.StatusOK, "ok", 0
	if !allowed {
		status, state, retry = http.StatusTooManyRequests, "exceeded", 42
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	remaining := max(0, f.limit-used)
	if !allowed {
		remaining = 0
	}
	w.Header().Set("RateLimit-Policy", `"api_calls/minute";q=`+strconv.FormatInt(f.limit, 10)+`;w=60`)
	w.Header().Set("RateLimit", `"api_calls/minute";r=`+strconv.FormatInt(remaining, 10)+`;t=42`)
	writeJSON(w, status, map[string]any{
		"allowed": allowed, "customer": req.Customer, "metric": req.Metric, "cost": req.Cost,
		"overage": false, "elastic": false, "retry_after": retry, "degraded": false,
		"limits": []any{map[string]any{"window": "minute", "limit": f.limit, "used": used, "remaining": max(0, f.limit-used),
			"reset_at": "2026-11-22T10:01:00Z", "mode": "hard", "state": state}},
		"a_field_from_the_future": true,
	})
}

func (f *fakeQuotad) customers(w http.ResponseWriter, r *http.Request) {
	ids := []string{"c01", "c02", "c03", "c04", "c05"}
	if p := r.URL.Query().Get("plan"); p != "" && p != "pro" {
		ids = nil
	}
	size := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		size, _ = strconv.Atoi(l)
	}
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	end := min(start+size, len(ids))
	page := []any{}
	for i, id := range ids[start:end] {
		page = append(page, map[string]any{"id": id, "plan": "pro", "name": "", "billing_anchor_day": nil,
			"metadata": map[string]any{}, "version": start + i + 1, "created_at": "2026-11-22T10:00:00Z", "updated_at": "2026-11-22T10:00:00Z"})
	}
	out := map[string]any{"customers": page}
	if end < len(ids) {
		out["next_cursor"] = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeQuotad) putMetric(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := f.calls["PUT "+r.URL.Path]
	f.mu.Unlock()
	if m := r.Header.Get("If-Match"); m != "" && m != `"`+strconv.Itoa(n-1)+`"` {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusPreconditionFailed)
		w.Write([]byte(`{"type":"urn:quotad:problem:precondition_failed","title":"Precondition Failed","status":412,"code":"precondition_failed"}`))
		return
	}
	status := http.StatusOK
	if n == 1 {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", `"`+strconv.Itoa(n)+`"`)
	writeJSON(w, status, map[string]any{"key": r.PathValue("metric"), "description": "", "capacity": map[string]any{},
		"version": n, "created_at": "2026-11-22T10:00:00Z", "updated_at": "2026-11-22T10:00:00Z"})
}
