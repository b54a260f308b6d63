package quotad

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"sync"
	"time"
)

// DefaultSettleTimeout bounds the reservation middleware's commit or
// release, retries included, when ReservationMiddlewareOptions.SettleTimeout
// is 0.
const DefaultSettleTimeout = 5 * time.Second

// ReservationMiddlewareOptions configure Client.ReservationMiddleware.
type ReservationMiddlewareOptions struct {
	// Customer returns the id of the customer the request was
	// authenticated as, never one the caller writes: as
	// MiddlewareOptions.Customer. Customer or APIKey is required, not both.
	Customer func(*http.Request) string
	// APIKey returns the request's API key, which quotad authenticates and
	// which names its customer. A request without a customer (or, with
	// APIKey, without a key) is answered 401 (problem code unauthorized)
	// unless AllowAnonymous is set, when it goes on to the handler without
	// a reservation: it is never charged to a customer the request names.
	APIKey func(*http.Request) string
	// Metric returns the metric the request uses. Required.
	Metric func(*http.Request) string
	// Subject returns who within the customer makes the request, as
	// MiddlewareOptions.Subject: nil or "", none (by API key, quotad
	// holds the units for the key's id).
	Subject func(*http.Request) string
	// Estimate returns the units to reserve before the handler runs: the
	// most the request may cost (an LLM call's max_tokens, say). Required.
	// An error answers the request 400 (problem code validation_failed,
	// the error's text as detail) without reserving. Estimate may read the
	// request's body if it puts back one the handler can read.
	Estimate func(*http.Request) (int64, error)
	// TTL is how long quotad holds the reservation if the middleware never
	// settles it (rounded up to whole seconds, 1 s to 1 h); quotad's
	// default (300 s) when 0. It must outlast the handler.
	TTL time.Duration
	// ReleaseUnreported releases the reservation of a handler that
	// succeeded without calling ReportCost; by default its estimate is
	// committed.
	ReleaseUnreported bool
	// AllowAnonymous lets requests without a customer (or API key)
	// through without a reservation, charged to no one.
	AllowAnonymous bool
	// Timeout bounds the reserve; DefaultMiddlewareTimeout when 0. The
	// reserve is never retried.
	Timeout time.Duration
	// SettleTimeout bounds the commit or release after the handler, the
	// client's retries included; DefaultSettleTimeout when 0.
	SettleTimeout time.Duration
	// FailClosed answers 503 (problem code unavailable) when quotad cannot
	// be reached in time or fails (a 5xx) at the reserve; by default such
	// requests go on to the handler without a reservation (fail open), and
	// what they cost is not counted.
	FailClosed bool
	// OnError is told of every reserve that came to no decision, before
	// the request is let through or refused, and of every commit or
	// release that failed after the handler (a *SettleError). Without it,
	// settle failures are written to the standard library's log.
	OnError func(*http.Request, error)
}

// SettleError is a commit or release the reservation middleware could not
// make after the handler. The reservation stays held until quotad releases
// it at its expiry: the customer then pays none of it.
type SettleError struct {
	// ReservationID is the reservation that is still held.
	ReservationID string
	// Op is "commit" or "release".
	Op string
	// Cost is the cost a commit tried to settle.
	Cost int64
	// Err is the client's error.
	Err error
}

// Error names the reservation and what the middleware tried.
func (e *SettleError) Error() string {
	if e.Op == "commit" {
		return fmt.Sprintf("quotad: commit of reservation %s at cost %d: %v", e.ReservationID, e.Cost, e.Err)
	}
	return fmt.Sprintf("quotad: %s of reservation %s: %v", e.Op, e.ReservationID, e.Err)
}

// Unwrap returns Err, so that errors.Is matches the client's sentinels.
func (e *SettleError) Unwrap() error { return e.Err }

// costKey is the context key of a request's *costRecorder.
type costKey struct{}

// costRecorder holds the reservation of one request and the cost its
// handler reports.
type costRecorder struct {
	res *Reservation

	mu       sync.Mutex
	cost     int64
	reported bool
}

// ReportCost tells the reservation middleware the actual cost of the
// request whose context (or a context derived from it) is ctx: after the
// handler, the reservation is committed at that cost, whatever the
// handler's status. A later call replaces an earlier one, so a streaming
// handler may report its running total; calls may come from any
// goroutine until the handler returns. It returns false, and records
// nothing, when ctx carries no reservation (a request let through
// without one) or cost is negative.
func ReportCost(ctx context.Context, cost int64) bool {
	rec, ok := ctx.Value(costKey{}).(*costRecorder)
	if !ok || cost < 0 {
		return false
	}
	rec.mu.Lock()
	rec.cost, rec.reported = cost, true
	rec.mu.Unlock()
	return true
}

