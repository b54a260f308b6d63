package keys

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// errInvalid is every refusal of Customer: unknown, revoked and expired
// keys alike, so that the caller cannot tell which.
var errInvalid = fmt.Errorf("resolve api key: %w", tiers.ErrInvalidAPIKey)

// entry is a live key in memory. used is the Unix minute of its last use
// this process knows of.
type entry struct {
	id       string
	customer string
	expires  time.Time // zero: never (Unix nanoseconds would not reach past 2262)
	added    uint64    // the Verifier's count of Adds when this one was added
	used     atomic.Int64
}

// Verifier resolves API keys to customers from memory: every live key's
// digest, loaded by Load and kept current by Add, Revoke and Changed (the
// process's own changes and the other processes' notifications). Lookups
// are by the key's SHA-256, so a lookup's time does not depend on how
// much of the key matches a stored one. Last uses are recorded in memory
// and written by Flush. Safe for concurrent use.
type Verifier struct {
	store Store
	now   func() time.Time

	mu      sync.RWMutex
	byHash  map[Digest]*entry
	byID    map[string]Digest
	revoked map[string]struct{} // ids revoked: a late load never brings them back
	adds    uint64              // Adds so far

	usedMu sync.Mutex
	dirty  map[string]int64 // key id → Unix minute, not yet written
}

// NewVerifier returns an empty Verifier over store; now judges expiry and
// stamps last uses.
func NewVerifier(store Store, now func() time.Time) *Verifier {
	return &Verifier{store: store, now: now, byHash: map[Digest]*entry{}, byID: map[string]Digest{},
		revoked: map[string]struct{}{}, dirty: map[string]int64{}}
}

// Customer returns the customer whose live key key is, and the key's id
// (checks by key count for it as their subject). Unknown, revoked and
// expired keys (judged against the Verifier's clock) return the same
// error, which wraps tiers.ErrInvalidAPIKey. ctx is unused: the answer is
// from memory, without allocating.
func (v *Verifier) Customer(_ context.Context, key string) (customer, id string, err error) {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return "", "", errInvalid
	}
	// Hash from a stack copy: converting key to []byte would allocate.
	var buf [MaxKeyLen]byte
	d := Digest(sha256.Sum256(append(buf[:0], key...)))
	v.mu.RLock()
	e := v.byHash[d]
	v.mu.RUnlock()
	if e == nil {
		return "", "", errInvalid
	}
	now := v.now()
	if !e.expires.IsZero() && !now.Before(e.expires) {
		return "", "", errInvalid
	}
	v.use(e, now)
	return e.customer, e.id, nil
}

// use records that e was used at now, to the minute: at most one write to
// the dirty set per key and minute.
func (v *Verifier) use(e *entry, now time.Time) {
	m := now.Unix() / 60
	if e.used.Load() >= m {
		return
	}
	if old := e.used.Swap(m); old >= m {
		e.used.CompareAndSwap(m, old) // a later minute was recorded meanwhile
		return
	}
	v.usedMu.Lock()
	if v.dirty[e.id] < m {
		v.dirty[e.id] = m
	}
	v.usedMu.Unlock()
}

func newEntry(k Live) *entry {
	e := &entry{id: k.ID, customer: k.Customer}
	if k.ExpiresAt != nil {
		e.expires = *k.ExpiresAt
	}
	if k.LastUsedAt != nil {
		e.used.Store(k.LastUsedAt.Unix() / 60)
	}
	return e
}

// Add holds k, unless it was revoked.
func (v *Verifier) Add(k Live) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, gone := v.revoked[k.ID]; gone {
		return
	}
	v.adds++
	e := newEntry(k)
	e.added = v.adds
	v.byHash[k.Digest] = e
	v.byID[k.ID] = k.Digest
}

// Revoke drops the key id, for good.
func (v *Verifier) Revoke(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.revoked[id] = struct{}{}
	if d, ok := v.byID[id]; ok {
		delete(v.byHash, d)
		delete(v.byID, id)
	}
}

// ForgetCustomer drops every key of a deleted customer (their rows went
// with it).
func (v *Verifier) ForgetCustomer(customer string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for d, e := range v.byHash {
		if e.customer == customer {
			v.revoked[e.id] = struct{}{}
			delete(v.byHash, d)
			delete(v.byID, e.id)
		}
	}
}

// Load replaces what the Verifier holds with the store's live keys. Keys
// revoked while it read stay revoked; keys added while it read stay.
func (v *Verifier) Load(ctx context.Context) (int, error) {
	v.mu.RLock()
	start := v.adds
	v.mu.RUnlock()
	live, err := v.store.LiveKeys(ctx, v.now())
	if err != nil {
		return 0, fmt.Errorf("load api keys: %w", err)
	}
	byHash := make(map[Digest]*entry, len(live))
	byID := make(map[string]Digest, len(live))
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, k := range live {
		if _, gone := v.revoked[k.ID]; gone {
			continue
		}
		e := newEntry(k)
		if old, ok := v.byHash[k.Digest]; ok {
			// Uses this process recorded and has not yet written.
			e.used.Store(max(e.used.Load(), old.used.Load()))
		}
		byHash[k.Digest], byID[k.ID] = e, k.Digest
	}
	for d, e := range v.byHash {
		if _, ok := byHash[d]; !ok && e.added > start {
			byHash[d], byID[e.id] = e, d
		}
	}
	v.byHash, v.byID = byHash, byID
	return len(byHash), nil
}

// Created loads the key id that another process created and holds it,
// unless it is gone already. ErrKeyNotFound is not an error here.
func (v *Verifier) Created(ctx context.Context, id string) error {
	k, err := v.store.LiveKey(ctx, id)
	if err != nil {
		if errors.Is(err, ErrKeyNotFound) {
			return nil
		}
		return fmt.Errorf("load api key[%s]: %w", id, err)
	}
	v.Add(k)
	return nil
}

// Len returns how many keys the Verifier holds.
func (v *Verifier) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.byHash)
}

// Flush writes the last uses recorded since the previous Flush, in one
// call to the store. On failure they are kept for the next one.
func (v *Verifier) Flush(ctx context.Context) error {
	v.usedMu.Lock()
	if len(v.dirty) == 0 {
		v.usedMu.Unlock()
		return nil
	}
	batch := v.dirty
	v.dirty = map[string]int64{}
	v.usedMu.Unlock()
	used := make(map[string]time.Time, len(batch))
	for id, m := range batch {
		used[id] = time.Unix(m*60, 0).UTC()
	}
	if err := v.store.TouchKeys(ctx, used); err != nil {
		v.usedMu.Lock()
		for id, m := range batch {
			if v.dirty[id] < m {
				v.dirty[id] = m
			}
		}
		v.usedMu.Unlock()
		return fmt.Errorf("record api keys' last use: %w", err)
	}
	return nil
}

// FlushEvery is how often Run writes last uses: they are kept to the
// minute.
const FlushEvery = time.Minute

// Run flushes last uses every interval until ctx ends, and once more then,
// each flush bounded by timeout (5 s if 0 or less), so that a store gone
// silent holds none up for long.
func (v *Verifier) Run(ctx context.Context, interval, timeout time.Duration, report func(error)) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			if err := v.Flush(final); err != nil {
				report(err)
			}
			cancel()
			return
		case <-t.C:
			flush, cancel := context.WithTimeout(ctx, timeout)
			err := v.Flush(flush)
			cancel()
			if err != nil {
				report(err)
			}
		}
	}
}
