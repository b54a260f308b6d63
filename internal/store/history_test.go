package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// The customers active since a day come most recent first, then most used;
// older history and deleted customers' history are left out.
func TestFindActiveCustomers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	MustSeed(t, db, nil, "busy", "quiet", "denied", "yesterday", "lastweek", "gone")
	yesterday, lastWeek := day0.AddDate(0, 0, -1), day0.AddDate(0, 0, -7)
	err := db.History.AddHistory(ctx, []quota.HistoryDelta{
		{Customer: "busy", Metric: "api_calls", Date: day0, Used: 50},
		{Customer: "busy", Metric: "exports", Date: day0, Used: 5},
		{Customer: "quiet", Metric: "api_calls", Date: day0, Used: 3},
		{Customer: "quiet", Metric: "api_calls", Date: yesterday, Used: 1000},
		// Denied units count as use: their checks loaded the customer too.
		{Customer: "denied", Metric: "api_calls", Date: day0, Denied: 20},
		{Customer: "yesterday", Metric: "api_calls", Date: yesterday, Used: 9000},
		{Customer: "lastweek", Metric: "api_calls", Date: lastWeek, Used: 1e6},
		{Customer: "gone", Metric: "api_calls", Date: day0, Used: 1e6},
		// History outlives customers: never created, or deleted.
		{Customer: "deleted", Metric: "api_calls", Date: day0, Used: 1e6},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog.DeleteCustomer(ctx, write("ops"), "gone"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		since time.Time
		limit int
		want  []string
	}{
		// quiet used more over both days than denied, but its latest day
		// comes first: the order is by latest day, then by all use since.
		{"today and yesterday", yesterday, 10, []string{"quiet", "busy", "denied", "yesterday"}},
		{"today", day0, 10, []string{"busy", "denied", "quiet"}},
		{"the most active", yesterday, 2, []string{"quiet", "busy"}},
		{"a week", lastWeek, 10, []string{"quiet", "busy", "denied", "yesterday", "lastweek"}},
		{"none asked", yesterday, 0, nil},
		{"nothing since", day0.AddDate(0, 0, 1), 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.History.FindActiveCustomers(ctx, tt.since, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("FindActiveCustomers(%s, %d) = %q, want %q", tt.since.Format(time.DateOnly), tt.limit, got, tt.want)
			}
		})
	}
}
