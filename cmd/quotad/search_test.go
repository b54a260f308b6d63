package main

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// GET /v1/customers?q= finds customers by id or name, with plan and
// pagination, as the console's search does.
func TestListCustomersSearch(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{}`)
	s.mustDo(201, "PUT", "/v1/plans/free", `{"name": "Free"}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{"name": "Pro"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan": "free", "name": "Acme Inc."}`)
	s.mustDo(201, "PUT", "/v1/customers/acme-eu", `{"plan": "pro", "name": "Acme Europe"}`)
	s.mustDo(201, "PUT", "/v1/customers/globex", `{"plan": "pro", "name": "Globex Inc."}`)

	tests := []struct {
		name  string
		query string
		want  []string
		code  int
	}{
		{"by id", "q=acme", []string{"acme", "acme-eu"}, 200},
		{"by name, any case", "q=INC.", []string{"acme", "globex"}, 200},
		{"with a plan", "q=acme&plan=pro", []string{"acme-eu"}, 200},
		{"paged", "q=a&limit=1", []string{"acme"}, 200},
		{"empty is every customer", "q=", []string{"acme", "acme-eu", "globex"}, 200},
		{"too long", "q=" + strings.Repeat("x", 201), nil, 400},
		{"not UTF-8", "q=%ff", nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.mustDo(tt.code, "GET", "/v1/customers?"+tt.query, "")
			if tt.code != 200 {
				var p struct{ Code string }
				if err := json.Unmarshal(r.Body, &p); err != nil || p.Code != "validation_failed" {
					t.Errorf("problem %s, want code validation_failed", r.Body)
				}
				return
			}
			var list struct {
				Customers []struct{ ID string }
			}
			if err := json.Unmarshal(r.Body, &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range list.Customers {
				got = append(got, c.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	// The next page of a search keeps to the search.
	r := s.mustDo(200, "GET", "/v1/customers?q=acme&limit=1", "")
	var first struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.Body, &first); err != nil || first.NextCursor == "" {
		t.Fatalf("first page %s: want a next_cursor", r.Body)
	}
	r = s.mustDo(200, "GET", "/v1/customers?q=acme&limit=1&cursor="+url.QueryEscape(first.NextCursor), "")
	if !strings.Contains(string(r.Body), `"acme-eu"`) || strings.Contains(string(r.Body), "globex") {
		t.Errorf("second page %s: want acme-eu alone", r.Body)
	}
}
