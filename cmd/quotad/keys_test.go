package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// createdKey is the answer to a key's creation.
type createdKey struct {
	ID         string  `json:"id"`
	Customer   string  `json:"customer"`
	Name       string  `json:"name"`
	Key        string  `json:"key"`
	Prefix     string  `json:"prefix"`
	CreatedAt  string  `json:"created_at"`
	ExpiresAt  *string `json:"expires_at"`
	LastUsedAt *string `json:"last_used_at"`
}

// MustCreateKey issues a key to customer with body and returns it.
func MustCreateKey(t testing.TB, s *testServer, customer, body string) createdKey {
	t.Helper()
	r := s.mustDo(http.StatusCreated, "POST", "/v1/customers/"+customer+"/keys", body)
	var k createdKey
	if err := json.Unmarshal(r.Body, &k); err != nil {
		t.Fatalf("created key: %v\n%s", err, r.Body)
	}
	if loc := r.Header.Get("Location"); loc != "/v1/keys/"+k.ID {
		t.Errorf("Location = %q, want /v1/keys/%s", loc, k.ID)
	}
	return k
}

// mustTime parses an RFC 3339 time.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// checkByKey posts a check of 1 api_calls by key, with the check token.
func (s *testServer) checkByKey(key string) response {
	s.t.Helper()
	return s.do("POST", "/v1/check", `{"api_key":"`+key+`","metric":"api_calls"}`, "Authorization", "Bearer "+checkToken)
}

const keyLimits = `[{"metric":"api_calls","window":"day","limit":1000}]`

// Issue a key once, then verify it: the key in the creation's answer only,
// checks and refunds by key answer for its customer, and the key is never
// in the log.
func TestKeysIssueAndVerify(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", keyLimits, "acme", "globex")

	k := MustCreateKey(t, s, "acme", `{"name":"ci","expires_at":"2999-01-01T00:00:00+01:00"}`)
	if !strings.HasPrefix(k.Key, "qk_") || len(k.Key) != 35 || k.Prefix != k.Key[:8] || k.Customer != "acme" ||
		k.Name != "ci" || k.ExpiresAt == nil || *k.ExpiresAt != "2998-12-31T23:00:00Z" || k.LastUsedAt != nil ||
		!strings.HasPrefix(k.ID, "key_") {
		t.Fatalf("created key = %+v", k)
	}
	other := MustCreateKey(t, s, "globex", `{}`)

	// The key is shown once: reading and listing show the rest.
	got := s.mustDo(http.StatusOK, "GET", "/v1/keys/"+k.ID, "")
	if strings.Contains(string(got.Body), k.Key) || got.JSON(t)["prefix"] != k.Prefix {
		t.Errorf("GET /v1/keys/%s = %s", k.ID, got.Body)
	}
	ids, _ := MustList(t, s, "/v1/customers/acme/keys", "keys", "id")
	if len(ids) != 1 || ids[0] != k.ID {
		t.Errorf("acme's keys = %v, want [%s]", ids, k.ID)
	}

	tests := []struct {
		name     string
		path     string
		body     string
		status   int
		customer string
		code     string
	}{
		{name: "check by key", path: "/v1/check", body: `{"api_key":"` + k.Key + `","metric":"api_calls","cost":3}`, status: 200, customer: "acme"},
		{name: "check by the other customer's key", path: "/v1/check", body: `{"api_key":"` + other.Key + `","metric":"api_calls"}`, status: 200, customer: "globex"},
		{name: "refund by key", path: "/v1/refund", body: `{"api_key":"` + k.Key + `","metric":"api_calls","cost":1}`, status: 200, customer: "acme"},
		{name: "reserve by key", path: "/v1/reservations", body: `{"api_key":"` + k.Key + `","metric":"api_calls","cost":2}`, status: 201, customer: "acme"},
		{name: "reserve by unknown key", path: "/v1/reservations", body: `{"api_key":"qk_` + strings.Repeat("1", 32) + `","metric":"api_calls","cost":2}`, status: 403, code: "invalid_api_key"},
		{name: "check by customer still", path: "/v1/check", body: `{"customer":"acme","metric":"api_calls"}`, status: 200, customer: "acme"},
		{name: "both", path: "/v1/check", body: `{"customer":"acme","api_key":"` + k.Key + `","metric":"api_calls"}`, status: 400, code: "validation_failed"},
		{name: "unknown key", path: "/v1/check", body: `{"api_key":"qk_` + strings.Repeat("0", 32) + `","metric":"api_calls"}`, status: 403, code: "invalid_api_key"},
		{name: "the key's prefix", path: "/v1/refund", body: `{"api_key":"` + k.Prefix + `","metric":"api_calls"}`, status: 403, code: "invalid_api_key"},
		{name: "the key's id", path: "/v1/check", body: `{"api_key":"` + k.ID + `","metric":"api_calls"}`, status: 403, code: "invalid_api_key"},
	}
	for _, tt := range tests {
		r := s.do("POST", tt.path, tt.body, "Authorization", "Bearer "+checkToken)
		if r.Status != tt.status {
			t.Errorf("%s: status %d, want %d\n%s", tt.name, r.Status, tt.status, r.Body)
			continue
		}
		if tt.code != "" {
			MustProblem(t, r, tt.status, tt.code)
			continue
		}
		if c := r.JSON(t)["customer"]; c != tt.customer {
			t.Errorf("%s: customer %v, want %s", tt.name, c, tt.customer)
		}
	}
	// The check by key counted for acme: 3 checked, 1 refunded, 2 held
	// by the reservation, 1 by id.
	usage := s.mustDo(http.StatusOK, "GET", "/v1/customers/acme/usage", "").JSON(t)
	if used := usage["usage"].([]any)[0].(map[string]any)["used"]; used != float64(5) {
		t.Errorf("acme's usage = %v, want 5", used)
	}

	// Nothing logged, at any level, holds a key.
	for _, secret := range []string{k.Key, other.Key, k.Key[8:]} {
		if strings.Contains(s.logs.String(), secret) {
			t.Errorf("the log holds a key")
		}
	}
}

