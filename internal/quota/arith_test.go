package quota

import (
	"math/big"
	"testing"

	"pgregory.net/rapid"

	"github.com/quotad/quotad/internal/tiers"
)

func TestMulDivMatchesBigInt(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64Range(0, tiers.MaxLimit).Draw(t, "a")
		b := rapid.Int64Range(0, 1100).Draw(t, "b")
		c := rapid.Int64Range(1, 60000).Draw(t, "c")
		want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		want.Div(want, big.NewInt(c))
		if want.Cmp(big.NewInt(tiers.MaxLimit)) > 0 {
			want = big.NewInt(tiers.MaxLimit)
		}
		if got := mulDiv(a, b, c); got != want.Int64() {
			t.Fatalf("mulDiv(%d, %d, %d) = %d, want %d", a, b, c, got, want)
		}
	})
}

func TestSoftThreshold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit, percent, want int64
	}{
		{10, 0, 10},
		{10, 15, 11}, // 11.5 rounds down
		{7, 50, 10},  // 10.5
		{1, 99, 1},   // 1.99
		{1, 100, 2},
		{0, 1000, 0},
		{100, 1000, 1100},
		{tiers.MaxLimit, 1000, tiers.MaxLimit}, // capped, computed without overflow
		{tiers.MaxLimit / 11, 1000, tiers.MaxLimit / 11 * 11},
	}
	for _, tt := range tests {
		if got := softThreshold(tt.limit, tt.percent); got != tt.want {
			t.Errorf("softThreshold(%d, %d) = %d, want %d", tt.limit, tt.percent, got, tt.want)
		}
	}
}

// TestShortWaitIsExact checks retry_after's source against the formula
// itself: after the returned wait the check passes, one millisecond
// earlier it does not, and "never" means it passes at no later time.
func TestShortWaitIsExact(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.SampledFrom([]tiers.Window{tiers.Second, tiers.Minute}).Draw(t, "window")
		length := w.Length().Milliseconds()
		threshold := rapid.Int64Range(0, 50).Draw(t, "threshold")
		b := bucket{
			start: 1_700_000_000_000 - 1_700_000_000_000%length,
			prev:  rapid.Int64Range(0, 60).Draw(t, "prev"),
			cur:   rapid.Int64Range(0, 60).Draw(t, "cur"),
		}
		now := b.start + rapid.Int64Range(0, length-1).Draw(t, "elapsed")
		k := rapid.Int64Range(1, 60).Draw(t, "cost")
		passesAt := func(at int64) bool {
			x := b
			x.roll(at-at%length, length)
			return x.weighted(at, length)+k <= threshold
		}
		wait := shortWait(b, now, length, k, threshold)
		switch {
		case wait < 0:
			for _, later := range []int64{0, length / 2, length, 2 * length, 5 * length} {
				if passesAt(now + later) {
					t.Fatalf("never, but passes %d ms later", later)
				}
			}
		case wait == 0:
			if !passesAt(now) {
				t.Fatalf("wait 0 but it does not pass now")
			}
		default:
			if !passesAt(now + wait) {
				t.Fatalf("does not pass after the %d ms wait", wait)
			}
			if passesAt(now + wait - 1) {
				t.Fatalf("already passes 1 ms before the %d ms wait", wait)
			}
		}
	})
}

// FuzzSlidingWindow fuzzes the window arithmetic: weighted counts stay
// between c and p+c, rolling keeps the newer state, and waits are exact.
func FuzzSlidingWindow(f *testing.F) {
	f.Add(int64(10), int64(0), int64(0), int64(1), int64(10), true)
	f.Add(int64(10), int64(5), int64(500), int64(6), int64(10), true)
	f.Add(int64(tiers.MaxLimit/2), int64(tiers.MaxLimit/2), int64(59999), int64(1), int64(tiers.MaxLimit), false)
	f.Add(int64(3), int64(3), int64(0), int64(1), int64(3), true)
	f.Fuzz(func(t *testing.T, prev, cur, elapsed, k, threshold int64, second bool) {
		w := tiers.Minute
		if second {
			w = tiers.Second
		}
		length := w.Length().Milliseconds()
		if prev < 0 || cur < 0 || prev > tiers.MaxLimit || cur > tiers.MaxLimit || k < 1 || k > 1e9 ||
			threshold < 0 || threshold > tiers.MaxLimit || prev > tiers.MaxLimit-cur {
			// Unreachable: a bucket only grows while the weighted count
			// stays within a threshold, itself at most 2^53-1.
			t.Skip()
		}
		elapsed = mod(elapsed, length)
		b := bucket{start: 1_800_000_000_000 - 1_800_000_000_000%length, prev: prev, cur: cur}
		now := b.start + elapsed
		got := b.weighted(now, length)
		if got < cur || got > addCap(prev, cur) {
			t.Fatalf("weighted = %d outside [%d, %d]", got, cur, addCap(prev, cur))
		}
		wait := shortWait(b, now, length, k, threshold)
		passesAt := func(at int64) bool {
			x := b
			x.roll(at-mod(at, length), length)
			return x.weighted(at, length)+k <= threshold
		}
		switch {
		case wait < 0 && k <= threshold:
			t.Fatalf("never for a cost within the threshold")
		case wait == 0 && !passesAt(now):
			t.Fatalf("wait 0 but does not pass")
		case wait > 0 && (!passesAt(now+wait) || passesAt(now+wait-1)):
			t.Fatalf("wait %d ms is not the first passing moment", wait)
		}
	})
}