// ReservationFromContext returns the reservation the middleware holds for
// the request whose context is ctx (its ID, its estimate as Cost, its
// expiry), if it holds one.
func ReservationFromContext(ctx context.Context) (*Reservation, bool) {
	rec, ok := ctx.Value(costKey{}).(*costRecorder)
	if !ok {
		return nil, false
	}
	return rec.res, true
}

// ReservationMiddleware returns HTTP middleware for requests whose cost is
// known only once the handler has run: it reserves an estimate before the
// handler and settles the actual cost after it.
//
//   - reserved: the handler runs with the reservation in its context, its
//     answer carrying quotad's RateLimit and RateLimit-Policy headers. It
//     reports the actual cost with ReportCost.
//   - after the handler: a reported cost is committed, whatever the
//     handler's status (the work it reports was done). A handler that
//     reported nothing and failed — answered 500 or more, or panicked —
//     has its reservation released (the panic then goes on up); one that
//     succeeded has its estimate committed, or with ReleaseUnreported
//     released. The commit or release is retried as the client's
//     RetryPolicy says, within SettleTimeout, even if the client has gone;
//     it ends before the request does. A failure goes to OnError (or the
//     log) as a *SettleError.
//   - denied: answered 429 as Client.Middleware answers a denied check
//     (quota_exceeded with Retry-After, or cost_exceeds_limit); the
//     handler does not run and nothing is held.
//   - quotad refuses the reserve (a 4xx: an unknown customer or API key,
//     an invalid estimate): 403 (problem code forbidden).
//   - quotad unreachable, too slow or failing at the reserve: the handler
//     runs without a reservation (fail open; ReportCost returns false and
//     nothing is counted), or with FailClosed the request is answered 503.
//
// It panics if opts lacks Metric or Estimate, has neither or both of
// Customer and APIKey, or if its TTL is beyond an hour.
func (c *Client) ReservationMiddleware(opts ReservationMiddlewareOptions) func(http.Handler) http.Handler {
	if (opts.Customer == nil) == (opts.APIKey == nil) || opts.Metric == nil || opts.Estimate == nil {
		panic("quotad: ReservationMiddleware needs ReservationMiddlewareOptions.Metric, Estimate and one of Customer or APIKey: " +
			"with APIKey, a request without a key is refused, never charged to a Customer")
	}
	if opts.TTL > time.Hour {
		panic("quotad: ReservationMiddlewareOptions.TTL is at most an hour")
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultMiddlewareTimeout
	}
	settleTimeout := opts.SettleTimeout
	if settleTimeout <= 0 {
		settleTimeout = DefaultSettleTimeout
	}
	ttl := 0
	if opts.TTL > 0 {
		ttl = int((opts.TTL + time.Second - 1) / time.Second)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req := ReserveRequest{Metric: opts.Metric(r), Subject: subjectOf(r, opts.Subject), TTLSeconds: ttl}
			req.Customer, req.APIKey = caller(r, opts.Customer, opts.APIKey)
			if req.APIKey == "" && req.Customer == "" {
				anonymous(w, r, next, opts.AllowAnonymous, opts.APIKey != nil)
				return
			}
			estimate, err := opts.Estimate(r)
			if err != nil {
				writeProblem(w, http.StatusBadRequest, "validation_failed", err.Error())
				return
			}
			req.Cost = estimate
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			res, err := c.reserve(ctx, req, false)
			cancel()
			if err != nil {
				if undecided(w, r, err, opts.FailClosed, opts.OnError) {
					next.ServeHTTP(w, r)
				}
				return
			}
			if !writeDecision(w, &res.CheckResult) {
				return
			}
			rec := &costRecorder{res: res}
			sw := &statusWriter{ResponseWriter: w}
			settle := func(failed bool) {
				rec.mu.Lock()
				cost, reported := rec.cost, rec.reported
				rec.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), settleTimeout)
				defer cancel()
				var serr *SettleError
				switch {
				case !reported && (failed || opts.ReleaseUnreported):
					if err := c.Release(ctx, res.ID); err != nil {
						serr = &SettleError{ReservationID: res.ID, Op: "release", Err: err}
					}
				default:
					if !reported {
						cost = res.Cost
					}
					if _, err := c.Commit(ctx, res.ID, cost); err != nil {
						serr = &SettleError{ReservationID: res.ID, Op: "commit", Cost: cost, Err: err}
					}
				}
				switch {
				case serr == nil:
				case opts.OnError != nil:
					opts.OnError(r, serr)
				default:
					log.Print(serr)
				}
			}
			defer func() {
				if p := recover(); p != nil {
					settle(true)
					panic(p)
				}
			}()
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), costKey{}, rec)))
			settle(sw.status >= http.StatusInternalServerError)
		})
	}
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until the handler writes
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what the handler wrote so far, for streaming handlers that
// assert http.Flusher.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	// A writer that cannot flush sends it all when the handler returns.
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
