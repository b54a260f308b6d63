// Command echo is an example of an echo server whose routes are checked
// against quotad by the Go client's middleware: every request to /hello
// costs its customer (the X-Customer header) one api_calls unit, and is
// answered 429 with Retry-After and the RateLimit headers once the
// customer's plan allows no more.
//
//	QUOTAD_URL=http://127.0.0.1:8080 QUOTAD_TOKEN=<check token> go run ./examples/echo
//	curl -H 'X-Customer: acme' localhost:8081/hello
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/labstack/echo/v4"

	quotad "github.com/quotad/quotad/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run serves on LISTEN (default 127.0.0.1:8081) until ctx ends.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	base := getenv("QUOTAD_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	addr := getenv("LISTEN")
	if addr == "" {
		addr = "127.0.0.1:8081"
	}
	srv := &http.Server{Addr: addr, Handler: newServer(quotad.New(base, quotad.WithToken(getenv("QUOTAD_TOKEN"))), 0)}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(stdout, "listening on %s, checking quotad at %s\n", addr, base)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newServer is the application: echo with the quotad middleware in front
// of its routes, each check bounded by timeout (0: the middleware's
// default).
func newServer(c *quotad.Client, timeout time.Duration) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.Use(echo.WrapMiddleware(c.Middleware(quotad.MiddlewareOptions{
		Customer: quotad.FromHeader("X-Customer"),
		Metric:   quotad.Static("api_calls"),
		Timeout:  timeout,
	})))
	e.GET("/hello", func(c echo.Context) error {
		return c.String(http.StatusOK, "hello "+c.Request().Header.Get("X-Customer")+"\n")
	})
	return e
}
