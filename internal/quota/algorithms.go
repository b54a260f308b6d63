package quota

import (
	"math"
	"math/bits"
	"slices"

	"github.com/quotad/quotad/internal/tiers"
)

// A short window counts by one of four algorithms (tiers.Algorithm). Each
// keeps a key's state in the key's bucket, three integers, read as
// follows (T is the window's length in milliseconds):
//
//   - sliding window: start of the current clock-aligned bucket, the
//     previous bucket's count and the current one's; the count is the
//     weighted floor(prev*(T-e)/T) + cur (see sliding.go).
//   - fixed window: the same buckets; the count is the current bucket's
//     alone, so it starts again from zero at every boundary.
//   - sliding log: start is the newest entry's millisecond, cur is the
//     units the log holds, and prev numbers the key's log in its shard
//     (plus one). The log keeps the units admitted in each millisecond of
//     the last T, so it is exact; merging a millisecond's units into one
//     entry bounds it by both T and the units admitted. A log of one entry
//     is kept in the bucket alone (prev 0: the cur units of millisecond
//     start), so that a key admitted once costs no more than the others.
//   - token bucket: the bucket is a debt of tokens taken and not yet
//     refilled, measured in 1/T tokens, refilled at rate (the limit) per T,
//     that is rate units per millisecond. It is kept exactly as the moment
//     it is paid off, start, less cur/rate milliseconds (0 <= cur < rate),
//     for prev = rate: debt(now) = (start-now)*rate - cur while now < start,
//     else 0. With rate 0 nothing is refilled, and cur counts the tokens
//     taken. The count is the whole tokens taken, ceil(debt/T), and a check
//     of cost k passes a threshold t iff count + k <= t: the bucket holds
//     t - debt/T tokens, k of them are there iff debt/T <= t - k, iff
//     ceil(debt/T) <= t - k. So every algorithm admits by the same rule,
//     used + cost <= threshold, and Rule decides them all.
//
// A leaky bucket used as a meter (units leak out at the limit's rate, a
// check adds its cost, overflowing is a denial) is the token bucket read
// the other way round: its level is the debt.

// logEntry is the units a sliding log admitted in one millisecond.
type logEntry struct{ ms, n int64 }

// logTable holds a shard's sliding logs, numbered; an entry of a sliding
// log key refers to its log by number, so the other algorithms pay
// nothing for it.
type logTable struct {
	logs [][]logEntry
	free []uint32
}

// newLog returns the number of an empty log.
func (t *logTable) newLog() uint32 {
	if k := len(t.free); k > 0 {
		n := t.free[k-1]
		t.free = t.free[:k-1]
		return n
	}
	t.logs = append(t.logs, nil)
	return uint32(len(t.logs) - 1)
}

// drop frees log n.
func (t *logTable) drop(n uint32) {
	t.logs[n] = nil
	t.free = append(t.free, n)
}

// maxPayoffMs bounds when a token bucket's debt is paid off (Unix ms): the
// payoff must fit 64 bits. A take that would owe more is denied (see
// records): a debt of over 290 million years, which only a count above
// about 1.5*10^14 times the rate per minute reaches.
const maxPayoffMs = math.MaxInt64 - 1

// meter is one span's algorithm over one key's state, at one moment: what
// a check reads and changes. A key that does not exist (a peek) reads as a
// scratch bucket with no log.
type meter struct {
	alg    tiers.Algorithm
	b      *bucket
	logs   *logTable // sliding log: where the key's log lives
	now    int64     // Unix ms
	length int64     // T, ms
	rate   int64     // token bucket: units refilled per T
	// next and nextMs are a token bucket's debt with the units resetAfter
	// was asked about, and how long it takes to pay off (0: not known, or
	// never: rate 0). add stores next.
	next   u128
	nextMs int64
}

// bucketStart returns the start of the clock-aligned bucket holding now.
func (m *meter) bucketStart() int64 { return bucketStart(m.now, m.length) }

// bucketStart returns the start of the clock-aligned bucket of length
// holding ms.
func bucketStart(ms, length int64) int64 { return ms - mod(ms, length) }

// log returns the key's log, nil when it has none.
func (m *meter) log() []logEntry {
	if m.b.prev == 0 || m.logs == nil {
		return nil
	}
	return m.logs.logs[m.b.prev-1]
}

// setLog stores the key's log, numbering it first if need be.
func (m *meter) setLog(l []logEntry) {
	if m.b.prev == 0 {
		m.b.prev = int64(m.logs.newLog()) + 1
	}
	m.logs.logs[m.b.prev-1] = l
}

