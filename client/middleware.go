package quotad

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// DefaultMiddlewareTimeout bounds the middleware's check when
// MiddlewareOptions.Timeout is 0.
const DefaultMiddlewareTimeout = 250 * time.Millisecond

// MiddlewareOptions configure Client.Middleware.
type MiddlewareOptions struct {
	// Customer returns the id of the customer the request was
	// authenticated as: by the application's own authentication (a
	// session, a verified token's claim, a value its auth middleware put
	// in the request's context, see FromContext), never a header, query or
	// path the caller writes, which would let anyone charge, and spend the
	// limits of, any customer. Customer or APIKey is required, not both. A
	// request for which it returns "" is answered 401 (problem code
	// unauthorized) unless AllowAnonymous is set, when it goes on to the
	// handler unchecked.
	Customer func(*http.Request) string
	// APIKey returns the request's API key (one quotad issued), e.g.
	// FromHeader("X-Api-Key"): quotad authenticates it and names its
	// customer. A request without a key is answered 401 (problem code
	// unauthorized), or with AllowAnonymous goes on unchecked: it is never
	// charged to a customer the request names.
	APIKey func(*http.Request) string
	// Metric returns the metric the request uses, e.g. Static("api_calls").
	// Required.
	Metric func(*http.Request) string
	// Cost returns the units the request uses; 1 when nil.
	Cost func(*http.Request) int64
	// Subject returns who within the customer makes the request (an end
	// user, an IP), e.g. FromHeader("X-User"), for the metric's limits
	// per subject, which count each subject apart. When nil, or when it
	// returns "", the check names none: by API key, quotad then counts the
	// key's id as the subject; by customer, a metric with a limit per
	// subject is refused (answered 403, as any check quotad refuses).
	Subject func(*http.Request) string
	// AllowAnonymous lets requests without a customer (or API key)
	// through unchecked, charged to no one.
	AllowAnonymous bool
	// Timeout bounds the check; DefaultMiddlewareTimeout when 0. The check
	// is never retried.
	Timeout time.Duration
	// FailClosed answers 503 (problem code unavailable) when quotad cannot
	// be reached in time or fails (a 5xx); by default such requests go on
	// to the handler (fail open).
	FailClosed bool
	// OnError, if set, is told of every check that did not come to a
	// decision (to log it), before the request is let through or refused.
	OnError func(*http.Request, error)
}

