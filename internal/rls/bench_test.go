package rls_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/rls"
	"github.com/quotad/quotad/internal/tiers"
)

// The rate limit service's micro-benchmarks, the gRPC counterpart of
// internal/api's check benchmarks. Speed is never asserted; compare runs
// with benchstat:
//
//	go test -run '^$' -bench . -benchmem -count 6 ./internal/rls/

// benchCustomers is how many customers the benchmarks check in turn.
const benchCustomers = 10_000

// benchService is a Service as cmd/quotad configures it (a check and an
// admin token) over an engine whose benchCustomers customers may make
// 2^40 calls a second and a minute, counted in process.
func benchService(tb testing.TB) (*rls.Service, *quota.Engine) {
	tb.Helper()
	catalog := quotafake.NewCatalog()
	catalog.PutMetric("api_calls", nil)
	limits := []tiers.Limit{
		{Metric: "api_calls", Window: tiers.Second, Limit: 1 << 40, Mode: tiers.Hard},
		{Metric: "api_calls", Window: tiers.Minute, Limit: 1 << 40, Mode: tiers.Hard},
	}
	for i := range benchCustomers {
		catalog.PutCustomer("c"+strconv.Itoa(i), tiers.Anchor{}, limits)
	}
	clock := quotafake.NewClock(now)
	e := quota.New(quota.Options{Catalog: catalog, Clock: clock, StoreTimeout: 30 * time.Second})
	svc := rls.New(rls.Options{Checker: e, Tokens: []string{"adm-secret", "chk-secret"}, Now: clock.Now})
	return svc, e
}

// benchRequests are one request per customer, as Envoy sends them: the
// domain names the metric, one descriptor names the customer.
func benchRequests() []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, benchCustomers)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "api_calls", Descriptors: []*commonrl.RateLimitDescriptor{
			{Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: "customer", Value: "c" + strconv.Itoa(i)}}}}}
	}
	return reqs
}

// benchContext is a call's context as the gRPC server hands it over: the
// check token in its incoming metadata.
func benchContext() context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer chk-secret"))
}

// BenchmarkShouldRateLimit measures the service's part of a call (the
// token, the descriptors read, the check, the answer built), not gRPC's.
func BenchmarkShouldRateLimit(b *testing.B) {
	svc, _ := benchService(b)
	reqs, ctx := benchRequests(), benchContext()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		res, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		if err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkEngineCheckOfDescriptor is the engine's part of
// BenchmarkShouldRateLimit alone: what the service adds is the
// difference.
func BenchmarkEngineCheckOfDescriptor(b *testing.B) {
	_, e := benchService(b)
	ids := make([]string, benchCustomers)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d, err := e.Check(ctx, quota.Request{Customer: ids[i%len(ids)], Metric: "api_calls", Cost: 1})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}
