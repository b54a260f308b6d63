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
//	plans:
//	  pro:
//	    name: Pro
//	    price: {amount_cents: 4900, currency: USD, interval: month}
//	    limits:
//	      - {metric: api_calls, window: second, limit: 50}
//	customers:
//	  acme:
//	    plan: pro
//	    overrides:
//	      - {metric: api_calls, window: day, limit: 200000, reason: launch week}
//
// A section left out of a file is not managed by it: nothing in it is
// compared, and --prune deletes nothing there. A section present, even
// empty, is the whole truth for its kind.
package catalogfile

import (
	"encoding/json"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is a catalog file as written. Pointers and nil maps tell a field or
// section left out from one set to its zero value. Every field is the
// admin API's field of the same name; a field left out takes the API's
// default, as a PUT does.
type File struct {
	Metrics   map[string]*Metric   `yaml:"metrics,omitempty" json:"metrics,omitempty"`
	Plans     map[string]*Plan     `yaml:"plans,omitempty" json:"plans,omitempty"`
	Customers map[string]*Customer `yaml:"customers,omitempty" json:"customers,omitempty"`
}

// The JSON tags make each entry the body of its PUT, as the admin API reads
// it; a customer's metadata is read and written with MetadataJSON and
// SetMetadataJSON, its overrides are bodies of their own.

// Metric is a metric's entry: the body of PUT /v1/metrics/{metric}.
type Metric struct {
	Description *string           `yaml:"description,omitempty" json:"description,omitempty"`
	Capacity    map[string]*int64 `yaml:"capacity,omitempty" json:"capacity,omitempty"`
}

// Plan is a plan's entry: the body of PUT /v1/plans/{plan}.
type Plan struct {
	Name        *string `yaml:"name,omitempty" json:"name,omitempty"`
	Description *string `yaml:"description,omitempty" json:"description,omitempty"`
	Price       *Price  `yaml:"price,omitempty" json:"price,omitempty"`
	Limits      []Limit `yaml:"limits,omitempty" json:"limits,omitempty"`
}

// Price is a plan's price.
type Price struct {
	AmountCents *int64  `yaml:"amount_cents,omitempty" json:"amount_cents,omitempty"`
	Currency    *string `yaml:"currency,omitempty" json:"currency,omitempty"`
	Interval    *string `yaml:"interval,omitempty" json:"interval,omitempty"`
}

// Limit is one limit of a plan.
type Limit struct {
	Metric             string  `yaml:"metric" json:"metric"`
	Window             string  `yaml:"window" json:"window"`
	Limit              *int64  `yaml:"limit" json:"limit"`
	Mode               *string `yaml:"mode,omitempty" json:"mode,omitempty"`
	OveragePercent     *int64  `yaml:"overage_percent,omitempty" json:"overage_percent,omitempty"`
	OveragePriceMicros *int64  `yaml:"overage_price_micros,omitempty" json:"overage_price_micros,omitempty"`
	Ceiling            *int64  `yaml:"ceiling,omitempty" json:"ceiling,omitempty"`
	Algorithm          *string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	Burst              *int64  `yaml:"burst,omitempty" json:"burst,omitempty"`
}

// Customer is a customer's entry: the body of PUT /v1/customers/{customer},
// and the customer's overrides. Its overrides are all it has: one the
// server holds and the entry does not list is deleted by --prune.
type Customer struct {
	Plan             *string `yaml:"plan" json:"plan"`
	Name             *string `yaml:"name,omitempty" json:"name,omitempty"`
	BillingAnchorDay *int64  `yaml:"billing_anchor_day,omitempty" json:"billing_anchor_day,omitempty"`
	// Metadata is a mapping, stored by quotad as a JSON object.
	Metadata  *yaml.Node `yaml:"metadata,omitempty" json:"-"`
	Overrides []Override `yaml:"overrides,omitempty" json:"-"`
}

// Override is one override of a customer: metric and window name it, the
// rest is the body of PUT /v1/customers/{customer}/overrides/{metric}/{window}.
type Override struct {
	Metric             string     `yaml:"metric" json:"-"`
	Window             string     `yaml:"window" json:"-"`
	Limit              *int64     `yaml:"limit" json:"limit"`
	Mode               *string    `yaml:"mode,omitempty" json:"mode,omitempty"`
	OveragePercent     *int64     `yaml:"overage_percent,omitempty" json:"overage_percent,omitempty"`
	OveragePriceMicros *int64     `yaml:"overage_price_micros,omitempty" json:"overage_price_micros,omitempty"`
	Ceiling            *int64     `yaml:"ceiling,omitempty" json:"ceiling,omitempty"`
	Algorithm          *string    `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	Burst              *int64     `yaml:"burst,omitempty" json:"burst,omitempty"`
	ExpiresAt          *time.Time `yaml:"expires_at,omitempty" json:"expires_at,omitempty"`
	Reason             *string    `yaml:"reason,omitempty" json:"reason,omitempty"`
}

// MetadataJSON returns the customer's metadata as a JSON object, nil when
// it has none.
func (c *Customer) MetadataJSON() (json.RawMessage, error) {
	if c.Metadata == nil {
		return nil, nil
	}
	raw, ferr := nodeToJSON(c.Metadata, "metadata")
	if ferr != nil {
		return nil, Error{Line: ferr.line, Field: ferr.field, Message: ferr.msg}
	}
	return raw, nil
}

// SetMetadataJSON sets the customer's metadata from a JSON object; null or
// {} leaves it unset.
func (c *Customer) SetMetadataJSON(raw json.RawMessage) error {
	n, err := jsonToNode(raw)
	if err != nil {
		return err
	}
	c.Metadata = n
	return nil
}