// buckets reports whether the meter counts in clock-aligned buckets.
func (m *meter) buckets() bool { return m.alg <= tiers.FixedWindow }

// roll brings the state to now: buckets move on, a log drops what left
// the window. Token buckets need nothing: their debt is read at now.
func (m *meter) roll() {
	if m.buckets() {
		m.b.roll(m.bucketStart(), m.length)
	} else if m.alg == tiers.SlidingLog {
		m.prune()
	}
}

// prune drops what left a sliding log's window.
func (m *meter) prune() {
	if m.b.prev == 0 { // one entry, in the bucket
		if m.b.start <= m.now-m.length {
			m.b.cur = 0
		}
		return
	}
	l := m.log()
	i := 0
	for i < len(l) && l[i].ms <= m.now-m.length {
		m.b.cur -= l[i].n
		i++
	}
	if i > 0 {
		m.logs.logs[m.b.prev-1] = l[i:]
	}
}

// count returns the key's count at now: the number a check adds its cost
// to and measures against the threshold.
func (m *meter) count() int64 {
	switch m.alg {
	case tiers.SlidingWindow:
		return m.b.weighted(m.now, m.length)
	case tiers.TokenBucket:
		return m.debt().ceilDivLength(m.length)
	}
	return m.b.cur
}

// add counts k units at now.
func (m *meter) add(k int64) {
	switch m.alg {
	case tiers.SlidingLog:
		switch {
		case m.b.prev == 0 && m.b.cur == 0: // the first entry, in the bucket
			m.b.start = m.now
		case m.b.prev == 0 && m.b.start >= m.now:
			// the bucket's entry: this millisecond, or a clock that stepped back
		default:
			l := m.log()
			if m.b.prev == 0 { // a second entry: the log moves out of the bucket
				l = append(l, logEntry{ms: m.b.start, n: m.b.cur})
			}
			if n := len(l); n > 0 && l[n-1].ms >= m.now {
				l[n-1].n += k // this millisecond's entry, or a clock that stepped back
			} else {
				l = append(l, logEntry{ms: m.now, n: k})
				m.b.start = m.now
			}
			m.setLog(l)
		}
		m.b.cur = addCap(m.b.cur, k)
	case tiers.TokenBucket:
		switch {
		case m.nextMs > 0: // resetAfter(k) computed it
			m.setPaidOff(m.next, m.nextMs)
		case !m.next.zero():
			m.setDebt(m.next) // rate 0: kept as it is
		default:
			m.next = m.debt().add(mul128(uint64(k), uint64(m.length)))
			m.setDebt(m.next)
		}
	default:
		m.b.cur = addCap(m.b.cur, k)
	}
}

// wait returns how many milliseconds from now pass before the key admits
// k units against threshold t, or -1 if it never will. No algorithm's
// count grows while nothing is added, so once it admits, it admits from
// then on.
func (m *meter) wait(k, t int64) int64 {
	if k > t {
		return -1
	}
	switch m.alg {
	case tiers.FixedWindow:
		if m.b.cur+k <= t {
			return 0
		}
		return m.b.start + m.length - m.now // the count starts again
	case tiers.SlidingLog:
		u := m.b.cur
		if u+k <= t {
			return 0
		}
		if m.b.prev == 0 { // one entry: once it leaves, k <= t fits
			return max(1, m.b.start+m.length-m.now)
		}
		for _, e := range m.log() { // oldest first: each leaves at ms + T
			if u -= e.n; u+k <= t {
				return max(1, e.ms+m.length-m.now)
			}
		}
		return -1 // not reached: the log holds cur units, and k <= t
	case tiers.TokenBucket:
		// debt(now+d) + k*T <= t*T with debt falling by rate a ms.
		need, ok := m.debt().add(mul128(uint64(k), uint64(m.length))).sub(mul128(uint64(t), uint64(m.length)))
		switch {
		case !ok || need.zero():
			return 0
		case m.rate == 0:
			return -1 // nothing refills
		}
		return min(need.ceilDiv(uint64(m.rate)), math.MaxInt64/2)
	}
	return shortWait(*m.b, m.now, m.length, k, t)
}

// giveBack takes up to n units off a sliding or fixed window's count,
// never below zero, from the clock-aligned bucket that holds at first,
// then from the one before it, and returns how many it took from each, so
// that the metric's global counter can give the same units back.
func (m *meter) giveBack(at, n int64) (fromCur, fromPrev int64) {
	return m.b.giveBack(bucketStart(at, m.length), m.length, n)
}

