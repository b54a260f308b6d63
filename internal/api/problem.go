package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// Problem is an RFC 9457 problem document with quotad's stable code and,
// for validation failures, one entry per bad field.
type Problem struct {
	Type   string             `json:"type"`
	Title  string             `json:"title"`
	Status int                `json:"status"`
	Detail string             `json:"detail,omitempty"`
	Code   string             `json:"code"`
	Errors []tiers.FieldError `json:"errors,omitempty"`
	// Upgrade, on forward-auth's 429, is the check answer's upgrade.
	Upgrade *upgradeBody `json:"upgrade,omitempty"`
}

// Problem codes.
const (
	codeValidation           = "validation_failed"
	codeUnauthorized         = "unauthorized"
	codeForbidden            = "forbidden"
	codeInvalidAPIKey        = "invalid_api_key"
	codeCustomerSuspended    = "customer_suspended"
	codeReservationNotFound  = "reservation_not_found"
	codeReservationExpired   = "reservation_expired"
	codeCheckNotFound        = "check_not_found"
	codeSubjectRequired      = "subject_required"
	codeNoTotalLimit         = "no_total_limit"
	codeCustomerNotFound     = "customer_not_found"
	codePlanNotFound         = "plan_not_found"
	codePlanVersionNotFound  = "plan_version_not_found"
	codeMetricNotFound       = "metric_not_found"
	codeOverrideNotFound     = "override_not_found"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeConflict             = "conflict"
	codeCapReached           = "cap_reached"
	codePreconditionFailed   = "precondition_failed"
	codePayloadTooLarge      = "payload_too_large"
	codeUnsupportedMedia     = "unsupported_media_type"
	codeUnavailable          = "unavailable"
	codeInternal             = "internal"
	problemTypePrefix        = "urn:quotad:problem:"
	contentTypeProblemJSON   = "application/problem+json"
	wwwAuthenticateChallenge = `Bearer realm="quotad"`
)

// apiError is an error the API answers with a given status, code and detail.
type apiError struct {
	status int
	code   string
	detail string
	fields []tiers.FieldError
}

func (e *apiError) Error() string { return e.code + ": " + e.detail }

// customerError is err, met while serving a request about customer id: a
// customer_not_found problem then names the id.
type customerError struct {
	id  string
	err error
}

func (e *customerError) Error() string { return "customer " + e.id + ": " + e.err.Error() }
func (e *customerError) Unwrap() error { return e.err }

// fieldCause is err, met for one field of the request (an item's, say):
// the problem its row of errorTable makes names the field, and value, the
// field's value (the metric a subject is required for, the metric not
// declared).
type fieldCause struct {
	field, value string
	err          error
}

func (e *fieldCause) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldCause) Unwrap() error { return e.err }

// aboutCustomer wraps err, if any, as met for customer id.
func aboutCustomer(id string, err error) error {
	if err == nil || id == "" {
		return err
	}
	return &customerError{id: id, err: err}
}

func problemf(status int, code, detail string) *apiError {
	return &apiError{status: status, code: code, detail: detail}
}

// invalid is a 400 about one field.
func invalid(field, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: codeValidation, detail: "the request is invalid",
		fields: []tiers.FieldError{{Field: field, Message: message}}}
}

// errorTable maps domain errors to statuses and codes: the only place that
// does.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{tiers.ErrCustomerNotFound, http.StatusNotFound, codeCustomerNotFound},
	{tiers.ErrPlanNotFound, http.StatusNotFound, codePlanNotFound},
	{tiers.ErrPlanVersionNotFound, http.StatusNotFound, codePlanVersionNotFound},
	{tiers.ErrMetricNotFound, http.StatusNotFound, codeMetricNotFound},
	{tiers.ErrOverrideNotFound, http.StatusNotFound, codeOverrideNotFound},
	{tiers.ErrFeatureOverrideNotFound, http.StatusNotFound, codeFeatureOverrideNotFound},
	{webhooks.ErrWebhookNotFound, http.StatusNotFound, codeNotFound},
	{keys.ErrKeyNotFound, http.StatusNotFound, codeKeyNotFound},
	{grants.ErrGrantNotFound, http.StatusNotFound, codeGrantNotFound},
	{tiers.ErrMetricInUse, http.StatusConflict, codeConflict},
	{tiers.ErrPlanInUse, http.StatusConflict, codeConflict},
	{tiers.ErrConflict, http.StatusConflict, codeConflict},
	{tiers.ErrCapReached, http.StatusConflict, codeCapReached},
	{tiers.ErrPreconditionFailed, http.StatusPreconditionFailed, codePreconditionFailed},
	{tiers.ErrInvalidAPIKey, http.StatusForbidden, codeInvalidAPIKey},
	{tiers.ErrCustomerSuspended, http.StatusForbidden, codeCustomerSuspended},
	{tiers.ErrReservationNotFound, http.StatusNotFound, codeReservationNotFound},
	{tiers.ErrReservationExpired, http.StatusGone, codeReservationExpired},
	{tiers.ErrCheckNotFound, http.StatusNotFound, codeCheckNotFound},
	{tiers.ErrSubjectRequired, http.StatusBadRequest, codeSubjectRequired},
	{tiers.ErrNoTotalLimit, http.StatusConflict, codeNoTotalLimit},
	{tiers.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
}

// details are the client-facing sentences for the domain errors; the
// wrapped error text, which may name internals, is only logged.
var details = map[string]string{
	codeCustomerNotFound:        "no customer has this id",
	codePlanNotFound:            "no plan has this key",
	codePlanVersionNotFound:     "the plan has no version of this number",
	codeMetricNotFound:          "no metric with this key is declared",
	codeOverrideNotFound:        "the customer has no override on this metric and window (and per)",
	codeFeatureOverrideNotFound: "the customer has no override of this feature",
	codePreconditionFailed:      "If-Match does not match the current version of the resource",
	codeUnavailable:             "the database cannot be reached; nothing was changed",
	codeInvalidAPIKey:           "the API key is not valid: unknown, revoked or expired",
	codeReservationNotFound:     "no reservation has this id",
	codeReservationExpired:      "the reservation expired before it was committed; its units were given back",
	codeKeyNotFound:             "no live API key has this id",
	codeCheckNotFound:           "the request_id names no check of this customer admitted within the last 24 hours: a refund gives back the units of such a check",
	codeNotFound:                "no such route",
	codeMethodNotAllowed:        "the route does not allow this method",
	codeSubjectRequired:         "the metric has limits per subject: the request must name a subject",
	codeGrantNotFound:           "no grant that is not voided has this id",
	codeCustomerSuspended:       "the customer is suspended",
	codeNoTotalLimit:            "no limit of window total on this metric is in effect for the customer: only a total can be set",
}

// toProblem turns any error a handler returns into the problem to send.
func toProblem(err error) (Problem, bool) {
	var ae *apiError
	var ve *tiers.ValidationError
	var he *echo.HTTPError
	var ce *billing.ConflictError
	switch {
	case errors.As(err, &ce):
		return newProblem(http.StatusConflict, codeConflict, ce.Detail, nil), true
	case errors.As(err, &ae):
		return newProblem(ae.status, ae.code, ae.detail, ae.fields), true
	case errors.As(err, &ve):
		return newProblem(http.StatusBadRequest, codeValidation, "the request is invalid", ve.Fields), true
	case errors.As(err, &he):
		return echoProblem(he), true
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			detail := details[row.code]
			if errors.Is(err, tiers.ErrMetricInUse) {
				detail = "a plan, a version of a plan that customers are on, or an override (expired ones too) still uses this metric, or a credit pool's schema names it"
			}
			if errors.Is(err, tiers.ErrPlanInUse) {
				detail = "customers are still on this plan"
			}
			if errors.Is(err, webhooks.ErrWebhookNotFound) {
				detail = "no webhook has this id"
			}
			if se := (*tiers.SuspendedError)(nil); errors.As(err, &se) {
				detail = se.Error()
			}
			if capErr := (*tiers.CapError)(nil); errors.As(err, &capErr) {
				detail = capErr.Error()
			}
			var ce *customerError
			if row.code == codeCustomerNotFound && errors.As(err, &ce) {
				detail = fmt.Sprintf("no customer has the id %q", ce.id)
			}
			if row.code == codeConflict && detail == "" {
				detail = err.Error()
			}
			var fields []tiers.FieldError
			if fc := (*fieldCause)(nil); errors.As(err, &fc) {
				switch row.code {
				case codeMetricNotFound:
					detail = fmt.Sprintf("%s: no metric with the key %q is declared", fc.field, fc.value)
				case codeSubjectRequired:
					if fc.value != "" {
						detail = fmt.Sprintf("the metric %q has limits per subject: the request must name a subject", fc.value)
					}
					fields = []tiers.FieldError{{Field: fc.field, Message: "is required: the metric has limits per subject"}}
				}
			}
			return newProblem(row.status, row.code, detail, fields), true
		}
	}
	return newProblem(http.StatusInternalServerError, codeInternal, "internal error", nil), false
}

func echoProblem(he *echo.HTTPError) Problem {
	switch he.Code {
	case http.StatusNotFound:
		return newProblem(he.Code, codeNotFound, details[codeNotFound], nil)
	case http.StatusMethodNotAllowed:
		return newProblem(he.Code, codeMethodNotAllowed, details[codeMethodNotAllowed], nil)
	case http.StatusRequestEntityTooLarge:
		return newProblem(he.Code, codePayloadTooLarge, "the request body exceeds 64 KiB", nil)
	case http.StatusUnsupportedMediaType:
		return newProblem(he.Code, codeUnsupportedMedia, "the request body must be application/json", nil)
	case http.StatusUnauthorized:
		return newProblem(he.Code, codeUnauthorized, "a valid bearer token is required", nil)
	case http.StatusForbidden:
		return newProblem(he.Code, codeForbidden, "this token may not call this route", nil)
	case http.StatusServiceUnavailable:
		return newProblem(he.Code, codeUnavailable, "the service is unavailable", nil)
	}
	if he.Code >= 400 && he.Code < 500 {
		return newProblem(http.StatusBadRequest, codeValidation, "the request is malformed", nil)
	}
	return newProblem(http.StatusInternalServerError, codeInternal, "internal error", nil)
}

func newProblem(status int, code, detail string, fields []tiers.FieldError) Problem {
	return Problem{
		Type:   problemTypePrefix + code,
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
		Errors: fields,
	}
}

// errorHandler is echo's HTTPErrorHandler: every error becomes a problem
// document. Unknown errors are logged in full here and answered with a
// generic 500 that names nothing internal.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	// The routes under /v1/customers/:customer are all about that one.
	p, known := toProblem(aboutCustomer(c.Param("customer"), err))
	req := c.Request()
	switch {
	case errors.Is(err, context.Canceled) && req.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		s.log.Debug("request canceled", "method", req.Method, "path", req.URL.Path)
		return
	case !known:
		s.log.Error("internal error", "method", req.Method, "path", req.URL.Path, "error", err)
	case p.Status == http.StatusServiceUnavailable:
		s.log.Warn("store unavailable", "method", req.Method, "path", req.URL.Path, "error", err)
	}
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set(headerWWWAuthenticate, wwwAuthenticateChallenge)
	}
	writeProblem(c, p)
}

func writeProblem(c echo.Context, p Problem) {
	c.Response().Header().Set(echo.HeaderContentType, contentTypeProblemJSON)
	c.Response().WriteHeader(p.Status)
	if c.Request().Method == http.MethodHead {
		return
	}
	_ = writeJSONBody(c.Response(), p)
}
