// Package catalogfile is quotad's catalog as code: a YAML file of metrics,
// plans and, optionally, customers with their overrides; its parsing and
// validation with the line of every error; the normalised catalog both a
// file and a server's answers turn into; the changes that take a server from
// one catalog to another; and how those changes are printed.
//
// The package speaks no HTTP: the caller reads the server's catalog, hands
// it over in the file's own form (File), and makes the changes Diff returns.
//
// The file's form mirrors the admin API's bodies, keyed by resource name:
//
//	metrics:
//	  api_calls:
//	    description: Calls to the public API
//	    capacity: {day: 10000000}
//	  credits:
//	    credit_schema:
//	      - {metric: api_calls, credits: 3, per: 100}
//	plans:
//	  pro:
//	    name: Pro
//	    price: {amount_cents: 4900, currency: USD, interval: month}
//	    limits:
//	      - {metric: api_calls, window: second, limit: 50}
//	      - {metric: api_calls, window: second, per: subject, limit: 5}
//	    features: {sso: true, max_projects: 10, support: priority}
//	customers:
//	  acme:
//	    plan: pro
//	    overrides:
//	      - {metric: api_calls, window: day, limit: 200000, reason: launch week}
//	      - {metric: api_calls, window: second, per: subject, limit: 10}
//
// A section left out of a file is not managed by it: nothing in it is
// compared, and --prune deletes nothing there. A section present, even
// empty, is the whole truth for its kind.
package catalogfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is a catalog file as written. Pointers and nil maps tell a field or
// section left out from one set to its zero value. Every field is the
// admin API's field of the same name; a field left out takes the API's
// default, as a PUT does.
type File struct {
	Metrics   map[string]*Metric   `yaml:"metrics,omitempty"`
	Plans     map[string]*Plan     `yaml:"plans,omitempty"`
	Customers map[string]*Customer `yaml:"customers,omitempty"`
}

// Each entry holds the fields of its PUT body; the caller converts it to
// and from the bodies it sends and reads. A customer's metadata is read
// and written with MetadataObject and SetMetadataObject, its overrides are
// bodies of their own.

// Metric is a metric's entry: the body of PUT /v1/metrics/{metric}.
type Metric struct {
	Description  *string           `yaml:"description,omitempty"`
	Capacity     map[string]*int64 `yaml:"capacity,omitempty"`
	CreditSchema []CreditRate      `yaml:"credit_schema,omitempty"`
}

// CreditRate is one entry of a credit pool's schema: a metric that draws
// on the pool, and at what rate.
type CreditRate struct {
	Metric  string `yaml:"metric"`
	Credits *int64 `yaml:"credits"`
	Per     *int64 `yaml:"per,omitempty"`
}

// Plan is a plan's entry: the body of PUT /v1/plans/{plan}.
type Plan struct {
	Name        *string `yaml:"name,omitempty"`
	Description *string `yaml:"description,omitempty"`
	// Public: the plan may be offered as a denied check's upgrade.
	Public *bool   `yaml:"public,omitempty"`
	Price  *Price  `yaml:"price,omitempty"`
	Limits []Limit `yaml:"limits,omitempty"`
	// Features are scalars by feature key: true or false, an integer or a
	// string (read and written with FeatureValues and SetFeatureValues).
	Features map[string]*yaml.Node `yaml:"features,omitempty"`
}

// Price is a plan's price.
type Price struct {
	AmountCents *int64  `yaml:"amount_cents,omitempty"`
	Currency    *string `yaml:"currency,omitempty"`
	Interval    *string `yaml:"interval,omitempty"`
}

// Limit is one limit of a plan.
type Limit struct {
	Metric             string  `yaml:"metric"`
	Window             string  `yaml:"window"`
	Per                *string `yaml:"per,omitempty"`
	Limit              *int64  `yaml:"limit"`
	Mode               *string `yaml:"mode,omitempty"`
	OveragePercent     *int64  `yaml:"overage_percent,omitempty"`
	OveragePriceMicros *int64  `yaml:"overage_price_micros,omitempty"`
	Ceiling            *int64  `yaml:"ceiling,omitempty"`
	Algorithm          *string `yaml:"algorithm,omitempty"`
	Burst              *int64  `yaml:"burst,omitempty"`
	// Rollover: see tiers.Limit.Rollover.
	Rollover *Rollover `yaml:"rollover,omitempty"`
}

// Rollover is a limit's rollover: rollover: {max: 1000}.
type Rollover struct {
	Max int64 `yaml:"max"`
}

// Customer is a customer's entry: the body of PUT /v1/customers/{customer},
// and the customer's overrides. Its overrides are all it has: one the
// server holds and the entry does not list is deleted by --prune.
type Customer struct {
	Plan             *string `yaml:"plan"`
	Name             *string `yaml:"name,omitempty"`
	BillingAnchorDay *int64  `yaml:"billing_anchor_day,omitempty"`
	TimeZone         *string `yaml:"time_zone,omitempty"` // an IANA name; UTC when left out
	// Metadata is a mapping, stored by quotad as a JSON object.
	Metadata  *yaml.Node `yaml:"metadata,omitempty"`
	Overrides []Override `yaml:"overrides,omitempty"`
}

// Override is one override of a customer: metric, window and per name it
// (per left out: the customer-wide one), the rest is the body of
// PUT /v1/customers/{customer}/overrides/{metric}/{window}?per={per}.
type Override struct {
	Metric             string     `yaml:"metric"`
	Window             string     `yaml:"window"`
	Per                *string    `yaml:"per,omitempty"`
	Limit              *int64     `yaml:"limit"`
	Mode               *string    `yaml:"mode,omitempty"`
	OveragePercent     *int64     `yaml:"overage_percent,omitempty"`
	OveragePriceMicros *int64     `yaml:"overage_price_micros,omitempty"`
	Ceiling            *int64     `yaml:"ceiling,omitempty"`
	Algorithm          *string    `yaml:"algorithm,omitempty"`
	Burst              *int64     `yaml:"burst,omitempty"`
	Rollover           *Rollover  `yaml:"rollover,omitempty"`
	ExpiresAt          *time.Time `yaml:"expires_at,omitempty"`
	Reason             *string    `yaml:"reason,omitempty"`
}

// MetadataObject returns the customer's metadata as the JSON object it
// stands for, nil when it has none. Its numbers are json.Number, so that
// they keep their digits when encoded.
func (c *Customer) MetadataObject() (map[string]any, error) {
	if c.Metadata == nil {
		return nil, nil
	}
	raw, ferr := nodeToJSON(c.Metadata, "metadata")
	if ferr != nil {
		return nil, Error{Line: ferr.line, Field: ferr.field, Message: ferr.msg}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return obj, nil
}

// SetMetadataObject sets the customer's metadata from a JSON object (as
// encoding/json decodes one; numbers as json.Number keep their digits).
// nil or empty leaves it unset.
func (c *Customer) SetMetadataObject(obj map[string]any) error {
	if obj == nil {
		c.Metadata = nil
		return nil
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	n, err := jsonToNode(raw)
	if err != nil {
		return err
	}
	c.Metadata = n
	return nil
}
