package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// With QUOTAD_REFUND_REQUIRES_REQUEST_ID, a refund without a request_id
// by the check token or by API key is a 403; an admin token may still make
// one, and a refund naming a check gives back at most its charge. Without
// it, the check token refunds without a request_id as before.
func TestRefundRequiresRequestID(t *testing.T) {
	t.Parallel()
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	tests := []struct {
		name     string
		required bool
		token    []string // nil: the admin token
		body     string   // {key} stands for an API key of the case's customer
		want     int
		refunded int64
	}{
		{"off: the check token, no request_id", false, asCheck, `"metric":"api_calls","cost":4}`, 200, 4},
		{"off: by key, no request_id", false, asCheck, `"api_key":"{key}","metric":"api_calls","cost":4}`, 200, 4},
		{"on: the check token, no request_id", true, asCheck, `"metric":"api_calls","cost":4}`, 403, 0},
		{"on: by key, no request_id", true, asCheck, `"api_key":"{key}","metric":"api_calls","cost":4}`, 403, 0},
		{"on: by key with the admin token, no request_id", true, nil, `"api_key":"{key}","metric":"api_calls","cost":4}`, 403, 0},
		{"on: the admin token, no request_id", true, nil, `"metric":"api_calls","cost":4}`, 200, 4},
		{"on: the check token naming the check", true, asCheck, `"metric":"api_calls","cost":50,"request_id":"c1"}`, 200, 10},
	}
	customers := make([]string, len(tests))
	for i := range tests {
		customers[i] = fmt.Sprintf("cust%d", i)
	}
	servers := map[bool]*testServer{}
	for _, required := range []bool{false, true} {
		servers[required] = MustStartServer(t, nil, map[string]string{"QUOTAD_REFUND_REQUIRES_REQUEST_ID": fmt.Sprint(required)})
		MustSeed(t, servers[required], "", `[{"metric":"api_calls","window":"day","limit":100}]`, customers...)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, customer := servers[tt.required].forT(t), customers[i]
			if r, a := s.check(`{"customer":"` + customer + `","metric":"api_calls","cost":10,"request_id":"c1"}`); !a.Allowed {
				t.Fatalf("check: %d %s", r.Status, r.Body)
			}
			body := `{"customer":"` + customer + `",` + tt.body
			if strings.Contains(tt.body, "{key}") {
				body = "{" + strings.ReplaceAll(tt.body, "{key}", MustCreateKey(t, s, customer, `{"name":"k"}`).Key)
			}
			r := s.do("POST", "/v1/refund", body, tt.token...)
			if tt.want != http.StatusOK {
				MustProblem(t, r, tt.want, "forbidden")
				return
			}
			var a struct {
				Refunded int64 `json:"refunded"`
			}
			if err := json.Unmarshal(r.Body, &a); r.Status != http.StatusOK || err != nil || a.Refunded != tt.refunded {
				t.Errorf("refund: %d %s, want 200 refunded %d", r.Status, r.Body, tt.refunded)
			}
		})
	}
}

// Refunds and resets are in the audit log: who asked (the token's name,
// or the API key's id for a refund by key), the customer, the metric, the
// request_id, the cost asked and the units refunded.
func TestRefundsAndResetsAudited(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":100}]`, "acme")
	asCheck := []string{"Authorization", "Bearer " + checkToken}
	if r, a := s.check(`{"customer":"acme","metric":"api_calls","cost":10,"request_id":"c1"}`); !a.Allowed {
		t.Fatalf("check: %d %s", r.Status, r.Body)
	}
	key := MustCreateKey(t, s, "acme", `{"name":"k"}`)
	s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":40,"request_id":"c1"}`, asCheck...)
	s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"customer":"acme","metric":"api_calls","cost":40,"request_id":"c1"}`, asCheck...) // a replay
	s.check(`{"customer":"acme","metric":"api_calls","cost":5}`)
	s.mustDo(http.StatusOK, "POST", "/v1/refund", `{"api_key":"`+key.Key+`","metric":"api_calls","cost":2}`, asCheck...)
	s.mustDo(http.StatusNoContent, "DELETE", "/v1/customers/acme/usage/api_calls", "")

	_, page := mustAudit(t, s, "/v1/audit?customer=acme&limit=3")
	var got []string
	for _, e := range page.Events {
		after := string(e.After)
		if e.Action == "reset" {
			after = "" // the counters zeroed are in before
		}
		got = append(got, e.Actor+" "+e.Action+" "+e.Resource+" "+after)
	}
	const resource = "customers/acme/usage/api_calls"
	want := []string{
		"ops reset " + resource + " ",
		key.ID + " refund " + resource + ` {"cost":2,"metric":"api_calls","subject":"` + key.ID + `","refunded":2}`,
		"backend refund " + resource + ` {"cost":40,"metric":"api_calls","refunded":10,"request_id":"c1"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit events, newest first:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
