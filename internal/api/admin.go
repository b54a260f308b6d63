package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// AuditLog is what GET /v1/audit reads. *tiers.Service implements it.
type AuditLog interface {
	AuditEvents(ctx context.Context, f tiers.AuditFilter) ([]tiers.AuditEvent, bool, error)
}

var _ AuditLog = (*tiers.Service)(nil)

// adminHandlers serve the operator's routes: health, readiness, the audit
// log and the lease holders.
type adminHandlers struct {
	ready   func(ctx context.Context) error
	log     *slog.Logger
	audit   AuditLog
	holders Holders
}

func (a *adminHandlers) healthz(c echo.Context) error {
	return respond(c, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *adminHandlers) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		a.log.Warn("not ready", "error", err)
		return problemf(http.StatusServiceUnavailable, codeUnavailable, "not ready: "+readinessReason(err))
	}
	return respond(c, http.StatusOK, map[string]string{"status": "ready"})
}

// NotReadyError explains why the service is not ready, in words safe for
// any client.
type NotReadyError struct{ Reason string }

func (e *NotReadyError) Error() string { return e.Reason }

func readinessReason(err error) string {
	if nr, ok := err.(*NotReadyError); ok {
		return nr.Reason
	}
	return "the database cannot be reached"
}

func (a *adminHandlers) listAudit(c echo.Context) error {
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	f := tiers.AuditFilter{Limit: limit, Customer: c.QueryParam("customer")}
	if after != "" {
		id, ok := parseID(after)
		if !ok {
			return invalid("cursor", "is not a cursor this service returned")
		}
		f.Before = id
	}
	if c.QueryParams().Has("customer") {
		if err := tiers.CheckCustomerID("customer", f.Customer); err != nil {
			return err
		}
	}
	events, more, err := a.audit.AuditEvents(c.Request().Context(), f)
	if err != nil {
		return err
	}
	last := ""
	if len(events) > 0 {
		last = formatID(events[len(events)-1].ID)
	}
	return respond(c, http.StatusOK, list("events", events, nextCursor(more, last)))
}
