package quotatest

import (
	"context"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/quota"
)

// Store is the state quotad processes share, in memory, with the
// PostgreSQL store's semantics: counters (units granted: admitted, or held
// in leases), leases per process, global usage and request ids. Each
// process sees it through a Ledger of its own (Process).
type Store struct {
	txMu     sync.Mutex // one transaction at a time
	mu       sync.Mutex
	counters map[quota.CounterKey]int64
	global   map[quota.GlobalKey]int64
	requests map[requestKey]requestRecord
	leases   map[leaseKey]int64 // units a holder reported unused
	alive    map[int64]bool
	recall   map[int64]func(quota.CounterKey)
	holders  int64
}

type requestKey struct {
	customer string
	kind     quota.RequestKind
	id       string
}

type requestRecord struct {
	rec quota.Recorded
	at  time.Time
}

type leaseKey struct {
	key    quota.CounterKey
	holder int64
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		counters: map[quota.CounterKey]int64{},
		global:   map[quota.GlobalKey]int64{},
		requests: map[requestKey]requestRecord{},
		leases:   map[leaseKey]int64{},
		alive:    map[int64]bool{},
		recall:   map[int64]func(quota.CounterKey){},
	}
}

// Process returns the Ledger of a new, running process.
func (s *Store) Process() *Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holders++
	s.alive[s.holders] = true
	return &Ledger{s: s, holder: s.holders}
}

// Kill marks l's process dead, as a SIGKILL would: its leases stay, with
// their units counted, and it hears no recall.
func (s *Store) Kill(l *Ledger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.alive, l.holder)
	delete(s.recall, l.holder)
}

// Count returns a counter's value: units admitted or held in leases.
func (s *Store) Count(k quota.CounterKey) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[k]
}

// Ledger is one process's in-memory quota.Ledger over a Store. Err, when
// set, fails every call as an unreachable store would. Transactions
// (Atomically) run one at a time and roll back by undoing what they did.
type Ledger struct {
	s      *Store
	holder int64
	Err    error
	// Charges counts calls to Take, in and out of transactions.
	Charges int
}

// NewLedger returns the ledger of one process over an empty store.
func NewLedger() *Ledger { return NewStore().Process() }

// Store returns the store l is a process of.
func (l *Ledger) Store() *Store { return l.s }

// OnRecall has f told (outside any lock) of counters whose units other
// processes recall; only a live process hears them.
func (l *Ledger) OnRecall(f func(quota.CounterKey)) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.alive[l.holder] {
		l.s.recall[l.holder] = f
	}
}

// Count returns a counter's value.
func (l *Ledger) Count(k quota.CounterKey) int64 { return l.s.Count(k) }

// Global returns a metric's global usage in a window.
func (l *Ledger) Global(k quota.GlobalKey) int64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.global[k]
}

// lock locks the store and returns Err.
func (l *Ledger) lock() error {
	l.s.mu.Lock()
	if l.Err != nil {
		l.s.mu.Unlock()
		return l.Err
	}
	return nil
}

// leased returns the units live holders other than but (0: none) report
// holding unused in leases of k, and how many such leases there are.
func (s *Store) leased(k quota.CounterKey, but int64) (units int64, leases int) {
	for lk, n := range s.leases {
		if lk.key == k && lk.holder != but && s.alive[lk.holder] {
			units += n
			leases++
		}
	}
	return units, leases
}

// undoLog collects how to undo a transaction's changes; nil outside one.
type undoLog []func()

func (u *undoLog) add(f func()) {
	if u != nil {
		*u = append(*u, f)
	}
}

// take implements Take with s.mu held.
func (l *Ledger) take(c *quota.Charge, out []quota.Outcome, undo *undoLog) bool {
	s := l.s
	l.Charges++
	ok := true
	for i := range c.Spans {
		sp := &c.Spans[i]
		out[i] = c.Judge(i, s.counters[sp.Key], s.global[sp.Global])
		ok = ok && out[i].Passed
	}
	if !ok {
		return false
	}
	for i := range c.Spans {
		k := c.Spans[i].Key
		s.counters[k] += c.Cost
		undo.add(func() { s.counters[k] -= c.Cost })
	}
	for _, g := range c.Globals {
		s.global[g] += c.Cost
		undo.add(func() { s.global[g] -= c.Cost })
	}
	return true
}

// giveBack implements GiveBack with s.mu held: only admitted units go
// back, not those live processes hold in leases.
func (l *Ledger) giveBack(c *quota.Charge, out []quota.Outcome, undo *undoLog) {
	s := l.s
	for i := range c.Spans {
		k := c.Spans[i].Key
		before := s.counters[k]
		leased, _ := s.leased(k, 0)
		admitted := max(0, before-leased)
		out[i] = quota.Outcome{Used: admitted, Passed: true}
		s.counters[k] = before - min(admitted, c.Cost)
		undo.add(func() { s.counters[k] = before })
	}
	for _, g := range c.Globals {
		n := c.Cost
		if i := c.SpanOf(g); i >= 0 {
			n = min(n, out[i].Used)
		}
		n = min(n, s.global[g])
		s.global[g] -= n
		undo.add(func() { s.global[g] += n })
	}
}