// Revoked on one process, a key is refused there at once (the 204 comes
// after) and on the other once it hears of it; the 403 is the same as for
// an unknown key.
func TestKeysRevokeAcrossProcesses(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	b := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", keyLimits, "acme")
	k := MustCreateKey(t, a, "acme", `{"name":"old"}`)
	if r := a.checkByKey(k.Key); r.Status != http.StatusOK {
		t.Fatalf("check by key on the issuing process: %d\n%s", r.Status, r.Body)
	}
	eventually(t, func() bool { return b.checkByKey(k.Key).Status == http.StatusOK },
		"the other process to accept a key issued by the first")

	// Rotation: a new key, then the old one revoked.
	fresh := MustCreateKey(t, a, "acme", `{"name":"new"}`)
	a.mustDo(http.StatusNoContent, "DELETE", "/v1/keys/"+k.ID, "")
	revoked := a.checkByKey(k.Key)
	MustProblem(t, revoked, http.StatusForbidden, "invalid_api_key")
	eventually(t, func() bool { return b.checkByKey(k.Key).Status == http.StatusForbidden },
		"the other process to refuse the revoked key")
	eventually(t, func() bool { return b.checkByKey(fresh.Key).Status == http.StatusOK },
		"the other process to accept the new key")
	if r := a.checkByKey(fresh.Key); r.Status != http.StatusOK {
		t.Errorf("new key on the issuing process: %d\n%s", r.Status, r.Body)
	}

	// Revoked, the key still reads, with when it was revoked; it is
	// listed only when asked for, and cannot be revoked again.
	for _, s := range []*testServer{a, b} {
		got := s.mustDo(http.StatusOK, "GET", "/v1/keys/"+k.ID, "").JSON(t)
		at, _ := got["revoked_at"].(string)
		if when, err := time.Parse(time.RFC3339Nano, at); err != nil || got["id"] != k.ID || when.Before(mustTime(t, k.CreatedAt)) {
			t.Errorf("GET the revoked key = %v, want its revoked_at", got)
		}
		if live := s.mustDo(http.StatusOK, "GET", "/v1/keys/"+fresh.ID, "").JSON(t); live["revoked_at"] != nil {
			t.Errorf("GET a live key: revoked_at = %v, want null", live["revoked_at"])
		}
	}
	MustProblem(t, a.do("DELETE", "/v1/keys/"+k.ID, ""), http.StatusNotFound, "key_not_found")
	lists := []struct {
		query string
		want  []string
	}{
		{"", []string{fresh.ID}},
		{"?include_revoked=false", []string{fresh.ID}},
		{"?include_revoked=true", []string{k.ID, fresh.ID}},
	}
	for _, l := range lists {
		ids, _ := MustList(t, b, "/v1/customers/acme/keys"+l.query, "keys", "id")
		slices.Sort(l.want)
		if !slices.Equal(ids, l.want) {
			t.Errorf("keys%s after rotation = %v, want %v", l.query, ids, l.want)
		}
	}
	MustProblem(t, b.do("GET", "/v1/customers/acme/keys?include_revoked=yes", ""), http.StatusBadRequest, "validation_failed")

	// Unknown and revoked keys get the same answer, byte for byte.
	unknown := b.checkByKey("qk_" + strings.Repeat("Z", 32))
	again := b.checkByKey(k.Key)
	if unknown.Status != again.Status || string(unknown.Body) != string(again.Body) {
		t.Errorf("unknown key: %d %s; revoked key: %d %s", unknown.Status, unknown.Body, again.Status, again.Body)
	}

	// A process started after the revocation loads the live keys only.
	c := MustStartServer(t, schema, nil)
	if r := c.checkByKey(k.Key); r.Status != http.StatusForbidden {
		t.Errorf("revoked key on a new process: %d", r.Status)
	}
	if r := c.checkByKey(fresh.Key); r.Status != http.StatusOK {
		t.Errorf("live key on a new process: %d\n%s", r.Status, r.Body)
	}

	// Deleting the customer takes its keys, in every process.
	a.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme", "")
	MustProblem(t, a.checkByKey(fresh.Key), http.StatusForbidden, "invalid_api_key")
	eventually(t, func() bool { return b.checkByKey(fresh.Key).Status == http.StatusForbidden },
		"the other process to refuse the key of a deleted customer")
}

