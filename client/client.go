package quotad

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Version is the client's version, sent in its default User-Agent.
const Version = "0.1.0"

// maxAnswer bounds how much of an answer the client reads.
const maxAnswer = 16 << 20

// Client calls quotad's HTTP API. It is safe for concurrent use.
//
// Its own methods are the calls a backend makes while serving requests;
// the rest of the API is in its services, one per resource (c.Plans.Put,
// c.Customers.Get), which call through it. The package documentation's
// Layout says which call is where.
type Client struct {
	Metrics    *MetricsService
	Plans      *PlansService
	Customers  *CustomersService
	Overrides  *OverridesService
	Features   *FeaturesService
	Keys       *KeysService
	Grants     *GrantsService
	Webhooks   *WebhooksService
	Statements *StatementsService
	Audit      *AuditService

	base      *url.URL
	baseErr   error
	token     string
	http      *http.Client
	userAgent string
	retry     RetryPolicy

	// sleep waits d or until ctx ends; jitter returns a number in [0, 1).
	// Tests replace them.
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func() float64
}

// service is what every service holds: the client it calls through.
type service struct{ client *Client }

// RetryPolicy says how calls that are safe to repeat are retried.
type RetryPolicy struct {
	// MaxAttempts is how many times a call is sent at most, the first
	// included; 1 turns retries off.
	MaxAttempts int
	// BaseDelay is the backoff before the first retry, doubled for each
	// retry after it, up to MaxDelay; the wait is a random duration from 0
	// to that backoff (full jitter).
	BaseDelay time.Duration
	// MaxDelay caps the backoff. A 503's Retry-After is honoured even when
	// it is longer, unless the context ends first.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is the policy of a Client made without WithRetry.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as a bearer token on every call.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient makes calls through hc instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry replaces DefaultRetryPolicy.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithUserAgent replaces the User-Agent header, quotad-go/<Version> by
// default.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the quotad at baseURL (e.g. http://quotad:8080;
// a path prefix is kept). A malformed baseURL makes every call fail.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		http:      http.DefaultClient,
		userAgent: "quotad-go/" + Version,
		retry:     DefaultRetryPolicy,
		sleep:     sleepCtx,
		jitter:    rand.Float64,
	}
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	switch {
	case err != nil:
		c.baseErr = fmt.Errorf("quotad: base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		c.baseErr = fmt.Errorf("quotad: base URL %q: want http(s)://host[:port]", baseURL)
	default:
		c.base = u
	}
	for _, o := range opts {
		o(c)
	}
	if c.retry.MaxAttempts < 1 {
		c.retry.MaxAttempts = 1
	}
	c.Metrics = &MetricsService{c}
	c.Plans = &PlansService{c}
	c.Customers = &CustomersService{c}
	c.Overrides = &OverridesService{c}
	c.Features = &FeaturesService{c}
	c.Keys = &KeysService{c}
	c.Grants = &GrantsService{c}
	c.Webhooks = &WebhooksService{c}
	c.Statements = &StatementsService{c}
	c.Audit = &AuditService{c}
	return c
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WriteOption is an option of a Put or Delete.
type WriteOption func(*http.Header)

// IfMatch makes a Put or Delete conditional: quotad refuses it with 412
// (ErrPreconditionFailed) unless the resource's current ETag is etag. "*"
// matches any existing version.
func IfMatch(etag string) WriteOption {
	return func(h *http.Header) { h.Set("If-Match", etag) }
}

// call is one API call.
type call struct {
	method string
	path   string // escaped, below the base URL
	query  url.Values
	body   any // JSON-encoded when not nil
	header http.Header
	// retry: the call may be repeated.
	retry bool
	// ok lists the statuses that are answers, not errors (200 when empty).
	ok []int
	// out receives the decoded JSON answer, if not nil.
	out any
	// csv, if not nil, asks for text/csv and receives the answer's body
	// as it arrives, whatever its size.
	csv io.Writer
}

// response is what a call answered.
type response struct {
	status int
	header http.Header
}

// pathf builds a path from a format and segments, each escaped.
func pathf(format string, segments ...string) string {
	args := make([]any, len(segments))
	for i, s := range segments {
		args[i] = url.PathEscape(s)
	}
	return fmt.Sprintf(format, args...)
}

// do sends c, retrying it as its retry field and the policy allow.
func (cl *Client) do(ctx context.Context, c call) (*response, error) {
	if cl.baseErr != nil {
		return nil, cl.baseErr
	}
	var body []byte
	if c.body != nil {
		var err error
		if body, err = json.Marshal(c.body); err != nil {
			return nil, fmt.Errorf("quotad: %s %s: encode: %w", c.method, c.path, err)
		}
	}
	attempts := 1
	if c.retry {
		attempts = cl.retry.MaxAttempts
	}
	for attempt := 1; ; attempt++ {
		resp, wait, err := cl.once(ctx, c, body)
		if err == nil || attempt >= attempts || wait < 0 {
			return resp, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if wait == 0 {
			wait = cl.backoff(attempt)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return nil, err // the retry could not happen in time
		}
		if serr := cl.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("%w (retry abandoned: %w)", err, serr)
		}
	}
}

// backoff is the wait before retry number n (1 for the first): a random
// duration up to BaseDelay·2^(n-1), capped at MaxDelay.
func (cl *Client) backoff(n int) time.Duration {
	ceil := cl.retry.BaseDelay
	for i := 1; i < n && ceil < cl.retry.MaxDelay; i++ {
		ceil *= 2
	}
	if cl.retry.MaxDelay > 0 && ceil > cl.retry.MaxDelay {
		ceil = cl.retry.MaxDelay
	}
	return time.Duration(cl.jitter() * float64(ceil))
}

// once sends c once. wait says whether the error may be retried: < 0 no,
// 0 after the backoff, > 0 after that long (a 503's Retry-After).
func (cl *Client) once(ctx context.Context, c call, body []byte) (*response, time.Duration, error) {
	u := cl.base.String() + c.path
	if len(c.query) > 0 {
		u += "?" + c.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, rd)
	if err != nil {
		return nil, -1, fmt.Errorf("quotad: %s %s: %w", c.method, c.path, err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if c.csv != nil {
		req.Header.Set("Accept", "text/csv, application/problem+json")
	}
	if cl.userAgent != "" {
		req.Header.Set("User-Agent", cl.userAgent)
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, -1, fmt.Errorf("quotad: %s %s: %w", c.method, c.path, err)
		}
		return nil, 0, fmt.Errorf("quotad: %s %s: %w", c.method, c.path, err)
	}
	defer resp.Body.Close()
	if c.csv != nil && isOK(resp.StatusCode, c.ok) {
		// Part of it may be written: never retried.
		if _, err := io.Copy(c.csv, resp.Body); err != nil {
			return nil, -1, fmt.Errorf("quotad: %s %s: read answer: %w", c.method, c.path, err)
		}
		return &response{status: resp.StatusCode, header: resp.Header}, -1, nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, 0, fmt.Errorf("quotad: %s %s: read answer: %w", c.method, c.path, err)
	}
	r := &response{status: resp.StatusCode, header: resp.Header}
	if !isOK(resp.StatusCode, c.ok) {
		p := problemFrom(resp, data)
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			return r, retryAfter(resp.Header.Get("Retry-After"), time.Now()), p
		case http.StatusBadGateway, http.StatusGatewayTimeout:
			return r, 0, p
		}
		return r, -1, p
	}
	if c.out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, c.out); err != nil {
			if resp.StatusCode >= 400 {
				return r, -1, problemFrom(resp, data)
			}
			return r, -1, fmt.Errorf("quotad: %s %s: decode answer %d: %w", c.method, c.path, resp.StatusCode, err)
		}
	}
	return r, -1, nil
}

func isOK(status int, ok []int) bool {
	if len(ok) == 0 {
		return status == http.StatusOK
	}
	for _, s := range ok {
		if s == status {
			return true
		}
	}
	return false
}

// retryAfter parses a Retry-After header (seconds or an HTTP date); 0 when
// absent or unusable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
