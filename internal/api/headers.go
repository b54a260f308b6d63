package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
)

// Header names quotad sets or reads, beyond echo's, in canonical form (as
// http.CanonicalHeaderKey makes them, and as they go on the wire), so that
// they can also index a Header directly (TestHeaderNamesAreCanonical).
const (
	headerIfMatch         = "If-Match"
	headerETag            = "Etag"
	headerRetryAfter      = rlheaders.RetryAfter
	headerRateLimit       = rlheaders.RateLimit
	headerRateLimitPolicy = rlheaders.RateLimitPolicy
	headerWWWAuthenticate = "Www-Authenticate"
)

// setCheckHeaders sets the headers of a check's answer, as Header.Set
// would, with one allocation for the values (see rlheaders.For) and one
// for their slices: Content-Type, RateLimit-Policy, RateLimit and
// Retry-After as rlheaders says them.
func setCheckHeaders(h http.Header, d *quota.Decision, now time.Time) {
	v := rlheaders.For(d, now)
	values := make([]string, 4)
	values[0] = echo.MIMEApplicationJSON
	h[echo.HeaderContentType] = values[0:1:1]
	if v.Policy != "" {
		values[1] = v.Policy
		h[headerRateLimitPolicy] = values[1:2:2]
	}
	if v.RateLimit != "" {
		values[2] = v.RateLimit
		h[headerRateLimit] = values[2:3:3]
	}
	if v.RetryAfter != "" {
		values[3] = v.RetryAfter
		h[headerRetryAfter] = values[3:4:4]
	}
}
