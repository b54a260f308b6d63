package quota_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// refModel is a slow, obviously right model of one key of one algorithm:
// what the short-window counter must agree with, step by step.
type refModel interface {
	count(now int64) int64 // the algorithm's count at now
	add(now, n int64)
	giveBack(now, n int64)
}

const refT = 1000 // a second window

// refFixed counts per clock-aligned bucket.
type refFixed struct{ buckets map[int64]int64 }

func (r *refFixed) count(now int64) int64 { return r.buckets[now-now%refT] }
func (r *refFixed) add(now, n int64)      { r.buckets[now-now%refT] += n }
func (r *refFixed) giveBack(now, n int64) {
	cur := now - now%refT
	d := min(n, r.buckets[cur])
	r.buckets[cur] -= d
	r.buckets[cur-refT] -= min(n-d, r.buckets[cur-refT])
}

// refSliding weighs the previous bucket, in big integers.
type refSliding struct{ refFixed }

func (r *refSliding) count(now int64) int64 {
	cur := now - now%refT
	p, e := big.NewInt(r.buckets[cur-refT]), big.NewInt(now-cur)
	w := new(big.Int).Mul(p, new(big.Int).Sub(big.NewInt(refT), e))
	w.Div(w, big.NewInt(refT))
	return w.Int64() + r.buckets[cur]
}

// refLog keeps every admitted unit with its time.
type refLog struct{ units []int64 }

func (r *refLog) count(now int64) int64 {
	n := int64(0)
	for _, at := range r.units {
		if at > now-refT && at <= now {
			n++
		}
	}
	return n
}

func (r *refLog) add(now, n int64) {
	for range n {
		r.units = append(r.units, now)
	}
}

// giveBack takes units counted at now first, then the newest.
func (r *refLog) giveBack(now, n int64) {
	for i := len(r.units) - 1; i >= 0 && n > 0; i-- {
		if r.units[i] == now {
			r.units = append(r.units[:i], r.units[i+1:]...)
			n--
		}
	}
	for n > 0 && len(r.units) > 0 {
		r.units = r.units[:len(r.units)-1]
		n--
	}
}

// refBucket holds tokens as an exact fraction, refilled at rate per T.
type refBucket struct {
	tokens      *big.Rat
	burst, rate int64
	last        int64
}

// at returns the tokens the bucket holds at now, not before its last
// change.
func (r *refBucket) at(now int64) *big.Rat {
	t := new(big.Rat).Set(r.tokens)
	if now > r.last {
		t.Add(t, big.NewRat((now-r.last)*r.rate, refT))
	}
	if b := big.NewRat(r.burst, 1); t.Cmp(b) > 0 {
		return b
	}
	return t
}

func (r *refBucket) count(now int64) int64 {
	t := r.at(now)
	whole := new(big.Int).Quo(t.Num(), t.Denom()) // floor: tokens >= 0
	return r.burst - whole.Int64()
}

func (r *refBucket) add(now, n int64) {
	r.tokens, r.last = r.at(now), max(now, r.last)
	r.tokens.Sub(r.tokens, big.NewRat(n, 1))
}

func (r *refBucket) giveBack(now, n int64) {
	r.tokens, r.last = r.at(now), max(now, r.last)
	r.tokens.Add(r.tokens, big.NewRat(n, 1))
	if b := big.NewRat(r.burst, 1); r.tokens.Cmp(b) > 0 {
		r.tokens = b
	}
}