// An expired key is refused with the answer of an unknown one. Expiry is
// judged by the server's clock: a check sent after expires_at is never
// admitted, and one answered before it never refused. (The verifier's own
// test moves a manual clock across the instant.)
func TestKeysExpire(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", keyLimits, "acme")
	expires := time.Now().Add(2 * time.Second).Truncate(time.Second)
	k := MustCreateKey(t, s, "acme", `{"expires_at":"`+expires.UTC().Format(time.RFC3339)+`"}`)
	var last response
	eventually(t, func() bool {
		sent := time.Now()
		last = s.checkByKey(k.Key)
		answered := time.Now()
		switch {
		case last.Status == http.StatusOK && sent.After(expires):
			t.Fatalf("a check sent %v after the key expired was admitted", sent.Sub(expires))
		case last.Status == http.StatusForbidden && answered.Before(expires):
			t.Fatalf("a check answered %v before the key expired was refused", expires.Sub(answered))
		case last.Status != http.StatusOK && last.Status != http.StatusForbidden:
			t.Fatalf("check by key: %d\n%s", last.Status, last.Body)
		}
		return last.Status == http.StatusForbidden
	}, "the key to expire")
	unknown := s.checkByKey("qk_" + strings.Repeat("Z", 32))
	if string(unknown.Body) != string(last.Body) {
		t.Errorf("expired key: %s; unknown key: %s", last.Body, unknown.Body)
	}
	MustProblem(t, last, http.StatusForbidden, "invalid_api_key")
}

