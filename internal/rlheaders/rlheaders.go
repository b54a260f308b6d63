// Package rlheaders formats the rate limit headers of a check's answer —
// RateLimit-Policy and RateLimit (the IETF httpapi ratelimit-headers
// draft, in its current form or in draft 7's), the older RateLimit-Limit,
// -Remaining and -Reset and GitHub's X-RateLimit-* — and Retry-After, from
// a quota.Decision, once for every protocol that sends them: the HTTP check
// and forward-auth (internal/api) and Envoy's rate limit service over gRPC
// (internal/rls). It knows nothing of servers.
package rlheaders

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// Header names, in canonical form (as http.CanonicalHeaderKey makes them,
// and as they go on the wire), so that they can also index an http.Header
// directly.
const (
	RetryAfter          = "Retry-After"
	RateLimit           = "Ratelimit"           // RateLimit in the IETF draft
	RateLimitPolicy     = "Ratelimit-Policy"    // RateLimit-Policy
	RateLimitLimit      = "Ratelimit-Limit"     // RateLimit-Limit, drafts 0 to 6
	RateLimitRemaining  = "Ratelimit-Remaining" // RateLimit-Remaining
	RateLimitReset      = "Ratelimit-Reset"     // RateLimit-Reset
	XRateLimitLimit     = "X-Ratelimit-Limit"   // X-RateLimit-Limit, GitHub's
	XRateLimitRemaining = "X-Ratelimit-Remaining"
	XRateLimitReset     = "X-Ratelimit-Reset"
)

// Forms is a set of the forms the rate limit headers are sent in. Every
// form describes the same window, the one RateLimit names (see
// MostConstraining), with the same figures.
type Forms uint8

// The forms of the rate limit headers.
const (
	// Draft10 is RateLimit-Policy (every window: "name";q=…;w=…) and
	// RateLimit ("name";r=…;t=…), draft-ietf-httpapi-ratelimit-headers-10.
	Draft10 Forms = 1 << iota
	// Draft7 is draft 7's RateLimit-Policy (every window: q;w=…) and
	// RateLimit (limit=…, remaining=…, reset=…).
	Draft7
	// Legacy is RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
	// (seconds from now), the drafts before 7.
	Legacy
	// X is X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
	// (the Unix time of the reset, in seconds), GitHub's form.
	X

	// Default is the forms quotad sends unless told otherwise.
	Default = Draft10
)

// formNames names the forms, in the order their headers are sent.
var formNames = [...]struct {
	name string
	form Forms
}{{"draft10", Draft10}, {"draft7", Draft7}, {"legacy", Legacy}, {"x", X}}

// FormNames lists the forms' names, for a flag's help: "draft10, draft7,
// legacy and x".
const FormNames = "draft10, draft7, legacy and x"

// ParseForms parses a comma-separated list of forms' names (spaces around
// them ignored, a name given twice counted once). draft10 and draft7 are
// exclusive: both are RateLimit and RateLimit-Policy, in syntaxes that
// cannot share one field.
func ParseForms(s string) (Forms, error) {
	var f Forms
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		found := false
		for _, n := range formNames {
			if item == n.name {
				f |= n.form
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("want a comma list of %s, got %q", FormNames, s)
		}
	}
	if f&(Draft10|Draft7) == Draft10|Draft7 {
		return 0, errors.New("draft10 and draft7 are both RateLimit and RateLimit-Policy, in two syntaxes that cannot share a field: choose one")
	}
	return f, nil
}

