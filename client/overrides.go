package quotad

import (
	"context"
	"iter"
	"net/http"
	"net/url"
)

// OverridesService manages a customer's overrides of its plan's limits.
type OverridesService service

// List lists a customer's overrides, expired ones included, by metric
// then window.
func (s *OverridesService) List(ctx context.Context, customer string) iter.Seq2[Override, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Override], error) {
		var out struct {
			Overrides  []Override `json:"overrides"`
			NextCursor string     `json:"next_cursor"`
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/overrides", customer),
			query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Overrides, func(o *Override) *Meta { return &o.Meta })
		return page[Override]{out.Overrides, out.NextCursor}, err
	})
}

// Get gets one customer-wide override; ErrOverrideNotFound if there
// is none.
func (s *OverridesService) Get(ctx context.Context, customer, metric, window string) (*Override, error) {
	return s.GetPer(ctx, customer, metric, window, "")
}

// GetPer gets the override per says, PerCustomer or PerSubject (""
// is PerCustomer); ErrOverrideNotFound if there is none.
func (s *OverridesService) GetPer(ctx context.Context, customer, metric, window, per string) (*Override, error) {
	var o Override
	r, err := s.client.do(ctx, call{method: http.MethodGet, path: overridePath(customer, metric, window), query: perQuery(per),
		retry: true, out: &o})
	if err != nil {
		return nil, err
	}
	setETag(&o.Meta, r)
	return &o, nil
}

// Put creates or replaces a customer-wide override, and says
// whether it created it.
func (s *OverridesService) Put(ctx context.Context, customer, metric, window string, spec OverrideSpec, opts ...WriteOption) (*Override, bool, error) {
	return s.PutPer(ctx, customer, metric, window, "", spec, opts...)
}

// PutPer creates or replaces the override per says, PerCustomer
// or PerSubject ("" is PerCustomer), and says whether it created it.
func (s *OverridesService) PutPer(ctx context.Context, customer, metric, window, per string, spec OverrideSpec, opts ...WriteOption) (*Override, bool, error) {
	var o Override
	r, err := s.client.do(ctx, call{method: http.MethodPut, path: overridePath(customer, metric, window), query: perQuery(per),
		body: spec, header: writeHeader(opts), retry: true, ok: []int{http.StatusOK, http.StatusCreated}, out: &o})
	if err != nil {
		return nil, false, err
	}
	setETag(&o.Meta, r)
	return &o, r.status == http.StatusCreated, nil
}

// Delete deletes a customer-wide override.
func (s *OverridesService) Delete(ctx context.Context, customer, metric, window string, opts ...WriteOption) error {
	return s.DeletePer(ctx, customer, metric, window, "", opts...)
}

// DeletePer deletes the override per says, PerCustomer or
// PerSubject ("" is PerCustomer).
func (s *OverridesService) DeletePer(ctx context.Context, customer, metric, window, per string, opts ...WriteOption) error {
	_, err := s.client.do(ctx, call{method: http.MethodDelete, path: overridePath(customer, metric, window), query: perQuery(per),
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
