package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/tiers"
)

// lifeProcess is one quotad process as run wires it, in process, over a
// shared schema and a manual clock: its own cache and engine, and its
// applying of plan changes (what the background loop calls each tick).
type lifeProcess struct {
	*inProcess
}

func mustLifeProcess(t *testing.T, schema *dbtest.Schema, clock *quotafake.Clock) *lifeProcess {
	t.Helper()
	return &lifeProcess{mustInProcess(t, stackOptions{schema: schema, clock: clock, billing: true})}
}

func (p *lifeProcess) do(method, path, body string) *httptest.ResponseRecorder {
	p.t.Helper()
	return p.inProcess.do(method, path, body, "")
}

// limit returns the day limit a dry-run check of acme's api_calls meets
// now: the plan in effect, as this process sees it.
func (p *lifeProcess) limit() int64 {
	p.t.Helper()
	rec := p.do(http.MethodPost, "/v1/check", `{"customer":"acme","metric":"api_calls","cost":1,"dry_run":true}`)
	var d struct {
		Limits []struct{ Limit int64 }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || rec.Code != http.StatusOK || len(d.Limits) != 1 {
		p.t.Fatalf("check: %d %s", rec.Code, rec.Body)
	}
	return d.Limits[0].Limit
}

// apply applies what is due now, as the background loop does.
func (p *lifeProcess) apply() []string {
	p.t.Helper()
	var changed []string
	err := tiers.ApplyDue(context.Background(), p.db.Catalog, p.clock.Now(), func(ch tiers.Change) {
		p.cache.Invalidate(ch)
		changed = append(changed, ch.Key)
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return changed
}

// A trial and a scheduled change on a manual clock, with two processes
// and a restart between: checks in every process meet the trial's limits
// until its end, the customer's plan's from that instant, the scheduled
// plan's from its instant, before any process applied them; each is
// applied once whichever processes try (at the same time, and after a
// restart), audited as quotad's at its instant, billed from it, and the
// trial's end is a trial.ended event.
func TestPlanChangesApplyOnceAtTheirInstant(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	clock := quotafake.NewClock(ts("2026-11-22T12:00:00Z"))
	a := mustLifeProcess(t, schema, clock)
	b := mustLifeProcess(t, schema, clock)
	plan := func(key string, cents, limit int) string {
		return `/v1/plans/` + key + ` {"name":"` + key + `","price":{"amount_cents":` + itoa(cents) +
			`,"currency":"USD","interval":"month"},"limits":[{"metric":"api_calls","window":"day","limit":` + itoa(limit) + `}]}`
	}
	for _, w := range []string{
		`/v1/metrics/api_calls {}`, plan("free", 0, 1), plan("pro", 3000, 3), plan("team", 6000, 6),
		`/v1/customers/acme {"plan":"free","trial":{"plan":"pro","ends_at":"2026-11-22T13:00:00Z"},` +
			`"scheduled_change":{"plan":"team","at":"2026-11-22T14:00:00Z"}}`,
	} {
		path, body, _ := strings.Cut(w, " ")
		if rec := a.do(http.MethodPut, path, body); rec.Code != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", path, rec.Code, rec.Body)
		}
	}

	step := func(at string, procs []*lifeProcess, want int64) {
		t.Helper()
		clock.Set(ts(at))
		for i, p := range procs {
			if got := p.limit(); got != want {
				t.Fatalf("at %s, process %d: limit %d, want %d", at, i, got, want)
			}
		}
	}
	// applyAll has procs apply at once; it returns how many changes of
	// customers were applied in all.
	applyAll := func(procs ...*lifeProcess) int {
		t.Helper()
		var mu sync.Mutex
		var wg sync.WaitGroup
		n := 0
		for _, p := range procs {
			wg.Go(func() {
				got := len(p.apply())
				mu.Lock()
				n += got
				mu.Unlock()
			})
		}
		wg.Wait()
		return n
	}

	step("2026-11-22T12:59:59Z", []*lifeProcess{a, b}, 3) // the trial's pro
	if n := applyAll(a, b); n != 0 {
		t.Fatalf("%d changes applied before their instant", n)
	}
	step("2026-11-22T13:00:00Z", []*lifeProcess{a, b}, 1) // free, before anyone applied it
	if n := applyAll(a, b); n != 1 {
		t.Fatalf("the trial's end applied %d times, want once", n)
	}
	step("2026-11-22T13:30:00Z", []*lifeProcess{a, b}, 1)

	// a restarts: a new process, its cache cold. The loop runs late.
	c := mustLifeProcess(t, schema, clock)
	step("2026-11-22T13:59:59Z", []*lifeProcess{b, c}, 1)
	step("2026-11-22T14:00:05Z", []*lifeProcess{b, c}, 6) // team since 14:00:00
	if n := applyAll(b, c); n != 1 {
		t.Fatalf("the scheduled change applied %d times, want once", n)
	}
	if n := applyAll(b, c); n != 0 {
		t.Fatalf("applied again: %d", n)
	}
	step("2026-11-22T14:00:06Z", []*lifeProcess{b, c}, 6)

	var cu tiers.Customer
	if rec := c.do(http.MethodGet, "/v1/customers/acme", ""); json.Unmarshal(rec.Body.Bytes(), &cu) != nil ||
		cu.Plan != "team" || cu.Trial != nil || cu.ScheduledChange != nil || cu.Version != 3 {
		t.Fatalf("customer after both: %s", rec.Body)
	}

	// The audit log: quotad's two changes, at their instants.
	rec := c.do(http.MethodGet, "/v1/audit?customer=acme", "")
	var audit struct {
		Events []tiers.AuditEvent `json:"events"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &audit); err != nil || len(audit.Events) != 3 {
		t.Fatalf("audit: %s", rec.Body)
	}
	for i, want := range []struct{ actor, at string }{
		{"quotad", "2026-11-22T14:00:00Z"}, {"quotad", "2026-11-22T13:00:00Z"}, {"anonymous", "2026-11-22T12:00:00Z"},
	} {
		if e := audit.Events[i]; e.Actor != want.actor || !e.At.Equal(ts(want.at)) {
			t.Errorf("audit event %d: %s at %s, want %s at %s", i, e.Actor, e.At, want.actor, want.at)
		}
	}

	// One trial.ended event, at the trial's end.
	var events int
	var plan0, next string
	var at time.Time
	if err := schema.Pool.QueryRow(context.Background(),
		`SELECT count(*) OVER (), plan_key, next_plan_key, occurred_at FROM usage_events WHERE type = 'trial.ended'`).
		Scan(&events, &plan0, &next, &at); err != nil || events != 1 || plan0 != "pro" || next != "free" || !at.Equal(ts("2026-11-22T13:00:00Z")) {
		t.Fatalf("trial.ended events: %d %s→%s at %s (%v), want one pro→free at 13:00", events, plan0, next, at, err)
	}

	// Billed: pro at no price during the trial, free, then team from
	// 14:00: team's 60.00 for the 8 days and 10 hours of November left.
	clock.Set(ts("2026-12-02T00:00:00Z"))
	rec = c.do(http.MethodGet, "/v1/customers/acme/statement?period=2026-11", "")
	var st struct {
		Lines []struct {
			Plan        string `json:"plan"`
			Quantity    int64  `json:"quantity"`
			AmountCents int64  `json:"amount_cents"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || len(st.Lines) != 3 {
		t.Fatalf("statement: %d %s", rec.Code, rec.Body)
	}
	for i, want := range []struct {
		plan            string
		seconds, amount int64
	}{
		{"pro", 3600, 0}, {"free", 3600, 0}, {"team", 8*86400 + 10*3600, 1683}, // 6000 × 727200/2592000 = 1683.3
	} {
		if l := st.Lines[i]; l.Plan != want.plan || l.Quantity != want.seconds || l.AmountCents != want.amount {
			t.Errorf("line %d: %+v, want %s for %d s, %d cents", i, l, want.plan, want.seconds, want.amount)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// quotad as run applies a trial's end by itself, in the background: the
// customer read back no longer has it, and the audit log says quotad did
// it, at the trial's end.
func TestTrialEndAppliedInTheBackground(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/free", `{"name":"Free"}`)
	s.mustDo(http.StatusCreated, "PUT", "/v1/plans/pro", `{"name":"Pro"}`)
	ends := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
	s.mustDo(http.StatusCreated, "PUT", "/v1/customers/acme",
		`{"plan":"free","trial":{"plan":"pro","ends_at":"`+ends.Format(time.RFC3339)+`"}}`)
	eventually(t, func() bool { return s.mustDo(http.StatusOK, "GET", "/v1/customers/acme", "").JSON(t)["trial"] == nil },
		"the trial's end to be applied")
	events := s.mustDo(http.StatusOK, "GET", "/v1/audit?customer=acme", "").JSON(t)["events"].([]any)
	last := events[0].(map[string]any)
	if last["actor"] != "quotad" || last["at"] != ends.Format(time.RFC3339) {
		t.Errorf("the last audit event = %v, want quotad's at %s", last, ends.Format(time.RFC3339))
	}
}
