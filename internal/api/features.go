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

// errNoFeatures answers the feature routes of a server without a
// FeatureChecker.
var errNoFeatures = problemf(http.StatusNotFound, codeNotFound, "this server answers no feature checks")

// feature asks the server's FeatureChecker.
func (s *Server) feature(ctx context.Context, customer, feature string) (tiers.FeatureValue, error) {
	if s.features == nil {
		return tiers.FeatureValue{}, errNoFeatures
	}
	return s.features.Feature(ctx, customer, feature)
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

func (s *Server) registerFeatures(v1 *echo.Group) {
	v1.POST("/features/check", s.checkFeature)
	v1.GET("/customers/:customer/features", s.listFeatures)
	v1.PUT("/customers/:customer/features/:feature", s.putFeature)
	v1.DELETE("/customers/:customer/features/:feature", s.deleteFeature)
}

// checkFeature answers whether a customer, named or found by one of its
// API keys, is granted a feature, from memory; nothing is counted.
func (s *Server) checkFeature(c echo.Context) error {
	var req featureCheckRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := call{Customer: req.Customer, APIKey: req.APIKey}
	if err := s.identify(ctx, &who); err != nil {
		return err
	}
	v, err := s.feature(ctx, who.Customer, req.Feature)
	if err != nil {
		return byKey(&who, err)
	}
	return respond(c, http.StatusOK, featureCheckAnswer{Customer: who.Customer, Feature: req.Feature,
		Allowed: v.Allowed(), Value: v})
}

func (s *Server) listFeatures(c echo.Context) error {
	a, features, err := s.catalog.Features(c.Request().Context(), param(c, "customer"))
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

func (s *Server) putFeature(c echo.Context) error {
	var spec tiers.FeatureOverrideSpec
	if err := decodeBody(c, &spec); err != nil {
		return err
	}
	o, created, err := s.catalog.PutFeatureOverride(c.Request().Context(), s.write(c),
		param(c, "customer"), param(c, "feature"), spec)
	if err != nil {
		return err
	}
	return respondResource(c, created, o.Version, o)
}

func (s *Server) deleteFeature(c echo.Context) error {
	err := s.catalog.DeleteFeatureOverride(c.Request().Context(), s.write(c), param(c, "customer"), param(c, "feature"))
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// headerFeature names, on a forward-auth answer of 403
// feature_not_granted, the feature the route requires: nginx, which
// cannot pass quotad's body on, writes its problem from it.
const headerFeature = "X-Quotad-Feature"

// featureGranted returns nil when customer is granted feature now, else
// the 403 feature_not_granted problem, naming the feature in
// headerFeature: the answer of a forward-auth route that requires it.
func (s *Server) featureGranted(c echo.Context, customer, feature string) error {
	v, err := s.feature(c.Request().Context(), customer, feature)
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
