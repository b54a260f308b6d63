package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotatest"
	"github.com/quotad/quotad/internal/tiers"
)

// BenchmarkSharedCheck is a check of a second and a minute window through
// Redis, from 32 goroutines a core (quotad's checks arrive concurrently,
// and rueidis pipelines them), over 10,000 customers: what a check costs
// quotad and Redis together, the round trip included.
func BenchmarkSharedCheck(b *testing.B) {
	catalog := quotatest.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
		catalog.PutCustomer(ids[i], tiers.Anchor{}, []tiers.Limit{
			{Metric: "api_calls", Window: tiers.Second, Limit: tiers.MaxLimit},
			{Metric: "api_calls", Window: tiers.Minute, Limit: tiers.MaxLimit},
		})
	}
	e := quota.New(quota.Options{Catalog: catalog, Ledger: quotatest.NewLedger(), Shared: newStore(b), SharedClock: true})
	ctx := context.Background()
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			i++
			d, err := e.Check(ctx, quota.Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1})
			if err != nil || !d.Allowed || d.Degraded {
				b.Error(d, err)
				return
			}
		}
	})
}