// Take implements quota.Counter.
func (l *Ledger) Take(_ context.Context, c *quota.Charge, out []quota.Outcome) (bool, error) {
	if err := l.lock(); err != nil {
		return false, err
	}
	defer l.s.mu.Unlock()
	c.Trips++
	return l.take(c, out, nil), nil
}

// GiveBack implements quota.Counter.
func (l *Ledger) GiveBack(_ context.Context, c *quota.Charge, out []quota.Outcome) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	c.Trips++
	l.giveBack(c, out, nil)
	return nil
}

// Peek implements quota.Counter.
func (l *Ledger) Peek(_ context.Context, c *quota.Charge, out []quota.Outcome) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	c.Trips++
	for i := range c.Spans {
		sp := &c.Spans[i]
		leased, _ := l.s.leased(sp.Key, l.holder)
		out[i] = c.Judge(i, l.s.counters[sp.Key]-leased, l.s.global[sp.Global])
	}
	return nil
}

// Read implements quota.Ledger.
func (l *Ledger) Read(_ context.Context, counters []quota.CounterKey, globals []quota.GlobalKey) ([]int64, []int64, error) {
	if err := l.lock(); err != nil {
		return nil, nil, err
	}
	defer l.s.mu.Unlock()
	used := make([]int64, len(counters))
	for i, k := range counters {
		leased, _ := l.s.leased(k, l.holder)
		used[i] = l.s.counters[k] - leased
	}
	global := make([]int64, len(globals))
	for i, g := range globals {
		global[i] = l.s.global[g]
	}
	return used, global, nil
}

// AddGlobal implements quota.Ledger.
func (l *Ledger) AddGlobal(_ context.Context, deltas []quota.GlobalDelta) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	for _, d := range deltas {
		l.s.global[d.Key] = max(0, l.s.global[d.Key]+d.Units)
	}
	return nil
}

// Lease implements quota.Leaser.
func (l *Ledger) Lease(_ context.Context, r *quota.LeaseRequest) error {
	if err := l.lock(); err != nil {
		return err
	}
	s := l.s
	r.Granted, r.Others, r.Lost = 0, 0, false
	used, exists := s.counters[r.Key]
	mine := leaseKey{r.Key, l.holder}
	_, held := s.leases[mine]
	switch {
	case !exists && r.Need > r.Threshold: // the cost alone does not fit
		r.Used, r.Lost = 0, r.Held
		s.mu.Unlock()
		return nil
	case r.Held && !held:
		r.Used, r.Lost = used, true
		s.mu.Unlock()
		return nil
	}
	if used+r.Need <= r.Threshold {
		r.Granted = min(r.Need+r.Extra, r.Threshold-used)
		used += r.Granted
		s.counters[r.Key] = used
		s.leases[mine] = r.Granted - r.Need + r.InFlight
		if r.Global.Metric != "" {
			s.global[r.Global] += r.Granted
		}
	}
	r.Used = used
	r.Others, _ = s.leased(r.Key, l.holder)
	var tell []func(quota.CounterKey)
	if r.Granted == 0 && r.Others > 0 && r.Recall && r.Need <= r.Threshold-used+r.Others {
		tell = s.listeners(l.holder)
	}
	s.mu.Unlock()
	for _, f := range tell {
		f(r.Key)
	}
	return nil
}

// listeners returns the recall handlers of live processes other than
// holder; s.mu is held.
func (s *Store) listeners(holder int64) []func(quota.CounterKey) {
	var out []func(quota.CounterKey)
	for h, f := range s.recall {
		if h != holder && s.alive[h] {
			out = append(out, f)
		}
	}
	return out
}

// Settle implements quota.Leaser.
func (l *Ledger) Settle(_ context.Context, set []quota.Settlement) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	for _, x := range set {
		k := leaseKey{x.Key, l.holder}
		if _, ok := l.s.leases[k]; !ok {
			continue
		}
		delete(l.s.leases, k)
		back := min(x.Unused, l.s.counters[x.Key])
		l.s.counters[x.Key] -= back
		if x.Global.Metric != "" {
			l.s.global[x.Global] -= min(back, l.s.global[x.Global])
		}
	}
	return nil
}

// Report implements quota.Leaser.
func (l *Ledger) Report(_ context.Context, set []quota.Settlement) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	for i, x := range set {
		k := leaseKey{x.Key, l.holder}
		if _, ok := l.s.leases[k]; !ok {
			set[i].Lost = true
			continue
		}
		l.s.leases[k] = x.Unused
	}
	return nil
}

// Alone implements quota.Leaser.
func (l *Ledger) Alone(context.Context) (bool, error) {
	if err := l.lock(); err != nil {
		return false, err
	}
	defer l.s.mu.Unlock()
	for h := range l.s.alive {
		if h != l.holder {
			return false, nil
		}
	}
	return true, nil
}

