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
	Used  int64
	State State // StateExceeded: this window denied the check
	At    time.Time
}

// Watcher hears how every long window a check covers stands once the
// check is decided, to notice thresholds, overage and denials beside the
// check path. Dry runs, replays and windows the store could not consult
// are not observed. Observe runs on the check path, once per long window
// of every check: it must be quick and must not block.
type Watcher interface {
	Observe(o Observation)
}

// watch passes the long windows of a decided check to the engine's
// watcher.
func (e *Engine) watch(r Request, s *scope, d *Decision) {
	short, long := len(s.short.Spans), len(s.long.Spans)
	if long == 0 || r.DryRun || d.Replayed || len(d.Limits) != short+long {
		return
	}
	for i := range s.long.Spans {
		sp, w := &s.long.Spans[i], &d.Limits[short+i]
		e.watcher.Observe(Observation{Key: sp.Key, End: sp.End, Mode: w.Mode, Limit: w.Limit, Used: w.Used,
			State: w.State, At: s.long.At})
	}
}
