package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quotad/quotad/internal/quotadtest"
)

// With --tls-cert and --tls-key, the API and the rate limit service are
// served over TLS: an HTTPS check and a gRPC call succeed, a plaintext
// request to either port is refused, and a renewed certificate is served
// without a restart.
func TestTLSServesHTTPAndGRPC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert := quotadtest.MustWriteCert(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), 1)
	s := MustStartServer(t, nil, withGRPC(map[string]string{"QUOTAD_TLS_CERT": cert.CertFile, "QUOTAD_TLS_KEY": cert.KeyFile}))
	addr := strings.TrimPrefix(s.URL, "http://")
	plain := s.URL
	s.URL = "https://" + addr
	s.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}}

	// An HTTPS check, after a catalog set up over HTTPS.
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":5}]`, "acme")
	r := s.mustDo(http.StatusOK, "POST", "/v1/check", `{"customer": "acme", "metric": "api_calls"}`, "Authorization", "Bearer "+checkToken)
	if !strings.Contains(string(r.Body), `"allowed":true`) {
		t.Errorf("HTTPS check: %s, want allowed", r.Body)
	}

	// Plain HTTP to the TLS port is not served.
	if resp, err := http.Get(plain + "/healthz"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS port: %d %s, want it refused", resp.StatusCode, body)
		}
	}

	// gRPC over TLS.
	conn, err := grpc.NewClient(s.grpcAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: cert.Pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &rlsClient{RateLimitServiceClient: rlsv3.NewRateLimitServiceClient(conn)}
	if res := c.mustCall(t, "api_calls", rlDesc(1, "customer", "acme")); rlCodes(res) != "OK [OK]" {
		t.Errorf("gRPC over TLS: %s, want OK", rlCodes(res))
	}
	if got := s.usedDay("acme"); got != 2 {
		t.Errorf("acme used %v, want 2 (a check over HTTPS, one over gRPC)", got)
	}
	// gRPC in clear (h2c) to the TLS port is not served.
	h2c, err := grpc.NewClient(s.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer h2c.Close()
	if _, err := rlsv3.NewRateLimitServiceClient(h2c).ShouldRateLimit(asToken(checkToken),
		&rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{rlDesc(1, "customer", "acme")}}); err == nil {
		t.Errorf("gRPC in clear to the TLS port succeeded, want it refused")
	}

	// A renewed certificate is served from the next handshake on.
	renewed := quotadtest.MustWriteCert(t, cert.CertFile, cert.KeyFile, 2)
	later := time.Now().Add(time.Minute) // a change of time the file system cannot miss
	for _, f := range []string{renewed.CertFile, renewed.KeyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	conf := &tls.Config{RootCAs: renewed.Pool}
	tc, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatalf("handshake after the renewal: %v", err)
	}
	defer tc.Close()
	if got := tc.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(renewed.Serial) != 0 {
		t.Errorf("served the certificate of serial %v after the renewal, want %v", got, renewed.Serial)
	}
}

// --tls-cert and --tls-key go together, and a pair that cannot be used
// stops start-up, naming the flags.
func TestTLSConfigRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert := quotadtest.MustWriteCert(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), 1)
	other := quotadtest.MustWriteCert(t, filepath.Join(dir, "other.pem"), filepath.Join(dir, "other-key.pem"), 2)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"a certificate without its key", []string{"--tls-cert", cert.CertFile}, nil, []string{"--tls-cert", "--tls-key", "both or neither"}},
		{"a key without its certificate", nil, map[string]string{"QUOTAD_TLS_KEY": cert.KeyFile}, []string{"$QUOTAD_TLS_KEY", "both or neither"}},
	} {
		t.Run(tc.name, func(t *testing.T) { mustRefuseConfig(t, tc.args, tc.env, tc.want, nil) })
	}
	for _, tc := range []struct {
		name      string
		cert, key string
		want      string
	}{
		{"a missing file", filepath.Join(dir, "nothing.pem"), cert.KeyFile, "nothing.pem"},
		{"another certificate's key", cert.CertFile, other.KeyFile, "private key does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runOut(t, "--tls-cert", tc.cert, "--tls-key", tc.key, "--database-url", "postgres://postgres@127.0.0.1:1/quotad", "--db-wait", "0s", "--listen", "127.0.0.1:0")
			if err == nil || !strings.Contains(err.Error(), "--tls-cert") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want an error naming --tls-cert and saying %q", err, tc.want)
			}
		})
	}
}
