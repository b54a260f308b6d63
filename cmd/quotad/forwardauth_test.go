package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad forward-auth file stops quotad at start-up, before it serves.
func TestRunRejectsBadForwardAuthConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("headers:\n  costumer: X-Tenant\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"unknown field", typo, `line 2: unknown field "costumer" in headers: want one of customer, metric, cost, api_key`},
		{"missing file", filepath.Join(dir, "missing.yaml"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"QUOTAD_FORWARD_AUTH_CONFIG": tt.path, "QUOTAD_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
			var out bytes.Buffer
			err := run(context.Background(), []string{"quotad"}, func(k string) string { return env[k] }, &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// mustForwardAuthFile writes a forward-auth file of the given YAML in a
// directory of the test's and returns its path.
func mustForwardAuthFile(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "forward-auth.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustStartForwardAuth starts quotad on a schema of its own with a
// forward-auth file of the given YAML.
func mustStartForwardAuth(t testing.TB, yaml string) *testServer {
	t.Helper()
	return MustStartServer(t, nil, map[string]string{"QUOTAD_FORWARD_AUTH_CONFIG": mustForwardAuthFile(t, yaml)})
}