// giveBackOther gives back span i's units of charge c in a sliding log or
// a token bucket, never below zero, and returns how many it took off the
// count. at is the refund's time, or for an undo (undo set) the take's.
// A refund (at now) takes from the log's entry of now first, then
// from its newest, or pays a bucket's debt down. An undo of a take (see
// Charge.undoNow) gives back only the take's own units that still count:
// those in the log's entry the take counted them in (Charge.tookLogMs: the
// take's millisecond, or a later one), if it is still in the window; what
// of the take a bucket still owes, its later refill deducted. So it never
// gives back another check's units.
func (m *meter) giveBackOther(c *Charge, i int, at int64, undo bool) int64 {
	n := c.Cost
	switch m.alg {
	case tiers.SlidingLog:
		if undo && c.tookLogMs[i] != 0 {
			at = c.tookLogMs[i]
		}
		if m.b.prev == 0 { // one entry, in the bucket
			if undo && m.b.start != at {
				return 0
			}
			d := min(n, m.b.cur)
			m.b.cur -= d
			return d
		}
		l := m.log()
		left := n
		take := func(j int) {
			d := min(left, l[j].n)
			l[j].n -= d
			left -= d
		}
		if j := slices.IndexFunc(l, func(e logEntry) bool { return e.ms == at }); j >= 0 {
			take(j)
		}
		for j := len(l) - 1; !undo && j >= 0 && left > 0; j-- {
			take(j)
		}
		l = slices.DeleteFunc(l, func(e logEntry) bool { return e.n == 0 })
		if len(l) > 0 {
			m.b.start = l[len(l)-1].ms
		}
		m.setLog(l)
		m.b.cur -= n - left
		return n - left
	case tiers.TokenBucket:
		before := m.count()
		owed := mul128(uint64(n), uint64(m.length))
		if undo {
			// What the take still owes: its debt less the refill since,
			// at most its own n tokens.
			refilled := mul128(uint64(max(0, m.now-at)), uint64(m.rate))
			left, ok := c.tookDebt[i].sub(refilled)
			if !ok {
				left = u128{}
			}
			if left.cmp(owed) < 0 {
				owed = left
			}
		}
		d, ok := m.debt().sub(owed)
		if !ok {
			d = u128{}
		}
		m.setDebt(d)
		return before - m.count()
	}
	return 0
}

// resetMs returns when the count is back to zero, in Unix ms, or 0 where
// that is the end of the current bucket (sliding and fixed windows). A
// token bucket that never refills (its limit is 0) and owes tokens never
// is: math.MaxInt64.
func (m *meter) resetMs() int64 {
	switch m.alg {
	case tiers.SlidingLog:
		if m.b.cur == 0 {
			return m.now
		}
		return m.b.start + m.length
	case tiers.TokenBucket:
		switch {
		case m.b.prev == 0 && m.b.cur > 0:
			return math.MaxInt64
		case m.b.prev == 0 || m.b.start <= m.now:
			return m.now
		}
		return m.b.start
	}
	return 0
}

// resetAfter returns what resetMs would, were k units added at now, and
// whether the key can count them: a token bucket whose debt would be paid
// off after maxPayoffMs cannot keep it exactly (a take is then denied);
// every other key can. A token bucket keeps what it computed for add.
func (m *meter) resetAfter(k int64) (int64, bool) {
	switch m.alg {
	case tiers.SlidingLog:
		newest := m.now
		if m.b.cur > 0 && m.b.start > newest { // a clock that stepped back
			newest = m.b.start
		}
		return newest + m.length, true
	case tiers.TokenBucket:
		m.next = m.debt().add(mul128(uint64(k), uint64(m.length)))
		if m.rate == 0 {
			return math.MaxInt64, true
		}
		m.nextMs = m.next.ceilDiv(uint64(m.rate))
		room := maxPayoffMs - m.now
		return m.now + min(m.nextMs, room), m.nextMs < room
	}
	return 0, true
}

// idle reports whether a key in state b, counted by alg, counts nothing
// at now and later, so that it may be dropped.
func idle(alg tiers.Algorithm, b *bucket, now, length int64) bool {
	switch alg {
	case tiers.FixedWindow, tiers.SlidingLog: // start: the bucket's, or the newest entry's
		return b.cur == 0 || now >= b.start+length
	case tiers.TokenBucket:
		if b.prev == 0 {
			return b.cur == 0
		}
		return now >= b.start
	}
	return b.idle(now, length)
}

