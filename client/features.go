package quotad

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"time"
)

// Features are the features a plan grants, by key (as metric keys). A
// value is a bool (sso: true), an int64 (max_projects: 10) or a string
// (support: "priority"); quotad refuses any other. Read from quotad,
// integers are int64. A feature is granted unless its value is false or
// 0; one nothing grants is false.
type Features map[string]any

// UnmarshalJSON decodes a JSON object of feature values, integers as
// int64.
func (f *Features) UnmarshalJSON(data []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	for k, v := range obj {
		obj[k] = featureValue(v)
	}
	*f = obj
	return nil
}

// featureValue returns a feature's value as encoding/json decodes it into
// an any, an integer as int64: quotad's integers are within ±(2^53-1),
// which a float64 holds exactly.
func featureValue(v any) any {
	if f, ok := v.(float64); ok && f == math.Trunc(f) {
		return int64(f)
	}
	return v
}

// FeatureCheckRequest is the body of Client.CheckFeature: Customer or APIKey
// (one of the two), and the feature.
type FeatureCheckRequest struct {
	Customer string `json:"customer,omitempty"`
	APIKey   string `json:"api_key,omitempty"`
	Feature  string `json:"feature"`
}

// FeatureCheckResult is whether the customer is granted the feature.
type FeatureCheckResult struct {
	// Customer is the customer checked: the key's, for a check by APIKey.
	Customer string `json:"customer"`
	Feature  string `json:"feature"`
	// Allowed is false for false, 0 and a feature nothing grants.
	Allowed bool `json:"allowed"`
	// Value is what the customer is granted: a bool, an int64 or a
	// string; false when nothing grants the feature.
	Value any `json:"value"`
}

// FeatureOverrideSpec is the body of FeaturesService.Put.
type FeatureOverrideSpec struct {
	// Value is a bool, an integer or a string (see Features).
	Value any `json:"value"`
	// ExpiresAt, if set, must lie in the future; the plan's value applies
	// again from then on.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Reason is kept in the audit log.
	Reason string `json:"reason,omitempty"`
}

// FeatureOverride is a feature's value set for one customer, over its
// plan's.
type FeatureOverride struct {
	Customer string `json:"customer"`
	Feature  string `json:"feature"`
	// Value is a bool, an int64 or a string.
	Value     any        `json:"value"`
	ExpiresAt *time.Time `json:"expires_at"`
	Reason    string     `json:"reason"`
	// Expired: ExpiresAt has passed; the override no longer counts.
	Expired bool `json:"expired"`
	Meta
}

// CustomerFeatures are what a customer is granted now of every feature its
// plan or an unexpired override names, and its overrides.
type CustomerFeatures struct {
	Customer  string            `json:"customer"`
	Plan      string            `json:"plan"`
	Features  Features          `json:"features"`
	Overrides []FeatureOverride `json:"overrides"`
}

// CheckFeature asks quotad whether a customer is granted a feature: from
// quotad's memory, nothing counted. A check token may call it. An unknown
// customer is ErrCustomerNotFound, an unknown API key ErrInvalidAPIKey.
func (c *Client) CheckFeature(ctx context.Context, req FeatureCheckRequest) (*FeatureCheckResult, error) {
	var res FeatureCheckResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/features/check", body: req, retry: true, out: &res}); err != nil {
		return nil, err
	}
	res.Value = featureValue(res.Value)
	return &res, nil
}

// FeaturesService reads a customer's features and manages their overrides;
// Client.CheckFeature checks one.
type FeaturesService service

// Get gets what a customer is granted of every feature, and its
// overrides of them (expired ones included).
func (s *FeaturesService) Get(ctx context.Context, customer string) (*CustomerFeatures, error) {
	var f CustomerFeatures
	if err := s.client.get(ctx, pathf("/v1/customers/%s/features", customer), &f, nil); err != nil {
		return nil, err
	}
	for i := range f.Overrides {
		f.Overrides[i].Value = featureValue(f.Overrides[i].Value)
		f.Overrides[i].ETag = etagOf(f.Overrides[i].Version)
	}
	return &f, nil
}

// Put creates or replaces a customer's override of a feature, and
// says whether it created it.
func (s *FeaturesService) Put(ctx context.Context, customer, feature string, spec FeatureOverrideSpec, opts ...WriteOption) (*FeatureOverride, bool, error) {
	var o FeatureOverride
	created, err := s.client.put(ctx, pathf("/v1/customers/%s/features/%s", customer, feature), spec, &o, &o.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	o.Value = featureValue(o.Value)
	return &o, created, nil
}

// Delete deletes a customer's override of a feature: its plan's
// value applies again. ErrFeatureOverrideNotFound if there is none.
func (s *FeaturesService) Delete(ctx context.Context, customer, feature string, opts ...WriteOption) error {
	return s.client.del(ctx, pathf("/v1/customers/%s/features/%s", customer, feature), opts)
}
