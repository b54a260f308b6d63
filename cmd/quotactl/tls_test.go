package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotad/quotad/internal/quotadtest"
)

// quotactl talks to a quotad served over TLS with a private authority's
// certificate once --ca-cert (or QUOTAD_CA_CERT) names that authority, and
// refuses the certificate without it.
func TestCACert(t *testing.T) {
	dir := t.TempDir()
	cert := quotadtest.MustWriteCert(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), 1)
	srv := quotadtest.MustStart(t, map[string]string{"QUOTAD_TLS_CERT": cert.CertFile, "QUOTAD_TLS_KEY": cert.KeyFile})
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{"the flag", []string{"--ca-cert", cert.CertFile}, nil, 0, ""},
		{"the variable", nil, map[string]string{"QUOTAD_CA_CERT": cert.CertFile}, 0, ""},
		{"no authority", nil, nil, 1, "certificate"},
		{"a file without a certificate", []string{"--ca-cert", cert.KeyFile}, nil, 1, "no PEM certificate"},
		{"a missing file", []string{"--ca-cert", filepath.Join(dir, "nothing.pem")}, nil, 1, "--ca-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"QUOTAD_URL": "https://" + srv.Addr, "QUOTAD_TOKEN": srv.AdminToken}
			for k, v := range tc.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"quotactl"}, tc.args...), "catalog", "export")
			code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", code, stderr.String(), tc.wantCode, tc.wantErr)
			}
		})
	}
}