// debt returns a token bucket's debt at now, in 1/T tokens.
func (m *meter) debt() u128 {
	b := m.b
	switch {
	case b.prev == 0:
		return mul128(uint64(b.cur), uint64(m.length))
	case m.now >= b.start:
		return u128{}
	}
	d, _ := mul128(uint64(b.start-m.now), uint64(b.prev)).sub(u128{lo: uint64(b.cur)})
	return d
}

// setDebt stores a token bucket's debt at now, for the meter's rate.
func (m *meter) setDebt(d u128) {
	b := m.b
	if m.rate == 0 {
		*b = bucket{cur: min(d.ceilDiv(uint64(m.length)), tiers.MaxLimit)}
		return
	}
	if d.zero() {
		*b = bucket{start: m.now, prev: m.rate}
		return
	}
	m.setPaidOff(d, d.ceilDiv(uint64(m.rate)))
}

// setPaidOff stores debt d, nonzero, paid off q = ceil(d/rate) ms from now.
func (m *meter) setPaidOff(d u128, q int64) {
	if q >= maxPayoffMs-m.now { // only a conversion gets here (see resetAfter)
		*m.b = bucket{start: maxPayoffMs, prev: m.rate}
		return
	}
	over, _ := mul128(uint64(q), uint64(m.rate)).sub(d) // < rate
	*m.b = bucket{start: m.now + q, prev: m.rate, cur: int64(over.lo)}
}

// convert brings a key counted by another algorithm, or a token bucket
// written for another rate, to the meter's: it keeps the count it had,
// as if those units were admitted now. Admin changes that switch a
// limit's algorithm keep the customer's count as well as they can.
func (m *meter) convert(from tiers.Algorithm) {
	old := *m
	old.alg = from
	old.rate = m.b.prev
	if from == tiers.TokenBucket && m.alg == tiers.TokenBucket {
		m.setDebt(old.debt()) // the same debt, refilled at the new rate
		return
	}
	old.roll()
	used := old.count()
	if from == tiers.SlidingLog && m.b.prev > 0 {
		m.logs.drop(uint32(m.b.prev - 1))
	}
	*m.b = bucket{}
	switch m.alg {
	case tiers.SlidingWindow, tiers.FixedWindow:
		*m.b = bucket{start: m.bucketStart(), cur: used}
	case tiers.SlidingLog:
		if used > 0 {
			m.add(used)
		}
	case tiers.TokenBucket:
		m.setDebt(mul128(uint64(used), uint64(m.length)))
	}
}

// u128 is an unsigned 128-bit integer, for token bucket debts: tokens
// times a window's milliseconds pass 2^64.
type u128 struct{ hi, lo uint64 }

func mul128(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) zero() bool { return x.hi == 0 && x.lo == 0 }

// cmp returns -1, 0 or 1 as x is below, equal to or above y.
func (x u128) cmp(y u128) int {
	switch {
	case x.hi < y.hi || x.hi == y.hi && x.lo < y.lo:
		return -1
	case x == y:
		return 0
	}
	return 1
}

// add returns x+y, saturating.
func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c := bits.Add64(x.hi, y.hi, c)
	if c != 0 {
		return u128{math.MaxUint64, math.MaxUint64}
	}
	return u128{hi, lo}
}

// sub returns x-y, and false (with zero) when y > x.
func (x u128) sub(y u128) (u128, bool) {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, b := bits.Sub64(x.hi, y.hi, b)
	if b != 0 {
		return u128{}, false
	}
	return u128{hi, lo}, true
}

// ceilDivLength is ceilDiv by a short window's length in milliseconds:
// below 2^64 by a constant, which compiles to a multiplication, not a
// division (a token bucket divides by it on every check).
func (x u128) ceilDivLength(length int64) int64 {
	if x.hi == 0 && x.lo <= math.MaxInt64 {
		switch length {
		case 1000:
			return int64((x.lo + 999) / 1000)
		case 60_000:
			return int64((x.lo + 59_999) / 60_000)
		}
	}
	return x.ceilDiv(uint64(length))
}

// ceilDiv returns ceil(x/d) for d > 0, saturating at math.MaxInt64.
func (x u128) ceilDiv(d uint64) int64 {
	if x.hi >= d {
		return math.MaxInt64
	}
	q, r := bits.Div64(x.hi, x.lo, d)
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 || q == 0 && r > 0 {
		return math.MaxInt64
	}
	return int64(q)
}
