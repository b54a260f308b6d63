package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// headersWithSet sets the check answer's headers as the handler did with
// Header.Set, before setCheckHeaders.
func headersWithSet(d quota.Decision, now time.Time) http.Header {
	h := http.Header{}
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	if w, ok := rlheaders.MostConstraining(d.Limits); ok {
		id := strconv.Quote(d.Metric + "/" + w.Window.String())
		var policy []string
		for _, l := range d.Limits {
			policy = append(policy, strconv.Quote(d.Metric+"/"+l.Window.String())+";q="+strconv.FormatInt(l.Limit, 10)+
				";w="+strconv.FormatInt(int64(l.Length/time.Second), 10))
		}
		h.Set(headerRateLimitPolicy, strings.Join(policy, ", "))
		reset := int64(0)
		if until := w.ResetAt.Sub(now); until > 0 {
			reset = int64((until + time.Second - 1) / time.Second)
		}
		remaining := w.Remaining
		if !d.Allowed && w.State == quota.StateExceeded && !d.Never {
			reset = d.RetryAfter
		}
		if d.Allowed || !d.Never {
			h.Set(headerRateLimit, id+";r="+strconv.FormatInt(remaining, 10)+";t="+strconv.FormatInt(reset, 10))
		}
	}
	if !d.Allowed && !d.Never {
		h.Set(headerRetryAfter, strconv.FormatInt(d.RetryAfter, 10))
	}
	return h
}

// Header names are canonical: setCheckHeaders indexes the map with them.
func TestHeaderNamesAreCanonical(t *testing.T) {
	for _, name := range []string{headerIfMatch, headerETag, headerRetryAfter, headerRateLimit,
		headerRateLimitPolicy, headerWWWAuthenticate, echo.HeaderContentType, echo.HeaderLocation,
		echo.HeaderAuthorization} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("header name %s is not canonical: %s", name, c)
		}
	}
}

func TestSetCheckHeaders(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 300_000_000, time.UTC)
	win := func(w tiers.Window, limit, remaining int64, s quota.State, reset time.Duration, length time.Duration) quota.WindowResult {
		return quota.WindowResult{Window: w, Mode: tiers.Hard, Limit: limit, Used: limit - remaining, Remaining: remaining,
			ResetAt: now.Add(reset), State: s, Length: length}
	}
	sec := win(tiers.Second, 50, 49, quota.StateOK, 700*time.Millisecond, time.Second)
	day := win(tiers.Day, 1000, 10, quota.StateOK, 14*time.Hour+time.Nanosecond, 24*time.Hour)
	month := win(tiers.Month, 9007199254740991, 0, quota.StateExceeded, 30*24*time.Hour, 31*24*time.Hour)
	past := win(tiers.Minute, 5, 5, quota.StateOK, -time.Second, time.Minute)
	decision := func(allowed, never bool, retry int64, metric string, ws ...quota.WindowResult) quota.Decision {
		return quota.Decision{Allowed: allowed, Never: never, RetryAfter: retry, Customer: "acme", Metric: metric, Cost: 1, Limits: ws}
	}
	for name, d := range map[string]quota.Decision{
		"allowed, two windows":           decision(true, false, 0, "api_calls", sec, day),
		"allowed, no limits":             decision(true, false, 0, "api_calls"),
		"denied by the month":            decision(false, false, 86400*3, "api_calls", sec, month),
		"denied, never passes":           decision(false, true, 0, "api_calls", month),
		"denied, no limits":              decision(false, false, 5, "api_calls"),
		"denied, never, no limits":       decision(false, true, 0, "api_calls"),
		"reset in the past":              decision(true, false, 0, "m", past),
		"retry after of many digits":     decision(false, false, 1<<62, "m", month),
		"metric to quote":                decision(true, false, 0, "a\"b\\c\x01é", sec),
		"empty metric":                   decision(true, false, 0, "", sec),
		"invalid window":                 decision(true, false, 0, "m", win(0, 1, 1, quota.StateOK, time.Second, 0)),
		"long metric":                    decision(false, false, 9, string(make([]byte, 300)), sec),
		"negative remaining and lengths": decision(true, false, 0, "m", win(tiers.Hour, -5, -7, quota.StateOverage, -time.Hour, -time.Hour)),
	} {
		t.Run(name, func(t *testing.T) {
			got := http.Header{"X-Other": {"kept"}}
			setCheckHeaders(got, rlheaders.Draft10, &d, now)
			want := headersWithSet(d, now)
			want["X-Other"] = []string{"kept"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("setCheckHeaders = %q\nHeader.Set gave %q", got, want)
			}
			// The values' slices are separate: a value added to one header
			// (Header.Add appends to its slice) leaves the others as they were.
			for _, name := range []string{echo.HeaderContentType, headerRateLimitPolicy, headerRateLimit} {
				before := got.Clone()
				got.Add(name, "added")
				for k, v := range before {
					if k != name && !reflect.DeepEqual(got[k], v) {
						t.Errorf("adding a value to %s changed %s from %q to %q", name, k, v, got[k])
					}
				}
			}
		})
	}
}

