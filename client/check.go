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
