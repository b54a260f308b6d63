package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/billing"
	"github.com/quotad/quotad/internal/quota/quotafake"
)

// zoneStack is the statements' stack (MustStatementStack) with leases: the
// engine serves long windows from them, as run wires it.
type zoneStack struct {
	*inProcess
}

func mustZoneStack(t *testing.T, start time.Time) *zoneStack {
	t.Helper()
	return &zoneStack{mustInProcess(t, stackOptions{clock: quotafake.NewClock(start), leases: true, billing: true, whatIf: true})}
}

// do sends a request, failing the test on a 5xx.
func (s *zoneStack) do(method, path, body string) *httptest.ResponseRecorder {
	s.t.Helper()
	rec := s.inProcess.do(method, path, body, "")
	if rec.Code >= 500 {
		s.t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	return rec
}

// zoneWindow is a window of an answer.
type zoneWindow struct {
	Window  string
	Used    int64
	ResetAt time.Time `json:"reset_at"`
}

// check makes a check of cost units of api_calls for customer at at, which
// must be allowed, and returns its windows by name and its RateLimit
// headers.
func (s *zoneStack) check(at time.Time, customer string, cost int) (map[string]zoneWindow, http.Header) {
	s.t.Helper()
	s.clock.Set(at)
	rec := s.do(http.MethodPost, "/v1/check", fmt.Sprintf(`{"customer":%q,"metric":"api_calls","cost":%d}`, customer, cost))
	if rec.Code != http.StatusOK {
		s.t.Fatalf("check at %s: %d %s", at.Format(time.RFC3339), rec.Code, rec.Body)
	}
	var a struct{ Limits []zoneWindow }
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		s.t.Fatal(err)
	}
	return byWindow(a.Limits), rec.Header()
}

// usage returns the customer's usage windows by name.
func (s *zoneStack) usage(customer string) map[string]zoneWindow {
	s.t.Helper()
	var u struct{ Usage []zoneWindow }
	if err := json.Unmarshal(s.do(http.MethodGet, "/v1/customers/"+customer+"/usage", "").Body.Bytes(), &u); err != nil {
		s.t.Fatal(err)
	}
	return byWindow(u.Usage)
}

func byWindow(ws []zoneWindow) map[string]zoneWindow {
	out := map[string]zoneWindow{}
	for _, w := range ws {
		out[w.Window] = w
	}
	return out
}

// zonePlan limits api_calls by the hour, day, week and month, the day
// the tightest: the RateLimit headers describe it.
const zonePlan = `/v1/plans/pro {"name":"Pro","price":{"amount_cents":0,"currency":"USD","interval":"month"},"limits":[
	{"metric":"api_calls","window":"hour","limit":500},
	{"metric":"api_calls","window":"day","limit":100},
	{"metric":"api_calls","window":"week","limit":1000},
	{"metric":"api_calls","window":"month","limit":10000}]}`

