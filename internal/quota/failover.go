package quota

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Failover is the short-window counter of an engine with a shared store:
// the shared counters while the store answers; when it does not, the
// process's own counters, charges marked degraded, until a later check
// finds the store back.
//
// It keeps that state per shard of the store (SharedStore.Shard): a call
// that fails takes only its own shard out, so when one node of a Redis
// Cluster is out of reach only the charges of its slots are counted in
// process, and every other charge goes on in the store. Of a shard that
// failed, at most one check at a time tries the store again, retryEvery
// after the shard last failed, so an outage costs checks no time; a store
// of one shard behaves as a single switch. A shard no check has come to
// for forgetAfter is forgotten: the next check of it tries the store.
type Failover struct {
	shared *SharedCounters
	local  Counter
	// now is the wall clock: failover is about real outages, whatever
	// clock decides windows.
	now func() time.Time

	// down holds the shards whose last call failed, each a *shardDown by
	// its number; ndown counts them, so that while none is down a check
	// looks nothing up (not even its shard). A shard's entry and the
	// count change together: the count moves only when an entry is stored
	// or deleted.
	down  sync.Map
	ndown atomic.Int64
	// sweepAt is when idle shards are next looked for (Unix ns).
	sweepAt atomic.Int64
	// failures counts calls that failed.
	failures atomic.Uint64

	// onChange hears when the process's mode changes: shared false when
	// a first shard goes down, true when none is left; at most once per
	// change, however many shards change with it, so that a dead node
	// does not log once per slot. mu serializes it; reportedDown is what
	// it was told last.
	onChange     func(shared bool, err error)
	mu           sync.Mutex
	reportedDown bool
}

// shardDown is a shard whose last call failed.
type shardDown struct {
	failedAt atomic.Int64 // Unix ns of its last failure
	trying   atomic.Bool  // a check is trying the store again
}

const (
	// retryEvery is how long after a shard's failure the store is tried
	// again for it.
	retryEvery = time.Second
	// forgetAfter is how long a shard stays down without a check trying
	// it (a shard with checks is tried every retryEvery).
	forgetAfter = time.Minute
)

var _ Counter = (*Failover)(nil)

func newFailover(shared *SharedCounters, local Counter, onChange func(shared bool, err error)) *Failover {
	return &Failover{shared: shared, local: local, now: time.Now, onChange: onChange}
}

// ShardsDown returns how many shards of the store failed their last call
// and are counted in process (idle ones forgotten).
func (f *Failover) ShardsDown() int64 {
	f.sweep(f.now().UnixNano())
	return f.ndown.Load()
}

// route is where one call goes: to the shared store or not, of which
// shard (-1: not looked up, none being down), and, for the one check
// trying a failed shard again, that shard's entry.
type route struct {
	shared bool
	shard  int
	trial  *shardDown
}

// use returns the route of a call for cs: to the shared store only if no
// charge of cs is kept in a shard that is down (a set is counted in one
// place, all or nothing), unless this call is the one to try that shard
// again (the first charge's that is down).
func (f *Failover) use(cs []Charge) route {
	if f.ndown.Load() == 0 {
		return route{shared: true, shard: -1}
	}
	now := f.now().UnixNano()
	f.sweep(now)
	id := f.shared.store.Shard(&cs[0])
	var v any
	ok := false
	for i := range cs {
		id = f.shared.store.Shard(&cs[i])
		if v, ok = f.down.Load(id); ok {
			break
		}
	}
	if !ok {
		return route{shared: true, shard: id}
	}
	d := v.(*shardDown)
	if now < d.failedAt.Load()+int64(retryEvery) || !d.trying.CompareAndSwap(false, true) {
		return route{shard: id}
	}
	if now < d.failedAt.Load()+int64(retryEvery) { // another check tried it in between
		d.trying.Store(false)
		return route{shard: id}
	}
	return route{shared: true, shard: id, trial: d}
}