// Creations and revocations are audited with the key's fields, never the
// key.
func TestKeysAudit(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", keyLimits, "acme")
	k := MustCreateKey(t, s, "acme", `{"name":"ci"}`)
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/keys/"+k.ID, "")

	// Both are the customer's events (the filter finds them).
	r, page := mustAudit(t, s, "/v1/audit?customer=acme&limit=2")
	if strings.Contains(string(r.Body), k.Key) || strings.Contains(string(r.Body), k.Key[8:]) {
		t.Fatalf("the audit log holds the key:\n%s", r.Body)
	}
	if len(page.Events) != 2 {
		t.Fatalf("events = %s", r.Body)
	}
	revoke, create := page.Events[0], page.Events[1]
	if revoke.Action != "delete" || revoke.Resource != "keys/"+k.ID || revoke.Actor != "ops" ||
		string(revoke.After) != "null" || !strings.Contains(string(revoke.Before), `"prefix":"`+k.Prefix+`"`) {
		t.Errorf("revocation event = %+v", revoke)
	}
	if create.Action != "create" || create.Resource != "keys/"+k.ID || string(create.Before) != "null" ||
		!strings.Contains(string(create.After), `"name":"ci"`) {
		t.Errorf("creation event = %+v", create)
	}
}

// Forward-auth's API-key header takes the keys quotad issued when the
// file's api_keys do not name the key (the file's are tried first).
func TestKeysForwardAuth(t *testing.T) {
	t.Parallel()
	s := mustStartForwardAuth(t, "headers:\n  api_key: X-Api-Key\n  metric: X-Quotad-Metric\napi_keys:\n  static-key-1: globex\n")
	MustSeed(t, s, "", keyLimits, "acme", "globex")
	k := MustCreateKey(t, s, "acme", `{}`)
	tests := []struct {
		name, key string
		status    int
		customer  string
	}{
		{"issued key", k.Key, 200, "acme"},
		{"the file's key", "static-key-1", 200, "globex"},
		{"unknown key", "qk_nope", 403, ""},
	}
	for _, tt := range tests {
		r := s.do("GET", "/v1/forward-auth", "", "Authorization", "Bearer "+checkToken, "X-Api-Key", tt.key, "X-Quotad-Metric", "api_calls")
		if r.Status != tt.status || r.Header.Get("X-Quotad-Customer") != tt.customer {
			t.Errorf("%s: %d, customer %q; want %d, %q\n%s", tt.name, r.Status, r.Header.Get("X-Quotad-Customer"), tt.status, tt.customer, r.Body)
		}
	}
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/keys/"+k.ID, "")
	r := s.do("GET", "/v1/forward-auth", "", "Authorization", "Bearer "+checkToken, "X-Api-Key", k.Key, "X-Quotad-Metric", "api_calls")
	if r.Status != http.StatusForbidden {
		t.Errorf("revoked key through forward-auth: %d\n%s", r.Status, r.Body)
	}
	if strings.Contains(s.logs.String(), k.Key) {
		t.Errorf("the log holds a key")
	}
}

