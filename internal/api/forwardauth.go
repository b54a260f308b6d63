package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/forwardauth"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// forwardAuthPath is the forward-auth route. Below it, /v1/forward-auth/*
// answers every method: Envoy's ext_authz sends the original request's
// method and appends its path to the path prefix.
const forwardAuthPath = "/v1/forward-auth"

// forwardAuthMethods are the methods /v1/forward-auth/* answers: the ones
// an OpenAPI document can describe.
var forwardAuthMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions, http.MethodTrace,
}

// headerCustomer carries the customer a forward-auth check resolved to, so
// that a gateway may pass it on upstream.
const headerCustomer = "X-Quotad-Customer"

// codePathNotCanonical is an original request path that forward-auth
// will not match to a route (see forwardauth.PathError).
const codePathNotCanonical = "path_not_canonical"

// forwardAuthHandler serves GET /v1/forward-auth and the routes below it:
// the checks of gateways, from the headers they forward.
type forwardAuthHandler struct {
	rules   *forwardauth.Rules
	keys    KeyResolver
	decider *decider
	gate    featureGate
	log     *slog.Logger
	forms   rlheaders.Forms
}

// forwardAuth decides one check from a gateway's forwarded headers: 200
// with an empty body and the RateLimit headers when it passes, 429 with
// Retry-After when it does not; a route that requires a feature the
// customer is not granted is 403 feature_not_granted, with nothing
// counted (see forwardauth.Rules for where customer,
// metric, cost and subject come from; a check by a key quotad issued,
// without a subject header, counts for the key's id).
func (fa *forwardAuthHandler) forwardAuth(c echo.Context) error {
	req := c.Request()
	fr := forwardauth.Request{Method: req.Method, Header: req.Header}
	if c.Path() != forwardAuthPath {
		// The original path as the gateway sent it: "/" and the wildcard.
		fr.Suffix = "/" + c.Param("*")
		if rest, ok := strings.CutPrefix(req.URL.EscapedPath(), forwardAuthPath+"/"); ok {
			fr.Suffix = "/" + rest
		}
		if req.URL.RawQuery != "" {
			fr.Suffix += "?" + req.URL.RawQuery
		}
	}
	call, err := fa.rules.Resolve(fr)
	log := callLogOf(fa.log, c)
	if log != nil {
		log.customer, log.metric, log.subject, log.cost = call.Customer, call.Metric, call.Subject, call.Cost
	}
	if call.APIKey != "" {
		// Not one of the file's api_keys: one quotad issued, or none. An
		// unknown key is refused before anything else, as the file's are.
		keyErr := error(forwardauth.ErrUnknownKey)
		var id string
		if fa.keys != nil {
			call.Customer, id, keyErr = fa.keys.Customer(req.Context(), call.APIKey)
		}
		if call.Subject == "" {
			call.Subject = id
		}
		if keyErr != nil {
			fa.decider.reject()
			if log != nil {
				log.failed(keyErr)
			}
			return fa.forwardAuthError(keyErr)
		}
	}
	if err != nil {
		// Refused before any check, as a malformed POST /v1/check is.
		fa.decider.reject()
		if log != nil {
			log.failed(err)
		}
		if errors.Is(err, forwardauth.ErrNoKey) {
			// No Bearer challenge: the credential wanted is the API-key
			// header, and nginx passes a 401's challenge on to the client.
			writeProblem(c, newProblem(http.StatusUnauthorized, codeUnauthorized, "the "+fa.rules.Headers().APIKey+" header is required", nil))
			return nil
		}
		return fa.forwardAuthError(err)
	}
	if call.Pass {
		if log != nil {
			log.decision = "passed" // a route that checks nothing
		}
		// An empty customer rather than none: Caddy's copy_headers would
		// otherwise send its placeholder upstream, unreplaced.
		c.Response().Header()[headerCustomer] = []string{""}
		return c.NoContent(http.StatusOK)
	}
	if call.Feature != "" {
		// Before anything is counted: a request refused for its plan
		// takes nothing.
		err := fa.gate.granted(c, call.Customer, call.Feature)
		if log != nil {
			log.customer = call.Customer // a key's, resolved
		}
		if err != nil {
			if log != nil {
				log.failed(err)
			}
			return fa.forwardAuthError(byForwardedKey(&call, err))
		}
		if call.Metric == "" {
			if log != nil {
				log.decision = "passed" // a route that requires a feature and counts nothing
			}
			c.Response().Header()[headerCustomer] = []string{call.Customer}
			return c.NoContent(http.StatusOK)
		}
	}
	d, now, err := fa.decider.decide(req.Context(), quota.Request{Customer: call.Customer, Metric: call.Metric, Cost: call.Cost,
		Subject: call.Subject})
	err = byForwardedKey(&call, err)
	if log != nil {
		log.customer, log.subject = call.Customer, call.Subject
		log.decided(&d, err)
	}
	if err != nil {
		return fa.forwardAuthError(aboutMetric(call.Metric, err))
	}
	h := c.Response().Header()
	setCheckHeaders(h, fa.forms, &d, now)
	h.Del(echo.HeaderContentType)
	if d.Allowed {
		// For the upstream only: a denial goes to the client as it is
		// (Traefik, Caddy), and the customer is none of its business.
		h[headerCustomer] = []string{call.Customer}
		return c.NoContent(http.StatusOK)
	}
	var code, detail string
	switch {
	case d.Never:
		code, detail = codeCostExceedsLimit, neverDetail(&d)
	default:
		code, detail = codeQuotaExceeded, deniedDetail(&d)
	}
	p := newProblem(http.StatusTooManyRequests, code, detail, nil)
	p.Upgrade = newUpgradeBody(d.Upgrade)
	writeProblem(c, p)
	return nil
}

