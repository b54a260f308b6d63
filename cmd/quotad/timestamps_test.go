package main

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// timestampFields returns every field of a JSON object, at any depth,
// whose name ends in "_at", by its path: the raw text of each, as sent.
func timestampFields(t testing.TB, body []byte) map[string]string {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := path + "." + k
				if s, ok := e.(string); ok && strings.HasSuffix(k, "_at") {
					out[p] = s
					continue
				}
				walk(p, e)
			}
		}
	}
	walk("", v)
	return out
}

// A timestamp reads the same in the answer to a write as in every later
// read: one precision (microseconds, what PostgreSQL keeps) everywhere.
// Each resource is created, then read back, and every *_at field of the
// creation's answer must be the read's, byte for byte.
func TestTimestampsOnePrecision(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, map[string]string{"QUOTAD_WEBHOOK_ALLOW_PRIVATE": "true"})
	s.mustDo(http.StatusCreated, "PUT", "/v1/metrics/api_calls", `{}`)

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		// read is the path to GET after the write; list, if set, names
		// the list of the answer that holds the resource, the item whose
		// field by (else "id") is the creation's.
		read func(created map[string]any) string
		list string
		by   string
	}{
		{"metric", "PUT", "/v1/metrics/seats", `{}`, 201,
			func(map[string]any) string { return "/v1/metrics/seats" }, "", ""},
		{"plan", "PUT", "/v1/plans/pro", `{"name":"Pro","limits":[{"metric":"api_calls","window":"day","limit":1000}]}`, 201,
			func(map[string]any) string { return "/v1/plans/pro" }, "", ""},
		{"plan updated", "PUT", "/v1/plans/pro", `{"name":"Pro 2","limits":[{"metric":"api_calls","window":"day","limit":1000}]}`, 200,
			func(map[string]any) string { return "/v1/plans/pro" }, "", ""},
		{"customer", "PUT", "/v1/customers/acme", `{"plan":"pro"}`, 201,
			func(map[string]any) string { return "/v1/customers/acme" }, "", ""},
		{"customer updated", "PUT", "/v1/customers/acme", `{"plan":"pro","name":"Acme"}`, 200,
			func(map[string]any) string { return "/v1/customers/acme" }, "", ""},
		{"override", "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit":5000,"expires_at":"2999-01-01T00:00:00.123456789Z"}`, 201,
			func(map[string]any) string { return "/v1/customers/acme/overrides/api_calls/day" }, "", ""},
		{"feature override", "PUT", "/v1/customers/acme/features/sso", `{"value":true,"expires_at":"2999-01-01T00:00:00.123456789Z"}`, 201,
			func(map[string]any) string { return "/v1/customers/acme/features" }, "overrides", "feature"},
		{"key", "POST", "/v1/customers/acme/keys", `{"name":"ci","expires_at":"2999-01-01T00:00:00.123456789Z"}`, 201,
			func(c map[string]any) string { return "/v1/keys/" + c["id"].(string) }, "", ""},
		{"key listed", "POST", "/v1/customers/acme/keys", `{"expires_at":"2999-01-01T00:00:00.987654321+02:00"}`, 201,
			func(map[string]any) string { return "/v1/customers/acme/keys" }, "keys", ""},
		{"grant", "POST", "/v1/customers/acme/grants", `{"metric":"api_calls","amount":10,"expires_at":"2999-01-01T00:00:00.123456789Z"}`, 201,
			func(map[string]any) string { return "/v1/customers/acme/grants" }, "grants", ""},
		{"webhook", "PUT", "/v1/webhooks/billing", `{"url":"http://127.0.0.1:1/hooks","events":["usage.threshold"],"thresholds":[80]}`, 201,
			func(map[string]any) string { return "/v1/webhooks/billing" }, "", ""},
		{"reservation", "POST", "/v1/reservations", `{"customer":"acme","metric":"api_calls","cost":2}`, 201,
			func(c map[string]any) string { return "/v1/reservations/" + c["id"].(string) }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := s.mustDo(tt.status, tt.method, tt.path, tt.body)
			created := w.JSON(t)
			read := s.mustDo(http.StatusOK, "GET", tt.read(created), "").Body
			if tt.list != "" {
				by := tt.by
				if by == "" {
					by = "id"
				}
				read = MustListItem(t, read, tt.list, by, created[by].(string))
			}
			wrote, got := timestampFields(t, w.Body), timestampFields(t, read)
			if len(wrote) == 0 {
				t.Fatalf("no timestamp in %s", w.Body)
			}
			names := make([]string, 0, len(wrote))
			for k := range wrote {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				if g, ok := got[k]; !ok || g != wrote[k] {
					t.Errorf("%s: %q in the answer to the write, %q read back", k, wrote[k], g)
				}
			}
		})
	}
}

// MustListItem returns the item of body's list whose field by is id.
func MustListItem(t testing.TB, body []byte, list, by, id string) []byte {
	t.Helper()
	var page map[string]json.RawMessage
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(body, &page); err != nil || json.Unmarshal(page[list], &items) != nil {
		t.Fatalf("no list %q in %s", list, body)
	}
	for _, item := range items {
		var v string
		if json.Unmarshal(item[by], &v) == nil && v == id {
			raw, err := json.Marshal(item)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
	}
	t.Fatalf("no item %s in %s", id, body)
	return nil
}
