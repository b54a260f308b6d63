package serve

import (
	"context"
	"net/http"
	"testing"
)

func TestGetenv(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	for key, want := range map[string]string{"SET": "v", "EMPTY": "def", "UNSET": "def"} {
		if got := Getenv(getenv, key, "def"); got != want {
			t.Errorf("Getenv(%q) = %q, want %q", key, got, want)
		}
	}
}

// Run ends without error when its context does, and with the server's
// error when it cannot serve.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, &http.Server{Addr: "127.0.0.1:0"}); err != nil {
		t.Errorf("Run after its context ended = %v, want nil", err)
	}
	if err := Run(context.Background(), &http.Server{Addr: "127.0.0.1:-1"}); err == nil {
		t.Errorf("Run on a bad address = nil, want its error")
	}
}
