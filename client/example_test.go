package quotad_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	quotad "github.com/quotad/quotad/client"
)

func ExampleClient_Check() {
	// A stand-in for quotad: acme may make 2 api_calls a minute.
	_, srv := newFakeQuotad(2)
	defer srv.Close()

	c := quotad.New(srv.URL, quotad.WithToken("check-token"))
	ctx := context.Background()
	for range 3 {
		res, err := c.Check(ctx, quotad.CheckRequest{Customer: "acme", Metric: "api_calls"})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if res.Allowed {
			fmt.Println("allowed,", res.Limits[0].Remaining, "left;", res.RateLimit)
		} else {
			fmt.Println("denied, retry after", *res.RetryAfter, "s")
		}
	}

	_, err := c.Check(ctx, quotad.CheckRequest{Customer: "globex", Metric: "api_calls"})
	fmt.Println(errors.Is(err, quotad.ErrCustomerNotFound), errors.Is(err, quotad.ErrNotFound))
	// Output:
	// allowed, 1 left; "api_calls/minute";r=1;t=42
	// allowed, 0 left; "api_calls/minute";r=0;t=42
	// denied, retry after 42 s
	// true true
}

func ExampleClient_Middleware() {
	_, srv := newFakeQuotad(1)
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("check-token"))

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	mux := http.NewServeMux()
	mux.Handle("/hello", c.Middleware(quotad.MiddlewareOptions{
		Customer: quotad.FromHeader("X-Customer"),
		Metric:   quotad.Static("api_calls"),
		// How long a request waits for quotad before it goes on unchecked
		// (DefaultMiddlewareTimeout when 0). Generous here: this quotad
		// runs beside other tests, on a machine that may be busy.
		Timeout: 5 * time.Second,
	})(hello))
	app := httptest.NewServer(mux)
	defer app.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, app.URL+"/hello", nil)
		req.Header.Set("X-Customer", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "RateLimit:", resp.Header.Get("RateLimit"))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			fmt.Println("Retry-After:", ra)
		}
		fmt.Print(string(body))
	}
	// Output:
	// 200 RateLimit: "api_calls/minute";r=0;t=42
	// hello
	// 429 RateLimit: "api_calls/minute";r=0;t=42
	// Retry-After: 42
	// {"type":"urn:quotad:problem:quota_exceeded","title":"Too Many Requests","status":429,"detail":"the customer's limit on this metric is reached; retry after 42 s","code":"quota_exceeded"}
}

func ExampleClient_Customers() {
	_, srv := newFakeQuotad(0)
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("admin-token"))

	// Pages of 2 are fetched as the loop needs them.
	for cust, err := range c.Customers(context.Background(), quotad.CustomerFilter{Plan: "pro", PageSize: 2}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(cust.ID, cust.Plan, cust.ETag)
	}
	// Output:
	// c01 pro "1"
	// c02 pro "2"
	// c03 pro "3"
	// c04 pro "4"
	// c05 pro "5"
}

func ExampleIfMatch() {
	_, srv := newFakeQuotad(0)
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("admin-token"))
	ctx := context.Background()

	m, created, err := c.PutMetric(ctx, "api_calls", quotad.MetricSpec{Description: "API calls"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", created, "etag:", m.ETag)

	// Replace it only if nobody changed it since.
	m, created, err = c.PutMetric(ctx, "api_calls", quotad.MetricSpec{Description: "Calls"}, quotad.IfMatch(m.ETag))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", created, "etag:", m.ETag)

	// A stale ETag is refused.
	_, _, err = c.PutMetric(ctx, "api_calls", quotad.MetricSpec{}, quotad.IfMatch(`"1"`))
	fmt.Println(errors.Is(err, quotad.ErrPreconditionFailed))
	// Output:
	// created: true etag: "1"
	// created: false etag: "2"
	// true
}
