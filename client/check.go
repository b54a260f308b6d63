package quotad

import (
	"context"
	"net/http"
	"net/url"
)

// Check asks quotad whether req may pass and charges it if so. Allowed
// and denied are both results: a denied check returns Allowed false and a
// nil error. A check with a RequestID is retried as the RetryPolicy says
// (quotad answers a repeat without charging again); one without is sent
// once. An unknown customer is ErrCustomerNotFound, an undeclared metric
// ErrMetricNotFound.
func (c *Client) Check(ctx context.Context, req CheckRequest) (*CheckResult, error) {
	return c.check(ctx, req, req.RequestID != "")
}

func (c *Client) check(ctx context.Context, req CheckRequest, retry bool) (*CheckResult, error) {
	var res CheckResult
	r, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/check", body: req, retry: retry,
		ok: []int{http.StatusOK, http.StatusTooManyRequests}, out: &res})
	if err != nil {
		return nil, err
	}
	if r.status == http.StatusTooManyRequests && (res.Allowed || res.Customer == "") {
		// A 429 without a decision in it came from something in front of
		// quotad.
		return nil, &Problem{Status: r.status, Title: http.StatusText(r.status), Detail: "a 429 that is not quotad's decision"}
	}
	res.RateLimit = r.header.Get("RateLimit")
	res.RateLimitPolicy = r.header.Get("RateLimit-Policy")
	return &res, nil
}

// Refund gives req.Cost units back to the customer's current windows of
// req.Metric and returns their usage after it. A refund with a RequestID
// gives back at most what the check of that RequestID charged, once (see
// RefundRequest.RequestID), and is retried as the RetryPolicy says; one
// without is sent once.
func (c *Client) Refund(ctx context.Context, req RefundRequest) (*RefundResult, error) {
	var res RefundResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/refund", body: req, retry: req.RequestID != "", out: &res}); err != nil {
		return nil, err
	}
	return &res, nil
}

// Usage gets a customer's current usage of every effective limit.
func (c *Client) Usage(ctx context.Context, customer string) (*Usage, error) {
	var u Usage
	if err := c.get(ctx, pathf("/v1/customers/%s/usage", customer), &u, nil); err != nil {
		return nil, err
	}
	return &u, nil
}

// SubjectUsage gets a customer's current usage of every effective limit,
// and, for each limit per subject, the subject's (the entries whose
// Subject is set).
func (c *Client) SubjectUsage(ctx context.Context, customer, subject string) (*Usage, error) {
	var u Usage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/usage", customer),
		query: url.Values{"subject": {subject}}, retry: true, out: &u}); err != nil {
		return nil, err
	}
	return &u, nil
}

// MetricUsage gets a metric's global usage (every customer's admitted
// units) in each window for which it declares a capacity.
func (c *Client) MetricUsage(ctx context.Context, metric string) (*MetricUsage, error) {
	var u MetricUsage
	if err := c.get(ctx, pathf("/v1/metrics/%s/usage", metric), &u, nil); err != nil {
		return nil, err
	}
	return &u, nil
}

// ResetUsage zeroes a customer's current windows of a metric, short and
// long. Its usage history is not changed.
func (c *Client) ResetUsage(ctx context.Context, customer, metric string) error {
	return c.del(ctx, pathf("/v1/customers/%s/usage/%s", customer, metric), nil)
}

// SetTotal sets a customer's gauge of metric (its count in window Total:
// seats, projects) to used, in every quotad process, to sync it with the
// application's own records. used may exceed the limit: later checks are
// then denied until refunds bring the count down. A metric without a
// customer-wide limit of window total is a 409 (no_total_limit).
func (c *Client) SetTotal(ctx context.Context, customer, metric string, used int64) (*UsageEntry, error) {
	var u UsageEntry
	if _, err := c.do(ctx, call{method: http.MethodPut, path: pathf("/v1/customers/%s/usage/%s/total", customer, metric),
		body: map[string]int64{"used": used}, retry: true, out: &u}); err != nil {
		return nil, err
	}
	return &u, nil
}

// UsageHistory gets a customer's daily usage totals, by date then metric.
// Any valid customer id answers, deleted customers' too.
func (c *Client) UsageHistory(ctx context.Context, customer string, f HistoryFilter) ([]UsageDay, error) {
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
	if _, err := c.do(ctx, call{method: http.MethodGet, path: pathf("/v1/customers/%s/usage/history", customer),
		query: q, retry: true, out: &out}); err != nil {
		return nil, err
	}
	return out.Days, nil
}
