package quotad

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// writeHeader applies write options.
func writeHeader(opts []WriteOption) http.Header {
	h := http.Header{}
	for _, o := range opts {
		o(&h)
	}
	return h
}

// get fetches one resource into out and sets its ETag.
func (c *Client) get(ctx context.Context, path string, out any, meta *Meta) error {
	r, err := c.do(ctx, call{method: http.MethodGet, path: path, retry: true, out: out})
	if err != nil {
		return err
	}
	setETag(meta, r)
	return nil
}

// put writes a resource and says whether it was created.
func (c *Client) put(ctx context.Context, path string, body, out any, meta *Meta, opts []WriteOption) (bool, error) {
	return c.putQuery(ctx, path, nil, body, out, meta, opts)
}

// putQuery is put with query parameters.
func (c *Client) putQuery(ctx context.Context, path string, query url.Values, body, out any, meta *Meta, opts []WriteOption) (bool, error) {
	r, err := c.do(ctx, call{method: http.MethodPut, path: path, query: query, body: body, header: writeHeader(opts),
		retry: true, ok: []int{http.StatusOK, http.StatusCreated}, out: out})
	if err != nil {
		return false, err
	}
	setETag(meta, r)
	return r.status == http.StatusCreated, nil
}

// del deletes a resource.
func (c *Client) del(ctx context.Context, path string, opts []WriteOption) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: path, header: writeHeader(opts),
		retry: true, ok: []int{http.StatusNoContent, http.StatusOK}})
	return err
}

// setETag takes the answer's ETag, or makes it of the version.
func setETag(meta *Meta, r *response) {
	if meta == nil {
		return
	}
	if tag := r.header.Get("ETag"); tag != "" {
		meta.ETag = tag
	} else if meta.Version > 0 {
		meta.ETag = etagOf(meta.Version)
	}
}

// page is one page of a list.
type page[T any] struct {
	items      []T
	nextCursor string
}

// paginate follows next_cursor from the first page on, yielding every item
// and stopping at the first error. fetch gets one page from a cursor ("" for
// the first).
func paginate[T any](ctx context.Context, fetch func(ctx context.Context, cursor string) (page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			p, err := fetch(ctx, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.items {
				if !yield(it, nil) {
					return
				}
			}
			if p.nextCursor == "" || p.nextCursor == cursor {
				return
			}
			cursor = p.nextCursor
		}
	}
}

// listQuery is the query of a list page.
func listQuery(cursor string, pageSize int) url.Values {
	q := url.Values{}
	if pageSize > 0 {
		q.Set("limit", strconv.Itoa(pageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// fillETags sets the ETag of listed resources from their versions.
func fillETags[T any](items []T, meta func(*T) *Meta) {
	for i := range items {
		m := meta(&items[i])
		m.ETag = etagOf(m.Version)
	}
}

// Metrics lists the declared metrics by key.
func (c *Client) Metrics(ctx context.Context) iter.Seq2[Metric, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Metric], error) {
		var out struct {
			Metrics    []Metric `json:"metrics"`
			NextCursor string   `json:"next_cursor"`
		}
		_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/metrics", query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Metrics, func(m *Metric) *Meta { return &m.Meta })
		return page[Metric]{out.Metrics, out.NextCursor}, err
	})
}

// Metric gets a metric; ErrMetricNotFound if it is not declared.
func (c *Client) Metric(ctx context.Context, key string) (*Metric, error) {
	var m Metric
	if err := c.get(ctx, pathf("/v1/metrics/%s", key), &m, &m.Meta); err != nil {
		return nil, err
	}
	return &m, nil
}

// PutMetric creates or replaces a metric, and says whether it created it.
func (c *Client) PutMetric(ctx context.Context, key string, spec MetricSpec, opts ...WriteOption) (*Metric, bool, error) {
	var m Metric
	created, err := c.put(ctx, pathf("/v1/metrics/%s", key), spec, &m, &m.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &m, created, nil
}

// DeleteMetric deletes a metric; ErrConflict while a plan or override
// limits it.
func (c *Client) DeleteMetric(ctx context.Context, key string, opts ...WriteOption) error {
	return c.del(ctx, pathf("/v1/metrics/%s", key), opts)
}

// Plans lists the plans by key.
func (c *Client) Plans(ctx context.Context) iter.Seq2[Plan, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Plan], error) {
		var out struct {
			Plans      []Plan `json:"plans"`
			NextCursor string `json:"next_cursor"`
		}
		_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/plans", query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Plans, func(p *Plan) *Meta { return &p.Meta })
		return page[Plan]{out.Plans, out.NextCursor}, err
	})
}

// Plan gets a plan; ErrPlanNotFound if there is none.
func (c *Client) Plan(ctx context.Context, key string) (*Plan, error) {
	var p Plan
	if err := c.get(ctx, pathf("/v1/plans/%s", key), &p, &p.Meta); err != nil {
		return nil, err
	}
	return &p, nil
}

