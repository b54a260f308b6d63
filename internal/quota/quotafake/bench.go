package quotafake

import (
	"context"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/tiers"
)

// SameAccount is a quota.Catalog that serves one metric and the same
// account to every customer id, without locks: for benchmarks that spread
// checks over many customers and must not measure the catalog.
type SameAccount struct {
	metric tiers.Metric
	acct   tiers.Account
}

// NewSameAccount returns a catalog serving metric, and acct under any
// customer id.
func NewSameAccount(metric tiers.Metric, acct tiers.Account) *SameAccount {
	return &SameAccount{metric: metric, acct: acct}
}

// PublicPlans returns no plans.
func (*SameAccount) PublicPlans(context.Context) ([]tiers.Plan, error) { return nil, nil }

// Metric returns the one metric, whatever the key.
func (c *SameAccount) Metric(context.Context, string) (tiers.Metric, error) { return c.metric, nil }

// Account returns the account, as customer id's.
func (c *SameAccount) Account(_ context.Context, id string) (tiers.Account, error) {
	a := c.acct
	a.Customer.ID = id
	return a, nil
}

// NopLedger is a ledger that grants every lease in full and does nothing
// else: for measuring the lease pool's own cost. Its counts are nil: a
// benchmark that reaches them panics.
type NopLedger struct{ quota.Counts }

// Lease grants every request its need and extra, all used.
func (NopLedger) Lease(_ context.Context, rs []lease.Request) error {
	for i := range rs {
		r := &rs[i]
		r.Granted, r.Used = r.Need+r.Extra, r.Need+r.Extra
	}
	return nil
}

// Settle does nothing.
func (NopLedger) Settle(context.Context, []lease.Settlement) error { return nil }

// Report does nothing.
func (NopLedger) Report(context.Context, []lease.Settlement) error { return nil }

// Resolve does nothing.
func (NopLedger) Resolve(context.Context, []lease.Resolution) error { return nil }

// Recall recalls nothing.
func (NopLedger) Recall(context.Context, quota.CounterKey) (int, error) { return 0, nil }

// Alone says the process is the only one.
func (NopLedger) Alone(context.Context) (bool, error) { return true, nil }

// FixedClock is a quota.Clock stopped at one time, without the lock
// Clock takes: for benchmarks.
type FixedClock time.Time

// Now returns the clock's time.
func (c FixedClock) Now() time.Time { return time.Time(c) }
