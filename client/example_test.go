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
	// The customer comes from the application's own authentication, never
	// from something the caller writes: here a stand-in that knows one
	// session token and puts its customer in the request's context.
	type customerKey struct{}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer acme-session" {
				http.Error(w, "who are you?", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), customerKey{}, "acme")))
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/hello", authenticate(c.Middleware(quotad.MiddlewareOptions{
		Customer: quotad.FromContext(customerKey{}),
		Metric:   quotad.Static("api_calls"),
		// How long a request waits for quotad before it goes on unchecked
		// (DefaultMiddlewareTimeout when 0). Generous here: this quotad
		// runs beside other tests, on a machine that may be busy.
		Timeout: 5 * time.Second,
	})(hello)))
	app := httptest.NewServer(mux)
	defer app.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, app.URL+"/hello", nil)
		req.Header.Set("Authorization", "Bearer acme-session")
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

func ExampleCustomersService_List() {
	_, srv := newFakeQuotad(0)
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("admin-token"))

	// Pages of 2 are fetched as the loop needs them.
	for cust, err := range c.Customers.List(context.Background(), quotad.CustomerFilter{Plan: "pro", PageSize: 2}) {
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

	m, created, err := c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{Description: "API calls"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", created, "etag:", m.ETag)

	// Replace it only if nobody changed it since.
	m, created, err = c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{Description: "Calls"}, quotad.IfMatch(m.ETag))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", created, "etag:", m.ETag)

	// A stale ETag is refused.
	_, _, err = c.Metrics.Put(ctx, "api_calls", quotad.MetricSpec{}, quotad.IfMatch(`"1"`))
	fmt.Println(errors.Is(err, quotad.ErrPreconditionFailed))
	// Output:
	// created: true etag: "1"
	// created: false etag: "2"
	// true
}

func ExampleClient_Reserve() {
	// A stand-in for quotad: acme may use 10 llm_tokens a minute.
	_, srv := newFakeQuotad(10)
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("check-token"))
	ctx := context.Background()

	// Hold the most the call may cost before making it...
	res, err := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 8, TTLSeconds: 60})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	if !res.Allowed {
		fmt.Println("denied, retry after", *res.RetryAfter, "s")
		return
	}
	fmt.Println("reserved", res.Cost, "as", res.ID, "until", res.ExpiresAt.Format(time.Kitchen), "-", res.Limits[0].Remaining, "left")

	// ...while it runs, other calls see those units as used...
	denied, _ := c.Reserve(ctx, quotad.ReserveRequest{Customer: "acme", Metric: "llm_tokens", Cost: 5})
	fmt.Println("a second call of 5 allowed:", denied.Allowed)

	// ...then settle what it actually cost. A retry of the same commit
	// answers the same; the units not used go back.
	s, err := c.Commit(ctx, res.ID, 3)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("committed", s.Committed, "released", s.Released, "over", s.Over, "-", s.Limits[0].Remaining, "left")

	_, err = c.Commit(ctx, res.ID, 4)
	fmt.Println("another cost:", errors.Is(err, quotad.ErrConflict))
	// Output:
	// reserved 8 as rsv_1 until 10:05AM - 2 left
	// a second call of 5 allowed: false
	// committed 3 released 5 over 0 - 7 left
	// another cost: true
}

func ExampleClient_ReservationMiddleware() {
	_, srv := newFakeQuotad(10)
	defer srv.Close()
	c := quotad.New(srv.URL, quotad.WithToken("check-token"))

	// A handler whose cost is known only at its end: it reports it.
	complete := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens := int64(3) // what the model really produced
		quotad.ReportCost(r.Context(), tokens)
		fmt.Fprintln(w, "used", tokens, "tokens")
	})
	mux := http.NewServeMux()
	mux.Handle("/complete", c.ReservationMiddleware(quotad.ReservationMiddlewareOptions{
		// The API key quotad issued to the customer: quotad authenticates
		// it and charges its customer. A request without one is a 401.
		APIKey: quotad.FromHeader("X-Api-Key"),
		Metric: quotad.Static("llm_tokens"),
		// The most a request may cost, reserved before the handler runs.
		Estimate: func(*http.Request) (int64, error) { return 6, nil },
		// Generous: this quotad runs beside other tests.
		Timeout: 5 * time.Second,
	})(complete))
	app := httptest.NewServer(mux)
	defer app.Close()

	// 6 are reserved and 3 committed each time: the third request finds
	// 6 used, and 6 more would go beyond 10.
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, app.URL+"/complete", nil)
		req.Header.Set("X-Api-Key", "qk_acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
		if resp.StatusCode != http.StatusOK {
			fmt.Println()
		}
	}
	// Output:
	// 200 used 3 tokens
	// 200 used 3 tokens
	// 429 {"type":"urn:quotad:problem:quota_exceeded","title":"Too Many Requests","status":429,"detail":"the customer's limit on this metric is reached; retry after 42 s","code":"quota_exceeded"}
}
