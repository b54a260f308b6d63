package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// mustBuildClientCmd builds Envoy's ratelimit command-line client
// (src/client_cmd of github.com/envoyproxy/ratelimit, at the version
// tools/envoyratelimit pins) into the test's temporary directory; the Go
// build cache keeps its compiled packages between runs. Where it cannot be
// built (no module proxy, no network), the test is skipped, but fails in
// CI.
func mustBuildClientCmd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "client_cmd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/envoyproxy/ratelimit/src/client_cmd")
	cmd.Dir = filepath.Join("..", "..", "tools", "envoyratelimit")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("building Envoy's client_cmd: %v\n%s", err, out)
		}
		t.Skipf("Envoy's client_cmd cannot be built here (set CI to fail instead): %v\n%s", err, out)
	}
	return bin
}

// Envoy's own client, run as a user would, against a running quotad: it
// prints the answer, OK while within the limit, then OVER_LIMIT. It sends
// no token: the quotad it asks has none configured.
func TestEnvoyClientCmd(t *testing.T) {
	t.Parallel()
	bin := mustBuildClientCmd(t)
	s := MustStartServer(t, nil, withGRPC(map[string]string{"QUOTAD_ADMIN_TOKENS": "", "QUOTAD_CHECK_TOKENS": ""}))
	MustSeed(t, s, "", `[{"metric":"api_calls","window":"day","limit":2}]`, "acme", "other")
	addr := s.grpcAddr()
	overall := regexp.MustCompile(`response: .*overall_code:\s*(\w+)`)
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-domain", "api_calls", "-descriptors", "customer=acme"}, "OK"},
		{[]string{"-domain", "api_calls", "-descriptors", "customer=acme", "-descriptors", "customer=other"}, "OK"},
		// acme's 2 are used: over the limit, and other's unit not counted.
		{[]string{"-domain", "api_calls", "-descriptors", "customer=other", "-descriptors", "customer=acme"}, "OVER_LIMIT"},
		{[]string{"-domain", "whatever", "-descriptors", "customer=other,metric=api_calls"}, "OK"},
		{[]string{"-domain", "api_calls", "-descriptors", "customer=ghost"}, "OVER_LIMIT"},
	} {
		out, err := exec.Command(bin, append([]string{"-dial_string", addr}, tc.args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("client_cmd %v: %v\n%s", tc.args, err, out)
		}
		t.Logf("client_cmd %v:\n%s", tc.args, out)
		m := overall.FindSubmatch(out)
		if m == nil || string(m[1]) != tc.want {
			t.Errorf("call %d, client_cmd %v printed\n%s\nwant overall_code %s", i, tc.args, out, tc.want)
		}
	}
	if got := s.usedDay("other"); got != 2 {
		t.Errorf("other used %v, want 2: the OVER_LIMIT answer counted nothing", got)
	}
}
