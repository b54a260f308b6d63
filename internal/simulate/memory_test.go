package simulate

import (
	"testing"

	"github.com/quotad/quotad/internal/tiers"
)

// The sliding window counter keeps a 64-byte entry and a few bytes of
// index per key, allocated 1024 entries at a time per shard (64 of them):
// 100,000 keys take two chunks a shard, about 84 bytes a key and their
// index.
func TestMeasureBytesPerKey(t *testing.T) {
	cfg := Config{Window: tiers.Second, Limit: 2}
	b, keys, err := MeasureBytesPerKey(t.Context(), cfg, tiers.SlidingWindow, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f bytes per key over %d keys", b, keys)
	if keys != 100_000 || b < 64 || b > 150 {
		t.Errorf("%.1f bytes per key over %d keys, want 64 to 150 over 100000", b, keys)
	}
	for _, c := range []struct {
		keys  int
		limit int64
		want  int
	}{{100_000, 100, 100_000}, {100_000, 1000, 10_000}, {100_000, 1 << 40, 1000}, {500, 1 << 40, 500}} {
		if got := memoryKeys(c.keys, c.limit); got != c.want {
			t.Errorf("memoryKeys(%d, %d) = %d, want %d", c.keys, c.limit, got, c.want)
		}
	}
	// A limit above the window's milliseconds fills each key in one check
	// a millisecond, not one a unit: 1000 keys × 1000 checks here.
	big := Config{Window: tiers.Second, Limit: tiers.MaxLimit}
	if b, keys, err := MeasureBytesPerKey(t.Context(), big, tiers.SlidingLog, 1000); err != nil || keys != 1000 || b < 64 {
		t.Errorf("a log of limit 2^53-1: %.1f bytes per key over %d keys (%v), want 1000 keys", b, keys, err)
	}
	if _, _, err := MeasureBytesPerKey(t.Context(), cfg, tiers.SlidingWindow, 0); err == nil {
		t.Error("no keys measured")
	}
}
