package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// MustHistory writes a day of usage history for each customer, days
// counted back from today (UTC): 0 is today.
func MustHistory(t testing.TB, schema *dbtest.Schema, days map[string]int, used map[string]int64) {
	t.Helper()
	now := time.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	for customer, back := range days {
		if _, err := schema.Pool.Exec(context.Background(),
			`INSERT INTO usage_history (customer_id, metric, day, used) VALUES ($1, 'api_calls', $2, $3)`,
			customer, today.AddDate(0, 0, -back), used[customer]); err != nil {
			t.Fatal(err)
		}
	}
}

// A quotad that starts loads the customers active today and yesterday
// before it serves, the most recent and most used first, up to
// --warm-customers and within --warm-timeout: their first checks load no
// customer from PostgreSQL, while every other customer's first check
// loads one.
func TestStartWarm(t *testing.T) {
	t.Parallel()
	const customerLoads = `quotad_catalog_loads_total{kind="customer"}`
	tests := []struct {
		name string
		env  map[string]string
		log  string   // a line the start-up logs
		warm []string // first checks answered without loading the customer
		cold []string // first checks that load it
	}{
		{name: "the default", log: `"msg":"cache warmed","customers":3,"active":3`,
			warm: []string{"busy", "quiet", "yesterday"}, cold: []string{"lastweek", "never"}},
		{name: "the two most active", env: map[string]string{"QUOTAD_WARM_CUSTOMERS": "2"},
			log:  `"msg":"cache warmed","customers":2,"active":2`,
			warm: []string{"busy", "quiet"}, cold: []string{"yesterday", "lastweek", "never"}},
		{name: "off", env: map[string]string{"QUOTAD_WARM_CUSTOMERS": "0"},
			cold: []string{"busy", "quiet", "yesterday", "lastweek", "never"}},
		{name: "no time to warm", env: map[string]string{"QUOTAD_WARM_TIMEOUT": "1ns"},
			log:  `"msg":"cache warming stopped early; serving anyway","customers":0`,
			cold: []string{"busy", "quiet", "yesterday", "lastweek", "never"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A schema of its own: checks write history.
			schema := dbtest.New(t)
			seed := MustStartServer(t, schema, map[string]string{"QUOTAD_WARM_CUSTOMERS": "0"})
			MustSeed(t, seed, "", `[{"metric":"api_calls","window":"day","limit":1000}]`,
				"busy", "quiet", "yesterday", "lastweek", "never")
			if err := seed.stop(); err != nil {
				t.Fatal(err)
			}
			MustHistory(t, schema,
				map[string]int{"busy": 0, "quiet": 0, "yesterday": 1, "lastweek": 7, "deleted": 0},
				map[string]int64{"busy": 50, "quiet": 5, "yesterday": 500, "lastweek": 1000, "deleted": 1000})

			s := MustStartServer(t, schema, tt.env).forT(t)
			if tt.log != "" && !strings.Contains(s.logs.String(), tt.log) {
				t.Errorf("the start-up log lacks %s", tt.log)
			}
			if tt.log == "" && strings.Contains(s.logs.String(), "cache warm") {
				t.Errorf("the start-up log speaks of warming the cache, which is off")
			}
			if got := s.metricValue(customerLoads); got != float64(len(tt.warm)) {
				t.Errorf("%s = %v after start-up, want %d", customerLoads, got, len(tt.warm))
			}
			if got := s.metricValue("quotad_catalog_customers"); got != float64(len(tt.warm)) {
				t.Errorf("the cache holds %v customers after start-up, want %d", got, len(tt.warm))
			}
			loads := s.metricValue(customerLoads)
			for _, c := range append(append([]string(nil), tt.warm...), tt.cold...) {
				r, a := s.check(fmt.Sprintf(`{"customer":%q,"metric":"api_calls"}`, c))
				if r.Status != http.StatusOK || !a.Allowed {
					t.Fatalf("check of %s: %d %s", c, r.Status, r.Body)
				}
				want := loads
				if !slices.Contains(tt.warm, c) {
					want++
				}
				if loads = s.metricValue(customerLoads); loads != want {
					t.Errorf("after the first check of %s, %s = %v, want %v", c, customerLoads, loads, want)
				}
			}
		})
	}
}
