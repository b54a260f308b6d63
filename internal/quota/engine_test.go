package quota_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/lease"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// fixture is an engine over in-memory doubles and a manual clock.
type fixture struct {
	clock   *quotafake.Clock
	catalog *quotafake.Catalog
	ledger  *quotafake.Ledger
	history *quotafake.History
	engine  *quota.Engine
	// leases is the engine's lease pool (nil: long windows charged to
	// the ledger directly).
	leases *lease.Pool
}

// testStoreTimeout is how long the engines of tests wait for their stores,
// unless a test says otherwise. The stores are in memory, but with leases
// a check waits for a batch's goroutine, which a busy machine can hold up
// past the default (250ms): the check would then be answered as if the
// store were down.
const testStoreTimeout = 30 * time.Second

// newFixture returns an engine at now over in-memory doubles: long
// windows charged to the ledger directly, or leased from it.
func newFixture(t testing.TB, now time.Time, failClosed, leases bool) *fixture {
	t.Helper()
	f := &fixture{
		clock:   quotafake.NewClock(now),
		catalog: quotafake.NewCatalog(),
		ledger:  quotafake.NewLedger(),
		history: quotafake.NewHistory(),
	}
	o := quota.Options{Catalog: f.catalog, Counts: f.ledger, Requests: f.ledger, Maintenance: f.ledger, Audits: f.ledger,
		History: f.history, Clock: f.clock, FailClosed: failClosed, StoreTimeout: testStoreTimeout}
	if leases {
		f.leases = lease.NewPool(f.ledger, f.clock)
		o.Leases = f.leases
	}
	f.engine = quota.New(o)
	return f
}

// acmeFixture returns newFixture's fixture on Sunday 2026-11-22 10:00 UTC,
// failing open, with metrics declared and customer acme on limits.
func acmeFixture(t testing.TB, leases bool, limits []tiers.Limit, metrics ...string) *fixture {
	t.Helper()
	f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, leases)
	for _, m := range metrics {
		f.catalog.PutMetric(m, nil)
	}
	f.catalog.PutCustomer("acme", tiers.Anchor{}, limits)
	return f
}

// leasesOf returns a lease pool over s when on, nil otherwise.
func leasesOf(on bool, s lease.Store, clock quota.Clock) quota.Leases {
	if !on {
		return nil
	}
	return lease.NewPool(s, clock)
}

