package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
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
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe logs and counts every request. Admin writes are logged at info,
// everything else (the check path above all) at debug.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			// Write the problem now so that the status is known below.
			c.Error(err)
		}
		req := c.Request()
		status := c.Response().Status
		route := c.Path()
		if route == "" || c.Response().Status == http.StatusNotFound && route == "/*" {
			route = "unmatched"
		}
		elapsed := time.Since(start)
		s.metrics.requests.WithLabelValues(route, req.Method, strconv.Itoa(status)).Inc()
		s.metrics.duration.WithLabelValues(route).Observe(elapsed.Seconds())

		level := slog.LevelDebug
		if req.Method != http.MethodGet && route != "/v1/check" && route != "/v1/refund" && status < 400 {
			level = slog.LevelInfo
		}
		if status >= 500 {
			level = slog.LevelWarn
		}
		if s.log.Enabled(req.Context(), level) {
			s.log.LogAttrs(req.Context(), level, "request",
				slog.String("method", req.Method), slog.String("route", route),
				slog.String("path", req.URL.Path), slog.Int("status", status),
				slog.Duration("duration", elapsed), slog.String("actor", actor(c)))
		}
		return nil
	}
}

// recoverPanics turns a panic in a handler into a logged 500.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic in handler", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }
