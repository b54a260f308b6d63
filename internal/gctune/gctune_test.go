package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name           string
		live, headroom uint64
		want           int
	}{
		{"small heap: the headroom paces", 16 * mib, 128 * mib, 800},
		{"a third of the headroom", 48 * mib, 128 * mib, 266},
		{"live as large as the headroom: the runtime's doubling", 128 * mib, 128 * mib, 100},
		{"live beyond the headroom: never below the default", 1024 * mib, 128 * mib, 100},
		{"nothing live yet", 0, 128 * mib, 100 << 20},
		{"a byte live", 1, 128 * mib, 100 << 20},
		{"the largest headroom over a few bytes", 8, 1 << 40, 100 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.live, tc.headroom); got != tc.want {
				t.Errorf("Percent(%d, %d) = %d, want %d", tc.live, tc.headroom, got, tc.want)
			}
		})
	}
}

// gcPercent returns the collector's percent, leaving it as it is.
func gcPercent() int {
	p := debug.SetGCPercent(DefaultPercent)
	debug.SetGCPercent(p)
	return p
}

func TestStartZeroLeavesTheRuntimeAlone(t *testing.T) {
	before := gcPercent()
	tu := Start(0)
	if tu != nil {
		t.Fatalf("Start(0) = %v, want nil", tu)
	}
	tu.Stop() // a nil Tuner stops as a no-op
	if got := gcPercent(); got != before {
		t.Errorf("percent %d after Start(0), want %d", got, before)
	}
}

func TestTunerFollowsCollections(t *testing.T) {
	const headroom = 1 << 30
	tu := Start(headroom)
	defer tu.Stop()
	// Each collection frees the tuner's sentinel; its cleanup runs soon
	// after, on the runtime's cleanup goroutine.
	deadline := time.Now().Add(30 * time.Second)
	for tu.Tunes() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the tuner followed %d collections in 30s, want 2", tu.Tunes())
		}
		runtime.GC()
		runtime.Gosched()
	}
	// A test binary's live heap is a few MB: far below 1 GiB.
	if got := gcPercent(); got < 1000 {
		t.Errorf("percent %d with a live heap far below the headroom, want at least 1000", got)
	}
	tu.Stop()
	if got := gcPercent(); got != DefaultPercent {
		t.Errorf("percent %d after Stop, want %d", got, DefaultPercent)
	}
	tunes := tu.Tunes()
	runtime.GC()
	runtime.GC()
	if got := gcPercent(); got != DefaultPercent {
		t.Errorf("percent %d after collections past Stop, want %d (tunes %d)", got, DefaultPercent, tunes)
	}
}
