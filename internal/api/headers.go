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
// would, with one allocation for the values (see rlheaders.Forms.For) and
// one for their slices: Content-Type, then the rate limit headers in the
// forms asked for and Retry-After as rlheaders says them.
func setCheckHeaders(h http.Header, forms rlheaders.Forms, d *quota.Decision, now time.Time) {
	v := forms.For(d, now)
	list := v.Headers()
	values := make([]string, 1+len(list))
	values[0] = echo.MIMEApplicationJSON
	h[echo.HeaderContentType] = values[0:1:1]
	for i, x := range list {
		values[i+1] = x.Value
		h[x.Name] = values[i+1 : i+2 : i+2]
	}
}
