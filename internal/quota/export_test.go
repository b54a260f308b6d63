package quota

import (
	"context"
	"errors"
	"time"
)

// SetFailoverClock makes the engine's failover read now instead of the
// wall clock (see Failover). Call it before the first check.
func (e *Engine) SetFailoverClock(now func() time.Time) { e.failover.now = now }

// RetryEvery and ForgetAfter are Failover's periods, for tests.
const (
	RetryEvery  = retryEvery
	ForgetAfter = forgetAfter
)

// NewFailover returns the short-window counter of an engine with a shared
// store (see Engine): shared while the store answers, local when it does
// not. It reports no change of mode.
func NewFailover(shared *SharedCounters, local Counter) *Failover {
	return newFailover(shared, local, nil)
}

// EvictIdle drops short-window counters that count nothing any more and
// returns how many it dropped (Run does it every evictEvery).
func (e *Engine) EvictIdle() int { return e.sliding.evict(e.clock.Now().UnixMilli()) }

// Repay charges what checks admitted degraded owe, where their stores
// answer (Run does it every second).
func (e *Engine) Repay(ctx context.Context) error {
	return errors.Join(e.repay(ctx), e.debts.repayShared(ctx, e.failover, e.clock.Now().UTC()))
}