// RateLimit's t is one wait with Retry-After: on a denial that can pass
// later, the window that denied says when the same check could pass, not
// when the window resets.
func TestRateLimitResetIsRetryAfterWhenDenied(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	minute := quota.WindowResult{Window: tiers.Minute, Mode: tiers.Hard, Limit: 3, Used: 3, Remaining: 0,
		ResetAt: now.Add(55 * time.Second), State: quota.StateExceeded, Length: time.Minute}
	used := minute
	used.State = quota.StateOK // allowed, the last unit taken
	few := minute              // 1 left, a check of cost 5 denied
	few.Used, few.Remaining = 2, 1
	day := quota.WindowResult{Window: tiers.Day, Mode: tiers.Hard, Limit: 100, Used: 10, Remaining: 90,
		ResetAt: now.Add(10 * time.Hour), State: quota.StateOK, Length: 24 * time.Hour}
	tests := []struct {
		name       string
		d          quota.Decision
		rateLimit  string
		retryAfter string
	}{
		{"denied: t is Retry-After",
			quota.Decision{Metric: "emails", RetryAfter: 15, Limits: []quota.WindowResult{minute, day}},
			`"emails/minute";r=0;t=15`, "15"},
		{"denied, never passes: no RateLimit, no Retry-After",
			quota.Decision{Metric: "emails", Never: true, Limits: []quota.WindowResult{minute}},
			"", ""},
		{"allowed, nothing left: t is the reset",
			quota.Decision{Allowed: true, Metric: "emails", Limits: []quota.WindowResult{used, day}},
			`"emails/minute";r=0;t=55`, ""},
		{"denied with units left: r is what remains",
			quota.Decision{Metric: "emails", Cost: 5, RetryAfter: 20, Limits: []quota.WindowResult{few, day}},
			`"emails/minute";r=1;t=20`, "20"},
		{"allowed, units left: t is the reset",
			quota.Decision{Allowed: true, Metric: "emails", Limits: []quota.WindowResult{day}},
			`"emails/day";r=90;t=36000`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			setCheckHeaders(h, rlheaders.Draft10, &tt.d, now)
			if got := h.Get(headerRateLimit); got != tt.rateLimit {
				t.Errorf("RateLimit = %q, want %q", got, tt.rateLimit)
			}
			if got := h.Get(headerRetryAfter); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

// RateLimit-Policy lists every window of the check, whichever RateLimit
// describes: the same policy for a customer and metric on every answer.
func TestRateLimitPolicyListsEveryWindow(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	sec := quota.WindowResult{Window: tiers.Second, Mode: tiers.Hard, Limit: 10, Used: 1, Remaining: 9,
		ResetAt: now.Add(time.Second), State: quota.StateOK, Length: time.Second}
	day := quota.WindowResult{Window: tiers.Day, Mode: tiers.Hard, Limit: 1000, Used: 995, Remaining: 5,
		ResetAt: now.Add(14 * time.Hour), State: quota.StateOK, Length: 24 * time.Hour}
	secLow := sec
	secLow.Used, secLow.Remaining = 8, 2
	const policy = `"api_calls/second";q=10;w=1, "api_calls/day";q=1000;w=86400`
	for _, tt := range []struct {
		name, rateLimit string
		limits          []quota.WindowResult
	}{
		{"the day has fewer left", `"api_calls/day";r=5;t=50400`, []quota.WindowResult{sec, day}},
		{"the second has fewer left", `"api_calls/second";r=2;t=1`, []quota.WindowResult{secLow, day}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := quota.Decision{Allowed: true, Metric: "api_calls", Cost: 1, Limits: tt.limits}
			h := http.Header{}
			setCheckHeaders(h, rlheaders.Draft10, &d, now)
			if got := h.Get(headerRateLimitPolicy); got != policy {
				t.Errorf("RateLimit-Policy = %q, want %q", got, policy)
			}
			if got := h.Get(headerRateLimit); got != tt.rateLimit {
				t.Errorf("RateLimit = %q, want %q", got, tt.rateLimit)
			}
		})
	}
}

// rateLimitHeaderNames are every header a form of the rate limit headers
// may send.
var rateLimitHeaderNames = []string{rlheaders.RateLimitPolicy, rlheaders.RateLimit, rlheaders.RateLimitLimit,
	rlheaders.RateLimitRemaining, rlheaders.RateLimitReset, rlheaders.XRateLimitLimit, rlheaders.XRateLimitRemaining,
	rlheaders.XRateLimitReset, rlheaders.RetryAfter}

// Checks and forward-auth answer the rate limit headers in the forms the
// server is configured with, and only in those; each form describes the
// same window with the same figures. scriptedChecker's window is a minute
// of 5 resetting in 30 s; a cost of 9 is denied (retry after 12 s), one of
// 101 can never pass.
func TestRateLimitHeaderForms(t *testing.T) {
	t.Parallel()
	type figures struct {
		status           int
		remaining, reset int64 // reset: -1 for no state at all (never)
		retryAfter       string
	}
	// expect returns the headers forms f should send for a minute of 5
	// named "jobs/minute", but X-RateLimit-Reset, which the caller checks
	// by its range.
	expect := func(f rlheaders.Forms, fig figures) map[string]string {
		out := map[string]string{rlheaders.RetryAfter: fig.retryAfter}
		r, reset := strconv.FormatInt(fig.remaining, 10), strconv.FormatInt(fig.reset, 10)
		state := fig.reset >= 0
		if f&rlheaders.Draft10 != 0 {
			out[rlheaders.RateLimitPolicy] = `"jobs/minute";q=5;w=60`
			if state {
				out[rlheaders.RateLimit] = `"jobs/minute";r=` + r + ";t=" + reset
			}
		}
		if f&rlheaders.Draft7 != 0 {
			out[rlheaders.RateLimitPolicy] = "5;w=60"
			if state {
				out[rlheaders.RateLimit] = "limit=5, remaining=" + r + ", reset=" + reset
			}
		}
		if f&rlheaders.Legacy != 0 && state {
			out[rlheaders.RateLimitLimit], out[rlheaders.RateLimitRemaining], out[rlheaders.RateLimitReset] = "5", r, reset
		}
		if f&rlheaders.X != 0 && state {
			out[rlheaders.XRateLimitLimit], out[rlheaders.XRateLimitRemaining] = "5", r
		}
		return out
	}
	type call struct {
		name string
		req  func() *http.Request
		fig  figures
	}
	var calls []call
	for _, c := range []struct {
		cost string
		fig  figures
	}{
		{"1", figures{http.StatusOK, 4, 30, ""}},
		{"9", figures{http.StatusTooManyRequests, 5, 12, "12"}},
		{"101", figures{http.StatusTooManyRequests, 5, -1, ""}},
	} {
		calls = append(calls, call{"check of cost " + c.cost, func() *http.Request {
			req := newRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"customer":"acme","metric":"jobs","cost":`+c.cost+`}`))
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
			return req
		}, c.fig}, call{"forward-auth of cost " + c.cost, func() *http.Request {
			req := newRequest(http.MethodGet, "/v1/forward-auth", nil)
			req.Header.Set("X-Quotad-Customer", "acme")
			req.Header.Set("X-Quotad-Metric", "jobs")
			req.Header.Set("X-Quotad-Cost", c.cost)
			return req
		}, c.fig})
	}
	for _, forms := range []rlheaders.Forms{0, rlheaders.Draft10, rlheaders.Draft7, rlheaders.Legacy, rlheaders.X,
		rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X, rlheaders.Draft10 | rlheaders.Legacy | rlheaders.X} {
		var last quota.Request
		srv := New(Config{Checker: scriptedChecker{last: &last}, RateLimitHeaders: forms})
		want := forms
		if want == 0 {
			want = rlheaders.Draft10 // the default
		}
		for _, c := range calls {
			t.Run(fmt.Sprintf("%s/%s", forms, c.name), func(t *testing.T) {
				rec := httptest.NewRecorder()
				before := time.Now()
				srv.ServeHTTP(rec, c.req())
				after := time.Now()
				if rec.Code != c.fig.status {
					t.Fatalf("status %d, want %d\n%s", rec.Code, c.fig.status, rec.Body)
				}
				exp := expect(want, c.fig)
				for _, name := range rateLimitHeaderNames {
					got := rec.Header().Values(name)
					if name == rlheaders.XRateLimitReset && want&rlheaders.X != 0 && c.fig.reset >= 0 {
						// The Unix time of the reset, rounded up: 30 s after
						// the check, or 12 after it for the denial.
						n, err := strconv.ParseInt(rec.Header().Get(name), 10, 64)
						if lo, hi := before.Unix()+c.fig.reset, after.Unix()+c.fig.reset+1; len(got) != 1 || err != nil || n < lo || n > hi {
							t.Errorf("%s = %q, want one Unix time from %d to %d", name, got, lo, hi)
						}
						continue
					}
					if w := exp[name]; (w == "" && got != nil) || (w != "" && !slices.Equal(got, []string{w})) {
						t.Errorf("%s = %q, want %q", name, got, w)
					}
				}
			})
		}
	}
}

// Whatever the forms, a check's headers cost two allocations: their
// values' string and the slices (the hot path's budget, see
// BenchmarkServeCheck).
func TestSetCheckHeadersAllocations(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	denied := benchDecision
	denied.Allowed, denied.RetryAfter = false, 1
	denied.Limits = slices.Clone(denied.Limits)
	denied.Limits[0].State = quota.StateExceeded
	for _, f := range []rlheaders.Forms{rlheaders.Draft10, rlheaders.Draft7, rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X,
		rlheaders.Draft10 | rlheaders.Legacy | rlheaders.X} {
		for _, d := range []*quota.Decision{&benchDecision, &denied} {
			h := http.Header{}
			if n := testing.AllocsPerRun(100, func() { clear(h); setCheckHeaders(h, f, d, now) }); n != 2 {
				t.Errorf("%s, allowed %t: %v allocations, want 2", f, d.Allowed, n)
			}
		}
	}
}