// used returns the units the customer's window of api_calls counts as
// admitted, as usage reports them.
func (f *fixture) used(t testing.TB, customer string, w tiers.Window) int64 {
	t.Helper()
	_, usage, err := f.engine.Usage(context.Background(), customer, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range usage {
		if u.Metric == "api_calls" && u.Window == w {
			return u.Used
		}
	}
	t.Fatalf("no usage of the %s window in %+v", w, usage)
	return 0
}

// eachMode runs f with long windows charged directly and with leases.
func eachMode(t *testing.T, f func(t *testing.T, leases bool)) {
	for _, leases := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "leases"}[leases], func(t *testing.T) {
			t.Parallel()
			f(t, leases)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func hard(w tiers.Window, n int64) tiers.Limit {
	return tiers.Limit{Metric: "api_calls", Window: w, Limit: n, Mode: tiers.Hard}
}

func soft(w tiers.Window, n, percent int64) tiers.Limit {
	return tiers.Limit{Metric: "api_calls", Window: w, Limit: n, Mode: tiers.Soft, OveragePercent: percent}
}

func elastic(w tiers.Window, n int64, ceiling *int64) tiers.Limit {
	return tiers.Limit{Metric: "api_calls", Window: w, Limit: n, Mode: tiers.Elastic, Ceiling: ceiling}
}

// never marks a denied step that can never pass (retry_after null).
const never = -1

// step is one check at a moment, and what it must answer.
type step struct {
	at       string // RFC 3339 with milliseconds allowed
	customer string // default "acme"
	cost     int64
	dryRun   bool
	look     bool // Request.Look
	force    bool // Request.Force
	allowed  bool
	used     []int64       // per window, shortest first
	states   []quota.State // per window; nil: not checked
	retry    int64         // denied steps: retry_after, or never
	overage  bool
	elastic  bool
}

func TestCheckTable(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		ok, over, el, ex := quota.StateOK, quota.StateOverage, quota.StateElastic, quota.StateExceeded
		tests := []struct {
			name     string
			limits   []tiers.Limit
			anchor   tiers.Anchor
			capacity map[tiers.Window]int64
			steps    []step
		}{
			{
				name:   "hard day: exactly at the limit, then one over",
				limits: []tiers.Limit{hard(tiers.Day, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 10, allowed: true, used: []int64{10}, states: []quota.State{ok}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{10}, states: []quota.State{ex}, retry: 14 * 3600},
				},
			},
			{
				name:   "cost larger than what remains charges nothing",
				limits: []tiers.Limit{hard(tiers.Day, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 7, allowed: true, used: []int64{7}},
					{at: "2026-11-22T10:00:00Z", cost: 4, allowed: false, used: []int64{7}, retry: 14 * 3600},
					{at: "2026-11-22T10:00:00Z", cost: 3, allowed: true, used: []int64{10}},
				},
			},
			{
				name:   "a look takes nothing: windows as they stand, denied only when nothing is left",
				limits: []tiers.Limit{hard(tiers.Minute, 5), hard(tiers.Day, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: true, used: []int64{0, 0}, states: []quota.State{ok, ok}},
					{at: "2026-11-22T10:00:00Z", cost: 4, allowed: true, used: []int64{4, 4}},
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: true, used: []int64{4, 4}},
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: true, used: []int64{4, 4}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: true, used: []int64{5, 5}},
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: false, used: []int64{5, 5}, states: []quota.State{ex, ok}},
					{at: "2026-11-22T10:02:00Z", cost: 5, allowed: true, used: []int64{5, 10}},
					{at: "2026-11-22T10:04:00Z", cost: 1, look: true, allowed: false, used: []int64{0, 10}, states: []quota.State{ok, ex}, retry: 14*3600 - 4*60},
				},
			},
			{
				name:   "soft day: a look within the allowance passes, as a dry run of a unit",
				limits: []tiers.Limit{soft(tiers.Day, 10, 20)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 11, allowed: true, used: []int64{11}, states: []quota.State{over}, overage: true},
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: true, used: []int64{11}, states: []quota.State{over}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: true, used: []int64{12}, overage: true},
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: false, used: []int64{12}, states: []quota.State{ex}, retry: 14 * 3600},
				},
			},
			{
				name:   "forced: counted over the limit, and denied",
				limits: []tiers.Limit{hard(tiers.Minute, 5), hard(tiers.Day, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 3, force: true, allowed: true, used: []int64{3, 3}, states: []quota.State{ok, ok}},
					{at: "2026-11-22T10:00:00Z", cost: 4, force: true, allowed: false, used: []int64{7, 7}, states: []quota.State{ex, ok}},
					{at: "2026-11-22T10:00:00Z", cost: 1, look: true, allowed: false, used: []int64{7, 7}, states: []quota.State{ex, ok}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{7, 7}},
					{at: "2026-11-22T10:05:00Z", cost: 4, force: true, allowed: false, used: []int64{4, 11}, states: []quota.State{ok, ex}, retry: 14*3600 - 5*60},
					{at: "2026-11-22T10:05:00Z", cost: 1, look: true, allowed: false, used: []int64{4, 11}, retry: 14*3600 - 5*60},
					{at: "2026-11-23T00:00:00Z", cost: 1, look: true, allowed: true, used: []int64{0, 0}},
				},
			},
			{
				name:   "day window rolls over at 00:00 UTC",
				limits: []tiers.Limit{hard(tiers.Day, 10)},
				steps: []step{
					{at: "2026-11-22T23:59:59Z", cost: 10, allowed: true, used: []int64{10}},
					{at: "2026-11-22T23:59:59.500Z", cost: 1, allowed: false, used: []int64{10}, retry: 1},
					{at: "2026-11-23T00:00:00Z", cost: 1, allowed: true, used: []int64{1}},
				},
			},
			{
				name:   "hour window rolls over on the full hour",
				limits: []tiers.Limit{hard(tiers.Hour, 2)},
				steps: []step{
					{at: "2026-11-22T10:59:00Z", cost: 2, allowed: true, used: []int64{2}},
					{at: "2026-11-22T10:59:00Z", cost: 1, allowed: false, used: []int64{2}, retry: 60},
					{at: "2026-11-22T11:00:00Z", cost: 2, allowed: true, used: []int64{2}},
				},
			},
			{
				name:   "sliding second: weights at elapsed 0, half and just before T",
				limits: []tiers.Limit{hard(tiers.Second, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00.000Z", cost: 10, allowed: true, used: []int64{10}},
					// elapsed 0 in the next bucket: floor(10*1000/1000) = 10.
					{at: "2026-11-22T10:00:01.000Z", cost: 1, allowed: false, used: []int64{10}, retry: 1},
					// half: floor(10*500/1000) = 5; 5+6 > 10, passes 1 ms later.
					{at: "2026-11-22T10:00:01.500Z", cost: 6, allowed: false, used: []int64{5}, retry: 1},
					{at: "2026-11-22T10:00:01.500Z", cost: 5, allowed: true, used: []int64{10}},
					// just before T: previous 5, floor(5*1/1000) = 0.
					{at: "2026-11-22T10:00:02.999Z", cost: 10, allowed: true, used: []int64{10}},
				},
			},
			{
				name:   "sliding minute: retry_after from the formula",
				limits: []tiers.Limit{hard(tiers.Minute, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 10, allowed: true, used: []int64{10}},
					// floor(10*(60000-e)/60000) <= 0 needs e >= 54001 ms: 55 s.
					{at: "2026-11-22T10:01:00Z", cost: 10, allowed: false, used: []int64{10}, retry: 55},
					{at: "2026-11-22T10:01:54.000Z", cost: 10, allowed: false, used: []int64{1}, retry: 1},
					{at: "2026-11-22T10:01:54.001Z", cost: 10, allowed: true, used: []int64{10}},
				},
			},
			{
				name:   "sliding window waits into the next bucket",
				limits: []tiers.Limit{hard(tiers.Second, 10)},
				steps: []step{
					{at: "2026-11-22T10:00:00.200Z", cost: 8, allowed: true, used: []int64{8}},
					// current bucket full: next bucket at 1.000 has previous 8:
					// floor(8*(1000-e)/1000) <= 10-5 needs e >= 251: 1051 ms.
					{at: "2026-11-22T10:00:00.200Z", cost: 5, allowed: false, used: []int64{8}, retry: 2},
					{at: "2026-11-22T10:00:01.250Z", cost: 5, allowed: false, used: []int64{6}},
					{at: "2026-11-22T10:00:01.251Z", cost: 5, allowed: true, used: []int64{10}},
				},
			},
			{
				name:   "soft limit: threshold rounds down, overage reported",
				limits: []tiers.Limit{soft(tiers.Day, 10, 15)}, // floor(11.5) = 11
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 10, allowed: true, used: []int64{10}, states: []quota.State{ok}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: true, used: []int64{11}, states: []quota.State{over}, overage: true},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{11}, states: []quota.State{ex}, retry: 14 * 3600},
				},
			},
			{
				name:   "soft limit with 50% on 7 admits 10",
				limits: []tiers.Limit{soft(tiers.Day, 7, 50)}, // floor(10.5) = 10
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 10, allowed: true, used: []int64{10}, states: []quota.State{over}, overage: true},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{10}},
				},
			},
			{
				name:   "elastic without declared capacity behaves as hard",
				limits: []tiers.Limit{elastic(tiers.Day, 5, nil)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{5}, states: []quota.State{ok}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{5}, states: []quota.State{ex}, retry: 14 * 3600},
				},
			},
			{
				name:     "elastic admits beyond the limit while global usage plus cost fits capacity",
				limits:   []tiers.Limit{elastic(tiers.Day, 5, nil)},
				capacity: map[tiers.Window]int64{tiers.Day: 8},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{5}, states: []quota.State{ok}},
					{at: "2026-11-22T10:00:00Z", cost: 2, allowed: true, used: []int64{7}, states: []quota.State{el}, elastic: true},
					{at: "2026-11-22T10:00:00Z", cost: 2, allowed: false, used: []int64{7}, states: []quota.State{ex}, retry: 14 * 3600},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: true, used: []int64{8}, states: []quota.State{el}, elastic: true},
				},
			},
			{
				name:     "global usage counts customers without limits",
				limits:   []tiers.Limit{elastic(tiers.Day, 5, nil)},
				capacity: map[tiers.Window]int64{tiers.Day: 8},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", customer: "free-rider", cost: 3, allowed: true, used: []int64{}},
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{5}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{5}},
				},
			},
			{
				name:     "elastic ceiling bounds spare capacity",
				limits:   []tiers.Limit{elastic(tiers.Day, 5, ptr(int64(6)))},
				capacity: map[tiers.Window]int64{tiers.Day: 100},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 6, allowed: true, used: []int64{6}, states: []quota.State{el}, elastic: true},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{6}, states: []quota.State{ex}, retry: 14 * 3600},
				},
			},
			{
				name:     "elastic short window borrows from the process's spare capacity",
				limits:   []tiers.Limit{elastic(tiers.Second, 2, nil)},
				capacity: map[tiers.Window]int64{tiers.Second: 3},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 3, allowed: true, used: []int64{3}, states: []quota.State{el}, elastic: true},
					// Global 3 of capacity 3: floor(3*(1000-e)/1000)+1 <= 3 first
					// holds at e = 1 of the next bucket: 1001 ms, so 2 s.
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{3}, retry: 2},
				},
			},
			{
				name:   "a denied check reports a soft window beyond its limit as it stands",
				limits: []tiers.Limit{hard(tiers.Hour, 10), soft(tiers.Month, 5, 200)}, // month threshold 15
				steps: []step{
					{at: "2026-11-22T10:30:00Z", cost: 6, allowed: true, used: []int64{6, 6}, states: []quota.State{ok, over}, overage: true},
					// The hour denies; the month would admit (overage), so the
					// wait is the hour's, not the month's.
					{at: "2026-11-22T10:30:00Z", cost: 5, allowed: false, used: []int64{6, 6}, states: []quota.State{ex, over}, retry: 1800},
				},
			},
			{
				name:     "a denied check reports an elastic window beyond its limit as it stands",
				limits:   []tiers.Limit{hard(tiers.Hour, 10), elastic(tiers.Month, 5, nil)},
				capacity: map[tiers.Window]int64{tiers.Month: 100},
				steps: []step{
					{at: "2026-11-22T10:30:00Z", cost: 6, allowed: true, used: []int64{6, 6}, states: []quota.State{ok, el}, elastic: true},
					{at: "2026-11-22T10:30:00Z", cost: 5, allowed: false, used: []int64{6, 6}, states: []quota.State{ex, el}, retry: 1800},
				},
			},
			{
				name:     "an anchored month counts its units once in the calendar month's capacity",
				limits:   []tiers.Limit{elastic(tiers.Month, 5, nil)},
				anchor:   tiers.Anchor{Day: 15}, // Nov 15 - Dec 15; the capacity's month is November
				capacity: map[tiers.Window]int64{tiers.Month: 12},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{5}, states: []quota.State{ok}},
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{10}, states: []quota.State{el}, elastic: true},
					{at: "2026-11-22T10:00:00Z", cost: 2, allowed: true, used: []int64{12}, states: []quota.State{el}, elastic: true},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{12}, states: []quota.State{ex}},
				},
			},
			{
				name:   "a limit of 0 can never pass",
				limits: []tiers.Limit{hard(tiers.Day, 0)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{0}, retry: never},
				},
			},
			{
				name:   "a cost above the threshold can never pass",
				limits: []tiers.Limit{hard(tiers.Second, 5), hard(tiers.Day, 100)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 6, allowed: false, used: []int64{0, 0}, states: []quota.State{ex, ok}, retry: never},
				},
			},
			{
				name:   "all or nothing: a long window denial gives short units back",
				limits: []tiers.Limit{hard(tiers.Second, 10), hard(tiers.Day, 5)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{5, 5}},
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{5, 5}, states: []quota.State{ok, ex}, retry: 14 * 3600},
					{at: "2026-11-22T10:00:00Z", cost: 1, dryRun: true, allowed: false, used: []int64{5, 5}},
				},
			},
			{
				name:   "all or nothing: a short window denial charges no long window",
				limits: []tiers.Limit{hard(tiers.Second, 3), hard(tiers.Day, 100)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 3, allowed: true, used: []int64{3, 3}},
					// At elapsed 0 of the next bucket floor(3*1000/1000) = 3 still
					// fills the window; at 1 ms it is 2: 1001 ms, so 2 s.
					{at: "2026-11-22T10:00:00Z", cost: 1, allowed: false, used: []int64{3, 3}, states: []quota.State{ex, ok}, retry: 2},
					{at: "2026-11-22T10:00:05Z", cost: 1, allowed: true, used: []int64{1, 4}},
				},
			},
			{
				name:   "retry_after is the longest of the denying windows",
				limits: []tiers.Limit{hard(tiers.Minute, 1), hard(tiers.Hour, 1)},
				steps: []step{
					{at: "2026-11-22T10:30:00Z", cost: 1, allowed: true, used: []int64{1, 1}},
					{at: "2026-11-22T10:30:10Z", cost: 1, allowed: false, used: []int64{1, 1}, states: []quota.State{ex, ex}, retry: 1790},
				},
			},
			{
				name:   "dry run answers without charging",
				limits: []tiers.Limit{hard(tiers.Second, 5), hard(tiers.Day, 5)},
				steps: []step{
					{at: "2026-11-22T10:00:00Z", cost: 5, dryRun: true, allowed: true, used: []int64{5, 5}},
					{at: "2026-11-22T10:00:00Z", cost: 5, allowed: true, used: []int64{5, 5}},
					{at: "2026-11-22T10:00:00Z", cost: 1, dryRun: true, allowed: false, used: []int64{5, 5}},
				},
			},
			{
				name:   "week starts Monday 00:00 UTC",
				limits: []tiers.Limit{hard(tiers.Week, 10)},
				steps: []step{
					{at: "2026-11-29T23:00:00Z", cost: 10, allowed: true, used: []int64{10}}, // a Sunday
					{at: "2026-11-29T23:00:00Z", cost: 1, allowed: false, used: []int64{10}, retry: 3600},
					{at: "2026-11-30T00:00:00Z", cost: 10, allowed: true, used: []int64{10}}, // Monday
				},
			},
			{
				name:   "month on anchor day 28 runs from the 28th",
				limits: []tiers.Limit{hard(tiers.Month, 10)},
				anchor: tiers.Anchor{Day: 28},
				steps: []step{
					{at: "2027-03-01T00:00:00Z", cost: 10, allowed: true, used: []int64{10}}, // period Feb 28 - Mar 28
					{at: "2027-03-27T23:59:59Z", cost: 1, allowed: false, used: []int64{10}, retry: 1},
					{at: "2027-03-28T00:00:00Z", cost: 10, allowed: true, used: []int64{10}},
				},
			},
			{
				name:   "calendar month ends with February in a leap year",
				limits: []tiers.Limit{hard(tiers.Month, 1)},
				steps: []step{
					{at: "2028-02-29T12:00:00Z", cost: 1, allowed: true, used: []int64{1}},
					{at: "2028-02-29T12:00:00Z", cost: 1, allowed: false, used: []int64{1}, retry: 12 * 3600},
					{at: "2028-03-01T00:00:00Z", cost: 1, allowed: true, used: []int64{1}},
				},
			},
			{
				name:   "calendar month in a non-leap February ends on the 28th",
				limits: []tiers.Limit{hard(tiers.Month, 1)},
				steps: []step{
					{at: "2027-02-28T23:00:00Z", cost: 1, allowed: true, used: []int64{1}},
					{at: "2027-02-28T23:00:00Z", cost: 1, allowed: false, used: []int64{1}, retry: 3600},
				},
			},
			{
				name:   "anchor 31 is impossible, 15 runs mid-month to mid-month",
				limits: []tiers.Limit{hard(tiers.Month, 3)},
				anchor: tiers.Anchor{Day: 15},
				steps: []step{
					{at: "2026-12-14T00:00:00Z", cost: 3, allowed: true, used: []int64{3}},
					{at: "2026-12-14T00:00:00Z", cost: 1, allowed: false, used: []int64{3}, retry: 24 * 3600},
					{at: "2026-12-15T00:00:00Z", cost: 1, allowed: true, used: []int64{1}},
				},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), false, leases)
				f.catalog.PutMetric("api_calls", tt.capacity)
				f.catalog.PutCustomer("acme", tt.anchor, tt.limits)
				f.catalog.PutCustomer("free-rider", tiers.Anchor{}, nil)
				for i, s := range tt.steps {
					at, err := time.Parse(time.RFC3339Nano, s.at)
					if err != nil {
						t.Fatal(err)
					}
					f.clock.Set(at)
					customer := s.customer
					if customer == "" {
						customer = "acme"
					}
					d, err := f.engine.Check(context.Background(), quota.Request{
						Customer: customer, Metric: "api_calls", Cost: s.cost, DryRun: s.dryRun, Look: s.look, Force: s.force,
					})
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					checkStep(t, i, s, d)
				}
			})
		}
	})
}

func checkStep(t *testing.T, i int, s step, d quota.Decision) {
	t.Helper()
	if d.Allowed != s.allowed {
		t.Errorf("step %d: allowed = %v, want %v (%+v)", i, d.Allowed, s.allowed, d)
	}
	if s.used != nil {
		if len(d.Limits) != len(s.used) {
			t.Fatalf("step %d: %d windows, want %d", i, len(d.Limits), len(s.used))
		}
		for j, w := range d.Limits {
			if w.Used != s.used[j] {
				t.Errorf("step %d: %s used = %d, want %d", i, w.Window, w.Used, s.used[j])
			}
			if want := max(0, w.Limit-w.Used); w.Remaining != want {
				t.Errorf("step %d: %s remaining = %d, want %d", i, w.Window, w.Remaining, want)
			}
		}
	}
	for j, st := range s.states {
		if d.Limits[j].State != st {
			t.Errorf("step %d: %s state = %s, want %s", i, d.Limits[j].Window, d.Limits[j].State, st)
		}
	}
	if d.Overage != s.overage || d.Elastic != s.elastic {
		t.Errorf("step %d: overage, elastic = %v, %v; want %v, %v", i, d.Overage, d.Elastic, s.overage, s.elastic)
	}
	switch {
	case s.allowed && (d.RetryAfter != 0 || d.Never):
		t.Errorf("step %d: allowed with retry_after %d (never %v)", i, d.RetryAfter, d.Never)
	case !s.allowed && s.retry == never && !d.Never:
		t.Errorf("step %d: retry_after = %d, want null (never)", i, d.RetryAfter)
	case !s.allowed && s.retry > 0 && (d.Never || d.RetryAfter != s.retry):
		t.Errorf("step %d: retry_after = %d (never %v), want %d", i, d.RetryAfter, d.Never, s.retry)
	case !s.allowed && !d.Never && d.RetryAfter < 1:
		t.Errorf("step %d: denied with retry_after %d, want >= 1", i, d.RetryAfter)
	}
}

func TestCheckErrors(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{hard(tiers.Day, 5)}, "api_calls")
		tests := []struct {
			name string
			req  quota.Request
			want error
		}{
			{"unknown customer", quota.Request{Customer: "ghost", Metric: "api_calls", Cost: 1}, tiers.ErrCustomerNotFound},
			{"undeclared metric", quota.Request{Customer: "acme", Metric: "nope", Cost: 1}, tiers.ErrMetricNotFound},
			{"both unknown reports the customer", quota.Request{Customer: "ghost", Metric: "nope", Cost: 1}, tiers.ErrCustomerNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := f.engine.Check(context.Background(), tt.req); !errors.Is(err, tt.want) {
					t.Errorf("err = %v, want %v", err, tt.want)
				}
			})
		}
		invalid := []quota.Request{
			{Customer: "", Metric: "api_calls", Cost: 1},
			{Customer: "acme", Metric: "API", Cost: 1},
			{Customer: "acme", Metric: "api_calls", Cost: 0},
			{Customer: "acme", Metric: "api_calls", Cost: quota.MaxCost + 1},
			{Customer: "acme", Metric: "api_calls", Cost: 1, RequestID: "bad\nid"},
		}
		for i, r := range invalid {
			var ve *tiers.ValidationError
			if _, err := f.engine.Check(context.Background(), r); !errors.As(err, &ve) {
				t.Errorf("invalid request %d: err = %v, want a validation error", i, err)
			}
		}
	})
}

