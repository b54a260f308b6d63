package quota

import (
	"math"
	"math/bits"

	"github.com/quotad/quotad/internal/tiers"
)

// All limit arithmetic is exact integer arithmetic. Operands are at most
// tiers.MaxLimit (2^53-1), but products such as limit*(100+percent) or
// p*(T-e) can pass 2^63, so they are formed in 128 bits.

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, saturating at
// tiers.MaxLimit.
func mulDiv(a, b, c int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return tiers.MaxLimit // the quotient does not fit 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > uint64(tiers.MaxLimit) {
		return tiers.MaxLimit
	}
	return int64(q)
}

// addCap returns a+b, saturating at tiers.MaxLimit; a, b >= 0.
func addCap(a, b int64) int64 {
	if a > tiers.MaxLimit-b {
		return tiers.MaxLimit
	}
	return a + b
}

// softThreshold is floor(limit * (100 + percent) / 100): how far a soft
// limit admits.
func softThreshold(limit, percent int64) int64 {
	return mulDiv(limit, 100+percent, 100)
}

// Threshold is how many units a limit admits in a window before anything
// elastic: its size (the limit, or a token bucket's burst), or its soft
// threshold.
func Threshold(l tiers.Limit) int64 { return threshold(l) }

func threshold(l tiers.Limit) int64 {
	if l.Mode == tiers.Soft {
		return softThreshold(l.Size(), l.OveragePercent)
	}
	return l.Size()
}

// mulDivCeil returns ceil(a*b/c) for a, b >= 0 and c > 0, at most most.
func mulDivCeil(a, b, c, most int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return most // the quotient does not fit 64 bits
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r > 0 {
		q++
	}
	if q == 0 || q > uint64(most) {
		return most
	}
	return int64(q)
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// mulSubDiv returns floor((a*b - 1) / c) for a, b, c >= 1: the largest y
// with c*y < a*b. It saturates at math.MaxInt64.
func mulSubDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
