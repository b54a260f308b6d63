package quotadtest_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/quotad/quotad/internal/quotadtest"
)

func TestMain(m *testing.M) { os.Exit(quotadtest.Main(m)) }

// get sends a GET with token (none when empty) and returns the status.
func get(t *testing.T, url, token string) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestMustStart(t *testing.T) {
	s := quotadtest.MustStart(t, nil)
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want http://127.0.0.1:<port>", s.URL)
	}
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"ready", "/readyz", "", http.StatusOK},
		{"admin token", "/v1/metrics", s.AdminToken, http.StatusOK},
		{"check token on an admin route", "/v1/metrics", s.CheckToken, http.StatusForbidden},
		{"no token", "/v1/metrics", "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := get(t, s.URL+tt.path, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("GET %s = %d, want %d", tt.path, got, tt.want)
			}
		})
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop = %v, want a clean shutdown", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
	if _, err := get(t, s.URL+"/healthz", ""); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET /healthz after Stop: err = %v, want connection refused", err)
	}
	if !strings.Contains(s.Logs(), `"msg":"listening"`) {
		t.Errorf("Logs() lacks the listening line:\n%s", s.Logs())
	}
}

// Two servers on one database see each other's writes.
func TestMustStartSharedDatabase(t *testing.T) {
	a := quotadtest.MustStart(t, nil)
	b := quotadtest.MustStart(t, map[string]string{"QUOTAD_DATABASE_URL": a.DatabaseURL})
	if a.URL == b.URL {
		t.Fatalf("both servers on %s", a.URL)
	}
	req, err := http.NewRequest(http.MethodPut, a.URL+"/v1/metrics/api_calls", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT on a = %d, want 201", resp.StatusCode)
	}
	got, err := get(t, b.URL+"/v1/metrics/api_calls", b.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if got != http.StatusOK {
		t.Errorf("GET on b = %d, want 200", got)
	}
}
