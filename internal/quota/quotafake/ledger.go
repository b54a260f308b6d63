package quotafake

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Store is the state quotad processes share, in memory, with the
// PostgreSQL store's semantics: counters (units granted: admitted, or held
// in leases), leases per process, global usage and request ids. Each
// process sees it through a Ledger of its own (Process).
type Store struct {
	txMu     sync.Mutex // one transaction at a time
	mu       sync.Mutex
	counters map[quota.CounterKey]int64
	watched  map[quota.CounterKey]bool // see LeaseRequest: told once units come back
	global   map[quota.GlobalKey]int64
	requests map[requestKey]requestRecord
	leases   map[leaseKey]leaseRow
	// holders indexes leases by counter: the holders of a lease of each.
	byKey   map[quota.CounterKey][]int64
	alive   map[int64]bool
	recall  map[int64]func(quota.CounterKey)
	freed   map[int64]func(quota.CounterKey)
	holders int64
	late    []func() // calls held back by a Delay fault, to arrive later
	notes   []func() // notifications to send once mu is unlocked
	refunds []quota.RefundEvent
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

// leaseRow is a holder's lease of a counter as the store keeps it (see
// counter_leases in the migrations): leased (the column held), the units
// reported unused, the number of the last call applied (or fenced off) and
// what that call granted.
type leaseRow struct {
	leased  bool
	unused  int64
	seq     int64
	granted int64
	fenced  bool
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		counters: map[quota.CounterKey]int64{},
		watched:  map[quota.CounterKey]bool{},
		global:   map[quota.GlobalKey]int64{},
		requests: map[requestKey]requestRecord{},
		leases:   map[leaseKey]leaseRow{},
		byKey:    map[quota.CounterKey][]int64{},
		alive:    map[int64]bool{},
		recall:   map[int64]func(quota.CounterKey){},
		freed:    map[int64]func(quota.CounterKey){},
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
	delete(s.freed, l.holder)
}

// Reclaim takes back l's leases as the others do once its process has
// been gone long enough (or an admin released it): the units they report
// unused are no longer counted, and l holds none of them.
func (s *Store) Reclaim(l *Ledger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, row := range s.leases {
		if k.holder != l.holder || !row.leased {
			continue
		}
		s.counters[k.key] -= min(row.unused, s.counters[k.key])
		row.leased, row.unused, row.granted = false, 0, 0
		s.leases[k] = row
	}
}

// Count returns a counter's value: units admitted or held in leases.
func (s *Store) Count(k quota.CounterKey) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[k]
}

// Ledger is one process's in-memory ledger over a Store: it plays the
// roles quota.Counts, Requests, Maintenance and Audits, and lease.Leaser.
// Err, when set, fails every call as an unreachable store would (AuditErr
// only the refunds' audit events); Faults, when set, decides the fate of
// each lease call (see Fault). Transactions (Atomically) run one at a time
// and roll back by undoing what they did.
type Ledger struct {
	s      *Store
	holder int64
	Err    error
	Faults func(op LeaseOp) Fault
	// Charges counts calls to Take, in and out of transactions.
	Charges int
	// AuditErr, when set, fails RecordRefunds (and nothing else).
	AuditErr error
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

// setLease stores the lease row of k, indexing a new one by its counter.
func (s *Store) setLease(k leaseKey, row leaseRow) {
	if _, ok := s.leases[k]; !ok {
		s.byKey[k.key] = append(s.byKey[k.key], k.holder)
	}
	s.leases[k] = row
}

// leased returns the units live holders other than but (0: none) report
// holding unused in leases of k, and how many such leases there are.
func (s *Store) leased(k quota.CounterKey, but int64) (units int64, leases int) {
	for _, h := range s.byKey[k] {
		if row := s.leases[leaseKey{k, h}]; h != but && s.alive[h] && row.unused > 0 {
			units += row.unused
			leases++
		}
	}
	return units, leases
}

// reserved returns the units every holder, live or not, reports holding
// unused in leases of k.
func (s *Store) reserved(k quota.CounterKey) int64 {
	var n int64
	for _, h := range s.byKey[k] {
		n += s.leases[leaseKey{k, h}].unused
	}
	return n
}

// undoLog collects how to undo a transaction's changes; nil outside one.
type undoLog []func()

func (u *undoLog) add(f func()) {
	if u != nil {
		*u = append(*u, f)
	}
}

// take implements Take with s.mu held: every charge of cs is judged, then
// counted if all admit.
func (l *Ledger) take(cs []quota.Charge, undo *undoLog) bool {
	s := l.s
	l.Charges++
	ok := true
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			sp := &c.Spans[i]
			c.Out[i] = c.Judge(i, s.counters[sp.Key], s.global[sp.Global])
			ok = ok && c.Out[i].Passed
		}
	}
	if !ok {
		return false
	}
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			k := c.Spans[i].Key
			s.counters[k] += c.Cost
			undo.add(func() { s.counters[k] -= c.Cost })
		}
		for _, g := range c.Globals {
			s.global[g] += c.Cost
			undo.add(func() { s.global[g] -= c.Cost })
		}
	}
	return true
}

// giveBack implements GiveBack with s.mu held: only admitted units go
// back, not those held in leases, by live processes or not, unless the
// charge's units are known admitted (see the PostgreSQL store's giveBack).
func (l *Ledger) giveBack(cs []quota.Charge, undo *undoLog) {
	s := l.s
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			k := c.Spans[i].Key
			before := s.counters[k]
			admitted := max(0, before)
			if !c.Admitted {
				admitted = max(0, before-s.reserved(k))
			}
			c.Out[i] = quota.Outcome{Used: admitted, Passed: true}
			s.counters[k] = before - min(admitted, c.Cost)
			undo.add(func() { s.counters[k] = before })
			if min(admitted, c.Cost) > 0 {
				s.free(k)
			}
		}
		for _, g := range c.Globals {
			n := c.Cost
			if i := c.SpanOf(g); i >= 0 {
				n = min(n, c.Out[i].Used)
			}
			n = min(n, s.global[g])
			s.global[g] -= n
			undo.add(func() { s.global[g] += n })
		}
	}
}

