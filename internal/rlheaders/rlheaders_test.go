package rlheaders_test

import (
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

func TestFor(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 300_000_000, time.UTC)
	minute := quota.WindowResult{Window: tiers.Minute, Limit: 5, Used: 3, Remaining: 2, ResetAt: now.Add(59700 * time.Millisecond),
		State: quota.StateOK, Length: time.Minute}
	day := quota.WindowResult{Window: tiers.Day, Limit: 100, Used: 3, Remaining: 97, ResetAt: now.Add(14 * time.Hour),
		State: quota.StateOK, Length: 24 * time.Hour}
	exceeded := minute
	exceeded.State = quota.StateExceeded
	// A total never resets: no reset_at, no length.
	seats := quota.WindowResult{Window: tiers.Total, Limit: 10, Used: 9, Remaining: 1, State: quota.StateOK}
	full := seats
	full.Used, full.Remaining, full.State = 10, 0, quota.StateExceeded
	tight := minute
	tight.Used, tight.Remaining = 4, 1
	named := func(w quota.WindowResult, metric, subject string) quota.WindowResult {
		w.Metric, w.Subject = metric, subject
		return w
	}
	for _, tc := range []struct {
		name string
		d    quota.Decision
		want rlheaders.Values
	}{
		{"no limit", quota.Decision{Allowed: true, Metric: "m"}, rlheaders.Values{}},
		{"allowed", quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{minute, day}},
			rlheaders.Values{Policy: `"m/minute";q=5;w=60, "m/day";q=100;w=86400`, RateLimit: `"m/minute";r=2;t=60`}},
		{"denied", quota.Decision{Metric: "m", RetryAfter: 7, Limits: []quota.WindowResult{exceeded, day}},
			rlheaders.Values{Policy: `"m/minute";q=5;w=60, "m/day";q=100;w=86400`, RateLimit: `"m/minute";r=2;t=7`, RetryAfter: "7"}},
		{"never", quota.Decision{Metric: "m", Never: true, Limits: []quota.WindowResult{exceeded}},
			rlheaders.Values{Policy: `"m/minute";q=5;w=60`}},
		{"quoted metric", quota.Decision{Allowed: true, Metric: `a"b`, Limits: []quota.WindowResult{day}},
			rlheaders.Values{Policy: `"a\"b/day";q=100;w=86400`, RateLimit: `"a\"b/day";r=97;t=50400`}},
		{"windows naming their metric, a pool's and a subject's", quota.Decision{Allowed: true, Metric: "m",
			Limits: []quota.WindowResult{named(minute, "m", ""), named(minute, "m", "user/7"), named(day, "credits", "")}},
			rlheaders.Values{Policy: `"m/minute";q=5;w=60, "m/minute/user/7";q=5;w=60, "credits/day";q=100;w=86400`,
				RateLimit: `"m/minute";r=2;t=60`}},
		{"items: the most constraining window of all", quota.Decision{Allowed: true,
			Limits: []quota.WindowResult{named(day, "a", ""), named(tight, "b", "alice")}},
			rlheaders.Values{Policy: `"a/day";q=100;w=86400, "b/minute/alice";q=5;w=60`, RateLimit: `"b/minute/alice";r=1;t=60`}},
		{"items, denied by one", quota.Decision{RetryAfter: 4, Limits: []quota.WindowResult{named(minute, "a", ""), named(exceeded, "b", "")}},
			rlheaders.Values{Policy: `"a/minute";q=5;w=60, "b/minute";q=5;w=60`, RateLimit: `"b/minute";r=2;t=4`, RetryAfter: "4"}},
		{"quoted subject", quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{named(day, "", `x"y`)}},
			rlheaders.Values{Policy: `"m/day/x\"y";q=100;w=86400`, RateLimit: `"m/day/x\"y";r=97;t=50400`}},
		{"a total: no t and no w", quota.Decision{Allowed: true, Metric: "seats", Limits: []quota.WindowResult{seats}},
			rlheaders.Values{Policy: `"seats/total";q=10`, RateLimit: `"seats/total";r=1`}},
		{"a total beside a day", quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{day, seats}},
			rlheaders.Values{Policy: `"m/day";q=100;w=86400, "m/total";q=10`, RateLimit: `"m/total";r=1`}},
		{"a full total: never, no retry", quota.Decision{Metric: "seats", Never: true, Limits: []quota.WindowResult{full}},
			rlheaders.Values{Policy: `"seats/total";q=10`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rlheaders.For(&tc.d, now); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	d := quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{minute, day}}
	if n := testing.AllocsPerRun(100, func() { rlheaders.For(&d, now) }); n != 1 {
		t.Errorf("For allocates %v times, want 1", n)
	}
}

func TestName(t *testing.T) {
	d := &quota.Decision{Metric: "api_calls"}
	for _, tc := range []struct {
		w    quota.WindowResult
		want string
	}{
		{quota.WindowResult{Window: tiers.Minute}, "api_calls/minute"},
		{quota.WindowResult{Metric: "api_calls", Window: tiers.Day, Subject: "alice"}, "api_calls/day/alice"},
		{quota.WindowResult{Metric: "credits", Window: tiers.Month}, "credits/month"},
	} {
		if got := rlheaders.Name(d, &tc.w); got != tc.want {
			t.Errorf("Name(%+v) = %q, want %q", tc.w, got, tc.want)
		}
	}
}
