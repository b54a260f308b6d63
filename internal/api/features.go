package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/tiers"
)

// codeFeatureNotGranted is a forward-auth route's feature that the
// customer is not granted.
const codeFeatureNotGranted = "feature_not_granted"

// codeFeatureOverrideNotFound: the customer has no override of the
// feature.
const codeFeatureOverrideNotFound = "feature_override_not_found"

// FeatureChecker answers whether a customer is granted a feature, from
// memory. *tiers.FeatureChecker implements it; its errors are tiers'
// sentinels and *tiers.ValidationError.
type FeatureChecker interface {
	Feature(ctx context.Context, customer, feature string) (tiers.FeatureValue, error)
}

var _ FeatureChecker = (*tiers.FeatureChecker)(nil)

// FeatureCatalog is the catalog's features of customers: those they have,
// and the overrides of their plans' features. *tiers.Service implements
// it; its errors are tiers' sentinels and *tiers.ValidationError.
type FeatureCatalog interface {
	Features(ctx context.Context, id string) (tiers.Account, map[string]tiers.FeatureValue, error)
	PutFeatureOverride(ctx context.Context, w tiers.Write, customer, feature string, spec tiers.FeatureOverrideSpec) (tiers.FeatureOverride, bool, error)
	DeleteFeatureOverride(ctx context.Context, w tiers.Write, customer, feature string) error
}

var _ FeatureCatalog = (*tiers.Service)(nil)

// errNoFeatures answers the feature routes of a server without a
// FeatureChecker.
var errNoFeatures = problemf(http.StatusNotFound, codeNotFound, "this server answers no feature checks")

// featureGate answers whether a customer has a feature, for POST
// /v1/features/check and the forward-auth routes that require one.
type featureGate struct {
	features FeatureChecker
}

// feature asks g's FeatureChecker.
func (g featureGate) feature(ctx context.Context, customer, feature string) (tiers.FeatureValue, error) {
	if g.features == nil {
		return tiers.FeatureValue{}, errNoFeatures
	}
	return g.features.Feature(ctx, customer, feature)
}

// featureCheckRequest is the body of POST /v1/features/check.
type featureCheckRequest struct {
	Customer string `json:"customer"`
	APIKey   string `json:"api_key"`
	Feature  string `json:"feature"`
}

// featureCheckAnswer is its answer.
type featureCheckAnswer struct {
	Customer string             `json:"customer"`
	Feature  string             `json:"feature"`
	Allowed  bool               `json:"allowed"`
	Value    tiers.FeatureValue `json:"value"`
}

// featuresAnswer is the body of GET /v1/customers/{customer}/features.
type featuresAnswer struct {
	Customer  string                        `json:"customer"`
	Plan      string                        `json:"plan"`
	Features  map[string]tiers.FeatureValue `json:"features"`
	Overrides []tiers.FeatureOverride       `json:"overrides"`
}

// featureHandlers serve the features' routes: the check of one, and a
// customer's features with their overrides.
type featureHandlers struct {
	catalog FeatureCatalog
	gate    featureGate
	ids     identifier
}

// checkFeature answers whether a customer, named or found by one of its
// API keys, is granted a feature, from memory; nothing is counted.
func (h *featureHandlers) checkFeature(c echo.Context) error {
	var req featureCheckRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := call{Customer: req.Customer, APIKey: req.APIKey}
	if err := h.ids.identify(ctx, &who); err != nil {
		return err
	}
	v, err := h.gate.feature(ctx, who.Customer, req.Feature)
	if err != nil {
		return byKey(&who, err)
	}
	return respond(c, http.StatusOK, featureCheckAnswer{Customer: who.Customer, Feature: req.Feature,
		Allowed: v.Allowed(), Value: v})
}

func (h *featureHandlers) listFeatures(c echo.Context) error {
	a, features, err := h.catalog.Features(c.Request().Context(), param(c, "customer"))
	if err != nil {
		return err
	}
	overrides := a.FeatureOverrides
	if overrides == nil {
		overrides = []tiers.FeatureOverride{}
	}
	return respond(c, http.StatusOK, featuresAnswer{Customer: a.Customer.ID, Plan: a.Plan.Key,
		Features: features, Overrides: overrides})
}

func (h *featureHandlers) putFeature(c echo.Context) error {
	var spec tiers.FeatureOverrideSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	o, created, err := h.catalog.PutFeatureOverride(c.Request().Context(), writeOf(c),
		param(c, "customer"), param(c, "feature"), spec)
	if err != nil {
		return err
	}
	return respondResource(c, created, o.Version, o)
}

func (h *featureHandlers) deleteFeature(c echo.Context) error {
	err := h.catalog.DeleteFeatureOverride(c.Request().Context(), writeOf(c), param(c, "customer"), param(c, "feature"))
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// headerFeature names, on a forward-auth answer of 403
// feature_not_granted, the feature the route requires: nginx, which
// cannot pass quotad's body on, writes its problem from it.
const headerFeature = "X-Quotad-Feature"

// granted returns nil when customer is granted feature now, else
// the 403 feature_not_granted problem, naming the feature in
// headerFeature: the answer of a forward-auth route that requires it.
func (g featureGate) granted(c echo.Context, customer, feature string) error {
	v, err := g.feature(c.Request().Context(), customer, feature)
	if err != nil {
		return err
	}
	if !v.Allowed() {
		c.Response().Header().Set(headerFeature, feature)
		return problemf(http.StatusForbidden, codeFeatureNotGranted,
			"the customer's plan does not include the feature "+feature)
	}
	return nil
}
