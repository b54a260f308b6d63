package quotad

import (
	"context"
	"iter"
	"net/http"
	"net/url"
)

// CustomersService manages customers, their status and effective limits,
// and their usage counters and history.
type CustomersService service

// List lists customers by id, those on f.Plan only if it is set.
func (s *CustomersService) List(ctx context.Context, f CustomerFilter) iter.Seq2[Customer, error] {
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
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/customers", query: q, retry: true, out: &out})
		fillETags(out.Customers, func(c *Customer) *Meta { return &c.Meta })
		return page[Customer]{out.Customers, out.NextCursor}, err
	})
}

// Get gets a customer; ErrCustomerNotFound if there is none.
func (s *CustomersService) Get(ctx context.Context, id string) (*Customer, error) {
	var cu Customer
	if err := s.client.get(ctx, pathf("/v1/customers/%s", id), &cu, &cu.Meta); err != nil {
		return nil, err
	}
	return &cu, nil
}

// Put creates or replaces a customer, and says whether it created
// it. An unknown plan is ErrValidation.
func (s *CustomersService) Put(ctx context.Context, id string, spec CustomerSpec, opts ...WriteOption) (*Customer, bool, error) {
	var cu Customer
	created, err := s.client.put(ctx, pathf("/v1/customers/%s", id), spec, &cu, &cu.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &cu, created, nil
}

// Suspend suspends a customer for reason: its checks,
// reservations and feature checks are refused (ErrCustomerSuspended) in
// every quotad process from their next one. It reads the customer and
// writes it back suspended, If-Match its version (ErrPreconditionFailed
// when it changed in between), the rest of it as it was.
func (s *CustomersService) Suspend(ctx context.Context, id, reason string) (*Customer, error) {
	return s.setStatus(ctx, id, StatusSuspended, reason)
}

// Resume makes a suspended customer active again, as
// Suspend writes it.
func (s *CustomersService) Resume(ctx context.Context, id string) (*Customer, error) {
	return s.setStatus(ctx, id, StatusActive, "")
}

func (s *CustomersService) setStatus(ctx context.Context, id, status, reason string) (*Customer, error) {
	cu, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	spec := cu.CustomerSpec
	spec.Status, spec.StatusReason = status, reason
	cu, _, err = s.Put(ctx, id, spec, IfMatch(cu.ETag))
	return cu, err
}

// Delete deletes a customer, its overrides and live counters (its
// usage history stays).
func (s *CustomersService) Delete(ctx context.Context, id string, opts ...WriteOption) error {
	return s.client.del(ctx, pathf("/v1/customers/%s", id), opts)
}

// Limits gets a customer's effective limits.
func (s *CustomersService) Limits(ctx context.Context, customer string) (*EffectiveLimits, error) {
	var l EffectiveLimits
	if err := s.client.get(ctx, pathf("/v1/customers/%s/limits", customer), &l, nil); err != nil {
		return nil, err
	}
	return &l, nil
}

// ResetUsage zeroes a customer's current windows of a metric, short and
// long. Its usage history is not changed.
func (s *CustomersService) ResetUsage(ctx context.Context, customer, metric string) error {
	return s.client.del(ctx, pathf("/v1/customers/%s/usage/%s", customer, metric), nil)
}

// SetTotal sets a customer's gauge of metric (its count in window Total:
// seats, projects) to used, in every quotad process, to sync it with the
// application's own records. used may exceed the limit: later checks are
// then denied until refunds bring the count down. A metric without a
// customer-wide limit of window total is a 409 (no_total_limit).
func (s *CustomersService) SetTotal(ctx context.Context, customer, metric string, used int64) (*UsageEntry, error) {
	var u UsageEntry
	if _, err := s.client.do(ctx, call{method: http.MethodPut, path: pathf("/v1/customers/%s/usage/%s/total", customer, metric),
		body: map[string]int64{"used": used}, retry: true, out: &u}); err != nil {
		return nil, err
	}
	return &u, nil
}

// UsageHistory gets a customer's daily usage totals, by date then metric.
// Any valid customer id answers, deleted customers' too.
func (s *CustomersService) UsageHistory(ctx context.Context, customer string, f HistoryFilter) ([]UsageDay, error) {
	q := url.Values{}
	if f.Metric != "" {
		q.Set("metric", f.Metric)
	}
	if !f.From.IsZero() {
		q.Set("from", f.From.UTC().Format("2006-01-02"))
	}
	if !f.To.IsZero() {
		q.Set("to", f.To.UTC().Format("2006-01-02"))
	}
	var out struct {
		Days []UsageDay `json:"days"`
	}
	if _, err := s.client.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/usage/history", customer),
		query: q, retry: true, out: &out}); err != nil {
		return nil, err
	}
	return out.Days, nil
}