// PutPlan creates or replaces a plan, and says whether it created it.
// Every metric its limits name must be declared (else ErrValidation).
func (c *Client) PutPlan(ctx context.Context, key string, spec PlanSpec, opts ...WriteOption) (*Plan, bool, error) {
	var p Plan
	created, err := c.put(ctx, pathf("/v1/plans/%s", key), spec, &p, &p.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &p, created, nil
}

// PutPlanGrandfathered is PutPlan keeping the plan's customers on the
// version they are on (PUT ?grandfather=true): a change of price, limits
// or features makes a new version that only customers new to the plan
// get, until MigratePlan moves the others.
func (c *Client) PutPlanGrandfathered(ctx context.Context, key string, spec PlanSpec, opts ...WriteOption) (*Plan, bool, error) {
	var p Plan
	q := url.Values{"grandfather": {"true"}}
	created, err := c.putQuery(ctx, pathf("/v1/plans/%s", key), q, spec, &p, &p.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &p, created, nil
}

// PlanVersions lists a plan's versions, oldest first; ErrPlanNotFound if
// there is no plan.
func (c *Client) PlanVersions(ctx context.Context, key string) iter.Seq2[PlanVersion, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[PlanVersion], error) {
		var out struct {
			Versions   []PlanVersion `json:"versions"`
			NextCursor string        `json:"next_cursor"`
		}
		_, err := c.do(ctx, call{method: http.MethodGet, path: pathf("/v1/plans/%s/versions", key),
			query: listQuery(cursor, 0), retry: true, out: &out})
		return page[PlanVersion]{out.Versions, out.NextCursor}, err
	})
}

// PlanVersion gets version n of a plan; ErrPlanVersionNotFound if it has
// none (ErrPlanNotFound if there is no plan).
func (c *Client) PlanVersion(ctx context.Context, key string, n int64) (*PlanVersion, error) {
	var v PlanVersion
	if err := c.get(ctx, pathf("/v1/plans/%s/versions/", key)+strconv.FormatInt(n, 10), &v, nil); err != nil {
		return nil, err
	}
	return &v, nil
}

// MigratePlan moves a plan's customers from older versions to a newer one
// (see MigrationSpec), or, with DryRun, only says what it would do: the
// customers, each with the windows whose current usage is beyond the
// limits it moves to. A dry run is retried like a read; a migration is
// not (a repeat moves nobody more, but answers differently).
func (c *Client) MigratePlan(ctx context.Context, key string, spec MigrationSpec) (*Migration, error) {
	var m Migration
	_, err := c.do(ctx, call{method: http.MethodPost, path: pathf("/v1/plans/%s/migrate", key), body: spec,
		retry: spec.DryRun, out: &m})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// DeletePlan deletes a plan; ErrConflict while customers are on it.
func (c *Client) DeletePlan(ctx context.Context, key string, opts ...WriteOption) error {
	return c.del(ctx, pathf("/v1/plans/%s", key), opts)
}

// Customers lists customers by id, those on f.Plan only if it is set.
func (c *Client) Customers(ctx context.Context, f CustomerFilter) iter.Seq2[Customer, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Customer], error) {
		var out struct {
			Customers  []Customer `json:"customers"`
			NextCursor string     `json:"next_cursor"`
		}
		q := listQuery(cursor, f.PageSize)
		if f.Plan != "" {
			q.Set("plan", f.Plan)
		}
		if f.Query != "" {
			q.Set("q", f.Query)
		}
		_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/customers", query: q, retry: true, out: &out})
		fillETags(out.Customers, func(c *Customer) *Meta { return &c.Meta })
		return page[Customer]{out.Customers, out.NextCursor}, err
	})
}

// Customer gets a customer; ErrCustomerNotFound if there is none.
func (c *Client) Customer(ctx context.Context, id string) (*Customer, error) {
	var cu Customer
	if err := c.get(ctx, pathf("/v1/customers/%s", id), &cu, &cu.Meta); err != nil {
		return nil, err
	}
	return &cu, nil
}

