// Package serve holds what the examples' commands share: reading their
// environment, and serving until interrupted. It is no part of what an
// example shows about quotad.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"time"
)

// Main calls run with the process's environment and standard output, its
// context ending at an interrupt, and exits 1 with run's error, if any.
func Main(run func(ctx context.Context, getenv func(string) string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Getenv returns getenv(key), or def when that is empty.
func Getenv(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// Run serves srv until ctx ends or serving fails, then shuts it down,
// giving the requests in flight five seconds to finish.
func Run(ctx context.Context, srv *http.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
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
