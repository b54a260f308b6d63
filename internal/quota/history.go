package quota

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// historyBuffer sums history deltas in memory and writes them in batches:
// one row update per customer, metric and day per flush instead of one per
// check. A crash loses at most the deltas of one flush interval; the
// counters that enforce limits are not affected. An entry stays from one
// flush to the next (zeroed), so that a customer checking all day costs one
// allocation a day, and goes once it has been idle for two flushes.
type historyBuffer struct {
	store  HistoryStore
	seed   maphash.Seed
	shards [16]historyShard
	// flushMu serializes flushes so that a failed batch is merged back
	// before the next one is taken.
	flushMu sync.Mutex
}

type historyKey struct {
	customer, metric string
	date             int64 // Unix seconds of 00:00 UTC
}

type historyEntry struct {
	used, overage, denied int64
	idle                  int // flushes since the last delta
}

type historyShard struct {
	mu sync.Mutex
	m  map[historyKey]*historyEntry
}

func newHistoryBuffer(store HistoryStore) *historyBuffer {
	h := &historyBuffer{store: store, seed: maphash.MakeSeed()}
	for i := range h.shards {
		h.shards[i].m = make(map[historyKey]*historyEntry)
	}
	return h
}

func (h *historyBuffer) add(d HistoryDelta) {
	if h.store == nil {
		return
	}
	k := historyKey{d.Customer, d.Metric, d.Date.Unix()}
	sh := &h.shards[maphash.String(h.seed, d.Customer)%uint64(len(h.shards))]
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil {
		e = &historyEntry{}
		sh.m[k] = e
	}
	e.used += d.Used
	e.overage += d.Overage
	e.denied += d.Denied
	e.idle = 0
	sh.mu.Unlock()
}

// flush writes everything buffered. On failure the deltas go back into the
// buffer, to be written by a later flush.
func (h *historyBuffer) flush(ctx context.Context) error {
	if h.store == nil {
		return nil
	}
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	var batch []HistoryDelta
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.used == 0 && e.overage == 0 && e.denied == 0 {
				if e.idle++; e.idle >= 2 {
					delete(sh.m, k)
				}
				continue
			}
			batch = append(batch, HistoryDelta{Customer: k.customer, Metric: k.metric, Date: time.Unix(k.date, 0).UTC(),
				Used: e.used, Overage: e.overage, Denied: e.denied})
			e.used, e.overage, e.denied = 0, 0, 0
		}
		sh.mu.Unlock()
	}
	if len(batch) == 0 {
		return nil
	}
	if err := h.store.AddHistory(ctx, batch); err != nil {
		for _, d := range batch {
			h.add(d)
		}
		return err
	}
	return nil
}

// day returns the UTC date of t, as 00:00 UTC of it.
func day(t time.Time) time.Time { return tiers.Anchor{}.LocalDate(t) }

// date returns the date history counts customer's checks of set s at at
// in: the customer's local date (see tiers.Anchor.LocalDate), UTC's when
// the set has no account of it.
func (s *set) date(customer string, at time.Time) time.Time {
	if a := s.account(customer); a != nil {
		return a.Customer.Anchor.LocalDate(at)
	}
	return day(at)
}
