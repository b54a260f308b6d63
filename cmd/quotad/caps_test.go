package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Creations beyond the caps are a 409 problem with code cap_reached,
// whatever creates them (a customer's PUT, a key's POST, a webhook's
// PUT); a replacement at the cap passes, and a revoked key frees a place.
func TestKeysWebhooksCustomersCaps(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{
		"QUOTAD_MAX_CUSTOMERS": "2", "QUOTAD_MAX_KEYS_PER_CUSTOMER": "1", "QUOTAD_MAX_WEBHOOKS": "1",
	})
	MustSeed(t, s, "", keyLimits, "acme", "globex")
	capReached := func(method, path, body string) {
		t.Helper()
		r := s.mustDo(http.StatusConflict, method, path, body)
		var p struct {
			Type, Code, Detail string
			Status             int
		}
		if err := json.Unmarshal(r.Body, &p); err != nil || p.Code != "cap_reached" || p.Type != "urn:quotad:problem:cap_reached" ||
			p.Status != 409 || p.Detail == "" || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %s (%v), want a cap_reached problem", method, path, r.Body, err)
		}
	}
	tests := []struct {
		name         string
		method, path string
		body         string
		want         int // 0: cap_reached
	}{
		{"a third customer", "PUT", "/v1/customers/initech", `{"plan":"limited"}`, 0},
		{"replacing one at the cap", "PUT", "/v1/customers/acme", `{"plan":"limited","name":"Acme"}`, http.StatusOK},
		{"acme's first key", "POST", "/v1/customers/acme/keys", `{}`, http.StatusCreated},
		{"acme's second key", "POST", "/v1/customers/acme/keys", `{}`, 0},
		{"globex's first key", "POST", "/v1/customers/globex/keys", `{}`, http.StatusCreated},
		{"a webhook", "PUT", "/v1/webhooks/billing", `{"url":"https://hooks.example.com/q"}`, http.StatusCreated},
		{"replacing it", "PUT", "/v1/webhooks/billing", `{"url":"https://hooks.example.com/r"}`, http.StatusOK},
		{"a second webhook", "PUT", "/v1/webhooks/ops", `{"url":"https://hooks.example.com/q"}`, 0},
	}
	var acmeKey string
	for _, tt := range tests {
		if tt.want == 0 {
			capReached(tt.method, tt.path, tt.body)
			continue
		}
		r := s.mustDo(tt.want, tt.method, tt.path, tt.body)
		if tt.name == "acme's first key" {
			acmeKey = r.JSON(t)["id"].(string)
		}
	}
	// Revoked, acme's key frees its place.
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/keys/"+acmeKey, "")
	s.mustDo(http.StatusCreated, "POST", "/v1/customers/acme/keys", `{}`)
	capReached("POST", "/v1/customers/acme/keys", `{}`)
}
