package quotad

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// recorder stands in for sleeping: it records the waits asked for.
type recorder struct{ waits []time.Duration }

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return ctx.Err()
}

// newTestClient is a client of url whose waits are recorded, with a jitter
// of 0.5 (half of each backoff).
func newTestClient(url string, opts ...Option) (*Client, *recorder) {
	c := New(url, opts...)
	rec := &recorder{}
	c.sleep = rec.sleep
	c.jitter = func() float64 { return 0.5 }
	return c, rec
}

func TestRetries(t *testing.T) {
	checkBody := `{"allowed":true,"customer":"acme","metric":"api_calls","cost":1,"retry_after":0,"limits":[]}`
	tests := []struct {
		name string
		// statuses the server answers in turn (the last one from then on);
		// 0 breaks the connection.
		statuses   []int
		retryAfter string
		call       func(ctx context.Context, c *Client) error
		wantCalls  int
		wantWaits  []time.Duration // nil: don't compare exactly
		wantErr    error           // nil: want no error unless fails
		fails      bool
	}{
		{
			name: "GET retried on 503 until it answers", statuses: []int{503, 503, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Metrics.Get(ctx, "api_calls"); return err },
			wantCalls: 3, wantWaits: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		},
		{
			name: "GET gives up after MaxAttempts", statuses: []int{503},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Metrics.Get(ctx, "api_calls"); return err },
			wantCalls: 3, wantErr: ErrUnavailable,
		},
		{
			name: "Retry-After in seconds is honoured on 503", statuses: []int{503, 200}, retryAfter: "7",
			call:      func(ctx context.Context, c *Client) error { _, err := c.Metrics.Get(ctx, "api_calls"); return err },
			wantCalls: 2, wantWaits: []time.Duration{7 * time.Second},
		},
		{
			name: "502 and 504 retried", statuses: []int{502, 504, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Plans.Get(ctx, "pro"); return err },
			wantCalls: 3,
		},
		{
			name: "a broken connection is retried", statuses: []int{0, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Customers.Get(ctx, "acme"); return err },
			wantCalls: 2,
		},
		{
			name: "PUT retried", statuses: []int{503, 201},
			call: func(ctx context.Context, c *Client) error {
				_, _, err := c.Metrics.Put(ctx, "api_calls", MetricSpec{})
				return err
			},
			wantCalls: 2,
		},
		{
			name: "DELETE retried", statuses: []int{503, 204},
			call:      func(ctx context.Context, c *Client) error { return c.Plans.Delete(ctx, "pro") },
			wantCalls: 2,
		},
		{
			name: "500 not retried", statuses: []int{500, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Metrics.Get(ctx, "api_calls"); return err },
			wantCalls: 1, wantWaits: []time.Duration{}, fails: true,
		},
		{
			name: "404 not retried", statuses: []int{404, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Metrics.Get(ctx, "api_calls"); return err },
			wantCalls: 1, wantErr: ErrNotFound,
		},
		{
			name: "check without request_id sent once", statuses: []int{503, 200},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Check(ctx, CheckRequest{Customer: "acme", Metric: "api_calls"})
				return err
			},
			wantCalls: 1, wantErr: ErrUnavailable,
		},
		{
			name: "check without request_id not resent after a broken connection", statuses: []int{0, 200},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Check(ctx, CheckRequest{Customer: "acme", Metric: "api_calls"})
				return err
			},
			wantCalls: 1, fails: true,
		},
		{
			name: "check with request_id retried", statuses: []int{503, 0, 200},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Check(ctx, CheckRequest{Customer: "acme", Metric: "api_calls", RequestID: "r1"})
				return err
			},
			wantCalls: 3,
		},
		{
			name: "refund without request_id sent once", statuses: []int{503, 200},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Refund(ctx, RefundRequest{Customer: "acme", Metric: "api_calls"})
				return err
			},
			wantCalls: 1, wantErr: ErrUnavailable,
		},
		{
			name: "refund with request_id retried", statuses: []int{503, 200},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Refund(ctx, RefundRequest{Customer: "acme", Metric: "api_calls", RequestID: "r1"})
				return err
			},
			wantCalls: 2,
		},
		{
			name: "reserve without request_id sent once", statuses: []int{503, 201},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Reserve(ctx, ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 5})
				return err
			},
			wantCalls: 1, wantErr: ErrUnavailable,
		},
		{
			name: "reserve without request_id not resent after a broken connection", statuses: []int{0, 201},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Reserve(ctx, ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 5})
				return err
			},
			wantCalls: 1, fails: true,
		},
		{
			name: "reserve with request_id retried", statuses: []int{503, 0, 201},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.Reserve(ctx, ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 5, RequestID: "r1"})
				return err
			},
			wantCalls: 3,
		},
		{
			name: "commit retried, idempotent by cost", statuses: []int{503, 0, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Commit(ctx, "rsv_1", 3); return err },
			wantCalls: 3,
		},
		{
			name: "commit not retried on 409", statuses: []int{409, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Commit(ctx, "rsv_1", 3); return err },
			wantCalls: 1, fails: true,
		},
		{
			name: "release retried", statuses: []int{502, 204},
			call:      func(ctx context.Context, c *Client) error { return c.Release(ctx, "rsv_1") },
			wantCalls: 2,
		},
		{
			name: "reservation GET retried", statuses: []int{504, 200},
			call:      func(ctx context.Context, c *Client) error { _, err := c.Reservation(ctx, "rsv_1"); return err },
			wantCalls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				status := tt.statuses[min(n, len(tt.statuses))-1]
				switch status {
				case 0:
					conn, _, err := http.NewResponseController(w).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					conn.Close()
					return
				case 200, 201:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					if r.URL.Path == "/v1/check" {
						w.Write([]byte(checkBody))
					} else {
						w.Write([]byte(`{"version":1}`))
					}
					return
				case 503:
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(503)
					w.Write([]byte(`{"type":"urn:quotad:problem:unavailable","title":"Service Unavailable","status":503,"code":"unavailable"}`))
					return
				}
				w.WriteHeader(status)
			}))
			defer srv.Close()
			c, rec := newTestClient(srv.URL, WithRetry(RetryPolicy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}))
			err := tt.call(context.Background(), c)
			if got := int(calls.Load()); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.fails:
				if err == nil {
					t.Error("err = nil, want an error")
				}
			case err != nil:
				t.Errorf("err = %v, want nil", err)
			}
			if tt.wantWaits != nil {
				if len(rec.waits) != len(tt.wantWaits) {
					t.Fatalf("waits = %v, want %v", rec.waits, tt.wantWaits)
				}
				for i := range rec.waits {
					if rec.waits[i] != tt.wantWaits[i] {
						t.Errorf("waits = %v, want %v", rec.waits, tt.wantWaits)
						break
					}
				}
			}
		})
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"0", 0},
		{"-4", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.header, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	c := New("http://quotad.invalid", WithRetry(RetryPolicy{MaxAttempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}))
	wantCeil := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, ceil := range wantCeil {
		ceil *= time.Millisecond
		n := i + 1
		c.jitter = func() float64 { return 0 }
		if got := c.backoff(n); got != 0 {
			t.Errorf("backoff(%d) with jitter 0 = %v, want 0", n, got)
		}
		c.jitter = func() float64 { return 0.999999 }
		if got := c.backoff(n); got > ceil || got < ceil*99/100 {
			t.Errorf("backoff(%d) with jitter ~1 = %v, want just under %v", n, got, ceil)
		}
	}
	// The real jitter stays within the bounds.
	c.jitter = New("http://quotad.invalid").jitter
	for range 1000 {
		if got := c.backoff(3); got < 0 || got >= 400*time.Millisecond {
			t.Fatalf("backoff(3) = %v, want within [0, 400ms)", got)
		}
	}
}

