// Command echo is an example of an echo server whose routes are checked
// against quotad by the Go client's middleware: every request to /hello
// costs its customer one api_calls unit, and is answered 429 with
// Retry-After and the RateLimit headers once the customer's plan allows no
// more.
//
// The customer is the one the application's own authentication
// established, never one the request names: here a bearer token of the
// application's (APP_TOKENS, token=customer pairs) that its auth
// middleware maps to a customer and puts in the request's context. A
// request without a known token is a 401.
//
//	APP_TOKENS=acme-secret-token=acme QUOTAD_URL=http://127.0.0.1:8080 QUOTAD_TOKEN=<check token> go run ./examples/echo
//	curl -H 'Authorization: Bearer acme-secret-token' localhost:8081/hello
package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/examples/internal/serve"
)

func main() { serve.Main(run) }

// run serves on LISTEN (default 127.0.0.1:8081) until ctx ends.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	base := serve.Getenv(getenv, "QUOTAD_URL", "http://127.0.0.1:8080")
	addr := serve.Getenv(getenv, "LISTEN", "127.0.0.1:8081")
	users, err := parseTokens(getenv("APP_TOKENS"))
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: newServer(quotad.New(base, quotad.WithToken(getenv("QUOTAD_TOKEN"))), users, 0)}
	fmt.Fprintf(stdout, "listening on %s, checking quotad at %s\n", addr, base)
	return serve.Run(ctx, srv)
}

// users maps the SHA-256 digest of each of the application's bearer
// tokens to its customer: a token is looked up by its digest, so that the
// tokens themselves are not kept.
type users map[[sha256.Size]byte]string

// parseTokens reads APP_TOKENS: comma-separated token=customer pairs.
func parseTokens(s string) (users, error) {
	u := users{}
	for pair := range strings.SplitSeq(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		token, customer, ok := strings.Cut(pair, "=")
		if !ok || token == "" || customer == "" {
			return nil, fmt.Errorf("APP_TOKENS: %q is not token=customer", pair)
		}
		u[sha256.Sum256([]byte(token))] = customer
	}
	return u, nil
}

// customerKey is the request context's key of the authenticated customer.
type customerKey struct{}

// authenticate is the application's own authentication: a request whose
// bearer token is one of u's goes on with its customer in its context;
// any other goes on with none, and the quotad middleware answers it 401.
func authenticate(u users) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if token, ok := strings.CutPrefix(r.Header.Get(echo.HeaderAuthorization), "Bearer "); ok {
				if customer, ok := u[sha256.Sum256([]byte(token))]; ok {
					c.SetRequest(r.WithContext(context.WithValue(r.Context(), customerKey{}, customer)))
				}
			}
			return next(c)
		}
	}
}

// newServer is the application: echo with its authentication, then the
// quotad middleware, in front of its routes, each check bounded by timeout
// (0: the middleware's default).
func newServer(c *quotad.Client, u users, timeout time.Duration) *echo.Echo {
	customer := quotad.FromContext(customerKey{})
	e := echo.New()
	e.HideBanner = true
	e.Use(authenticate(u))
	e.Use(echo.WrapMiddleware(c.Middleware(quotad.MiddlewareOptions{
		Customer: customer,
		Metric:   quotad.Static("api_calls"),
		Timeout:  timeout,
	})))
	e.GET("/hello", func(c echo.Context) error {
		return c.String(http.StatusOK, "hello "+customer(c.Request())+"\n")
	})
	return e
}
