// Package rlheaders formats the rate limit headers of a check's answer —
// RateLimit-Policy and RateLimit (the IETF httpapi ratelimit-headers
// draft) and Retry-After — from a quota.Decision, once for every protocol
// that sends them: the HTTP check and forward-auth (internal/api) and
// Envoy's rate limit service over gRPC (internal/rls). It knows nothing of
// servers.
package rlheaders

import (
	"strconv"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// Header names, in canonical form (as http.CanonicalHeaderKey makes them,
// and as they go on the wire), so that they can also index an http.Header
// directly.
const (
	RetryAfter      = "Retry-After"
	RateLimit       = "Ratelimit"        // RateLimit in the IETF draft
	RateLimitPolicy = "Ratelimit-Policy" // RateLimit-Policy
)

// Values are the rate limit headers of one check's answer; an empty value
// is a header not sent. The three share one string's memory.
type Values struct {
	// Policy lists every window of the check, in the order of its limits,
	// so that a customer's policy on a metric reads the same on every
	// answer; empty when the check has no limit.
	Policy string
	// RateLimit describes the most constraining window (see
	// MostConstraining); empty without a limit, and when the check can
	// never pass: its t would invite the client to retry what no wait lets
	// through.
	RateLimit string
	// RetryAfter is set for a denial that can pass later.
	RetryAfter string
}

// For returns the headers of decision d, answered at now, with one
// allocation.
func For(d *quota.Decision, now time.Time) Values {
	var buf [256]byte
	b := buf[:0]
	w, limited := MostConstraining(d.Limits)
	state := limited && (d.Allowed || !d.Never)
	var policyEnd, limitEnd int
	if limited {
		for i := range d.Limits {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPolicy(b, d.Metric, &d.Limits[i])
		}
		policyEnd = len(b)
		if state {
			b = appendID(b, d.Metric, &w)
			remaining, reset := State(d, w, now)
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, remaining, 10)
			if w.Window.Resets() {
				// A total has no t: no wait restores it.
				b = append(b, ";t="...)
				b = strconv.AppendInt(b, reset, 10)
			}
		}
		limitEnd = len(b)
	}
	retry := !d.Allowed && !d.Never
	if retry {
		b = strconv.AppendInt(b, d.RetryAfter, 10)
	}
	s := string(b)
	return Values{Policy: s[:policyEnd], RateLimit: s[policyEnd:limitEnd], RetryAfter: s[limitEnd:]}
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
	if !d.Allowed && w.State == quota.StateExceeded && !d.Never {
		return w.Remaining, d.RetryAfter
	}
	if until := w.ResetAt.Sub(now); until > 0 {
		reset = int64((until + time.Second - 1) / time.Second)
	}
	return w.Remaining, reset
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
