package dbtest

import (
	"errors"
	"strings"
	"testing"
)

// When no container can be started, the failure names the variable that
// would have pointed the tests at a server, and keeps testcontainers' cause.
func TestContainerErrorNamesTheVariable(t *testing.T) {
	cause := errors.New("rootless Docker not found")
	err := containerError(cause)
	if err == nil {
		t.Fatal("got nil, want an error")
	}
	for _, want := range []string{EnvURL, "rootless Docker not found", "postgres://"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	}
	if !errors.Is(err, cause) {
		t.Errorf("got %v, want it to wrap %v", err, cause)
	}
	if err := containerError(nil); err != nil {
		t.Errorf("containerError(nil) = %v, want nil", err)
	}
}
