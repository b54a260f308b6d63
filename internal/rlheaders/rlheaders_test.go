package rlheaders_test

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// testWindows returns the windows the tests describe, as seen at now: a
// minute with 2 of 5 left, a day with 97 of 100 left, that minute
// exceeded, and 10 seats with 1 left, a total, which never resets (no
// reset_at, no length).
func testWindows(now time.Time) (minute, day, exceeded, seats quota.WindowResult) {
	minute = quota.WindowResult{Window: tiers.Minute, Limit: 5, Used: 3, Remaining: 2, ResetAt: now.Add(59700 * time.Millisecond),
		State: quota.StateOK, Length: time.Minute}
	day = quota.WindowResult{Window: tiers.Day, Limit: 100, Used: 3, Remaining: 97, ResetAt: now.Add(14 * time.Hour),
		State: quota.StateOK, Length: 24 * time.Hour}
	exceeded = minute
	exceeded.State = quota.StateExceeded
	seats = quota.WindowResult{Window: tiers.Total, Limit: 10, Used: 9, Remaining: 1, State: quota.StateOK}
	return minute, day, exceeded, seats
}

func TestFor(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 300_000_000, time.UTC)
	minute, day, exceeded, seats := testWindows(now)
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
		want []rlheaders.Header
	}{
		{"no limit", quota.Decision{Allowed: true, Metric: "m"}, draft10("", "", "")},
		{"allowed", quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{minute, day}},
			draft10(`"m/minute";q=5;w=60, "m/day";q=100;w=86400`, `"m/minute";r=2;t=60`, "")},
		{"denied", quota.Decision{Metric: "m", RetryAfter: 7, Limits: []quota.WindowResult{exceeded, day}},
			draft10(`"m/minute";q=5;w=60, "m/day";q=100;w=86400`, `"m/minute";r=2;t=7`, "7")},
		{"never", quota.Decision{Metric: "m", Never: true, Limits: []quota.WindowResult{exceeded}},
			draft10(`"m/minute";q=5;w=60`, "", "")},
		{"quoted metric", quota.Decision{Allowed: true, Metric: `a"b`, Limits: []quota.WindowResult{day}},
			draft10(`"a\"b/day";q=100;w=86400`, `"a\"b/day";r=97;t=50400`, "")},
		{"windows naming their metric, a pool's and a subject's", quota.Decision{Allowed: true, Metric: "m",
			Limits: []quota.WindowResult{named(minute, "m", ""), named(minute, "m", "user/7"), named(day, "credits", "")}},
			draft10(`"m/minute";q=5;w=60, "m/minute/user/7";q=5;w=60, "credits/day";q=100;w=86400`, `"m/minute";r=2;t=60`, "")},
		{"items: the most constraining window of all", quota.Decision{Allowed: true,
			Limits: []quota.WindowResult{named(day, "a", ""), named(tight, "b", "alice")}},
			draft10(`"a/day";q=100;w=86400, "b/minute/alice";q=5;w=60`, `"b/minute/alice";r=1;t=60`, "")},
		{"items, denied by one", quota.Decision{RetryAfter: 4, Limits: []quota.WindowResult{named(minute, "a", ""), named(exceeded, "b", "")}},
			draft10(`"a/minute";q=5;w=60, "b/minute";q=5;w=60`, `"b/minute";r=2;t=4`, "4")},
		{"quoted subject", quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{named(day, "", `x"y`)}},
			draft10(`"m/day/x\"y";q=100;w=86400`, `"m/day/x\"y";r=97;t=50400`, "")},
		{"a total: no t and no w", quota.Decision{Allowed: true, Metric: "seats", Limits: []quota.WindowResult{seats}},
			draft10(`"seats/total";q=10`, `"seats/total";r=1`, "")},
		{"a total beside a day", quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{day, seats}},
			draft10(`"m/day";q=100;w=86400, "m/total";q=10`, `"m/total";r=1`, "")},
		{"a full total: never, no retry", quota.Decision{Metric: "seats", Never: true, Limits: []quota.WindowResult{full}},
			draft10(`"seats/total";q=10`, "", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := rlheaders.Draft10.For(&tc.d, now)
			if got := v.Headers(); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	d := quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{minute, day}}
	for _, f := range []rlheaders.Forms{rlheaders.Draft10, rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X} {
		if n := testing.AllocsPerRun(100, func() { f.For(&d, now) }); n != 1 {
			t.Errorf("%s: For allocates %v times, want 1", f, n)
		}
	}
}