// FromHeader returns a function that reads the named request header, for
// MiddlewareOptions.APIKey, Metric or Subject. Not for Customer: a header
// is whatever the caller writes.
func FromHeader(name string) func(*http.Request) string {
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// FromPathValue returns a function that reads the named wildcard of the
// request's http.ServeMux pattern, for MiddlewareOptions.Metric. Not for
// Customer: the path is whatever the caller writes.
func FromPathValue(name string) func(*http.Request) string {
	return func(r *http.Request) string { return r.PathValue(name) }
}

// Static returns a function that always returns s, for
// MiddlewareOptions.Metric (or Customer, in a service of one customer).
func Static(s string) func(*http.Request) string {
	return func(*http.Request) string { return s }
}

// FromContext returns a function that reads the customer id the
// application's authentication put in the request's context under key (a
// string value; "" when there is none), for MiddlewareOptions.Customer:
//
//	// in the application's auth middleware, once the caller is verified:
//	r = r.WithContext(context.WithValue(r.Context(), customerKey{}, user.CustomerID))
//
//	c.Middleware(quotad.MiddlewareOptions{Customer: quotad.FromContext(customerKey{}), ...})
func FromContext(key any) func(*http.Request) string {
	return func(r *http.Request) string {
		s, _ := r.Context().Value(key).(string)
		return s
	}
}

// StaticCost returns a function that always returns n, for
// MiddlewareOptions.Cost.
func StaticCost(n int64) func(*http.Request) int64 {
	return func(*http.Request) int64 { return n }
}

// Middleware returns HTTP middleware that checks quotad before the
// handler, and charges the request if it is allowed:
//
//   - allowed: the handler runs, its answer carrying quotad's RateLimit and
//     RateLimit-Policy headers;
//   - denied: answered 429 with a problem document (code quota_exceeded,
//     or cost_exceeds_limit when the check can never pass),
//     Retry-After (unless the check can never pass) and the RateLimit
//     headers; the handler does not run;
//   - quotad refuses the check itself (a 4xx: an unknown customer, an
//     invalid id or cost, a bad token): answered 403 (problem code
//     forbidden), whatever FailClosed says, since letting such requests
//     through would let anyone past the limits;
//   - quotad unreachable, too slow or failing (5xx): the handler runs (fail
//     open), or with FailClosed the request is answered 503.
//
// It panics if opts lacks Metric, or has neither or both of Customer and
// APIKey.
func (c *Client) Middleware(opts MiddlewareOptions) func(http.Handler) http.Handler {
	if (opts.Customer == nil) == (opts.APIKey == nil) || opts.Metric == nil {
		panic("quotad: Middleware needs MiddlewareOptions.Metric and one of Customer or APIKey: " +
			"with APIKey, a request without a key is refused, never charged to a Customer")
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultMiddlewareTimeout
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			customer, apiKey := caller(r, opts.Customer, opts.APIKey)
			if customer == "" && apiKey == "" {
				anonymous(w, r, next, opts.AllowAnonymous, opts.APIKey != nil)
				return
			}
			req := CheckRequest{Customer: customer, APIKey: apiKey, Metric: opts.Metric(r), Cost: 1, Subject: subjectOf(r, opts.Subject)}
			if opts.Cost != nil {
				req.Cost = opts.Cost(r)
			}
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			res, err := c.check(ctx, req, false)
			cancel()
			if err != nil {
				if undecided(w, r, err, opts.FailClosed, opts.OnError) {
					next.ServeHTTP(w, r)
				}
				return
			}
			if writeDecision(w, res) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// caller returns who a request is from, for the middlewares: its API key
// when the middleware checks by key (apiKey not nil), else its
// authenticated customer id. A request without a key is never charged to
// a customer instead: both come back "".
func caller(r *http.Request, customer, apiKey func(*http.Request) string) (string, string) {
	if apiKey != nil {
		return "", apiKey(r)
	}
	return customer(r), ""
}

// anonymous answers a request from no one (no key when byKey, else no
// customer) 401, or with allow hands it to next unchecked.
func anonymous(w http.ResponseWriter, r *http.Request, next http.Handler, allow, byKey bool) {
	switch {
	case allow:
		next.ServeHTTP(w, r)
	case byKey:
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "the request carries no API key")
	default:
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "the request names no customer")
	}
}

// subjectOf returns the request's subject, as subject finds it (nil: none).
func subjectOf(r *http.Request, subject func(*http.Request) string) string {
	if subject == nil {
		return ""
	}
	return subject(r)
}

// undecided answers a request whose check (or reserve) came to no
// decision, after telling onError, and says whether it may go on to the
// handler: quotad's 4xx refusal is a 403, whatever failClosed says; quotad
// unreachable, too slow or failing lets it go on, or with failClosed is a
// 503.
func undecided(w http.ResponseWriter, r *http.Request, err error, failClosed bool, onError func(*http.Request, error)) bool {
	if onError != nil {
		onError(r, err)
	}
	var p *Problem
	switch {
	case errors.As(err, &p) && p.Status >= 400 && p.Status < 500:
		detail := "the request cannot be checked"
		switch {
		case errors.Is(p, ErrCustomerNotFound):
			detail = "the request's customer is not known"
		case errors.Is(p, ErrInvalidAPIKey):
			detail = "the request's API key is not valid"
		case errors.Is(p, ErrCustomerSuspended):
			detail = "the request's customer is suspended"
		case errors.Is(p, ErrSubjectRequired):
			detail = "the request names no subject, which the metric's limits per subject need"
		}
		writeProblem(w, http.StatusForbidden, "forbidden", detail)
	case r.Context().Err() != nil:
		// The client went away; nobody reads an answer.
	case failClosed:
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the quota service cannot be reached")
	default:
		return true
	}
	return false
}

// writeDecision sets quotad's RateLimit headers of res on w and, when res
// is a denial, answers it 429; it says whether the request may go on to
// the handler.
func writeDecision(w http.ResponseWriter, res *CheckResult) bool {
	h := w.Header()
	if res.RateLimitPolicy != "" {
		h.Set("RateLimit-Policy", res.RateLimitPolicy)
	}
	if res.RateLimit != "" {
		h.Set("RateLimit", res.RateLimit)
	}
	if res.Allowed {
		return true
	}
	// The wording of quotad's 429s (its forward-auth's, which Caddy,
	// Traefik and Envoy pass on); the nginx block of docs/gateways.md,
	// which cannot read quotad's detail, words its 429 as the fallback
	// below does.
	if res.RetryAfter == nil {
		detail := res.Detail
		if detail == "" {
			detail = "this cost can never pass the customer's limit on this metric; do not retry"
		}
		writeDenial(w, "cost_exceeds_limit", detail, res.Upgrade)
		return false
	}
	retry := strconv.FormatInt(*res.RetryAfter, 10)
	h.Set("Retry-After", retry)
	detail := res.Detail // quotad's: whether the limit is reached or the cost larger than what remains
	if detail == "" {
		detail = "the customer's limit on this metric is reached; retry after " + retry + " s"
	}
	writeDenial(w, "quota_exceeded", detail, res.Upgrade)
	return false
}

// writeDenial answers 429 with a problem document carrying the check's
// upgrade, as quotad's forward-auth does.
func writeDenial(w http.ResponseWriter, code, detail string, upgrade *Upgrade) {
	p := newProblem(http.StatusTooManyRequests, code, detail)
	p.Upgrade = upgrade
	sendProblem(w, p)
}

// writeProblem answers with a problem document.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	sendProblem(w, newProblem(status, code, detail))
}

func newProblem(status int, code, detail string) Problem {
	return Problem{
		Type:   "urn:quotad:problem:" + code,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
	}
}

// sendProblem answers with problem document p.
func sendProblem(w http.ResponseWriter, p Problem) {
	status := p.Status
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
