package quota

import (
	"context"
	"hash/maphash"
	"sync"
)

// historyBuffer sums history deltas in memory and writes them in batches:
// one row update per customer, metric and day per flush instead of one per
// check. A crash loses at most the deltas of one flush interval; the
// counters that enforce limits are not affected.
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

type historyShard struct {
	mu sync.Mutex
	m  map[historyKey]*HistoryDelta
}

func newHistoryBuffer(store HistoryStore) *historyBuffer {
	h := &historyBuffer{store: store, seed: maphash.MakeSeed()}
	for i := range h.shards {
		h.shards[i].m = make(map[historyKey]*HistoryDelta)
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
	if cur := sh.m[k]; cur != nil {
		cur.Used += d.Used
		cur.Overage += d.Overage
		cur.Denied += d.Denied
	} else {
		sh.m[k] = &d
	}
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
		for _, d := range sh.m {
			batch = append(batch, *d)
		}
		clear(sh.m)
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
