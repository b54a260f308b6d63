package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// memEvents is an in-memory webhooks.EventStore with the store's
// once-only key.
type memEvents struct {
	mu     sync.Mutex
	watch  webhooks.Watch
	events []webhooks.Event
	seen   map[string]bool
	fail   error
}

func newMemEvents(w webhooks.Watch) *memEvents { return &memEvents{watch: w, seen: map[string]bool{}} }

func (m *memEvents) Watches(context.Context) (webhooks.Watch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watch, nil
}

func (m *memEvents) RecordEvents(_ context.Context, events []webhooks.Event) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	n := 0
	for _, e := range events {
		k := fmt.Sprint(e.Customer, e.Metric, e.Window, e.Start, e.Type, e.Threshold)
		if !m.seen[k] {
			m.seen[k] = true
			m.events = append(m.events, e)
			n++
		}
	}
	return n, nil
}

// names lists the recorded events as "type/threshold window used".
func (m *memEvents) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.events {
		out = append(out, fmt.Sprintf("%s/%d %s used=%d", e.Type, e.Threshold, e.Window, e.Used))
	}
	return out
}

var everything = webhooks.Watch{
	Types:      map[webhooks.EventType]bool{webhooks.Threshold: true, webhooks.OverageStarted: true, webhooks.LimitReached: true},
	Thresholds: []int{50, 80, 100, 120},
}

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

type detectFixture struct {
	clock    *quotafake.Clock
	catalog  *quotafake.Catalog
	engine   *quota.Engine
	detector *webhooks.Detector
	store    *memEvents
}

func newDetectFixture(t *testing.T, watch webhooks.Watch, leases bool, limits ...tiers.Limit) *detectFixture {
	t.Helper()
	f := &detectFixture{clock: quotafake.NewClock(t0), catalog: quotafake.NewCatalog(), store: newMemEvents(watch)}
	f.catalog.PutMetric("api_calls", nil)
	f.catalog.PutCustomer("acme", tiers.Anchor{}, limits)
	f.detector = webhooks.NewDetector(f.store)
	if err := f.detector.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// With leases a check waits for a batch's goroutine, which a busy
	// machine can hold up past the default store timeout (250ms): the check
	// would then be answered as if the store were down.
	ledger := quotafake.NewLedger()
	o := quota.Options{Catalog: f.catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
		History: quotafake.NewHistory(), Clock: f.clock, Watcher: f.detector, StoreTimeout: 30 * time.Second}
	if leases {
		o.Leases = lease.NewPool(ledger, f.clock)
	}
	f.engine = quota.New(o)
	return f
}

func (f *detectFixture) check(t *testing.T, cost int64, dryRun bool) quota.Decision {
	t.Helper()
	d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "api_calls", Cost: cost, DryRun: dryRun})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *detectFixture) flush(t *testing.T) []string {
	t.Helper()
	if err := f.detector.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f.store.names()
}

func soft(limit int64, percent int64) tiers.Limit {
	return tiers.Limit{Metric: "api_calls", Window: tiers.Day, Limit: limit, Mode: tiers.Soft, OveragePercent: percent}
}

// Events fire from the state a check leaves its windows in, each once per
// window start, type and threshold: one big check passing several
// thresholds fires every one of them, and later checks fire nothing again.
func TestDetectorFiresEachEventOnce(t *testing.T) {
	for _, leases := range []bool{false, true} {
		t.Run(fmt.Sprint("leases=", leases), func(t *testing.T) {
			f := newDetectFixture(t, everything, leases, soft(100, 50),
				tiers.Limit{Metric: "api_calls", Window: tiers.Hour, Limit: 1000, Mode: tiers.Hard})
			steps := []struct {
				cost   int64
				dryRun bool
				want   []string // events recorded after this step, in total
			}{
				{cost: 40},               // 40%: nothing
				{cost: 60, dryRun: true}, // a dry run is not usage
				{cost: 85, want: []string{ // 125%: one check passes four thresholds and starts overage
					"usage.threshold/50 day used=125", "usage.threshold/80 day used=125",
					"usage.threshold/100 day used=125", "usage.threshold/120 day used=125",
					"usage.overage_started/0 day used=125"}},
				{cost: 5},  // 130%: all of that already fired
				{cost: 50}, // 180% > 150%: denied, the limit is reached
				{cost: 50}, // denied again: nothing new
			}
			var want []string
			for i, s := range steps {
				f.check(t, s.cost, s.dryRun)
				want = append(want, s.want...)
				if i == 4 {
					want = append(want, "usage.limit_reached/0 day used=130")
				}
				if got := f.flush(t); !slices.Equal(got, want) {
					t.Fatalf("after step %d (cost %d): events\n%s\nwant\n%s", i, s.cost, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			// The next day's window starts over.
			f.clock.Advance(24 * time.Hour)
			f.check(t, 60, false)
			got := f.flush(t)
			if last := got[len(got)-1]; len(got) != len(want)+1 || last != "usage.threshold/50 day used=60" {
				t.Errorf("next day: events %q, want one more: the 50%% threshold", got)
			}
		})
	}
}

// Only what some webhook listens to is detected: no webhook, no events;
// thresholds only those named.
func TestDetectorLooksOnlyForWatched(t *testing.T) {
	tests := []struct {
		name  string
		watch webhooks.Watch
		want  []string
	}{
		{"nothing", webhooks.Watch{}, nil},
		{"threshold 80 only", webhooks.Watch{Types: map[webhooks.EventType]bool{webhooks.Threshold: true}, Thresholds: []int{80}},
			[]string{"usage.threshold/80 day used=110"}},
		{"overage only", webhooks.Watch{Types: map[webhooks.EventType]bool{webhooks.OverageStarted: true}, Thresholds: []int{80}},
			[]string{"usage.overage_started/0 day used=110"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newDetectFixture(t, tt.watch, false, soft(100, 20))
			f.check(t, 110, false)
			f.check(t, 50, false) // denied; limit_reached not watched
			if got := f.flush(t); !slices.Equal(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}

// Events the store could not take are written by a later flush; and once
// too many piled up, the dropped ones are noticed again by the window's
// next check.
func TestDetectorKeepsEventsTheStoreRefused(t *testing.T) {
	f := newDetectFixture(t, everything, false, soft(100, 0))
	f.store.fail = errors.New("store down")
	f.check(t, 100, false)
	if err := f.detector.Flush(context.Background()); err == nil {
		t.Fatal("flush succeeded with the store down")
	}
	f.store.fail = nil
	want := []string{"usage.threshold/50 day used=100", "usage.threshold/80 day used=100", "usage.threshold/100 day used=100"}
	if got := f.flush(t); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// Windows that ended are forgotten.
func TestDetectorPrunesEndedWindows(t *testing.T) {
	f := newDetectFixture(t, everything, false, soft(100, 0))
	f.check(t, 60, false)
	if n := f.detector.Stats().Windows; n != 1 {
		t.Fatalf("%d windows marked, want 1", n)
	}
	f.detector.Prune(t0.Add(time.Hour))
	if n := f.detector.Stats().Windows; n != 1 {
		t.Fatalf("%d windows marked before the day ended, want 1", n)
	}
	f.detector.Prune(t0.Add(14 * time.Hour))
	if n := f.detector.Stats().Windows; n != 0 {
		t.Errorf("%d windows marked after the day ended, want 0", n)
	}
}