// A check or refund without customer or metric says the field "is
// required"; one present but malformed is told its pattern.
func TestValidateWordsMissingFields(t *testing.T) {
	const (
		required = "is required"
		keyRule  = "must match ^[a-z0-9][a-z0-9_.-]{0,62}$"
		idRule   = "must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
	)
	for _, tt := range []struct {
		customer, metric string
		want             []tiers.FieldError
	}{
		{"", "api_calls", []tiers.FieldError{{Field: "customer", Message: required}}},
		{"acme", "", []tiers.FieldError{{Field: "metric", Message: required}}},
		{"", "", []tiers.FieldError{{Field: "customer", Message: required}, {Field: "metric", Message: required}}},
		{"-acme", "", []tiers.FieldError{{Field: "customer", Message: idRule}, {Field: "metric", Message: required}}},
		{"", "API", []tiers.FieldError{{Field: "customer", Message: required}, {Field: "metric", Message: keyRule}}},
	} {
		for name, err := range map[string]error{
			"check":  quota.Request{Customer: tt.customer, Metric: tt.metric, Cost: 1}.Validate(),
			"refund": quota.RefundRequest{Customer: tt.customer, Metric: tt.metric, Cost: 1}.Validate(),
		} {
			var ve *tiers.ValidationError
			if !errors.As(err, &ve) || !slices.Equal(ve.Fields, tt.want) {
				t.Errorf("%s of %q %q: err = %v, want %+v", name, tt.customer, tt.metric, err, tt.want)
			}
		}
	}
}

func TestNoEffectiveLimitIsAllowed(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{hard(tiers.Day, 5)}, "api_calls", "exports")
		d, err := f.engine.Check(context.Background(), quota.Request{Customer: "acme", Metric: "exports", Cost: 1000})
		if err != nil || !d.Allowed || len(d.Limits) != 0 {
			t.Fatalf("decision = %+v, err = %v; want allowed with no limits", d, err)
		}
		if d.StoreTrips != 0 || f.ledger.Charges != 0 {
			t.Errorf("%d round trips to the store, %d charges, for a metric without limits or capacity; want none",
				d.StoreTrips, f.ledger.Charges)
		}
	})
}

func TestOverrideExpiresWithoutDeletion(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		f := newFixture(t, t0, false, leases)
		f.catalog.PutMetric("api_calls", nil)
		exp := t0.Add(time.Hour)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 5)},
			tiers.Override{Customer: "acme", Limit: hard(tiers.Day, 100), ExpiresAt: &exp})
		ctx := context.Background()
		d, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 50})
		if !d.Allowed || d.Limits[0].Limit != 100 {
			t.Fatalf("under the override: %+v", d)
		}
		f.clock.Set(exp)
		d, _ = f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
		if d.Allowed || d.Limits[0].Limit != 5 || d.Limits[0].Used != 50 {
			t.Fatalf("after expiry the plan's limit must count (counters kept): %+v", d)
		}
	})
}

