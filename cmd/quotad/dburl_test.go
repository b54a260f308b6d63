package main

import (
	"bytes"
	"context"
	"errors"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
)

// A database URL that waiting will not mend (no such database, no such
// user, another scheme, unreadable) fails at once, naming the flag and the
// variable, however long --db-wait is; it is not retried until the wait
// runs out.
func TestRunRefusesBadDatabaseURLAtOnce(t *testing.T) {
	t.Parallel()
	server, err := neturl.Parse(dbtest.ServerURL(t))
	if err != nil || server.Scheme == "" {
		t.Fatalf("%s is not a URL: %v", dbtest.EnvURL, err)
	}
	with := func(edit func(u *neturl.URL)) string {
		u := *server
		edit(&u)
		return u.String()
	}
	tests := []struct {
		name string
		url  string
		says []string
	}{
		{"missing database", with(func(u *neturl.URL) { u.Path = "/quotad_n2" }),
			[]string{`database "quotad_n2" does not exist`}},
		{"unknown user", with(func(u *neturl.URL) { u.User = neturl.UserPassword("quotad_nobody", "s3cret") }),
			[]string{"quotad_nobody"}},
		{"another scheme", "mysql://root:s3cret@127.0.0.1/x",
			[]string{"must begin postgres:// or postgresql://"}},
		{"malformed", "postgres://root:s3cret@127.0.0.1:port/x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{
				"QUOTAD_DATABASE_URL": tt.url,
				"QUOTAD_LISTEN":       "127.0.0.1:0",
				"QUOTAD_DB_WAIT":      "1h",
			}
			// Only a safety net: a refused URL fails long before.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out bytes.Buffer
			err := run(ctx, []string{"quotad"}, func(k string) string { return env[k] }, &out)
			if err == nil {
				t.Fatal("run succeeded, want an error")
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Fatalf("got %v: run kept retrying", err)
			}
			for _, s := range append([]string{"--database-url", "QUOTAD_DATABASE_URL"}, tt.says...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got %q, want it to say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(out.String(), "s3cret") {
				t.Errorf("the password shows: error %q, log %q", err, out.String())
			}
		})
	}
}
