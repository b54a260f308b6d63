package main

import (
	"context"
	"strings"
	"testing"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/quotadtest"
)

// asks makes n checks of one api_calls unit for customer and fails unless
// exactly allowed of them are admitted.
func asks(t *testing.T, srv *quotadtest.Server, customer string, n, allowed int) {
	t.Helper()
	c := quotad.New(srv.URL, quotad.WithToken(srv.CheckToken))
	got := 0
	for range n {
		res, err := c.Check(context.Background(), quotad.CheckRequest{Customer: customer, Metric: "api_calls"})
		mustOK(t, err)
		if res.Allowed {
			got++
		}
	}
	if got != allowed {
		t.Fatalf("%s: %d of %d checks admitted, want %d", customer, got, n, allowed)
	}
}

// waitHistory waits until the customer's history records want units
// asked (used plus denied) today: quotad writes it every second.
func waitHistory(t *testing.T, srv *quotadtest.Server, customer string, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		days, err := admin(srv).Customers.UsageHistory(context.Background(), customer, quotad.HistoryFilter{Metric: "api_calls"})
		mustOK(t, err)
		var asked int64
		for _, d := range days {
			asked += d.Used + d.Denied
		}
		if asked == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's history holds %d units asked, want %d: %+v", customer, asked, want, days)
		}
		<-tick.C
	}
}

const impactBefore = `metrics:
  api_calls: {}
plans:
  free:
    price: {amount_cents: 0}
    limits:
      - {metric: api_calls, window: day, limit: 15}
customers:
  a: {plan: free}
  b: {plan: free}
`

// The file tightens free: 10 a day, and 8 a month, soft up to 12 at
// 2500 micros an overage unit; 5 a minute cannot be replayed.
const impactAfter = `metrics:
  api_calls: {}
plans:
  free:
    price: {amount_cents: 0}
    limits:
      - {metric: api_calls, window: minute, limit: 5}
      - {metric: api_calls, window: day, limit: 10}
      - {metric: api_calls, window: month, limit: 8, mode: soft, overage_percent: 50, overage_price_micros: 2500}
customers:
  a: {plan: free}
  b: {plan: free}
`

// TestCatalogDiffImpact: catalog diff --impact replays a changed plan's
// customers' recorded usage against the file's limits, with every figure
// worked out by hand below.
func TestCatalogDiffImpact(t *testing.T) {
	srv := quotadtest.MustStart(t, nil)
	mustApply(t, srv, 0, "-f", mustWrite(t, impactBefore))
	// What happened today: a asked 12, all admitted; b asked 17, 2 denied
	// by the day's 15.
	asks(t, srv, "a", 12, 12)
	asks(t, srv, "b", 17, 15)
	waitHistory(t, srv, "a", 12)
	waitHistory(t, srv, "b", 17)

	// Replayed: a's 12 asked, 10 admitted by the day (the month's room is
	// 8 + 50% = 12), 2 denied, the day over; 2 units beyond the month's 8
	// earn 5000 micros. b's 17: 10 admitted, 7 denied, the day over, the
	// same 2 overage units. Yesterday and tomorrow hold nothing.
	now := time.Now().UTC()
	from, to := now.AddDate(0, 0, -1).Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly)
	file := mustWrite(t, impactAfter)
	code, out, errOut := mustRun(t, srv, "catalog", "diff", "-f", file, "--impact", "--from", from, "--to", to)
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s\n%s", code, out, errOut)
	}
	want := `~ plan free
    limits[api_calls/minute].limit: (none) → 5
    limits[api_calls/minute].mode: (none) → "hard"
    limits[api_calls/day].limit: 15 → 10
    limits[api_calls/month].limit: (none) → 8
    limits[api_calls/month].mode: (none) → "soft"
    limits[api_calls/month].overage_percent: (none) → 50
    limits[api_calls/month].overage_price_micros: (none) → 2500

0 to create, 1 to update, 0 to delete.

Impact on plan free, its customers' usage from ` + from + ` to ` + to + ` replayed against the file's limits (2 customers):
    CUSTOMER  PERIODS OVER  DENIED  OVERAGE  OVERAGE REVENUE  DENIED THEN  OVERAGE THEN
    a         1             2       2        USD 0.005        0            0
    b         1             7       2        USD 0.005        2            0
    total     2             9       4        USD 0.01         2            0
    not replayed: api_calls/minute: history is kept by day: a window shorter than a day cannot be replayed
    DENIED THEN and OVERAGE THEN are what the current limits did over the same days.
`
	if out != want {
		t.Errorf("diff --impact printed\n%s\nwant\n%s", out, want)
	}

	// diff writes nothing: the plan keeps its day's 15.
	p, err := admin(srv).Plans.Get(context.Background(), "free")
	mustOK(t, err)
	if len(p.Limits) != 1 || p.Limits[0].Limit != 15 {
		t.Errorf("after diff, free's limits are %+v; want the day's 15 alone", p.Limits)
	}

	tests := []struct {
		name string
		args []string
		code int
		out  string // a line the output must hold
	}{
		{"no change", []string{"-f", mustWrite(t, impactBefore), "--impact"}, 0, "No plan's limits or price change: nothing to replay."},
		{"without --impact", []string{"-f", file}, 0, "0 to create, 1 to update, 0 to delete."},
		{"a bad date", []string{"-f", file, "--impact", "--from", "2026-13-01"}, 1, `--from "2026-13-01": want a date, YYYY-MM-DD`},
		{"from after to", []string{"-f", file, "--impact", "--from", "2026-03-02", "--to", "2026-03-01"}, 1, "--from must not be after --to"},
		{"dates without --impact", []string{"-f", file, "--from", "2026-03-01"}, 1, "--from and --to go with --impact"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := mustRun(t, srv, append([]string{"catalog", "diff"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out+errOut, tt.out) {
				t.Errorf("exit %d, want %d; output lacks %q:\n%s\n%s", code, tt.code, tt.out, out, errOut)
			}
			if strings.Contains(out, "Impact on plan") {
				t.Errorf("none of these replays, yet:\n%s", out)
			}
		})
	}
}