func TestRequestIDReplaysFirstAnswer(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		f := newFixture(t, t0, false, leases)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 100), hard(tiers.Day, 10)})
		ctx := context.Background()
		req := quota.Request{Customer: "acme", Metric: "api_calls", Cost: 3, RequestID: "op-1"}
		first, err := f.engine.Check(ctx, req)
		if err != nil || !first.Allowed {
			t.Fatalf("first: %+v, %v", first, err)
		}
		f.clock.Advance(time.Minute)
		again, err := f.engine.Check(ctx, req)
		if err != nil || !again.Replayed || again.Limits[1].Used != 3 {
			t.Fatalf("replay = %+v, %v; want the first answer", again, err)
		}
		if got := f.used(t, "acme", tiers.Day); got != 3 {
			t.Errorf("day counter = %d after a replay, want 3", got)
		}
		if _, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 4, RequestID: "op-1"}); !errors.Is(err, tiers.ErrConflict) {
			t.Errorf("reuse with another cost: err = %v, want ErrConflict", err)
		}
		// Denied checks are not recorded: the same id may pass later.
		if d, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 8, RequestID: "op-2"}); d.Allowed {
			t.Fatalf("op-2 should be denied: %+v", d)
		}
		if d, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 7, RequestID: "op-2"}); !d.Allowed || d.Replayed {
			t.Errorf("op-2 with a cost that fits: %+v, want a fresh allowed answer", d)
		}
		// After 24 hours the id is forgotten.
		f.clock.Advance(25 * time.Hour)
		if d, _ := f.engine.Check(ctx, req); d.Replayed {
			t.Errorf("a request id older than 24 h replayed: %+v", d)
		}
	})
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("closed=%v", closed), func(t *testing.T) {
				f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), closed, leases)
				f.catalog.PutMetric("api_calls", nil)
				f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 2), hard(tiers.Day, 100)})
				f.ledger.Err = fmt.Errorf("%w: connection refused", tiers.ErrUnavailable)
				ctx := context.Background()
				// Checks that only read the long windows fail the same way:
				// a dry run, and a check the short window denies (neither
				// charges anything).
				for _, tc := range []struct {
					name    string
					req     quota.Request
					allowed bool // when failing open
				}{
					{"dry run", quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1, DryRun: true}, true},
					{"short window denies", quota.Request{Customer: "acme", Metric: "api_calls", Cost: 3}, false},
				} {
					d, err := f.engine.Check(ctx, tc.req)
					switch {
					case closed && !errors.Is(err, tiers.ErrUnavailable):
						t.Errorf("%s, fail closed: %+v, %v; want ErrUnavailable", tc.name, d, err)
					case !closed && (err != nil || d.Allowed != tc.allowed || !d.Degraded || len(d.Limits) != 1):
						t.Errorf("%s, fail open: %+v, %v; want allowed=%v, degraded, only the short window",
							tc.name, d, err, tc.allowed)
					}
				}
				d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 2})
				if closed {
					if !errors.Is(err, tiers.ErrUnavailable) {
						t.Fatalf("fail closed: err = %v, want ErrUnavailable", err)
					}
				} else {
					if err != nil || !d.Allowed || !d.Degraded || len(d.Limits) != 1 || d.Limits[0].Window != tiers.Second {
						t.Fatalf("fail open: %+v, %v; want allowed, degraded, only the short window", d, err)
					}
				}
				// Short windows stay enforced; fail closed gave its units back.
				f.ledger.Err = nil
				d, err = f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 2})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed == !closed {
					t.Errorf("after recovery: allowed = %v, want %v (short units %s)", d.Allowed, closed,
						map[bool]string{true: "given back", false: "kept"}[closed])
				}
				if f.engine.Stats().StoreErrors == 0 {
					t.Errorf("store errors not counted")
				}
			})
		}
	})
}

// A refund gives the metric's global usage back only what it gave back to
// the customer: refunding more than was used must not make room for
// elastic limits beyond the declared capacity.
func TestRefundKeepsGlobalUsageExact(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, w := range []tiers.Window{tiers.Second, tiers.Day} {
			t.Run(w.String(), func(t *testing.T) {
				f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, leases)
				f.catalog.PutMetric("api_calls", map[tiers.Window]int64{w: 30})
				for _, c := range []string{"e1", "e2"} {
					f.catalog.PutCustomer(c, tiers.Anchor{}, []tiers.Limit{elastic(w, 5, ptr(int64(20)))})
				}
				ctx := context.Background()
				check := func(customer string, cost int64) quota.Decision {
					t.Helper()
					d, err := f.engine.Check(ctx, quota.Request{Customer: customer, Metric: "api_calls", Cost: cost})
					if err != nil {
						t.Fatal(err)
					}
					return d
				}
				if !check("e1", 15).Allowed || !check("e2", 14).Allowed {
					t.Fatal("setup: elastic checks within capacity denied")
				}
				// e1 used 15: fourteen refunds of 5 give back those 15 and nothing more.
				for range 14 {
					if _, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "e1", Metric: "api_calls", Cost: 5}); err != nil {
						t.Fatal(err)
					}
				}
				// Global usage is now e2's 14: 16 more fit the capacity of 30, 17 do not.
				if d := check("e1", 17); d.Allowed {
					t.Errorf("e1 cost 17 after over-refunding: allowed (%+v), want denied: 14 + 17 > capacity 30", d.Limits)
				}
				if d := check("e1", 16); !d.Allowed || !d.Elastic {
					t.Errorf("e1 cost 16: %+v, want allowed on spare capacity (14 + 16 = 30)", d)
				}
				if d := check("e2", 1); d.Allowed {
					t.Errorf("e2 cost 1 with the capacity spent: allowed, want denied (%+v)", d.Limits)
				}
			})
		}
	})
}

