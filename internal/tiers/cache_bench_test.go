package tiers

import (
	"context"
	"testing"
)

// BenchmarkCacheAccount is the check path's read of a customer the cache
// holds: a map lookup of the customer, then of its plan; no allocation.
func BenchmarkCacheAccount(b *testing.B) {
	src := newFakeSource()
	src.setPlan(Plan{Key: "pro", Limits: []Limit{{Metric: "api_calls", Window: Day, Limit: 10, Mode: Hard}}})
	src.setCustomer(Customer{ID: "acme", Plan: "pro"})
	c := NewCache(src, 0)
	ctx := context.Background()
	if _, err := c.Account(ctx, "acme"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Account(ctx, "acme"); err != nil {
			b.Fatal(err)
		}
	}
}