// The days that change daylight saving time in Europe/Berlin and
// America/New_York, through the engine with leases over PostgreSQL on a
// manual clock: a 23-hour and a 25-hour day, each one window that counts
// the units of that local day once (and the usage history's day with
// them), ends at the next local midnight, and says so in UTC (reset_at,
// the usage's, RateLimit-Policy's w); the check an instant later is in
// the next day, and week, window. Hours stay on UTC's full hours.
func TestTimeZoneDSTDays(t *testing.T) {
	t.Parallel()
	s := mustZoneStack(t, ts("2026-01-01T00:00:00Z"))
	s.write(`/v1/metrics/api_calls {}`, zonePlan)
	tests := []struct {
		customer, zone string
		date           string // the local date
		start, end     string // its window, in UTC
		hours          int
		across         string // an instant across the change
	}{
		{"berlin-spring", "Europe/Berlin", "2026-03-29", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z", 23, "2026-03-29T01:30:00Z"},
		{"berlin-autumn", "Europe/Berlin", "2026-10-25", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 25, "2026-10-25T01:30:00Z"},
		{"new-york-spring", "America/New_York", "2026-03-08", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 23, "2026-03-08T07:30:00Z"},
		{"new-york-autumn", "America/New_York", "2026-11-01", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", 25, "2026-11-01T06:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.customer, func(t *testing.T) {
			start, end := ts(tt.start), ts(tt.end)
			s.clock.Set(start.Add(-48 * time.Hour))
			s.write(fmt.Sprintf(`/v1/customers/%s {"plan":"pro","time_zone":%q}`, tt.customer, tt.zone))

			// The last second of the day before: its own window.
			w, _ := s.check(start.Add(-time.Second), tt.customer, 1)
			if got := w["day"]; got.Used != 1 || !got.ResetAt.Equal(start) {
				t.Errorf("the day before: day window %+v, want used 1, reset at %s", got, start)
			}
			// The day: its first instant, across the change, its last second.
			used := int64(0)
			for i, at := range []time.Time{start, ts(tt.across), end.Add(-time.Second)} {
				w, h := s.check(at, tt.customer, i+2)
				used += int64(i + 2)
				if got := w["day"]; got.Used != used || !got.ResetAt.Equal(end) {
					t.Errorf("check at %s: day window %+v, want used %d, reset at %s", at.Format(time.RFC3339), got, used, end)
				}
				if got, want := w["hour"].ResetAt, at.Truncate(time.Hour).Add(time.Hour); !got.Equal(want) {
					t.Errorf("check at %s: the hour resets at %s, want %s (UTC's full hour)", at.Format(time.RFC3339), got, want)
				}
				if policy := h.Get("RateLimit-Policy"); !strings.Contains(policy, fmt.Sprintf(`"api_calls/day";q=100;w=%d`, tt.hours*3600)) {
					t.Errorf("check at %s: RateLimit-Policy %q, want the day's w=%d", at.Format(time.RFC3339), policy, tt.hours*3600)
				}
				// (Its t counts from the server's wall clock, not this test's.)
				if rl, want := h.Get("RateLimit"), fmt.Sprintf(`"api_calls/day";r=%d;t=`, 100-used); !strings.HasPrefix(rl, want) {
					t.Errorf("check at %s: RateLimit %q, want %q…", at.Format(time.RFC3339), rl, want)
				}
			}
			if got := s.usage(tt.customer)["day"]; got.Used != used || !got.ResetAt.Equal(end) {
				t.Errorf("usage at the day's last second: %+v, want used %d, reset at %s", got, used, end)
			}
			// The next day (and, the change being on a Sunday, week).
			w, _ = s.check(end, tt.customer, 1)
			if got := w["day"]; got.Used != 1 || !got.ResetAt.Equal(end.Add(24*time.Hour)) {
				t.Errorf("the next day: day window %+v, want used 1, reset at %s", got, end.Add(24*time.Hour))
			}
			if got := w["week"]; got.Used != 1 || !got.ResetAt.Equal(end.Add(7*24*time.Hour)) {
				t.Errorf("the next week: week window %+v, want used 1, reset at %s", got, end.Add(7*24*time.Hour))
			}
			// History counts the units of the local day on that date.
			var h struct {
				Days []struct {
					Date string
					Used int64
				}
			}
			rec := s.do(http.MethodGet, "/v1/customers/"+tt.customer+"/usage/history?from="+tt.date+"&to="+tt.date, "")
			if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || len(h.Days) != 1 || h.Days[0].Used != used {
				t.Errorf("history of %s: %s, want one day with used %d", tt.date, rec.Body, used)
			}
		})
	}
	if st := s.engine.Stats(); st.Leases.Refills == 0 {
		t.Errorf("no lease was taken: %+v", st.Leases)
	}
}

// Week and month windows start at local midnight: Monday's for a week, the
// anchor day's for a month, across a change of daylight saving time.
func TestTimeZoneWeeksAndMonths(t *testing.T) {
	t.Parallel()
	s := mustZoneStack(t, ts("2026-01-01T00:00:00Z"))
	s.write(`/v1/metrics/api_calls {}`, zonePlan,
		`/v1/customers/berlin {"plan":"pro","time_zone":"Europe/Berlin"}`,
		`/v1/customers/ny15 {"plan":"pro","time_zone":"America/New_York","billing_anchor_day":15}`)
	tests := []struct {
		name, customer, window, at string
		used                       int64
		reset                      string
	}{
		// Berlin's March ends at 00:00 CEST on April 1st, 22:00 UTC.
		{"Berlin, the last minutes of March", "berlin", "month", "2026-03-31T21:30:00Z", 1, "2026-03-31T22:00:00Z"},
		{"Berlin, April from local midnight", "berlin", "month", "2026-03-31T22:00:00Z", 1, "2026-04-30T22:00:00Z"},
		// Berlin's week from Monday 2026-04-06 00:00 CEST.
		{"Berlin, Sunday night: the week of April 1st's checks", "berlin", "week", "2026-04-05T21:59:59Z", 3, "2026-04-05T22:00:00Z"},
		{"Berlin, Monday from local midnight", "berlin", "week", "2026-04-05T22:00:00Z", 1, "2026-04-12T22:00:00Z"},
		// Day 15 at 00:00 in New York: EDT in October, EST in November.
		{"New York, the eve of the 15th", "ny15", "month", "2026-11-15T04:59:59Z", 1, "2026-11-15T05:00:00Z"},
		{"New York, the 15th from local midnight", "ny15", "month", "2026-11-15T05:00:00Z", 1, "2026-12-15T05:00:00Z"},
	}
	for _, tt := range tests {
		w, _ := s.check(ts(tt.at), tt.customer, 1)
		if got := w[tt.window]; got.Used != tt.used || !got.ResetAt.Equal(ts(tt.reset)) {
			t.Errorf("%s: %s window %+v, want used %d, reset at %s", tt.name, tt.window, got, tt.used, tt.reset)
		}
	}
	// The month before the 15th began on October 15th at 00:00 EDT.
	s.clock.Set(ts("2026-11-15T04:59:59Z"))
	var st struct {
		Period struct{ Start, End time.Time }
	}
	rec := s.do(http.MethodGet, "/v1/customers/ny15/statement?period=2026-10", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || !st.Period.Start.Equal(ts("2026-10-15T04:00:00Z")) ||
		!st.Period.End.Equal(ts("2026-11-15T05:00:00Z")) {
		t.Errorf("statement of 2026-10: %d %s, want the period 2026-10-15T04:00:00Z..2026-11-15T05:00:00Z", rec.Code, rec.Body)
	}
}

// A changed time zone takes effect for the next window: the day, week and
// month in progress keep their bounds and their counts; the first day in
// the new zone starts where the old one ends and runs to the new zone's
// midnight (shorter, here), then whole local days follow.
func TestTimeZoneChange(t *testing.T) {
	t.Parallel()
	s := mustZoneStack(t, ts("2026-11-18T09:00:00Z")) // a Wednesday
	s.write(`/v1/metrics/api_calls {}`, zonePlan, `/v1/customers/acme {"plan":"pro"}`)
	s.check(ts("2026-11-18T10:00:00Z"), "acme", 5)

	s.clock.Set(ts("2026-11-18T12:00:00Z"))
	rec := s.do(http.MethodPut, "/v1/customers/acme", `{"plan":"pro","time_zone":"Europe/Berlin"}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"time_zone":"Europe/Berlin"`) {
		t.Fatalf("PUT the zone: %d %s", rec.Code, rec.Body)
	}
	if got := s.do(http.MethodGet, "/v1/customers/acme", "").Body.String(); !strings.Contains(got, `"time_zone":"Europe/Berlin"`) {
		t.Errorf("GET after the change: %s, want its time_zone", got)
	}
	steps := []struct {
		name, at         string
		day, week, month int64
		dayEnd, weekEnd  string
		monthEnd         string
	}{
		// 23:30 in Berlin already, but the UTC day in progress goes on.
		{"the day in progress keeps its bounds and count", "2026-11-18T22:30:00Z", 6, 6, 6,
			"2026-11-19T00:00:00Z", "2026-11-23T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"the first Berlin day: from the UTC midnight to Berlin's", "2026-11-19T00:30:00Z", 1, 7, 7,
			"2026-11-19T23:00:00Z", "2026-11-23T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"then whole Berlin days", "2026-11-19T23:30:00Z", 1, 8, 8,
			"2026-11-20T23:00:00Z", "2026-11-23T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"the first Berlin week", "2026-11-23T00:30:00Z", 1, 1, 9,
			"2026-11-23T23:00:00Z", "2026-11-29T23:00:00Z", "2026-12-01T00:00:00Z"},
		{"the first Berlin month", "2026-12-01T00:30:00Z", 1, 1, 1,
			"2026-12-01T23:00:00Z", "2026-12-06T23:00:00Z", "2026-12-31T23:00:00Z"},
	}
	for _, st := range steps {
		w, _ := s.check(ts(st.at), "acme", 1)
		for _, c := range []struct {
			window string
			used   int64
			end    string
		}{{"day", st.day, st.dayEnd}, {"week", st.week, st.weekEnd}, {"month", st.month, st.monthEnd}} {
			if got := w[c.window]; got.Used != c.used || !got.ResetAt.Equal(ts(c.end)) {
				t.Errorf("%s: %s window %+v, want used %d, reset at %s", st.name, c.window, got, c.used, c.end)
			}
		}
	}
}

// A statement of a customer in New York: its period runs from local
// midnight of the anchor day to the next, the base line prorates against
// that month (local midnight to local midnight: an hour longer across the
// change back to standard time), and overage is counted by local date.
func TestTimeZoneStatement(t *testing.T) {
	t.Parallel()
	s := mustZoneStack(t, ts("2026-09-01T12:00:00Z"))
	s.write(`/v1/metrics/api_calls {}`,
		`/v1/plans/pro {"name":"Pro","price":{"amount_cents":4900,"currency":"USD","interval":"month"},"limits":[
			{"metric":"api_calls","window":"day","limit":1,"mode":"soft","overage_percent":1000,"overage_price_micros":10000}]}`,
		`/v1/customers/ny {"plan":"pro","time_zone":"America/New_York","billing_anchor_day":15}`)
	// Each check of 3 units on a day of its own is 2 units of overage.
	for _, at := range []string{
		"2026-10-15T03:30:00Z", // October 14th, 23:30 EDT: the period before
		"2026-10-15T04:30:00Z", // October 15th, 00:30 EDT: the first day
		"2026-11-15T04:30:00Z", // November 14th, 23:30 EST: the last day
		"2026-11-15T05:30:00Z", // November 15th, 00:30 EST: the next period
	} {
		s.check(ts(at), "ny", 3)
	}
	s.clock.Set(ts("2026-11-20T00:00:00Z"))
	if err := s.engine.FlushHistory(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := s.do(http.MethodGet, "/v1/customers/ny/statement?period=2026-10", "")
	var st billing.Statement
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("statement: %d %s", rec.Code, rec.Body)
	}
	if !st.Period.Start.Equal(ts("2026-10-15T04:00:00Z")) || !st.Period.End.Equal(ts("2026-11-15T05:00:00Z")) {
		t.Errorf("period = %s..%s, want 2026-10-15T04:00:00Z..2026-11-15T05:00:00Z", st.Period.Start, st.Period.End)
	}
	const secs = 31*86400 + 3600 // October 15th to November 15th, with the hour given back
	want := []billing.Line{
		{Kind: billing.KindBase, Plan: "pro", Quantity: secs, UnitPriceMicros: 49000000, AmountCents: 4900,
			Description: fmt.Sprintf("Pro, 49.00 USD per month, for %d s of the period's %d s", secs, secs)},
		{Kind: billing.KindOverage, Plan: "pro", Quantity: 4, UnitPriceMicros: 10000, AmountCents: 4,
			Description: "4 overage units of api_calls on Pro at 10000 micros (0.01 USD) each"},
	}
	if len(st.Lines) != len(want) {
		t.Fatalf("lines = %+v, want %+v", st.Lines, want)
	}
	for i := range want {
		got := st.Lines[i]
		got.Metric = nil
		if got != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, got, want[i])
		}
	}
	if st.TotalCents != 4904 {
		t.Errorf("total = %d, want 4904", st.TotalCents)
	}
}

