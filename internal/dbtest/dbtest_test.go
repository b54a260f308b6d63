package dbtest

import (
	"testing"

	"github.com/quotad/quotad/internal/testserver"
)

// When no container can be started, the failure names the variable that
// would have pointed the tests at a server, and keeps testcontainers' cause.
func TestContainerErrorNamesTheVariable(t *testing.T) {
	testserver.CheckContainerError(t, &server, "postgres://")
}