// Take implements quota.Counter.
func (l *Ledger) Take(_ context.Context, cs []quota.Charge) (bool, error) {
	if err := l.lock(); err != nil {
		return false, err
	}
	defer l.s.mu.Unlock()
	cs[0].Trips++
	return l.take(cs, nil), nil
}

// GiveBack implements quota.Counter.
func (l *Ledger) GiveBack(_ context.Context, cs []quota.Charge) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.unlock()
	cs[0].Trips++
	l.giveBack(cs, nil)
	return nil
}

// Peek implements quota.Counter.
func (l *Ledger) Peek(_ context.Context, cs []quota.Charge) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	cs[0].Trips++
	for ci := range cs {
		c := &cs[ci]
		for i := range c.Spans {
			sp := &c.Spans[i]
			leased, _ := l.s.leased(sp.Key, l.holder)
			c.Out[i] = c.Judge(i, l.s.counters[sp.Key]-leased, l.s.global[sp.Global])
		}
	}
	return nil
}

// Read implements quota.Counts.
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

// AddGlobal implements quota.Counts.
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

func (s *Store) fresh(k requestKey, now time.Time) (quota.Recorded, bool) {
	r, ok := s.requests[k]
	if !ok || !now.Before(r.at.Add(24*time.Hour)) {
		return quota.Recorded{}, false
	}
	rec := r.rec
	rec.At = r.at
	return rec, true
}

// Recorded implements quota.Requests.
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

// Atomically implements quota.Requests.
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

func (t *ledgerTx) Take(_ context.Context, cs []quota.Charge) (bool, error) {
	if err := t.l.lock(); err != nil {
		return false, err
	}
	defer t.l.s.mu.Unlock()
	cs[0].Trips++
	return t.l.take(cs, &t.undo), nil
}

func (t *ledgerTx) GiveBack(_ context.Context, cs []quota.Charge) error {
	if err := t.l.lock(); err != nil {
		return err
	}
	defer t.l.s.unlock()
	cs[0].Trips++
	t.l.giveBack(cs, &t.undo)
	return nil
}

func (t *ledgerTx) Peek(ctx context.Context, cs []quota.Charge) error {
	return t.l.Peek(ctx, cs)
}

// Claim implements quota.Requests: the claims of c one after the other, in
// one transaction.
func (l *Ledger) Claim(ctx context.Context, c []quota.Claim) error {
	return l.Atomically(ctx, func(ctx context.Context, tx quota.Tx) error {
		for i := range c {
			var err error
			if c[i].Found, err = tx.Claim(ctx, c[i]); err != nil {
				return err
			}
		}
		return nil
	})
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

// Reset implements quota.Maintenance: the counters go to zero, and their
// leases end.
func (l *Ledger) Reset(_ context.Context, _, customer, metric string, _ time.Time) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	for k := range l.s.counters {
		if k.Customer == customer && k.Metric == metric {
			l.s.counters[k] = 0
		}
	}
	// Leases end, but keep their rows, with the numbers of their last
	// calls: a call from before the reset arriving late changes nothing.
	for k, row := range l.s.leases {
		if k.key.Customer == customer && k.key.Metric == metric {
			l.s.setLease(k, leaseRow{seq: row.seq, fenced: row.fenced})
		}
	}
	for k := range l.s.watched {
		if k.Customer == customer && k.Metric == metric {
			delete(l.s.watched, k)
		}
	}
	return nil
}

// SetTotal implements quota.Maintenance: the customer's total of metric is
// set, and its leases end as a reset ends them.
func (l *Ledger) SetTotal(_ context.Context, _, customer, metric string, used int64, _ time.Time) (int64, error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	defer l.s.mu.Unlock()
	k := quota.CounterKey{Customer: customer, Metric: metric, Window: tiers.Total, Start: quota.TotalStart}
	before := l.s.counters[k] - l.s.reserved(k)
	l.s.counters[k] = used
	for _, h := range l.s.byKey[k] {
		row := l.s.leases[leaseKey{k, h}]
		l.s.setLease(leaseKey{k, h}, leaseRow{seq: row.seq, fenced: row.fenced})
	}
	delete(l.s.watched, k)
	return before, nil
}

// RecordRefunds implements quota.Audits: the events are kept in order
// (see Refunds).
func (l *Ledger) RecordRefunds(_ context.Context, events []quota.RefundEvent) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.s.mu.Unlock()
	if l.AuditErr != nil {
		return l.AuditErr
	}
	l.s.refunds = append(l.s.refunds, events...)
	return nil
}

// Refunds returns the refunds' audit events recorded, oldest first.
func (s *Store) Refunds() []quota.RefundEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refunds)
}

// Purge implements quota.Maintenance.
func (l *Ledger) Purge(context.Context, time.Time, quota.Retention) (quota.Purged, error) {
	if err := l.lock(); err != nil {
		return nil, err
	}
	l.s.mu.Unlock()
	return quota.Purged{}, nil
}

var (
	_ quota.Counts      = (*Ledger)(nil)
	_ quota.Requests    = (*Ledger)(nil)
	_ quota.Maintenance = (*Ledger)(nil)
	_ quota.Audits      = (*Ledger)(nil)
	_ quota.Tx          = (*ledgerTx)(nil)
)
