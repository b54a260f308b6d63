package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Header names quotad sets or reads, beyond echo's, in canonical form (as
// http.CanonicalHeaderKey makes them, and as they go on the wire), so that
// they can also index a Header directly (TestHeaderNamesAreCanonical).
const (
	headerIfMatch         = "If-Match"
	headerETag            = "Etag"
	headerRetryAfter      = "Retry-After"
	headerRateLimit       = "Ratelimit"        // RateLimit in the IETF draft
	headerRateLimitPolicy = "Ratelimit-Policy" // RateLimit-Policy
	headerWWWAuthenticate = "Www-Authenticate"
)

// setCheckHeaders sets the headers of a check's answer, as Header.Set
// would, with one allocation for the values and one for their slices:
// Content-Type; RateLimit-Policy (IETF httpapi ratelimit headers) listing
// every window of the check, in the order of its limits, so that a
// customer's policy on a metric reads the same on every answer; RateLimit
// for the most constraining window, if any (see rateLimitState), unless
// the check can never pass; and Retry-After for a denial that can pass
// later.
func setCheckHeaders(h http.Header, d *quota.Decision, now time.Time) {
	var buf [256]byte
	b := buf[:0]
	w, limited := mostConstraining(d.Limits)
	// A check that can never pass gets no RateLimit: its t would invite
	// the client to retry what no wait lets through.
	state := limited && (d.Allowed || !d.Never)
	var policyEnd, limitEnd int
	if limited {
		for i := range d.Limits {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendRateLimitPolicy(b, d.Metric, &d.Limits[i])
		}
		policyEnd = len(b)
		if state {
			b = appendRateLimitID(b, d.Metric, w.Window)
			remaining, reset := rateLimitState(d, w, now)
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, remaining, 10)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, reset, 10)
		}
		limitEnd = len(b)
	}
	retry := !d.Allowed && !d.Never
	if retry {
		b = strconv.AppendInt(b, d.RetryAfter, 10)
	}
	s := string(b)
	values := make([]string, 4)
	values[0] = echo.MIMEApplicationJSON
	h[echo.HeaderContentType] = values[0:1:1]
	if limited {
		values[1], values[2] = s[:policyEnd], s[policyEnd:limitEnd]
		h[headerRateLimitPolicy] = values[1:2:2]
		if state {
			h[headerRateLimit] = values[2:3:3]
		}
	}
	if retry {
		values[3] = s[limitEnd:]
		h[headerRetryAfter] = values[3:4:4]
	}
}

// appendRateLimitPolicy appends window w's item of RateLimit-Policy: its
// name, q its limit and w its length in seconds.
func appendRateLimitPolicy(b []byte, metric string, w *quota.WindowResult) []byte {
	b = appendRateLimitID(b, metric, w.Window)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, w.Limit, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, int64(w.Length/time.Second), 10)
}

// rateLimitState returns the RateLimit header's r and t for window w of
// decision d: the units left, and the seconds until quota is restored
// enough (a check that can never pass has no RateLimit). r is always the window's remaining, as the body says it: a
// denied check of cost 5 with 1 unit left leaves 1, which a check of cost
// 1 may still take. For the window that denied a check that can pass
// later, t is the answer's Retry-After, when the same check could pass:
// one wait, not two. Otherwise t is the seconds until the window resets
// (its reset_at, counted from now, rounded up): when a denial can never
// pass, and on an allowed answer, whose next check's cost is not known,
// the time by which the window's count is back to zero.
func rateLimitState(d *quota.Decision, w quota.WindowResult, now time.Time) (remaining, reset int64) {
	if !d.Allowed && w.State == quota.StateExceeded && !d.Never {
		return w.Remaining, d.RetryAfter
	}
	if until := w.ResetAt.Sub(now); until > 0 {
		reset = int64((until + time.Second - 1) / time.Second)
	}
	return w.Remaining, reset
}

// appendRateLimitID appends the quoted "metric/window" that names a
// window in the RateLimit headers, as strconv.Quote writes it.
func appendRateLimitID(b []byte, metric string, w tiers.Window) []byte {
	for i := 0; i < len(metric); i++ {
		if c := metric[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return strconv.AppendQuote(b, metric+"/"+w.String())
		}
	}
	if !w.Valid() {
		return strconv.AppendQuote(b, metric+"/"+w.String())
	}
	b = append(b, '"')
	b = append(b, metric...)
	b = append(b, '/')
	b = append(b, w.String()...)
	return append(b, '"')
}