// FuzzAlgorithms runs a random sequence of takes, peeks and give-backs of
// one key through the short-window counter and through the reference
// model of its algorithm, and asserts that they agree on every count and
// decision, that a denied take's wait is the first moment the model
// admits, and that reset_at is when the model's count is back to zero.
func FuzzAlgorithms(f *testing.F) {
	f.Add(uint8(0), uint8(10), uint8(0), []byte{0, 9, 0, 1, 9, 0, 200, 3, 1, 4, 2, 3})
	f.Add(uint8(1), uint8(10), uint8(0), []byte{250, 9, 0, 4, 9, 0, 1, 3, 0, 90, 5, 3})
	f.Add(uint8(2), uint8(7), uint8(0), []byte{10, 6, 0, 100, 2, 0, 120, 5, 0, 3, 1, 3, 255, 7, 0})
	f.Add(uint8(3), uint8(3), uint8(9), []byte{0, 8, 0, 20, 1, 0, 18, 1, 0, 200, 4, 3, 60, 2, 2})
	f.Add(uint8(3), uint8(7), uint8(2), []byte{1, 1, 0, 2, 1, 0, 3, 11, 0, 180, 1, 0})
	f.Fuzz(func(t *testing.T, algByte, limitByte, burstByte uint8, ops []byte) {
		alg := tiers.Algorithms[int(algByte)%len(tiers.Algorithms)]
		limit := 1 + int64(limitByte)%50
		var burst *int64
		var model refModel
		switch alg {
		case tiers.SlidingWindow:
			model = &refSliding{refFixed{map[int64]int64{}}}
		case tiers.FixedWindow:
			model = &refFixed{map[int64]int64{}}
		case tiers.SlidingLog:
			model = &refLog{}
		case tiers.TokenBucket:
			size := limit
			if burstByte > 0 {
				size = int64(burstByte)%60 + 1
				burst = &size
			}
			model = &refBucket{tokens: big.NewRat(size, 1), burst: size, rate: limit}
		}
		rule := quota.RuleFor(tiers.Limit{Metric: "m", Window: tiers.Second, Limit: limit, Mode: tiers.Hard,
			Algorithm: alg, Burst: burst}, tiers.Metric{Key: "m"})
		counter := quota.NewSliding()
		ctx := context.Background()
		base := algoStart.UnixMilli()
		charge := func(now, cost int64) *quota.Charge {
			at := time.UnixMilli(base + now).UTC()
			start, end := quota.Bounds(tiers.Second, at, tiers.Anchor{})
			return &quota.Charge{Customer: "c", Metric: "m", Cost: cost, At: at, Spans: []quota.Span{{
				Key: quota.CounterKey{Customer: "c", Metric: "m", Window: tiers.Second, Start: start}, End: end, Rule: rule}}}
		}
		admits := func(now, cost int64) bool { return model.count(now)+cost <= rule.Threshold }
		now := int64(0)
		out := make([]quota.Outcome, 1)
		for i := 0; i+2 < len(ops); i += 3 {
			now += int64(ops[i]) * int64(ops[i]) / 16 // mostly short steps, up to about 4 s
			cost := 1 + int64(ops[i+1])%12
			c := charge(now, cost)
			took := false
			switch ops[i+2] % 4 {
			case 0, 1:
				want := admits(now, cost)
				used := model.count(now)
				ok, err := counter.Take(ctx, quotafake.One(c, out))
				if err != nil || ok != want || out[0].Used != used {
					t.Fatalf("%s op %d at %d: take %d: %v %v, used %d; model: %v, used %d",
						alg, i/3, now, cost, ok, err, out[0].Used, want, used)
				}
				if ok {
					model.add(now, cost)
					took = true
					break
				}
				w := out[0].Wait
				switch {
				case cost > rule.Threshold:
					if w != -1 {
						t.Fatalf("%s op %d: wait %d for a cost above the threshold", alg, i/3, w)
					}
				case w < 1 || !admits(now+w, cost) || admits(now+w-1, cost):
					t.Fatalf("%s op %d at %d: wait %d ms for cost %d, but the model admits at %d: %v, at %d: %v",
						alg, i/3, now, w, cost, now+w, admits(now+w, cost), now+w-1, admits(now+w-1, cost))
				}
			case 2:
				if err := counter.Peek(ctx, quotafake.One(c, out)); err != nil || out[0].Used != model.count(now) {
					t.Fatalf("%s op %d at %d: peek used %d (%v), model %d", alg, i/3, now, out[0].Used, err, model.count(now))
				}
			case 3:
				if err := counter.GiveBack(ctx, quotafake.One(c, out)); err != nil {
					t.Fatal(err)
				}
				model.giveBack(now, cost)
			}
			r := out[0].ResetMs // as the count stands: a take that passed reports it with its units
			if took {
				r = out[0].ResetAfterMs
			}
			if r != 0 {
				r -= base
				if model.count(r) != 0 || r > now && model.count(r-1) == 0 {
					t.Fatalf("%s op %d at %d: reset at %d, but the model counts %d there and %d 1 ms before",
						alg, i/3, now, r, model.count(r), model.count(r-1))
				}
			}
		}
	})
}
