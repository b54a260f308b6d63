package quota

import "time"

// SetFailoverClock makes the engine's failover read now instead of the
// wall clock (see Failover). Call it before the first check.
func (e *Engine) SetFailoverClock(now func() time.Time) { e.failover.now = now }

// RetryEvery and ForgetAfter are Failover's periods, for tests.
const (
	RetryEvery  = retryEvery
	ForgetAfter = forgetAfter
)