// draft10 lists the headers of Draft10: RateLimit-Policy, RateLimit and
// Retry-After, each left out when "".
func draft10(policy, rateLimit, retryAfter string) []rlheaders.Header {
	return headers(rlheaders.RateLimitPolicy, policy, rlheaders.RateLimit, rateLimit, rlheaders.RetryAfter, retryAfter)
}

// headers lists name, value pairs as headers, leaving out those whose
// value is "".
func headers(pairs ...string) []rlheaders.Header {
	var out []rlheaders.Header
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			out = append(out, rlheaders.Header{Name: pairs[i], Value: pairs[i+1]})
		}
	}
	return out
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

// Every form describes the window RateLimit names, with its figures: the
// limit, what remains and the reset (seconds from now; for X, the Unix
// time of the reset, rounded up).
func TestForms(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 300_000_000, time.UTC)
	unix := func(h, m, s int) string {
		return strconv.FormatInt(time.Date(2026, 11, 22, h, m, s, 0, time.UTC).Unix(), 10)
	}
	minute, day, exceeded, seats := testWindows(now)
	past := minute
	past.ResetAt = now.Add(-time.Second)
	const older = rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X
	for _, tc := range []struct {
		name  string
		forms rlheaders.Forms
		d     quota.Decision
		want  []rlheaders.Header
	}{
		{"allowed: the minute, which has fewer left", older,
			quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{minute, day}},
			headers(rlheaders.RateLimitPolicy, "5;w=60, 100;w=86400", rlheaders.RateLimit, "limit=5, remaining=2, reset=60",
				rlheaders.RateLimitLimit, "5", rlheaders.RateLimitRemaining, "2", rlheaders.RateLimitReset, "60",
				rlheaders.XRateLimitLimit, "5", rlheaders.XRateLimitRemaining, "2", rlheaders.XRateLimitReset, unix(10, 1, 0))},
		{"denied: the reset is Retry-After", older,
			quota.Decision{Metric: "m", RetryAfter: 7, Limits: []quota.WindowResult{exceeded, day}},
			headers(rlheaders.RateLimitPolicy, "5;w=60, 100;w=86400", rlheaders.RateLimit, "limit=5, remaining=2, reset=7",
				rlheaders.RateLimitLimit, "5", rlheaders.RateLimitRemaining, "2", rlheaders.RateLimitReset, "7",
				rlheaders.XRateLimitLimit, "5", rlheaders.XRateLimitRemaining, "2", rlheaders.XRateLimitReset, unix(10, 0, 8),
				rlheaders.RetryAfter, "7")},
		{"denied, no window exceeded (the day described): its own reset", older,
			quota.Decision{Metric: "m", RetryAfter: 7, Limits: []quota.WindowResult{day, func() quota.WindowResult {
				w := day
				w.Window, w.Length, w.Remaining, w.State = tiers.Hour, time.Hour, 98, quota.StateOK
				return w
			}()}},
			headers(rlheaders.RateLimitPolicy, "100;w=86400, 100;w=3600", rlheaders.RateLimit, "limit=100, remaining=97, reset=50400",
				rlheaders.RateLimitLimit, "100", rlheaders.RateLimitRemaining, "97", rlheaders.RateLimitReset, "50400",
				rlheaders.XRateLimitLimit, "100", rlheaders.XRateLimitRemaining, "97", rlheaders.XRateLimitReset, unix(24, 0, 1), // reset_at 00:00:00.3, rounded up
				rlheaders.RetryAfter, "7")},
		{"never: the policy only", older,
			quota.Decision{Metric: "m", Never: true, Limits: []quota.WindowResult{exceeded}},
			headers(rlheaders.RateLimitPolicy, "5;w=60")},
		{"a total: no w and no reset", older,
			quota.Decision{Allowed: true, Metric: "seats", Limits: []quota.WindowResult{seats}},
			headers(rlheaders.RateLimitPolicy, "10", rlheaders.RateLimit, "limit=10, remaining=1",
				rlheaders.RateLimitLimit, "10", rlheaders.RateLimitRemaining, "1",
				rlheaders.XRateLimitLimit, "10", rlheaders.XRateLimitRemaining, "1")},
		{"a reset in the past: now", rlheaders.Legacy | rlheaders.X,
			quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{past}},
			headers(rlheaders.RateLimitLimit, "5", rlheaders.RateLimitRemaining, "2", rlheaders.RateLimitReset, "0",
				rlheaders.XRateLimitLimit, "5", rlheaders.XRateLimitRemaining, "2", rlheaders.XRateLimitReset, unix(10, 0, 1))},
		{"a Retry-After past the end of time", rlheaders.X,
			quota.Decision{Metric: "m", RetryAfter: math.MaxInt64 - 5, Limits: []quota.WindowResult{exceeded}},
			headers(rlheaders.XRateLimitLimit, "5", rlheaders.XRateLimitRemaining, "2", rlheaders.XRateLimitReset, "9223372036854775807",
				rlheaders.RetryAfter, "9223372036854775802")},
		{"no limit: Retry-After only", older,
			quota.Decision{Metric: "m", RetryAfter: 3}, headers(rlheaders.RetryAfter, "3")},
		{"draft10 beside legacy and x: draft10 first", rlheaders.X | rlheaders.Legacy | rlheaders.Draft10,
			quota.Decision{Allowed: true, Metric: "m", Limits: []quota.WindowResult{minute}},
			headers(rlheaders.RateLimitPolicy, `"m/minute";q=5;w=60`, rlheaders.RateLimit, `"m/minute";r=2;t=60`,
				rlheaders.RateLimitLimit, "5", rlheaders.RateLimitRemaining, "2", rlheaders.RateLimitReset, "60",
				rlheaders.XRateLimitLimit, "5", rlheaders.XRateLimitRemaining, "2", rlheaders.XRateLimitReset, unix(10, 1, 0))},
		{"none: Retry-After only", 0,
			quota.Decision{Metric: "m", RetryAfter: 7, Limits: []quota.WindowResult{exceeded}}, headers(rlheaders.RetryAfter, "7")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.forms.For(&tc.d, now)
			if got := v.Headers(); !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestParseForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want rlheaders.Forms
		err  string
	}{
		{"draft10", rlheaders.Draft10, ""},
		{"draft7", rlheaders.Draft7, ""},
		{" legacy , x", rlheaders.Legacy | rlheaders.X, ""},
		{"x,draft10,x", rlheaders.X | rlheaders.Draft10, ""},
		{"draft7,legacy,x", rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X, ""},
		{"", 0, `want a comma list of draft10, draft7, legacy and x, got ""`},
		{"draft10,", 0, `want a comma list of draft10, draft7, legacy and x, got "draft10,"`},
		{"draft8", 0, `want a comma list of draft10, draft7, legacy and x, got "draft8"`},
		{"X", 0, `want a comma list of draft10, draft7, legacy and x, got "X"`},
		{"draft10,draft7", 0, "draft10 and draft7 are both RateLimit and RateLimit-Policy, in two syntaxes that cannot share a field: choose one"},
	} {
		got, err := rlheaders.ParseForms(tc.in)
		var msg string
		if err != nil {
			msg = err.Error()
		}
		if got != tc.want || msg != tc.err {
			t.Errorf("ParseForms(%q) = %v, %q; want %v, %q", tc.in, got, msg, tc.want, tc.err)
		}
		if err == nil {
			if back, _ := rlheaders.ParseForms(got.String()); back != got {
				t.Errorf("ParseForms(%q.String() = %q) = %v", tc.in, got.String(), back)
			}
		}
	}
}