// PutCustomer creates or replaces a customer, and says whether it created
// it. An unknown plan is ErrValidation.
func (c *Client) PutCustomer(ctx context.Context, id string, spec CustomerSpec, opts ...WriteOption) (*Customer, bool, error) {
	var cu Customer
	created, err := c.put(ctx, pathf("/v1/customers/%s", id), spec, &cu, &cu.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &cu, created, nil
}

// SuspendCustomer suspends a customer for reason: its checks,
// reservations and feature checks are refused (ErrCustomerSuspended) in
// every quotad process from their next one. It reads the customer and
// writes it back suspended, If-Match its version (ErrPreconditionFailed
// when it changed in between), the rest of it as it was.
func (c *Client) SuspendCustomer(ctx context.Context, id, reason string) (*Customer, error) {
	return c.setStatus(ctx, id, StatusSuspended, reason)
}

// ResumeCustomer makes a suspended customer active again, as
// SuspendCustomer writes it.
func (c *Client) ResumeCustomer(ctx context.Context, id string) (*Customer, error) {
	return c.setStatus(ctx, id, StatusActive, "")
}

func (c *Client) setStatus(ctx context.Context, id, status, reason string) (*Customer, error) {
	cu, err := c.Customer(ctx, id)
	if err != nil {
		return nil, err
	}
	spec := cu.CustomerSpec
	spec.Status, spec.StatusReason = status, reason
	cu, _, err = c.PutCustomer(ctx, id, spec, IfMatch(cu.ETag))
	return cu, err
}

// DeleteCustomer deletes a customer, its overrides and live counters (its
// usage history stays).
func (c *Client) DeleteCustomer(ctx context.Context, id string, opts ...WriteOption) error {
	return c.del(ctx, pathf("/v1/customers/%s", id), opts)
}

// Limits gets a customer's effective limits.
func (c *Client) Limits(ctx context.Context, customer string) (*EffectiveLimits, error) {
	var l EffectiveLimits
	if err := c.get(ctx, pathf("/v1/customers/%s/limits", customer), &l, nil); err != nil {
		return nil, err
	}
	return &l, nil
}

// Overrides lists a customer's overrides, expired ones included, by metric
// then window.
func (c *Client) Overrides(ctx context.Context, customer string) iter.Seq2[Override, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Override], error) {
		var out struct {
			Overrides  []Override `json:"overrides"`
			NextCursor string     `json:"next_cursor"`
		}
		_, err := c.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/overrides", customer),
			query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Overrides, func(o *Override) *Meta { return &o.Meta })
		return page[Override]{out.Overrides, out.NextCursor}, err
	})
}

// Override gets one customer-wide override; ErrOverrideNotFound if there
// is none.
func (c *Client) Override(ctx context.Context, customer, metric, window string) (*Override, error) {
	return c.OverridePer(ctx, customer, metric, window, "")
}

// OverridePer gets the override per says, PerCustomer or PerSubject (""
// is PerCustomer); ErrOverrideNotFound if there is none.
func (c *Client) OverridePer(ctx context.Context, customer, metric, window, per string) (*Override, error) {
	var o Override
	r, err := c.do(ctx, call{method: http.MethodGet, path: overridePath(customer, metric, window), query: perQuery(per),
		retry: true, out: &o})
	if err != nil {
		return nil, err
	}
	setETag(&o.Meta, r)
	return &o, nil
}

// PutOverride creates or replaces a customer-wide override, and says
// whether it created it.
func (c *Client) PutOverride(ctx context.Context, customer, metric, window string, spec OverrideSpec, opts ...WriteOption) (*Override, bool, error) {
	return c.PutOverridePer(ctx, customer, metric, window, "", spec, opts...)
}

// PutOverridePer creates or replaces the override per says, PerCustomer
// or PerSubject ("" is PerCustomer), and says whether it created it.
func (c *Client) PutOverridePer(ctx context.Context, customer, metric, window, per string, spec OverrideSpec, opts ...WriteOption) (*Override, bool, error) {
	var o Override
	r, err := c.do(ctx, call{method: http.MethodPut, path: overridePath(customer, metric, window), query: perQuery(per),
		body: spec, header: writeHeader(opts), retry: true, ok: []int{http.StatusOK, http.StatusCreated}, out: &o})
	if err != nil {
		return nil, false, err
	}
	setETag(&o.Meta, r)
	return &o, r.status == http.StatusCreated, nil
}

// DeleteOverride deletes a customer-wide override.
func (c *Client) DeleteOverride(ctx context.Context, customer, metric, window string, opts ...WriteOption) error {
	return c.DeleteOverridePer(ctx, customer, metric, window, "", opts...)
}

// DeleteOverridePer deletes the override per says, PerCustomer or
// PerSubject ("" is PerCustomer).
func (c *Client) DeleteOverridePer(ctx context.Context, customer, metric, window, per string, opts ...WriteOption) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: overridePath(customer, metric, window), query: perQuery(per),
		header: writeHeader(opts), retry: true, ok: []int{http.StatusNoContent, http.StatusOK}})
	return err
}

func overridePath(customer, metric, window string) string {
	return pathf("/v1/customers/%s/overrides/%s/%s", customer, metric, window)
}

// perQuery addresses an override by its per; the customer-wide one needs
// none.
func perQuery(per string) url.Values {
	if per == "" || per == PerCustomer {
		return nil
	}
	return url.Values{"per": {per}}
}

// AuditEvents lists the audit log, newest first.
func (c *Client) AuditEvents(ctx context.Context, f AuditFilter) iter.Seq2[AuditEvent, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[AuditEvent], error) {
		var out struct {
			Events     []AuditEvent `json:"events"`
			NextCursor string       `json:"next_cursor"`
		}
		q := listQuery(cursor, f.PageSize)
		if f.Customer != "" {
			q.Set("customer", f.Customer)
		}
		_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/audit", query: q, retry: true, out: &out})
		return page[AuditEvent]{out.Events, out.NextCursor}, err
	})
}

// Healthz returns nil while quotad runs.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/healthz"})
	return err
}

// Readyz returns nil when quotad is ready to serve, else a *Problem
// matching ErrUnavailable that says why. It is not retried.
func (c *Client) Readyz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/readyz"})
	return err
}