// Recall implements quota.Leaser.
func (l *Ledger) Recall(_ context.Context, k quota.CounterKey) (int, error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	_, n := l.s.leased(k, l.holder)
	var tell []func(quota.CounterKey)
	if n > 0 {
		tell = l.s.listeners(l.holder)
	}
	l.s.mu.Unlock()
	for _, f := range tell {
		f(k)
	}
	return n, nil
}

func (s *Store) fresh(k requestKey, now time.Time) (quota.Recorded, bool) {
	r, ok := s.requests[k]
	if !ok || !now.Before(r.at.Add(24*time.Hour)) {
		return quota.Recorded{}, false
	}
	return r.rec, true
}

// Recorded implements quota.Ledger.
func (l *Ledger) Recorded(_ context.Context, customer, requestID string, now time.Time) (*quota.Recorded, error) {
	if err := l.lock(); err != nil {
		return nil, err
	}
	defer l.s.mu.Unlock()
	if rec, ok := l.s.fresh(requestKey{customer, quota.KindCheck, requestID}, now); ok && rec.Answer != nil {
		return &rec, nil
	}
	return nil, nil
}

// Atomically implements quota.Ledger.
func (l *Ledger) Atomically(ctx context.Context, fn func(ctx context.Context, tx quota.Tx) error) error {
	l.s.txMu.Lock()
	defer l.s.txMu.Unlock()
	tx := &ledgerTx{l: l}
	err := fn(ctx, tx)
	if err != nil {
		l.s.mu.Lock()
		for i := len(tx.undo) - 1; i >= 0; i-- {
			tx.undo[i]()
		}
		l.s.mu.Unlock()
	}
	return err
}

// ledgerTx is a Ledger transaction.
type ledgerTx struct {
	l    *Ledger
	undo undoLog
}

func (t *ledgerTx) Take(_ context.Context, c *quota.Charge, out []quota.Outcome) (bool, error) {
	if err := t.l.lock(); err != nil {
		return false, err
	}
	defer t.l.s.mu.Unlock()
	c.Trips++
	return t.l.take(c, out, &t.undo), nil
}

func (t *ledgerTx) GiveBack(_ context.Context, c *quota.Charge, out []quota.Outcome) error {
	if err := t.l.lock(); err != nil {
		return err
	}
	defer t.l.s.mu.Unlock()
	c.Trips++
	t.l.giveBack(c, out, &t.undo)
	return nil
}

func (t *ledgerTx) Peek(ctx context.Context, c *quota.Charge, out []quota.Outcome) error {
	return t.l.Peek(ctx, c, out)
}

// Claim implements quota.Ledger.
func (l *Ledger) Claim(ctx context.Context, c quota.Claim) (*quota.Recorded, error) {
	var rec *quota.Recorded
	err := l.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
		var err error
		rec, err = tx.Claim(ctx, c)
		return err
	})
	return rec, err
}

func (t *ledgerTx) Claim(_ context.Context, c quota.Claim) (*quota.Recorded, error) {
	if err := t.l.lock(); err != nil {
		return nil, err
	}
	defer t.l.s.mu.Unlock()
	s := t.l.s
	k := requestKey{c.Customer, c.Kind, c.ID}
	if rec, ok := s.fresh(k, c.At); ok {
		return &rec, nil
	}
	old, had := s.requests[k]
	s.requests[k] = requestRecord{rec: quota.Recorded{Metric: c.Metric, Cost: c.Cost, Answer: c.Answer}, at: c.At}
	t.undo.add(func() {
		if had {
			s.requests[k] = old
		} else {
			delete(s.requests, k)
		}
	})
	return nil, nil
}

func (t *ledgerTx) Keep(_ context.Context, c quota.Claim, answer []byte) error {
	if err := t.l.lock(); err != nil {
		return err
	}
	defer t.l.s.mu.Unlock()
	k := requestKey{c.Customer, c.Kind, c.ID}
	r := t.l.s.requests[k]
	r.rec.Answer = answer
	t.l.s.requests[k] = r
	return nil
}

// Reset implements quota.Ledger: the counters go, with their leases.
func (l *Ledger) Reset(_ context.Context, _, customer, metric string, _ time.Time) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	for k := range l.s.counters {
		if k.Customer == customer && k.Metric == metric {
			delete(l.s.counters, k)
		}
	}
	for k := range l.s.leases {
		if k.key.Customer == customer && k.key.Metric == metric {
			delete(l.s.leases, k)
		}
	}
	return nil
}

// Purge implements quota.Ledger.
func (l *Ledger) Purge(context.Context, time.Time) error {
	if err := l.lock(); err != nil {
		return err
	}
	l.s.mu.Unlock()
	return nil
}

var (
	_ quota.Ledger = (*Ledger)(nil)
	_ quota.Tx     = (*ledgerTx)(nil)
)
