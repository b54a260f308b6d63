package api

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
)

// callLog is what a request's log line says of the check, refund or
// reserve it made: customer, metric, decision and, for a denial, the
// window that denied. Handlers fill it only when the log is at debug
// level (see callLogOf), so that with debug off the check path does no
// more for it than ask the logger its level.
type callLog struct {
	set                                  bool
	customer, metric, subject, requestID string
	cost                                 int64
	items                                int
	dryRun                               bool
	// decision is allowed, denied or degraded for a check (and a
	// reserve), refunded for a refund, passed for a forward-auth route
	// that checks nothing, rejected (4xx) or error (5xx) when there was
	// no decision; err is then why.
	decision string
	err      error
	// deniedBy is the first window that denied a check, when one did.
	deniedBy   quota.WindowResult
	denied     bool
	never      bool
	retryAfter int64
	replayed   bool
	refunded   int64
}

// callLogOf returns the log of c's call, to be filled, when log is at
// debug level; nil otherwise.
func callLogOf(log *slog.Logger, c echo.Context) *callLog {
	rc, ok := c.(*requestContext)
	if !ok || !log.Enabled(c.Request().Context(), slog.LevelDebug) {
		return nil
	}
	rc.call.set = true
	return &rc.call
}

// request records what was asked.
func (l *callLog) request(r *call) {
	l.customer, l.metric, l.subject, l.requestID = r.Customer, r.Metric, r.Subject, r.RequestID
	l.cost, l.items, l.dryRun = r.Cost, len(r.Items), r.DryRun
}

// decided records a check's decision, or the error that stood for one.
func (l *callLog) decided(d *quota.Decision, err error) {
	if err != nil {
		l.failed(err)
		return
	}
	if d.Customer != "" {
		l.customer = d.Customer
	}
	l.decision = "allowed"
	switch {
	case !d.Allowed:
		l.decision = "denied"
	case d.Degraded:
		l.decision = "degraded"
	}
	l.never, l.retryAfter, l.replayed = d.Never, d.RetryAfter, d.Replayed
	for i := range d.Limits {
		if d.Limits[i].State == quota.StateExceeded {
			l.deniedBy, l.denied = d.Limits[i], true
			break
		}
	}
}

// failed records the error a call was answered with.
func (l *callLog) failed(err error) {
	l.decision, l.err = failedDecision(err), err
}

// attrs appends the log's attributes to as.
func (l *callLog) attrs(as []slog.Attr) []slog.Attr {
	if l.customer != "" {
		as = append(as, slog.String("customer", l.customer))
	}
	if l.metric != "" {
		as = append(as, slog.String("metric", l.metric))
	}
	if l.items > 0 {
		as = append(as, slog.Int("items", l.items))
	}
	if l.subject != "" {
		as = append(as, slog.String("subject", l.subject))
	}
	if l.cost != 0 {
		as = append(as, slog.Int64("cost", l.cost))
	}
	if l.requestID != "" {
		as = append(as, slog.String("request_id", l.requestID))
	}
	if l.dryRun {
		as = append(as, slog.Bool("dry_run", true))
	}
	if l.decision != "" {
		as = append(as, slog.String("decision", l.decision))
	}
	if l.denied {
		w := &l.deniedBy
		by := []slog.Attr{slog.String("metric", w.Metric), slog.String("window", w.Window.String()),
			slog.Int64("limit", w.Limit), slog.Int64("used", w.Used)}
		if w.Subject != "" {
			by = append(by, slog.String("subject", w.Subject))
		}
		as = append(as, slog.Attr{Key: "denied_by", Value: slog.GroupValue(by...)})
	}
	if l.never {
		as = append(as, slog.Bool("never", true))
	} else if l.retryAfter > 0 {
		as = append(as, slog.Int64("retry_after", l.retryAfter))
	}
	if l.replayed {
		as = append(as, slog.Bool("replayed", true))
	}
	if l.refunded != 0 {
		as = append(as, slog.Int64("refunded", l.refunded))
	}
	if l.err != nil {
		as = append(as, slog.String("error", l.err.Error()))
	}
	return as
}
