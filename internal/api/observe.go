package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	requestSeries  seriesCache[requestLabels, prometheus.Counter]
	durationSeries seriesCache[string, prometheus.Observer]
}

// requestLabels are the labels of quotad_http_requests_total.
type requestLabels struct {
	route, method string
	status        int
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quotad_http_requests_total",
			Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "quotad_http_request_duration_seconds",
			Help:    "HTTP request latency by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"route"}),
	}
	m.requestSeries.create = func(l requestLabels) prometheus.Counter {
		return m.requests.WithLabelValues(l.route, l.method, strconv.Itoa(l.status))
	}
	m.durationSeries.create = func(route string) prometheus.Observer { return m.duration.WithLabelValues(route) }
	reg.MustRegister(m.requests, m.duration)
	return m
}

// seriesCache keeps the children of a metric vector by their labels: after
// a combination's first use, finding its child hashes no label values and
// takes no lock in prometheus. Children are still created on first use,
// as WithLabelValues creates them, so /metrics lists the same series.
// (quotad never deletes a child, which would leave a stale one here.)
type seriesCache[K comparable, M any] struct {
	children sync.Map // K → M
	create   func(K) M
}

func (c *seriesCache[K, M]) get(labels K) M {
	if m, ok := c.children.Load(labels); ok {
		return m.(M)
	}
	m, _ := c.children.LoadOrStore(labels, c.create(labels))
	return m.(M)
}

// middleware is quotad's one middleware, run for every request, routed or
// not. In this order it recovers panics in what follows, authenticates
// (after routing, so that c.Path() names the matched route and 401 and 403
// come before the router's own 404 and 405), answers 404 for a path with
// more segments than its route, runs the handler with the request's token,
// writes any error as a problem, and counts and logs the request. It is one
// middleware rather than four because echo wraps each anew, in a closure,
// on every request.
func (s *Server) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		rc := requestContexts.Get().(*requestContext)
		token, err := s.run(c, rc, next)
		if err != nil {
			// Write the problem now so that the status is known below.
			c.Error(err)
		}
		s.observe(c, token, start, &rc.call)
		rc.Context, rc.token = nil, nil
		if rc.call.set {
			rc.call = callLog{}
		}
		requestContexts.Put(rc)
		return nil
	}
}

// run authenticates the request and runs next with rc, turning a panic
// into a logged 500. token is nil when the request is unauthenticated or
// refused.
func (s *Server) run(c echo.Context, rc *requestContext, next echo.HandlerFunc) (token *Token, err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("panic in handler", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if token, err = s.authenticate(c); err != nil {
		return nil, err
	}
	if !wholeSegments(c) {
		return token, echo.ErrNotFound
	}
	if route := c.Path(); route != "/v1/check" && !strings.HasPrefix(route, forwardAuthPath) && !streamsStatements(c) && route != whatIfPath {
		// Checks bound their own waits (the engine's store timeout), the
		// streamed statements each page's and what-ifs each day's; every
		// other request waits for PostgreSQL at most this long, then
		// answers 503.
		ctx, cancel := context.WithTimeout(c.Request().Context(), s.requestTimeout)
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
	}
	rc.Context, rc.token = c, token
	return token, next(rc)
}

// observe counts and logs a request. Admin writes are logged at info,
// everything else (the check path above all) at debug; at debug, the line
// of a check, refund or reserve says what call lists (customer, metric,
// decision).
func (s *Server) observe(c echo.Context, token *Token, start time.Time, call *callLog) {
	req := c.Request()
	status := c.Response().Status
	route := c.Path()
	if route == "" || c.Response().Status == http.StatusNotFound && route == "/*" {
		route = "unmatched"
	}
	elapsed := time.Since(start)
	s.metrics.requestSeries.get(requestLabels{route, req.Method, status}).Inc()
	s.metrics.durationSeries.get(route).Observe(elapsed.Seconds())

	level := slog.LevelDebug
	if req.Method != http.MethodGet && !checkPath(route) && status < 400 {
		level = slog.LevelInfo
	}
	if status >= 500 {
		level = slog.LevelWarn
	}
	if s.log.Enabled(req.Context(), level) {
		name := anonymous.Name
		if token != nil {
			name = token.Name
		}
		attrs := []slog.Attr{slog.String("method", req.Method), slog.String("route", route),
			slog.String("path", req.URL.Path), slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed)/float64(time.Millisecond)), slog.String("actor", name)}
		if call.set {
			attrs = call.attrs(attrs)
		}
		s.log.LogAttrs(req.Context(), level, "request", attrs...)
	}
}

// checkPath reports whether route is one of the check path's, logged at
// debug whatever the method.
func checkPath(route string) bool {
	switch route {
	case "/v1/check", "/v1/refund", forwardAuthPath, forwardAuthPath + "/*":
		return true
	}
	return false
}

// requestContext is the echo.Context handlers get: echo's, with the
// request's token. They are pooled, as echo pools its own contexts; a
// handler must not keep one after it returns.
type requestContext struct {
	echo.Context
	token *Token
	call  callLog // filled at debug level only
}

var requestContexts = sync.Pool{New: func() any { return new(requestContext) }}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }
