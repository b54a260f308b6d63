package quotad

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is an error answer of quotad: an RFC 9457 problem document with
// quotad's stable Code. An error answer that is not a problem document
// becomes a Problem with its Status, the status's Title, the start of its
// body as Detail and no Code.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Code   string       `json:"code"`
	Errors []FieldError `json:"errors,omitempty"`
	// Upgrade, on a 429 of quotad's forward-auth or of Middleware, is the
	// denied check's CheckResult.Upgrade.
	Upgrade *Upgrade `json:"upgrade,omitempty"`
}

// FieldError names one bad field of a request (its JSON path, e.g.
// limits[0].window, or a path or query parameter) and what is wrong.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error describes the problem on one line.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString("quotad: ")
	b.WriteString(strconv.Itoa(p.Status))
	if p.Code != "" {
		b.WriteString(" ")
		b.WriteString(p.Code)
	} else if p.Title != "" {
		b.WriteString(" ")
		b.WriteString(p.Title)
	}
	if p.Detail != "" {
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	for i, f := range p.Errors {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString("; ")
		}
		if f.Field != "" {
			b.WriteString(f.Field)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
		if i == len(p.Errors)-1 {
			b.WriteString(")")
		}
	}
	return b.String()
}

// Is reports whether target is a sentinel this problem matches: by code
// (ErrCustomerNotFound matches customer_not_found) or by status
// (ErrNotFound matches every 404).
func (p *Problem) Is(target error) bool {
	s, ok := target.(*sentinel)
	if !ok {
		return false
	}
	return s.code != "" && p.Code == s.code || s.status != 0 && p.Status == s.status
}

// sentinel is an error value a *Problem matches with errors.Is.
type sentinel struct {
	msg    string
	code   string // matches this code, if set
	status int    // matches this status, if set
}

func (s *sentinel) Error() string { return s.msg }

// Sentinels for errors.Is. Those named after a status match every problem
// of that status, whatever its code.
var (
	// ErrValidation: 400, the request breaks a rule; Problem.Errors names
	// the fields.
	ErrValidation error = &sentinel{"quotad: validation failed", "validation_failed", http.StatusBadRequest}
	// ErrUnauthorized: 401, a missing or unknown token.
	ErrUnauthorized error = &sentinel{"quotad: unauthorized", "unauthorized", http.StatusUnauthorized}
	// ErrForbidden: 403, a check token on an admin route, or a refund
	// without a request_id where quotad requires one.
	ErrForbidden error = &sentinel{"quotad: forbidden", "forbidden", http.StatusForbidden}
	// ErrNotFound: any 404.
	ErrNotFound error = &sentinel{"quotad: not found", "not_found", http.StatusNotFound}
	// ErrCustomerNotFound: 404 customer_not_found.
	ErrCustomerNotFound error = &sentinel{"quotad: customer not found", "customer_not_found", 0}
	// ErrPlanNotFound: 404 plan_not_found.
	ErrPlanNotFound error = &sentinel{"quotad: plan not found", "plan_not_found", 0}
	// ErrPlanVersionNotFound: 404 plan_version_not_found, the plan has no
	// version of that number.
	ErrPlanVersionNotFound error = &sentinel{"quotad: plan version not found", "plan_version_not_found", 0}
	// ErrMetricNotFound: 404 metric_not_found.
	ErrMetricNotFound error = &sentinel{"quotad: metric not found", "metric_not_found", 0}
	// ErrOverrideNotFound: 404 override_not_found.
	ErrOverrideNotFound error = &sentinel{"quotad: override not found", "override_not_found", 0}
	// ErrFeatureOverrideNotFound: 404 feature_override_not_found, the
	// customer has no override of the feature.
	ErrFeatureOverrideNotFound error = &sentinel{"quotad: feature override not found", "feature_override_not_found", 0}
	// ErrFeatureNotGranted: 403 feature_not_granted, a gateway's route
	// (quotad's forward-auth) requires a feature the customer is not
	// granted. It matches ErrForbidden too.
	ErrFeatureNotGranted error = &sentinel{"quotad: feature not granted", "feature_not_granted", 0}
	// ErrKeyNotFound: 404 key_not_found, no live API key has the id.
	ErrKeyNotFound error = &sentinel{"quotad: api key not found", "key_not_found", 0}
	// ErrGrantNotFound: 404 grant_not_found, no grant that is not voided
	// has the id.
	ErrGrantNotFound error = &sentinel{"quotad: grant not found", "grant_not_found", 0}
	// ErrCustomerSuspended: 403 customer_suspended, a check, reservation
	// or feature check of a suspended customer (the Problem's Detail gives
	// the reason). Nothing was counted. It matches ErrForbidden too.
	ErrCustomerSuspended error = &sentinel{"quotad: customer suspended", "customer_suspended", 0}
	// ErrInvalidAPIKey: 403 invalid_api_key, a check or refund by an API
	// key that is unknown, revoked or expired.
	ErrInvalidAPIKey error = &sentinel{"quotad: invalid api key", "invalid_api_key", 0}
	// ErrSubjectRequired: 400 subject_required, a check, refund or
	// reserve of a metric with a limit per subject that names no subject
	// (Problem.Errors names the field). It matches ErrValidation too.
	ErrSubjectRequired error = &sentinel{"quotad: subject required", "subject_required", 0}
	// ErrMethodNotAllowed: 405.
	ErrMethodNotAllowed error = &sentinel{"quotad: method not allowed", "method_not_allowed", http.StatusMethodNotAllowed}
	// ErrConflict: 409, e.g. deleting a plan customers are on, a check
	// repeating a request_id with another metric or cost, or a second
	// refund (another cost) of one check.
	ErrConflict error = &sentinel{"quotad: conflict", "conflict", http.StatusConflict}
	// ErrCheckNotFound: 404 check_not_found, a refund's request_id names
	// no check of its customer admitted within the last 24 hours.
	ErrCheckNotFound error = &sentinel{"quotad: check not found", "check_not_found", 0}
	// ErrReservationNotFound: 404 reservation_not_found, no reservation
	// has this id.
	ErrReservationNotFound error = &sentinel{"quotad: reservation not found", "reservation_not_found", 0}
	// ErrReservationExpired: 410 reservation_expired, a commit of a
	// reservation quotad released at its expiry.
	ErrReservationExpired error = &sentinel{"quotad: reservation expired", "reservation_expired", http.StatusGone}
	// ErrPreconditionFailed: 412, an If-Match that does not match.
	ErrPreconditionFailed error = &sentinel{"quotad: precondition failed", "precondition_failed", http.StatusPreconditionFailed}
	// ErrPayloadTooLarge: 413.
	ErrPayloadTooLarge error = &sentinel{"quotad: payload too large", "payload_too_large", http.StatusRequestEntityTooLarge}
	// ErrUnsupportedMediaType: 415.
	ErrUnsupportedMediaType error = &sentinel{"quotad: unsupported media type", "unsupported_media_type", http.StatusUnsupportedMediaType}
	// ErrTooManyRequests: 429 from anything but a check or a reserve
	// (their 429 is a result), e.g. a proxy in front of quotad.
	ErrTooManyRequests error = &sentinel{"quotad: too many requests", "", http.StatusTooManyRequests}
	// ErrUnavailable: 503, quotad could not reach its database (nothing was
	// changed), or is not ready.
	ErrUnavailable error = &sentinel{"quotad: unavailable", "unavailable", http.StatusServiceUnavailable}
)

// maxDetail bounds the Detail taken from a body that is not a problem.
const maxDetail = 200

// problemFrom makes a *Problem of an error answer.
func problemFrom(resp *http.Response, body []byte) *Problem {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var p Problem
		if json.Unmarshal(body, &p) == nil && (p.Code != "" || p.Type != "") {
			if p.Status == 0 {
				p.Status = resp.StatusCode
			}
			if p.Title == "" {
				p.Title = http.StatusText(resp.StatusCode)
			}
			return &p
		}
	}
	detail := strings.TrimSpace(string(body))
	if len(detail) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut] + "…"
	}
	return &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: detail}
}