// A key's last use is recorded in memory and written in the background:
// at the latest when the process stops, to the minute.
func TestKeysLastUsedWrittenOnStop(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartServer(t, schema, nil)
	MustSeed(t, a, "", keyLimits, "acme")
	k := MustCreateKey(t, a, "acme", `{}`)
	before := time.Now().UTC().Truncate(time.Minute)
	if r := a.checkByKey(k.Key); r.Status != http.StatusOK {
		t.Fatalf("check by key: %d\n%s", r.Status, r.Body)
	}
	after := time.Now().UTC().Truncate(time.Minute)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	b := MustStartServer(t, schema, nil)
	var got struct {
		LastUsedAt *time.Time `json:"last_used_at"`
	}
	if err := json.Unmarshal(b.mustDo(http.StatusOK, "GET", "/v1/keys/"+k.ID, "").Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.LastUsedAt == nil || got.LastUsedAt.Before(before) || got.LastUsedAt.After(after) || got.LastUsedAt.Second() != 0 {
		t.Errorf("last_used_at = %v, want the minute of the check, %v to %v", got.LastUsedAt, before, after)
	}
}

// With a route table and unmatched: allow, an unknown key is still
// refused (before the route table is consulted), and an issued key's
// request that matches no route passes without a check.
func TestKeysForwardAuthUnmatched(t *testing.T) {
	t.Parallel()
	s := mustStartForwardAuth(t, "headers:\n  api_key: X-Api-Key\nroutes:\n  - {match: /v1/, metric: api_calls}\nunmatched: allow\n")
	MustSeed(t, s, "", keyLimits, "acme")
	k := MustCreateKey(t, s, "acme", `{}`)
	tests := []struct {
		name, key, uri string
		status         int
		customer       string
	}{
		{"issued key, a route", k.Key, "/v1/items", 200, "acme"},
		{"issued key, no route", k.Key, "/elsewhere", 200, ""},
		{"unknown key, a route", "qk_nope", "/v1/items", 403, ""},
		{"unknown key, no route", "qk_nope", "/elsewhere", 403, ""},
	}
	for _, tt := range tests {
		r := s.do("GET", "/v1/forward-auth", "", "Authorization", "Bearer "+checkToken, "X-Api-Key", tt.key,
			"X-Forwarded-Method", "GET", "X-Forwarded-Uri", tt.uri)
		if r.Status != tt.status || r.Header.Get("X-Quotad-Customer") != tt.customer {
			t.Errorf("%s: %d, customer %q; want %d, %q\n%s", tt.name, r.Status, r.Header.Get("X-Quotad-Customer"), tt.status, tt.customer, r.Body)
		}
	}
}

// An api_key longer than openapi.yaml's maxLength (256) is a 400 about
// the field on every route that takes one; one of 256 characters that no
// key has is the 403 of an unknown key.
func TestKeysTooLong(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", keyLimits, "acme")
	long, max := "qk_"+strings.Repeat("x", 254), "qk_"+strings.Repeat("x", 253)
	routes := []struct {
		name, path, body string
	}{
		{"check", "/v1/check", `{"api_key":%q,"metric":"api_calls"}`},
		{"check of items", "/v1/check", `{"api_key":%q,"items":[{"metric":"api_calls"}]}`},
		{"refund", "/v1/refund", `{"api_key":%q,"metric":"api_calls"}`},
		{"reservation", "/v1/reservations", `{"api_key":%q,"metric":"api_calls","cost":1}`},
		{"feature check", "/v1/features/check", `{"api_key":%q,"feature":"sso"}`},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			p := MustProblem(t, s.do("POST", r.path, fmt.Sprintf(r.body, long), "Authorization", "Bearer "+checkToken),
				http.StatusBadRequest, "validation_failed")
			if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "api_key" {
				t.Errorf("errors = %v, want one about api_key", p["errors"])
			}
			MustProblem(t, s.do("POST", r.path, fmt.Sprintf(r.body, max), "Authorization", "Bearer "+checkToken),
				http.StatusForbidden, "invalid_api_key")
		})
	}
	// An empty one, which only a reservation tells from none, is a 400 too.
	MustProblem(t, s.do("POST", "/v1/reservations", `{"api_key":"","metric":"api_calls","cost":1}`, "Authorization", "Bearer "+checkToken),
		http.StatusBadRequest, "validation_failed")
}