func TestHistoryAndRefund(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		f := newFixture(t, t0, false, leases)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{soft(tiers.Day, 10, 50)})
		ctx := context.Background()
		check := func(cost int64, dry bool, id string) quota.Decision {
			t.Helper()
			d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: cost, DryRun: dry, RequestID: id})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		check(8, false, "")  // used 8
		check(4, false, "a") // used 12: 2 overage units
		check(4, false, "a") // replay: not history
		check(9, true, "")   // dry run: not history
		check(4, false, "")  // denied (12+4 > 15)
		check(4, false, "")  // denied

		res, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 3, RequestID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if usage := res.Usage; len(usage) != 1 || usage[0].Used != 9 || usage[0].Overage != 0 || usage[0].Refunded != 3 || res.Refunded != 3 {
			t.Errorf("refund = %+v, want 3 refunded, used 9", res)
		}
		res, err = f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 3, RequestID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Refunded != 0 || res.Usage[0].Refunded != 0 || res.Usage[0].Used != 9 {
			t.Errorf("replayed refund = %+v, want nothing refunded again, used 9", res)
		}
		days, err := f.engine.History(ctx, "acme", "", t0.AddDate(0, 0, -1), t0)
		if err != nil {
			t.Fatal(err)
		}
		want := quota.Day{Date: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), Metric: "api_calls", Used: 9, Overage: 0, Denied: 2}
		if len(days) != 1 || days[0] != want {
			t.Errorf("history = %+v, want [%+v]", days, want)
		}
		// A refund never goes below zero.
		res, _ = f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: 1000})
		if res.Usage[0].Used != 0 || res.Refunded != 9 || res.Usage[0].Refunded != 9 {
			t.Errorf("a refund of 1000 against 9 used = %+v, want 9 refunded, used 0", res)
		}
	})
}

func TestResetZeroesShortAndLong(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		f := acmeFixture(t, leases, []tiers.Limit{hard(tiers.Minute, 5), hard(tiers.Day, 5)}, "api_calls")
		ctx := context.Background()
		if d, _ := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 5}); !d.Allowed {
			t.Fatal("first check denied")
		}
		if err := f.engine.Reset(ctx, "ops", "acme", "api_calls"); err != nil {
			t.Fatal(err)
		}
		_, usage, err := f.engine.Usage(ctx, "acme", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range usage {
			if u.Used != 0 {
				t.Errorf("%s used = %d after reset, want 0", u.Window, u.Used)
			}
		}
		if err := f.engine.Reset(ctx, "ops", "acme", "nope"); !errors.Is(err, tiers.ErrMetricNotFound) {
			t.Errorf("reset of an undeclared metric: err = %v", err)
		}
	})
}

func TestEvictIdleKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, false)
	f.catalog.PutMetric("api_calls", map[tiers.Window]int64{tiers.Second: 1000})
	for i := range 50 {
		id := fmt.Sprintf("c%d", i)
		f.catalog.PutCustomer(id, tiers.Anchor{}, []tiers.Limit{hard(tiers.Second, 5), hard(tiers.Minute, 50)})
		if _, err := f.engine.Check(context.Background(), quota.Request{Customer: id, Metric: "api_calls", Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.engine.Stats().ShortKeys; got != 101 {
		t.Fatalf("short keys = %d, want 101 (2 per customer + 1 global)", got)
	}
	f.clock.Advance(time.Minute)
	if n := f.engine.EvictIdle(); n != 51 {
		t.Errorf("evicted %d after a minute, want the 51 second-window keys", n)
	}
	f.clock.Advance(2 * time.Minute)
	f.engine.EvictIdle()
	if got := f.engine.Stats().ShortKeys; got != 0 {
		t.Errorf("short keys = %d after three idle minutes, want 0", got)
	}
}

// A customer without a limit in a window with capacity has no counter
// there: its refunds give the metric's global usage nothing back, as its
// share of it is not known.
func TestRefundWithoutCounterGivesGlobalNothing(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, w := range []tiers.Window{tiers.Second, tiers.Day} {
			t.Run(w.String(), func(t *testing.T) {
				f := newFixture(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), false, leases)
				f.catalog.PutMetric("api_calls", map[tiers.Window]int64{w: 10})
				f.catalog.PutCustomer("free", tiers.Anchor{}, nil)
				f.catalog.PutCustomer("el", tiers.Anchor{}, []tiers.Limit{elastic(w, 0, nil)})
				ctx := context.Background()
				check := func(customer string, cost int64) bool {
					t.Helper()
					d, err := f.engine.Check(ctx, quota.Request{Customer: customer, Metric: "api_calls", Cost: cost})
					if err != nil {
						t.Fatal(err)
					}
					return d.Allowed
				}
				if !check("free", 6) {
					t.Fatal("a customer without limits denied")
				}
				if _, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "free", Metric: "api_calls", Cost: 6}); err != nil {
					t.Fatal(err)
				}
				if check("el", 5) {
					t.Errorf("el cost 5 admitted: the refund gave global usage back units of an unknown share (6 + 5 > 10)")
				}
				if !check("el", 4) {
					t.Errorf("el cost 4 denied: 6 + 4 fits the capacity of 10")
				}
			})
		}
	})
}