// byForwardedKey turns an error about a customer that an API key
// resolved to but is gone (deleted since) into the key's refusal.
func byForwardedKey(call *forwardauth.Call, err error) error {
	if call.APIKey != "" && errors.Is(err, tiers.ErrCustomerNotFound) {
		return tiers.ErrInvalidAPIKey
	}
	return err
}

// forwardAuthError turns the errors of resolving and checking into the
// problems a gateway acts on: 401 and 403 reach the client through every
// gateway, 400 means the gateway's configuration sends what it should not,
// or, path_not_canonical, that the client sent a path no route is sure of.
// Validation errors name the headers the values came from; a subject
// required names the subject header, or, without one, the file's
// headers.subject that would name it.
func (fa *forwardAuthHandler) forwardAuthError(err error) error {
	h := fa.rules.Headers()
	subject := h.Subject
	if subject == "" {
		subject = "headers.subject"
	}
	var he *forwardauth.HeaderError
	var pe *forwardauth.PathError
	var ve *tiers.ValidationError
	var fc *fieldCause
	switch {
	case errors.As(err, &fc) && errors.Is(err, tiers.ErrSubjectRequired):
		return &fieldCause{field: subject, value: fc.value, err: tiers.ErrSubjectRequired}
	case errors.Is(err, forwardauth.ErrNoKey):
		return problemf(http.StatusUnauthorized, codeUnauthorized, "the "+h.APIKey+" header is required")
	case errors.Is(err, forwardauth.ErrUnknownKey), errors.Is(err, tiers.ErrInvalidAPIKey):
		return problemf(http.StatusForbidden, codeForbidden, "the API key is not known")
	case errors.Is(err, forwardauth.ErrNoRoute):
		return problemf(http.StatusForbidden, codeForbidden, "no forward-auth route matches the original request")
	case errors.As(err, &he):
		return invalid(he.Header, he.Message)
	case errors.As(err, &pe):
		return &apiError{status: http.StatusBadRequest, code: codePathNotCanonical,
			detail: "the original request's path " + pe.Reason + ": quotad does not guess which route the upstream serves it as",
			fields: []tiers.FieldError{{Field: pe.Header, Message: "the path " + pe.Reason}}}
	case errors.As(err, &ve):
		fields := make([]tiers.FieldError, len(ve.Fields))
		for i, f := range ve.Fields {
			switch f.Field {
			case "customer":
				f.Field = h.Customer
				if h.APIKey != "" {
					f.Field = "api_keys"
				}
			case "metric":
				f.Field = h.Metric
			case "cost":
				f.Field = h.Cost
			case "subject":
				f.Field = subject
			}
			fields[i] = f
		}
		return &apiError{status: http.StatusBadRequest, code: codeValidation, detail: "the request is invalid", fields: fields}
	}
	return err
}
