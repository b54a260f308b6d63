package quotad

import (
	"context"
	"iter"
	"net/http"
)

// MetricsService declares metrics and reads their global usage.
type MetricsService service

// List lists the declared metrics by key.
func (s *MetricsService) List(ctx context.Context) iter.Seq2[Metric, error] {
	return paginate(ctx, func(ctx context.Context, cursor string) (page[Metric], error) {
		var out struct {
			Metrics    []Metric `json:"metrics"`
			NextCursor string   `json:"next_cursor"`
		}
		_, err := s.client.do(ctx, call{method: http.MethodGet, path: "/v1/metrics", query: listQuery(cursor, 0), retry: true, out: &out})
		fillETags(out.Metrics, func(m *Metric) *Meta { return &m.Meta })
		return page[Metric]{out.Metrics, out.NextCursor}, err
	})
}

// Get gets a metric; ErrMetricNotFound if it is not declared.
func (s *MetricsService) Get(ctx context.Context, key string) (*Metric, error) {
	var m Metric
	if err := s.client.get(ctx, pathf("/v1/metrics/%s", key), &m, &m.Meta); err != nil {
		return nil, err
	}
	return &m, nil
}

// Put creates or replaces a metric, and says whether it created it.
func (s *MetricsService) Put(ctx context.Context, key string, spec MetricSpec, opts ...WriteOption) (*Metric, bool, error) {
	var m Metric
	created, err := s.client.put(ctx, pathf("/v1/metrics/%s", key), spec, &m, &m.Meta, opts)
	if err != nil {
		return nil, false, err
	}
	return &m, created, nil
}

// Delete deletes a metric; ErrConflict while a plan or override
// limits it.
func (s *MetricsService) Delete(ctx context.Context, key string, opts ...WriteOption) error {
	return s.client.del(ctx, pathf("/v1/metrics/%s", key), opts)
}

// Usage gets a metric's global usage (every customer's admitted
// units) in each window for which it declares a capacity.
func (s *MetricsService) Usage(ctx context.Context, metric string) (*MetricUsage, error) {
	var u MetricUsage
	if err := s.client.get(ctx, pathf("/v1/metrics/%s/usage", metric), &u, nil); err != nil {
		return nil, err
	}
	return &u, nil
}