// A refund says how many units it took back: from each window, min(cost,
// its count); in all, the most any window gave back.
func TestRefundSaysWhatWentBack(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		f := newFixture(t, t0, false, leases)
		f.catalog.PutMetric("api_calls", nil)
		f.catalog.PutMetric("exports", nil)
		f.catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 100), hard(tiers.Day, 1000)})
		ctx := context.Background()
		for _, tt := range []struct {
			name         string
			advance      time.Duration
			check        int64 // units checked before the refund
			refund       int64
			want         int64 // refunded
			minute, day  int64 // refunded from each window
			usedM, usedD int64 // used after
		}{
			{"less than used", 0, 5, 2, 2, 2, 2, 3, 3},
			{"windows hold different counts", 2 * time.Minute, 4, 6, 6, 4, 6, 0, 1},
			{"1000 against 1 used", 0, 0, 1000, 1, 0, 1, 0, 0},
			{"nothing used", 0, 0, 5, 0, 0, 0, 0, 0},
		} {
			f.clock.Advance(tt.advance)
			if tt.check > 0 {
				if d, err := f.engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: tt.check}); err != nil || !d.Allowed {
					t.Fatalf("%s: check %d: %+v, %v", tt.name, tt.check, d, err)
				}
			}
			res, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "api_calls", Cost: tt.refund})
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if len(res.Usage) != 2 {
				t.Fatalf("%s: usage %+v, want minute and day", tt.name, res.Usage)
			}
			m, d := res.Usage[0], res.Usage[1]
			got := []int64{res.Refunded, m.Refunded, d.Refunded, m.Used, d.Used}
			want := []int64{tt.want, tt.minute, tt.day, tt.usedM, tt.usedD}
			if !slices.Equal(got, want) {
				t.Errorf("%s: refunded, from minute, from day, used minute, used day = %v, want %v", tt.name, got, want)
			}
		}
		// Today's history loses what went back, not what was asked for: a
		// customer limited by the minute alone used 500 units, then 9 in a
		// later minute; a refund of 1000 gives the 9 back, and the day's
		// history keeps the 500.
		f.catalog.PutCustomer("globex", tiers.Anchor{}, []tiers.Limit{hard(tiers.Minute, 1000)})
		for _, cost := range []int64{500, 9} {
			if d, err := f.engine.Check(ctx, quota.Request{Customer: "globex", Metric: "api_calls", Cost: cost}); err != nil || !d.Allowed {
				t.Fatalf("check %d: %+v, %v", cost, d, err)
			}
			f.clock.Advance(2 * time.Minute)
		}
		f.clock.Advance(-time.Minute) // back in the minute of the 9
		res, err := f.engine.Refund(ctx, quota.RefundRequest{Customer: "globex", Metric: "api_calls", Cost: 1000})
		if err != nil || res.Refunded != 9 {
			t.Fatalf("refund of 1000 = %+v, %v; want 9 refunded", res, err)
		}
		if err := f.engine.FlushHistory(ctx); err != nil {
			t.Fatal(err)
		}
		today := t0.Truncate(24 * time.Hour)
		if days, err := f.history.FindHistory(ctx, "globex", "api_calls", today, today); err != nil || len(days) != 1 || days[0].Used != 500 {
			t.Errorf("history after the refund = %+v, %v; want used 500", days, err)
		}

		// A metric without a limit has no window to give back to.
		res, err = f.engine.Refund(ctx, quota.RefundRequest{Customer: "acme", Metric: "exports", Cost: 5})
		if err != nil {
			t.Fatal(err)
		}
		if res.Refunded != 0 || len(res.Usage) != 0 {
			t.Errorf("refund of a metric without limits = %+v, want 0 refunded, no usage", res)
		}
	})
}

// silentLedger is a store that went silent while silent is set: every
// call that reaches it hangs until its context ends, or, with slow, is
// answered after slow (a slow store). entered, if not nil, hears of each
// call that hangs.
type silentLedger struct {
	*quotafake.Ledger
	silent  atomic.Bool
	slow    time.Duration
	entered chan struct{}
}

func (s *silentLedger) hang(ctx context.Context) error {
	if !s.silent.Load() {
		return nil
	}
	select {
	case s.entered <- struct{}{}:
	default:
	}
	var answer <-chan time.Time // nil: never, the store is silent
	if s.slow > 0 {
		answer = time.After(s.slow)
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", tiers.ErrUnavailable, ctx.Err())
	case <-answer:
		return nil
	}
}

func (s *silentLedger) Lease(ctx context.Context, r []lease.Request) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.Ledger.Lease(ctx, r)
}

func (s *silentLedger) Take(ctx context.Context, cs []quota.Charge) (bool, error) {
	if err := s.hang(ctx); err != nil {
		return false, err
	}
	return s.Ledger.Take(ctx, cs)
}

// A check waits for a silent store only as long as the store timeout, then
// is answered as the failure policy says, with leases and without; and a
// check whose client went away meanwhile is not cut short before.
func TestSilentStoreWaitsAtMostTheStoreTimeout(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, leases bool) {
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("closed=%v", closed), func(t *testing.T) {
				ledger := &silentLedger{Ledger: quotafake.NewLedger()}
				catalog := quotafake.NewCatalog()
				catalog.PutMetric("api_calls", nil)
				catalog.PutCustomer("acme", tiers.Anchor{}, []tiers.Limit{hard(tiers.Day, 100)})
				// Each check of the silent store waits out the store
				// timeout; the check once it answers must not reach it,
				// which a busy machine could make it do in milliseconds.
				clock := quotafake.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
				engine := quota.New(quota.Options{Catalog: catalog, Counts: ledger, Requests: ledger, Maintenance: ledger, Audits: ledger,
					History: quotafake.NewHistory(), Clock: clock, FailClosed: closed, Leases: leasesOf(leases, ledger, clock), StoreTimeout: time.Second})
				ledger.silent.Store(true)
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // the client went away: the store timeout still decides
				d, err := engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
				switch {
				case closed && !errors.Is(err, tiers.ErrUnavailable):
					t.Errorf("fail closed: %+v, %v; want ErrUnavailable", d, err)
				case !closed && (err != nil || !d.Allowed || !d.Degraded):
					t.Errorf("fail open: %+v, %v; want allowed, degraded", d, err)
				}
				if !engine.StoreDown() {
					t.Error("StoreDown() = false after a check could not reach the store")
				}
				ledger.silent.Store(false)
				// The client of this check is gone too: its store calls are
				// made all the same.
				d, err = engine.Check(ctx, quota.Request{Customer: "acme", Metric: "api_calls", Cost: 1})
				if err != nil || !d.Allowed || d.Degraded || len(d.Limits) != 1 || d.Limits[0].Used != 1 {
					t.Errorf("once the store answers: %+v, %v; want allowed, not degraded, used 1", d, err)
				}
			})
		}
	})
}