// Bad time zones are 400s naming the field, never 5xx, and write nothing.
func TestTimeZoneBadInput(t *testing.T) {
	t.Parallel()
	s := mustZoneStack(t, ts("2026-11-18T09:00:00Z"))
	s.write(`/v1/metrics/api_calls {}`, zonePlan, `/v1/customers/acme {"plan":"pro","time_zone":"Asia/Tokyo"}`)
	for _, body := range []string{
		`{"plan":"pro","time_zone":"Mars/Olympus_Mons"}`,
		`{"plan":"pro","time_zone":""}`,
		`{"plan":"pro","time_zone":"Local"}`,
		`{"plan":"pro","time_zone":"+02:00"}`,
		`{"plan":"pro","time_zone":"../../../etc/passwd"}`,
		`{"plan":"pro","time_zone":"europe/berlin "}`,
		`{"plan":"pro","time_zone":5}`,
		`{"plan":"pro","time_zone":["UTC"]}`,
	} {
		rec := s.do(http.MethodPut, "/v1/customers/acme", body)
		var p struct {
			Code   string
			Errors []struct{ Field string }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		if rec.Code != http.StatusBadRequest || p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "time_zone" {
			t.Errorf("PUT %s: %d %s, want 400 naming time_zone", body, rec.Code, rec.Body)
		}
	}
	if got := s.do(http.MethodGet, "/v1/customers/acme", "").Body.String(); !strings.Contains(got, `"time_zone":"Asia/Tokyo"`) {
		t.Errorf("after the bad writes: %s, want the zone unchanged", got)
	}
	// Without one, a customer is in UTC; null says the same.
	for _, body := range []string{`{"plan":"pro"}`, `{"plan":"pro","time_zone":null}`} {
		if got := s.do(http.MethodPut, "/v1/customers/acme", body).Body.String(); !strings.Contains(got, `"time_zone":"UTC"`) {
			t.Errorf("PUT %s: %s, want time_zone UTC", body, got)
		}
	}
}
