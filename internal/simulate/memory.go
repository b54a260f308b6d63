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
// quotad's in-process counter: it fills up to keys keys (fewer when keys ×
// checks per key is above MaxMemoryChecks, at least 1000), each to its
// limit within one window, in checks spread over the window: one unit
// each, or, for a limit above the window's milliseconds, one check each
// millisecond (a log keeps one entry per millisecond, so that is the most
// a key holds), then divides the growth of the live heap, read
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
	length := cfg.Window.Length().Milliseconds()
	steps := min(fill, length) // checks per key
	keys = memoryKeys(keys, steps)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%08d", i)
	}
	l := &lane{counter: quota.NewSliding()}
	l.span[0].Rule = quota.RuleFor(cfg.limitOf(a), tiers.Metric{Key: metric})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for j := range steps {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		// fill units in steps checks: the first fill%steps one unit more.
		cost := fill / steps
		if j < fill%steps {
			cost++
		}
		c := Check{Ms: DefaultStart + j*length/steps, Cost: cost}
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

// memoryKeys returns how many of keys to fill in steps checks each: no more
// than MaxMemoryChecks checks' worth, but at least 1000 keys (or keys, when
// fewer). Steps are at most a window's milliseconds, 60,000, so that is at
// most 60 million checks.
func memoryKeys(keys int, steps int64) int {
	if int64(keys) > MaxMemoryChecks/steps {
		return int(min(int64(keys), max(1000, MaxMemoryChecks/steps)))
	}
	return keys
}
