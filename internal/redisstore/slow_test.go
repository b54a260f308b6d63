package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/faulttest"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotatest"
	"github.com/quotad/quotad/internal/redisstore"
	"github.com/quotad/quotad/internal/redistest"
	"github.com/quotad/quotad/internal/tiers"
)

// A Redis slower than the timeout, but answering, is waited for: its
// checks are counted there, not degraded. One that goes silent (a black
// hole) is given up on within its silence (four timeouts, at least a
// second), and checks go on in process, degraded.
func TestSlowRedisIsNotAnOutage(t *testing.T) {
	t.Parallel()
	server := redistest.StartServer(t)
	proxy := faulttest.Start(t, fmt.Sprintf("127.0.0.1:%d", server.Port()))
	const timeout = 100 * time.Millisecond // silence: 1 s
	s, err := redisstore.New("redis://"+proxy.Addr()+"/0", redisstore.Options{Prefix: redistest.Prefix(t),
		Timeout: timeout, Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	catalog := quotatest.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{{Metric: "api_calls", Window: tiers.Minute, Limit: 1000}})
	engine := quota.New(quota.Options{Catalog: catalog, Ledger: quotatest.NewLedger(), Shared: s,
		StoreTimeout: time.Minute})
	ctx := context.Background()
	check := func() quota.Decision {
		t.Helper()
		d, err := engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := check(); d.Degraded {
		t.Fatalf("before any fault: %+v", d)
	}
	// 300 ms each way: a round trip of six timeouts, within the silence.
	proxy.Latency(3 * timeout)
	for i := range 3 {
		if d := check(); d.Degraded || !d.Allowed || d.Limits[0].Used != int64(i+2) {
			t.Errorf("check %d through a slow network: %+v, want counted in Redis", i+2, d)
		}
	}
	proxy.Clear()
	proxy.BlackHole()
	start := time.Now()
	d := check()
	took := time.Since(start)
	if !d.Degraded {
		t.Errorf("Redis silent: %+v, want degraded", d)
	}
	// A bound, not a measure: the silence and a busy machine's slack,
	// well below the minute a call may wait for a Redis that answers.
	if took > 10*time.Second {
		t.Errorf("the check waited %s for a silent Redis", took)
	}
	t.Logf("a silent Redis was given up on after %s", took.Round(time.Millisecond))
}
