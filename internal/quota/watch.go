package quota

import (
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Observation is how one long window of a customer's metric stands after
// a check: what a Watcher sees.
type Observation struct {
	Key   CounterKey // the counter: customer, metric, window and its start
	End   time.Time  // when the window ends
	Mode  tiers.Mode
	Limit int64
	// Used is the window's count as the check's answer reports it: with
	// the check's cost when it was allowed, without it when denied.
	Used int64
	// State is StateExceeded where this window denied the check (also
	// when the customer's grants paid for it in its place).
	State State
	At    time.Time
}

// Watcher hears how every long window a check covers stands once the
// check is decided (the customer's own: not those of its subjects), to notice thresholds, overage and denials beside the
// check path. Dry runs, replays and windows the store could not consult
// are not observed. Observe runs on the check path, once per long window
// of every check: it must be quick and must not block.
type Watcher interface {
	Observe(o Observation)
}

// watch passes the customers' long windows of a decided set to w (the
// windows of limits per subject are not watched: thresholds are a
// customer's). allowed: the set was counted.
func (s *set) watch(w Watcher, allowed bool) {
	for i := range s.long {
		c := &s.long[i]
		if c.Subject != "" {
			continue
		}
		for j := range c.Spans {
			sp, o := &c.Spans[j], &c.Out[j]
			used := o.Used
			state := sp.Rule.State(addCap(o.Used, c.Cost), o.Passed, o.Elastic)
			switch {
			case o.Granted:
				// The window denied the check; grants paid for it.
				state = StateExceeded
			case allowed:
				used = addCap(used, c.Cost)
			}
			w.Observe(Observation{Key: sp.Key, End: sp.End, Mode: sp.Rule.Mode, Limit: sp.Rule.Limit, Used: used,
				State: state, At: c.At})
		}
	}
}
