package simulate

import (
	"context"
	"fmt"
	"runtime"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// MaxMemoryChecks bounds the checks MeasureBytesPerKey makes: with a
// large limit it fills fewer keys.
const MaxMemoryChecks = 10_000_000

// MeasureBytesPerKey measures the heap that keys of algorithm a hold in
// quotad's in-process counter: it fills up to keys keys (fewer when
// keys × limit is above MaxMemoryChecks, at least 1000), each to its
// limit within one window in checks of one unit spread over the window
// (the most a key holds), then divides the growth of the live heap, read
// after a collection, by the keys. It returns the bytes per key and the
// keys filled. Whatever else allocates meanwhile counts too: measure with
// nothing else running. It stops early with ctx's error when ctx is
// done.
func MeasureBytesPerKey(ctx context.Context, cfg Config, a tiers.Algorithm, keys int) (float64, int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	if keys < 1 {
		return 0, 0, fmt.Errorf("measure over at least one key, not %d", keys)
	}
	fill := cfg.Limit
	keys = memoryKeys(keys, fill)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%08d", i)
	}
	length := cfg.Window.Length().Milliseconds()
	l := &lane{counter: quota.NewSliding()}
	l.span[0].Rule = quota.RuleFor(cfg.limitOf(a), tiers.Metric{Key: metric})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for j := range fill {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		c := Check{Ms: DefaultStart + j*length/fill, Cost: 1}
		for _, name := range names {
			if _, err := l.take(ctx, cfg.Window, name, c); err != nil {
				return 0, 0, err
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l)
	runtime.KeepAlive(names)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(keys), keys, nil
}

// memoryKeys returns how many of keys to fill to limit: no more than
// MaxMemoryChecks checks' worth, but at least 1000 keys (or keys, when
// fewer).
func memoryKeys(keys int, limit int64) int {
	if int64(keys) > MaxMemoryChecks/limit {
		return int(min(int64(keys), max(1000, MaxMemoryChecks/limit)))
	}
	return keys
}