// done records how a call for cs to the shared store went: whether it
// counted (err nil), or could not be made (tiers.ErrUnavailable: its
// shard is down). Only a trial's success brings a shard back: another
// call that succeeds was sent before the shard failed, and says nothing
// of it since.
func (f *Failover) done(cs []Charge, r route, err error) {
	if r.trial != nil {
		defer r.trial.trying.Store(false)
	}
	switch {
	case err == nil:
		if r.trial != nil && f.down.CompareAndDelete(r.shard, r.trial) && f.ndown.Add(-1) == 0 {
			f.report(nil)
		}
	case errors.Is(err, errOutOfTurn): // the check's own time ran out: not the store's failure
	case errors.Is(err, tiers.ErrUnavailable):
		f.failures.Add(1)
		id := r.shard
		if id < 0 {
			id = f.shared.store.Shard(&cs[0])
		}
		now := f.now().UnixNano()
		if v, ok := f.down.Load(id); ok {
			v.(*shardDown).failedAt.Store(now)
			return
		}
		d := new(shardDown)
		d.failedAt.Store(now)
		if v, loaded := f.down.LoadOrStore(id, d); loaded {
			v.(*shardDown).failedAt.Store(now)
			return
		}
		if f.ndown.Add(1) == 1 {
			f.report(err)
		}
	}
}

// sweep forgets, at most once per retryEvery, the shards down that no
// check has tried for forgetAfter: nothing is degraded there, and
// keeping them would keep the process in fallback for good.
func (f *Failover) sweep(now int64) {
	at := f.sweepAt.Load()
	if f.ndown.Load() == 0 || now < at || !f.sweepAt.CompareAndSwap(at, now+int64(retryEvery)) {
		return
	}
	forgot := false
	f.down.Range(func(id, v any) bool {
		d := v.(*shardDown)
		if !d.trying.Load() && now-d.failedAt.Load() >= int64(forgetAfter) && f.down.CompareAndDelete(id, v) {
			forgot = f.ndown.Add(-1) == 0 || forgot
		}
		return true
	})
	if forgot {
		f.report(ErrSharedIdle)
	}
}

// ErrSharedIdle is what OnSharedChange hears with shared true when the
// process goes back to the shared store not because it answered but
// because no check has tried it for a while (its shards down were
// forgotten): the next check tries it.
var ErrSharedIdle = errors.New("no check has tried the shared store for a minute: the next one does")

// report tells onChange the mode the process is in now, if it has not
// been told it already. It is called after every change of ndown from or
// to 0 (with the error of a change to 1, and ErrSharedIdle for a change
// to 0 that no answer made), so the last call sees the last change,
// whatever order concurrent calls run in.
func (f *Failover) report(err error) {
	if f.onChange == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	down := f.ndown.Load() > 0
	if down == f.reportedDown || down && (err == nil || err == ErrSharedIdle) {
		// Told already; or down since a change whose own call, with its
		// error, is yet to come.
		return
	}
	f.reportedDown = down
	if down {
		f.onChange(false, err)
	} else {
		f.onChange(true, err)
	}
}

// Take implements Counter.
func (f *Failover) Take(ctx context.Context, cs []Charge) (bool, error) {
	if len(cs) == 0 {
		return true, nil
	}
	if r := f.use(cs); r.shared {
		ok, err := f.shared.Take(ctx, cs)
		f.done(cs, r, err)
		if !errors.Is(err, tiers.ErrUnavailable) {
			return ok, err
		}
	}
	degrade(cs)
	return f.local.Take(ctx, cs)
}

// degrade marks the charges of cs counted in process.
func degrade(cs []Charge) {
	for i := range cs {
		cs[i].degraded = true
	}
}

// Peek implements Counter.
func (f *Failover) Peek(ctx context.Context, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	if r := f.use(cs); r.shared {
		err := f.shared.Peek(ctx, cs)
		f.done(cs, r, err)
		if !errors.Is(err, tiers.ErrUnavailable) {
			return err
		}
	}
	degrade(cs)
	return f.local.Peek(ctx, cs)
}

// GiveBack implements Counter. An undone take gives back to the counters
// that took: in this process when it was degraded, in the store
// otherwise (where, if the store is gone, its units stay counted: never
// the other way). A refund goes where checks go now.
func (f *Failover) GiveBack(ctx context.Context, cs []Charge) error {
	if len(cs) == 0 {
		return nil
	}
	if cs[0].undoNow != 0 {
		if cs[0].degraded {
			return f.local.GiveBack(ctx, cs)
		}
		err := f.shared.GiveBack(ctx, cs)
		f.done(cs, route{shard: -1}, err)
		return err
	}
	if r := f.use(cs); r.shared {
		err := f.shared.GiveBack(ctx, cs)
		f.done(cs, r, err)
		if !errors.Is(err, tiers.ErrUnavailable) {
			return err
		}
	}
	degrade(cs)
	return f.local.GiveBack(ctx, cs)
}