// String lists the forms of f as ParseForms reads them.
func (f Forms) String() string {
	var names []string
	for _, n := range formNames {
		if f&n.form != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// Header is one header of an answer: its canonical name and its value.
type Header struct{ Name, Value string }

// MaxHeaders is the most headers an answer has: RateLimit-Policy and
// RateLimit in one draft's syntax, the three of Legacy, the three of X,
// and Retry-After.
const MaxHeaders = 2 + 3 + 3 + 1

// Values are the rate limit headers of one check's answer, in the forms
// asked for; a header not sent is not listed. Their values share one
// string's memory.
type Values struct {
	list [MaxHeaders]Header
	n    int
}

// Headers lists the headers, in order: the forms' in the order of
// ParseForms's names (in each, the policy first), Retry-After last.
func (v *Values) Headers() []Header { return v.list[:v.n] }

// Get returns the value of the header name (canonical), "" if not sent.
func (v *Values) Get(name string) string {
	for _, h := range v.Headers() {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// For returns the headers of decision d, answered at now, in the forms f,
// with one allocation. Of each form:
//   - the policy (Draft10's and Draft7's RateLimit-Policy) lists every
//     window of the check, in the order of its limits, so that a
//     customer's policy on a metric reads the same on every answer;
//   - the state (RateLimit, and the three headers of Legacy and of X)
//     describes the most constraining window, its reset left out for a
//     total, which never resets; none when the check has no limit, and
//     none when the check can never pass: its reset would invite the
//     client to retry what no wait lets through.
//
// Retry-After is set for a denial that can pass later.
func (f Forms) For(d *quota.Decision, now time.Time) Values {
	var buf [384]byte
	b := buf[:0]
	var v Values
	var ends [MaxHeaders]int // where each header's value ends in b
	add := func(name string) {
		v.list[v.n].Name = name
		ends[v.n] = len(b)
		v.n++
	}
	w, limited := MostConstraining(d.Limits)
	state := limited && (d.Allowed || !d.Never)
	var remaining, reset, resetUnix int64
	if state {
		remaining, reset = State(d, w, now)
		resetUnix = resetTime(d, w, now)
	}
	resets := w.Window.Resets() // a total has no reset
	if limited && f&Draft10 != 0 {
		for i := range d.Limits {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPolicy(b, d.Metric, &d.Limits[i])
		}
		add(RateLimitPolicy)
		if state {
			b = appendID(b, d.Metric, &w)
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, remaining, 10)
			if resets {
				b = append(b, ";t="...)
				b = strconv.AppendInt(b, reset, 10)
			}
			add(RateLimit)
		}
	}
	if limited && f&Draft7 != 0 {
		for i := range d.Limits {
			if i > 0 {
				b = append(b, ", "...)
			}
			l := &d.Limits[i]
			b = strconv.AppendInt(b, l.Limit, 10)
			if l.Window.Resets() {
				b = append(b, ";w="...)
				b = strconv.AppendInt(b, int64(l.Length/time.Second), 10)
			}
		}
		add(RateLimitPolicy)
		if state {
			b = append(b, "limit="...)
			b = strconv.AppendInt(b, w.Limit, 10)
			b = append(b, ", remaining="...)
			b = strconv.AppendInt(b, remaining, 10)
			if resets {
				b = append(b, ", reset="...)
				b = strconv.AppendInt(b, reset, 10)
			}
			add(RateLimit)
		}
	}
	for _, form := range [...]struct {
		form                    Forms
		limit, remaining, reset string
		resetValue              int64
	}{
		{Legacy, RateLimitLimit, RateLimitRemaining, RateLimitReset, reset},
		{X, XRateLimitLimit, XRateLimitRemaining, XRateLimitReset, resetUnix},
	} {
		if !state || f&form.form == 0 {
			continue
		}
		b = strconv.AppendInt(b, w.Limit, 10)
		add(form.limit)
		b = strconv.AppendInt(b, remaining, 10)
		add(form.remaining)
		if resets {
			b = strconv.AppendInt(b, form.resetValue, 10)
			add(form.reset)
		}
	}
	if !d.Allowed && !d.Never {
		b = strconv.AppendInt(b, d.RetryAfter, 10)
		add(RetryAfter)
	}
	s := string(b)
	start := 0
	for i := range v.n {
		v.list[i].Value = s[start:ends[i]]
		start = ends[i]
	}
	return v
}

// MostConstraining picks the window the RateLimit header describes: a
// window that denied, else the one with the fewest units left (the longer
// window on a tie, as it takes longer to recover).
func MostConstraining(ws []quota.WindowResult) (quota.WindowResult, bool) {
	if len(ws) == 0 {
		return quota.WindowResult{}, false
	}
	best := ws[0]
	rank := func(w quota.WindowResult) bool { return w.State == quota.StateExceeded }
	for _, w := range ws[1:] {
		switch {
		case rank(w) != rank(best):
			if rank(w) {
				best = w
			}
		case w.Remaining < best.Remaining, w.Remaining == best.Remaining && w.Window > best.Window:
			best = w
		}
	}
	return best, true
}

// State returns the RateLimit header's r and t for window w of decision
// d: the units left, and the seconds until quota is restored enough (a
// check that can never pass has no RateLimit). r is always the window's
// remaining, as the body says it: a denied check of cost 5 with 1 unit
// left leaves 1, which a check of cost 1 may still take. For the window
// that denied a check that can pass later, t is the answer's Retry-After,
// when the same check could pass: one wait, not two. Otherwise t is the
// seconds until the window resets (its reset_at, counted from now,
// rounded up): when a denial can never pass, and on an allowed answer,
// whose next check's cost is not known, the time by which the window's
// count is back to zero.
func State(d *quota.Decision, w quota.WindowResult, now time.Time) (remaining, reset int64) {
	if waits(d, &w) {
		return w.Remaining, d.RetryAfter
	}
	if until := w.ResetAt.Sub(now); until > 0 {
		reset = int64((until + time.Second - 1) / time.Second)
	}
	return w.Remaining, reset
}

// resetTime returns the instant State's reset points at, as X-RateLimit-Reset
// says it: the Unix time in seconds, rounded up (never early), of the
// window's reset (its reset_at, or now if that is past), or, for the
// window that denied a check that can pass later, of now plus
// Retry-After.
func resetTime(d *quota.Decision, w quota.WindowResult, now time.Time) int64 {
	at, wait := w.ResetAt, waits(d, &w)
	if wait || at.Before(now) {
		at = now
	}
	u := at.Unix()
	if at.Nanosecond() > 0 {
		u++
	}
	if wait {
		if d.RetryAfter > math.MaxInt64-u {
			return math.MaxInt64
		}
		u += d.RetryAfter
	}
	return u
}

// waits reports whether window w is the one that denied d, a check that
// can pass later: its reset is then d's Retry-After, when the same check
// could pass.
func waits(d *quota.Decision, w *quota.WindowResult) bool {
	return !d.Allowed && w.State == quota.StateExceeded && !d.Never
}

// appendPolicy appends window w's item of RateLimit-Policy: its name, q
// its limit and w its length in seconds (none for a total, which has no
// length).
func appendPolicy(b []byte, metric string, w *quota.WindowResult) []byte {
	b = appendID(b, metric, w)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, w.Limit, 10)
	if !w.Window.Resets() {
		return b
	}
	b = append(b, ";w="...)
	return strconv.AppendInt(b, int64(w.Length/time.Second), 10)
}

// Name returns the name of window w of decision d in the RateLimit
// headers, unquoted: "<metric>/<window>", the metric the window counts
// (the check's, or a credit pool's), and "/<subject>" after it for a
// window of a limit per subject ("api_calls/minute/alice"): metric keys
// and window names hold no slash, so the name reads one way only.
func Name(d *quota.Decision, w *quota.WindowResult) string {
	metric := d.Metric
	if w.Metric != "" {
		metric = w.Metric
	}
	name := metric + "/" + w.Window.String()
	if w.Subject != "" {
		name += "/" + w.Subject
	}
	return name
}

// appendID appends the quoted name of window w (see Name), as
// strconv.Quote writes it; metric is the check's, for a window that names
// none.
func appendID(b []byte, metric string, w *quota.WindowResult) []byte {
	if w.Metric != "" {
		metric = w.Metric
	}
	if !plain(metric) || !plain(w.Subject) || !w.Window.Valid() {
		return strconv.AppendQuote(b, Name(&quota.Decision{Metric: metric}, w))
	}
	b = append(b, '"')
	b = append(b, metric...)
	b = append(b, '/')
	b = append(b, w.Window.String()...)
	if w.Subject != "" {
		b = append(b, '/')
		b = append(b, w.Subject...)
	}
	return append(b, '"')
}

// plain reports whether s needs no escape in a quoted string.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