// A context that ends stops the retries, and the error says both why the
// call failed and why it was not retried.
func TestRetryStopsWithContext(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	c := New(srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	c.sleep = func(ctx context.Context, d time.Duration) error {
		cancel()
		return sleepCtx(ctx, d)
	}
	_, err := c.Metrics.Get(ctx, "api_calls")
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want ErrUnavailable and context.Canceled", err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("calls = %d, want 1", got)
	}

	// A deadline too close for the Retry-After is not waited for.
	calls.Store(0)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(503)
	})
	c, rec := newTestClient(srv.URL)
	ctx, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if _, err := c.Metrics.Get(ctx, "api_calls"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
	if got := calls.Load(); got != 1 || len(rec.waits) != 0 {
		t.Errorf("calls = %d, waits = %v; want 1 call and no wait", got, rec.waits)
	}
}

// The reservation middleware's commit is retried as the client's policy
// says: a 503 then an answer settles the reservation, and nothing is
// reported as lost.
func TestReservationMiddlewareRetriesTheCommit(t *testing.T) {
	var commits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/reservations":
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"rsv_1","customer":"acme","metric":"llm_tokens","cost":8,"allowed":true,"limits":[]}`))
		case "/v1/reservations/rsv_1/commit":
			if commits.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte(`{"id":"rsv_1","reserved":8,"committed":3,"released":5,"over":0,"limits":[]}`))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c, rec := newTestClient(srv.URL)
	var errs []error
	h := c.ReservationMiddleware(ReservationMiddlewareOptions{
		Customer: Static("acme"),
		Metric:   Static("llm_tokens"),
		Estimate: func(*http.Request) (int64, error) { return 8, nil },
		Timeout:  30 * time.Second,
		OnError:  func(_ *http.Request, err error) { errs = append(errs, err) },
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ReportCost(r.Context(), 3) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/complete", nil))
	if got := commits.Load(); got != 2 {
		t.Errorf("commits sent = %d, want 2", got)
	}
	if len(rec.waits) != 1 {
		t.Errorf("waits = %v, want one backoff", rec.waits)
	}
	if len(errs) != 0 {
		t.Errorf("OnError told of %v, want nothing", errs)
	}
}
