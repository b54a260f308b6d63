package quota

import (
	"errors"
	"strconv"
	"strings"

	"github.com/quotad/quotad/internal/tiers"
)

// A shared store keeps the in-process counter's entries written as text,
// so that it holds exactly what this process's counter would, and every
// process decides with the same code (see SharedCounters). One key holds
// a customer's metric in both short windows, another the metric's global
// usage in both:
//
//	<second's entry>|<minute's entry>
//
// and an entry, empty where the counter holds none, is
//
//	<algorithm> <start> <prev> <cur>[ <ms>:<units>...]
//
// start, prev and cur are the entry's bucket (see algorithms.go for what
// each algorithm keeps there). A sliding log's prev is 0 while its one
// entry is kept in the bucket, 1 when its entries follow, oldest first
// (in process it numbers the log in its shard's table). The empty string
// is a key that does not exist.

// sharedWindows are the windows a shared key holds, in order.
var sharedWindows = [2]tiers.Window{tiers.Second, tiers.Minute}

// encodeState returns the state of l's keys in the short windows, "" when
// the counter holds none. The shard must be locked.
func encodeState(l *lookup) string {
	var buf [96]byte
	b := appendKey(buf[:0], l, sharedWindows[0])
	n := len(b)
	b = append(b, '|')
	b = appendKey(b, l, sharedWindows[1])
	if n == 0 && len(b) == 1 {
		return ""
	}
	return string(b)
}

// loadState makes l's keys in the short windows hold state v (see
// encodeState). The shard must be locked.
func (s *localCounters) loadState(l *lookup, v string) error {
	var parts [2]string
	if v != "" {
		a, b, ok := strings.Cut(v, "|")
		if !ok || strings.Contains(b, "|") {
			return errBadState
		}
		parts = [2]string{a, b}
		for _, p := range parts {
			if _, _, err := decodeState(p); p != "" && err != nil {
				return err // before loading either: all or nothing
			}
		}
	}
	for i, w := range sharedWindows {
		if err := s.loadKey(l, w, parts[i]); err != nil {
			return err
		}
	}
	return nil
}

// errBadState: a shared store holds a key that is not a state this code
// wrote.
var errBadState = errors.New("a shared key holds no short-window state")

// slotOf returns the index in sh.slots of the entry of a key, or -1. sh
// must be locked.
func (sh *shard) slotOf(h uint32, l *lookup, w tiers.Window) int {
	if len(sh.slots) == 0 {
		return -1
	}
	mask := len(sh.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch n := sh.slots[i]; n {
		case emptySlot:
			return -1
		case tombSlot:
		default:
			e := sh.entry(n - 1)
			if e.hash == h && e.window == w && e.customer == l.customer && e.metric == l.metric && e.subject == l.subject {
				return i
			}
		}
	}
}

// appendKey appends the state of l's key in window w to b, nothing when
// the counter holds none. The shard must be locked.
func appendKey(b []byte, l *lookup, w tiers.Window) []byte {
	e := l.sh.find(windowHash(l.pair, w), l, w)
	if e == nil {
		return b
	}
	b = strconv.AppendInt(b, int64(e.algo), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.start, 10)
	var log []logEntry
	prev := e.prev
	if e.algo == tiers.SlidingLog && e.prev > 0 {
		log, prev = l.sh.logs.logs[e.prev-1], 1
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, prev, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.cur, 10)
	for _, x := range log {
		b = append(b, ' ')
		b = strconv.AppendInt(b, x.ms, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, x.n, 10)
	}
	return b
}

// loadKey makes l's key in window w hold state v (none for ""). The shard
// must be locked.
func (s *localCounters) loadKey(l *lookup, w tiers.Window, v string) error {
	h := windowHash(l.pair, w)
	i := l.sh.slotOf(h, l, w)
	if v == "" {
		if i >= 0 {
			l.sh.remove(i)
			s.keys.Add(-1)
		}
		return nil
	}
	e, log, err := decodeState(v)
	if err != nil {
		return err
	}
	var at *entry
	if i >= 0 {
		at = l.sh.entry(l.sh.slots[i] - 1)
		if at.algo == tiers.SlidingLog && at.prev > 0 {
			l.sh.logs.drop(uint32(at.prev - 1))
		}
	} else {
		at = l.sh.add(h, l, w)
		s.keys.Add(1)
	}
	at.algo, at.bucket = e.algo, e.bucket
	if e.algo == tiers.SlidingLog && e.prev > 0 {
		t := l.sh.logTable()
		n := t.newLog()
		t.logs[n] = log
		at.prev = int64(n) + 1
	}
	return nil
}

// decodeState reads an entry appendKey wrote: the entry's algorithm and
// bucket, and a sliding log's entries.
func decodeState(v string) (entry, []logEntry, error) {
	var e entry
	var n [4]int64
	rest := v
	for i := range n {
		var f string
		f, rest, _ = strings.Cut(rest, " ")
		x, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return e, nil, errBadState
		}
		n[i] = x
	}
	if n[0] < int64(tiers.SlidingWindow) || n[0] > int64(tiers.TokenBucket) {
		return e, nil, errBadState
	}
	e.algo = tiers.Algorithm(n[0])
	e.bucket = bucket{start: n[1], prev: n[2], cur: n[3]}
	if e.algo != tiers.SlidingLog || e.prev == 0 {
		if rest != "" {
			return e, nil, errBadState
		}
		return e, nil, nil
	}
	if rest == "" {
		return e, nil, nil // a log whose entries were all given back
	}
	log := make([]logEntry, 0, strings.Count(rest, " ")+1)
	for _, x := range strings.Split(rest, " ") {
		ms, units, ok := strings.Cut(x, ":")
		a, err1 := strconv.ParseInt(ms, 10, 64)
		b, err2 := strconv.ParseInt(units, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return e, nil, errBadState
		}
		log = append(log, logEntry{ms: a, n: b})
	}
	return e, log, nil
}

// idleFrom returns when a key in state v counts nothing any more, Unix ms,
// or false for never: a token bucket of limit 0 whose tokens were taken.
func idleFrom(e *entry, length, nowMs int64) (int64, bool) {
	switch e.algo {
	case tiers.SlidingWindow:
		return e.start + 2*length, true
	case tiers.FixedWindow, tiers.SlidingLog: // start: the bucket's, or the newest entry's
		return e.start + length, true
	}
	if e.prev == 0 { // a token bucket of limit 0: the tokens taken stay taken
		return nowMs, e.cur == 0
	}
	return e.start, true // paid off
}

// expiresMs returns how long after nowMs the shared key of l's short
// windows (see encodeState) may be dropped, because it counts nothing from
// then on (at least 1), or 0 for never: a token bucket of limit 0, which
// never refills, or one paid off only after maxExpiresMs. One window is
// added, so that the clocks of processes that disagree a little do not see
// a key go early. It reads the entries, not their text. The shard must be
// locked.
func expiresMs(l *lookup, nowMs int64) int64 {
	var ttl int64 = 1
	for _, w := range sharedWindows {
		e := l.sh.find(windowHash(l.pair, w), l, w)
		if e == nil {
			continue
		}
		length := w.Length().Milliseconds()
		at, ok := idleFrom(e, length, nowMs)
		if !ok || at-nowMs > maxExpiresMs {
			return 0 // kept until it counts nothing: a debt paid off in years, or never
		}
		ttl = max(ttl, max(1, at-nowMs)+length)
	}
	return ttl
}

// maxExpiresMs bounds the expiry of a shared key: about 30 years.
const maxExpiresMs = 1 << 40

// dropExpired drops l's short-window keys from the mirror if the store
// has expired their key by nowMs (see expiresMs): both count nothing since
// a window at least. So a decision expects no key where the store holds
// none. The shard must be locked.
func (s *localCounters) dropExpired(l *lookup, nowMs int64) {
	var slots [2]int
	for i, w := range sharedWindows {
		slots[i] = l.sh.slotOf(windowHash(l.pair, w), l, w)
		if slots[i] < 0 {
			continue
		}
		length := w.Length().Milliseconds()
		if at, ok := idleFrom(l.sh.entry(l.sh.slots[slots[i]]-1), length, nowMs); !ok || at > nowMs-length {
			return // still counts, or not long enough ago
		}
	}
	for _, i := range slots {
		if i >= 0 {
			l.sh.remove(i)
			s.keys.Add(-1)
		}
	}
}
