package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/npmtest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
)

// formHeaders are the headers of each form, as a client of that form reads
// them (Retry-After beside each).
var formHeaders = []struct {
	form  rlheaders.Forms
	names []string
}{
	{rlheaders.Draft10, []string{rlheaders.RateLimitPolicy, rlheaders.RateLimit}},
	{rlheaders.Draft7, []string{rlheaders.RateLimitPolicy, rlheaders.RateLimit}},
	{rlheaders.Legacy, []string{rlheaders.RateLimitLimit, rlheaders.RateLimitRemaining, rlheaders.RateLimitReset}},
	{rlheaders.X, []string{rlheaders.XRateLimitLimit, rlheaders.XRateLimitRemaining, rlheaders.XRateLimitReset}},
}

// clientReading is what testdata/npm/ratelimit-headers.mjs prints of one
// answer: ratelimit-header-parser's reading, and structured-headers'.
// A figure the parser could not read is "NaN".
type clientReading struct {
	Parser *struct {
		Limit     any    `json:"limit"`
		Remaining any    `json:"remaining"`
		ResetMS   *int64 `json:"reset_ms"`
		ResetInMS *int64 `json:"reset_in_ms"`
	} `json:"parser"`
	SF struct {
		Policy              any `json:"policy"`
		RateLimit           any `json:"ratelimit"`
		RateLimitDictionary any `json:"ratelimit_dictionary"`
	} `json:"sf"`
}

