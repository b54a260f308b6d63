package store_test

import (
	"context"
	"errors"
	"net"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// withURL returns the test server's URL changed by edit.
func withURL(t *testing.T, edit func(u *neturl.URL)) string {
	t.Helper()
	u, err := neturl.Parse(dbtest.ServerURL(t))
	if err != nil || u.Scheme == "" {
		t.Fatalf("%s is not a URL: %v", dbtest.EnvURL, err)
	}
	edit(u)
	return u.String()
}

// Open tells a connection PostgreSQL refuses for good (no such database,
// no such user) from one that waiting may mend (nothing listening), and
// a URL it cannot read from both.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: one that was free a moment ago.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).String()
	l.Close()

	tests := []struct {
		name    string
		url     string
		want    error
		notWant error
		says    []string
	}{
		{"missing database", withURL(t, func(u *neturl.URL) { u.Path = "/quotad_no_such_db" }),
			store.ErrRejected, tiers.ErrUnavailable, []string{`database "quotad_no_such_db" does not exist`, "3D000"}},
		{"unknown user", withURL(t, func(u *neturl.URL) { u.User = neturl.UserPassword("quotad_no_such_user", "s3cret") }),
			store.ErrRejected, tiers.ErrUnavailable, []string{"quotad_no_such_user", "28"}},
		{"nothing listening", withURL(t, func(u *neturl.URL) { u.Host = closedPort }),
			tiers.ErrUnavailable, store.ErrRejected, nil},
		{"another scheme", "mysql://root:s3cret@127.0.0.1/x",
			store.ErrBadURL, tiers.ErrUnavailable, []string{"postgres://", "postgresql://", "not mysql://"}},
		{"malformed", "postgres://root:s3cret@127.0.0.1:port/x",
			store.ErrBadURL, tiers.ErrUnavailable, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, err := store.Open(context.Background(), tt.url, 1)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%s) succeeded, want %v", store.RedactURL(tt.url), tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if errors.Is(err, tt.notWant) {
				t.Errorf("got %v, which is also %v", err, tt.notWant)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got %q, want it to say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("got %q, which shows the password", err)
			}
		})
	}
}