// Clients' own packages read quotad's answers in each form as quotad
// meant them: ratelimit-header-parser (draft 7's RateLimit,
// RateLimit-Limit/-Remaining/-Reset and X-RateLimit-*, which read NaN
// from draft 10's RateLimit) and structured-headers (draft 10's Lists, draft
// 7's Dictionary). Answers to checks (allowed and denied) and to
// forward-auth, from the real handler over scriptedChecker: a minute of 5
// resetting in 30 s, a denial retried after 12 s.
func TestRateLimitHeadersReadByClients(t *testing.T) {
	t.Parallel()
	type answer struct {
		name       string
		forms      rlheaders.Forms // the server's
		form       rlheaders.Forms // the one a client reads here
		headers    map[string]string
		remaining  int64
		reset      int64 // seconds
		before     time.Time
		after      time.Time
		retryAfter string
	}
	var answers []answer
	for _, forms := range []rlheaders.Forms{rlheaders.Draft10, rlheaders.Draft7, rlheaders.Legacy, rlheaders.X,
		rlheaders.Draft7 | rlheaders.Legacy | rlheaders.X} {
		var last quota.Request
		srv := httptest.NewServer(New(Config{Checker: scriptedChecker{last: &last}, RateLimitHeaders: forms}))
		t.Cleanup(srv.Close)
		for _, c := range []struct {
			name               string
			method, path, body string
			cost               string
			status             int
			remaining, reset   int64
			retryAfter         string
		}{
			{"check, allowed", "POST", "/v1/check", `{"customer":"acme","metric":"jobs","cost":1}`, "", http.StatusOK, 4, 30, ""},
			{"check, denied", "POST", "/v1/check", `{"customer":"acme","metric":"jobs","cost":9}`, "", http.StatusTooManyRequests, 5, 12, "12"},
			{"forward-auth, allowed", "GET", "/v1/forward-auth", "", "2", http.StatusOK, 3, 30, ""},
			{"forward-auth, denied", "GET", "/v1/forward-auth", "", "7", http.StatusTooManyRequests, 5, 12, "12"},
		} {
			req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Quotad-Customer", "acme")
			req.Header.Set("X-Quotad-Metric", "jobs")
			req.Header.Set("X-Quotad-Cost", c.cost)
			before := time.Now()
			res, err := http.DefaultClient.Do(req)
			after := time.Now()
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.status {
				t.Fatalf("%s, %s: status %d, want %d", forms, c.name, res.StatusCode, c.status)
			}
			for _, f := range formHeaders {
				if forms&f.form == 0 {
					continue
				}
				h := map[string]string{}
				for _, name := range append(f.names, rlheaders.RetryAfter) {
					if v := res.Header.Get(name); v != "" {
						h[strings.ToLower(name)] = v
					}
				}
				answers = append(answers, answer{fmt.Sprintf("%s: %s, read as %s", forms, c.name, f.form), forms, f.form, h,
					c.remaining, c.reset, before, after, c.retryAfter})
			}
		}
	}
	in := make([]map[string]string, len(answers))
	for i, a := range answers {
		in[i] = a.headers
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := npmtest.Run(t, stdin, "ratelimit-headers.mjs")
	var readings []clientReading
	if err := json.Unmarshal(out, &readings); err != nil || len(readings) != len(answers) {
		t.Fatalf("ratelimit-headers.mjs printed %d readings of %d answers (%v):\n%s", len(readings), len(answers), err, out)
	}
	// sameJSON compares a reading with the value it should be, as JSON
	// reads it.
	sameJSON := func(got any, want string) bool {
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatalf("want %s: %v", want, err)
		}
		return reflect.DeepEqual(got, w)
	}
	for i, a := range answers {
		r := readings[i]
		t.Run(a.name, func(t *testing.T) {
			if a.headers[strings.ToLower(rlheaders.RetryAfter)] != a.retryAfter {
				t.Errorf("Retry-After %q, want %q", a.headers["retry-after"], a.retryAfter)
			}
			if a.form == rlheaders.Draft10 {
				// structured-headers reads draft 10's Lists: the policy and
				// the state of the window, named by a String.
				if want := `[["jobs/minute",{"q":5,"w":60}]]`; !sameJSON(r.SF.Policy, want) {
					t.Errorf("structured-headers read RateLimit-Policy %v, want %s (headers %q)", r.SF.Policy, want, a.headers)
				}
				if want := fmt.Sprintf(`[["jobs/minute",{"r":%d,"t":%d}]]`, a.remaining, a.reset); !sameJSON(r.SF.RateLimit, want) {
					t.Errorf("structured-headers read RateLimit %v, want %s (headers %q)", r.SF.RateLimit, want, a.headers)
				}
				return
			}
			if a.form == rlheaders.Draft7 {
				// Draft 7's fields are Structured Fields too: a List of
				// Integers with w, and a Dictionary.
				if want := `[[5,{"w":60}]]`; !sameJSON(r.SF.Policy, want) {
					t.Errorf("structured-headers read RateLimit-Policy %v, want %s (headers %q)", r.SF.Policy, want, a.headers)
				}
				if want := fmt.Sprintf(`[["limit",5,{}],["remaining",%d,{}],["reset",%d,{}]]`, a.remaining, a.reset); !sameJSON(r.SF.RateLimitDictionary, want) {
					t.Errorf("structured-headers read RateLimit %v, want %s (headers %q)", r.SF.RateLimitDictionary, want, a.headers)
				}
			}
			p := r.Parser
			if p == nil {
				t.Fatalf("ratelimit-header-parser read nothing of %q", a.headers)
			}
			if p.Limit != float64(5) || p.Remaining != float64(a.remaining) {
				t.Errorf("ratelimit-header-parser read limit %v, remaining %v; want 5, %d (headers %q)", p.Limit, p.Remaining, a.remaining, a.headers)
			}
			switch {
			case p.ResetMS == nil || p.ResetInMS == nil:
				t.Errorf("ratelimit-header-parser read no reset from %q", a.headers)
			case a.form == rlheaders.X:
				// The Unix time of the reset, rounded up: t seconds after
				// the answer.
				lo, hi := (a.before.Unix()+a.reset)*1000, (a.after.Unix()+a.reset+1)*1000
				if *p.ResetMS < lo || *p.ResetMS > hi {
					t.Errorf("ratelimit-header-parser read the reset at %d ms, want from %d to %d (headers %q)", *p.ResetMS, lo, hi, a.headers)
				}
			default:
				// Seconds from now, which the parser adds to its clock
				// (read a moment after the script's).
				if d := *p.ResetInMS - a.reset*1000; d < 0 || d >= 1000 {
					t.Errorf("ratelimit-header-parser read the reset in %d ms, want %d s (headers %q)", *p.ResetInMS, a.reset, a.headers)
				}
			}
		})
	}
}
