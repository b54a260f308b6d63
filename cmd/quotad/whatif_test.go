package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// attempts makes n checks of a unit of api_calls for customer at t and
// fails the test unless exactly allowed of them are admitted.
func (s *inProcess) attempts(t time.Time, customer string, n, allowed int) {
	s.t.Helper()
	s.clock.Set(t)
	got := 0
	for range n {
		rec := s.do(http.MethodPost, "/v1/check", `{"customer":"`+customer+`","metric":"api_calls","cost":1}`, "")
		switch rec.Code {
		case http.StatusOK:
			got++
		case http.StatusTooManyRequests:
		default:
			s.t.Fatalf("check at %s: %d %s", t, rec.Code, rec.Body)
		}
	}
	if got != allowed {
		s.t.Fatalf("%s at %s: %d of %d checks admitted, want %d", customer, t, got, n, allowed)
	}
}

// What-if over a history written by real checks on three days, against
// proposed limits tighter than the plan's, with every figure worked out
// by hand below.
func TestWhatIfEndToEnd(t *testing.T) {
	t.Parallel()
	s := MustStatementStack(t, ts("2026-03-01T09:00:00Z"))
	s.at(ts("2026-03-01T09:00:00Z"),
		`/v1/metrics/api_calls {}`,
		`/v1/plans/free {"limits":[{"metric":"api_calls","window":"day","limit":15}]}`,
		`/v1/plans/pro {"limits":[{"metric":"api_calls","window":"day","limit":100}]}`,
		`/v1/customers/a {"plan":"free"}`,
		`/v1/customers/b {"plan":"free"}`,
		`/v1/customers/c {"plan":"pro"}`)
	// What happened: a asked 12, 17 (2 denied by the day's 15) and 5;
	// b 10, 10 and 12; c, on Pro, 30 on the first day.
	s.attempts(ts("2026-03-01T10:00:00Z"), "a", 12, 12)
	s.attempts(ts("2026-03-01T10:00:00Z"), "b", 10, 10)
	s.attempts(ts("2026-03-01T10:00:00Z"), "c", 30, 30)
	s.attempts(ts("2026-03-02T10:00:00Z"), "a", 17, 15)
	s.attempts(ts("2026-03-02T10:00:00Z"), "b", 10, 10)
	s.attempts(ts("2026-03-03T10:00:00Z"), "a", 5, 5)
	s.attempts(ts("2026-03-03T10:00:00Z"), "b", 12, 12)
	s.clock.Set(ts("2026-03-04T00:00:00Z"))
	if err := s.engine.FlushHistory(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Proposed: 10 a day, hard; 20 a month, soft up to 30 at 1000 micros
	// an overage unit; 5 a minute (not replayable from daily history).
	const limits = `[{"metric":"api_calls","window":"day","limit":10},` +
		`{"metric":"api_calls","window":"month","limit":20,"mode":"soft","overage_percent":50,"overage_price_micros":1000},` +
		`{"metric":"api_calls","window":"minute","limit":5}]`
	// a: day 1, 12 asked: 10 admitted, 2 denied, the day over; the month
	// at 10. Day 2, 17 asked (15 used, 2 denied): 10 admitted, 7 denied,
	// the day over; the month at 20. Day 3, 5 asked: all admitted, all
	// beyond the month's 20: 5 overage units, 5000 micros.
	// b: days 1 and 2, 10 each: admitted, the day full but nothing denied;
	// the month at 20. Day 3, 12 asked: 10 admitted (the month at 30, its
	// ceiling: full too), 2 denied: the day and the month over; 10
	// overage units, 10000 micros.
	// c is on Pro: not replayed unless named.
	const notReplayed = `"not_replayed":[{"metric":"api_calls","window":"minute","reason":"history is kept by day: a window shorter than a day cannot be replayed"}]`
	const free = `{"plan":"free","from":"2026-03-01","to":"2026-03-03","price":{"amount_cents":900,"currency":"USD","interval":"month"},` +
		`"customers":[` +
		`{"customer":"a","periods_over":2,"denied_units":9,"overage_units":5,"overage_revenue_micros":5000,"recorded":{"denied_units":2,"overage_units":0}},` +
		`{"customer":"b","periods_over":2,"denied_units":2,"overage_units":10,"overage_revenue_micros":10000,"recorded":{"denied_units":0,"overage_units":0}}],` +
		`"total":{"periods_over":4,"denied_units":11,"overage_units":15,"overage_revenue_micros":15000},` +
		`"recorded":{"denied_units":2,"overage_units":0},"customers_replayed":2,` + notReplayed + `}`
	// c, named: day 1, 30 asked: 10 admitted, 20 denied, the day over.
	const named = `{"plan":"free","from":"2026-03-01","to":"2026-03-03","price":{"amount_cents":0,"currency":"USD","interval":"month"},` +
		`"customers":[{"customer":"c","periods_over":1,"denied_units":20,"overage_units":0,"overage_revenue_micros":0,"recorded":{"denied_units":0,"overage_units":0}}],` +
		`"total":{"periods_over":1,"denied_units":20,"overage_units":0,"overage_revenue_micros":0},` +
		`"recorded":{"denied_units":0,"overage_units":0},"customers_replayed":1,` + notReplayed + `}`
	// Day 2 alone: a's 17 asked, 10 admitted; b's 10, nothing denied.
	const day2 = `{"plan":"free","from":"2026-03-02","to":"2026-03-02","price":{"amount_cents":0,"currency":"USD","interval":"month"},` +
		`"customers":[{"customer":"a","periods_over":1,"denied_units":7,"overage_units":0,"overage_revenue_micros":0,"recorded":{"denied_units":2,"overage_units":0}}],` +
		`"total":{"periods_over":1,"denied_units":7,"overage_units":0,"overage_revenue_micros":0},` +
		`"recorded":{"denied_units":2,"overage_units":0},"customers_replayed":2,` + notReplayed + `}`

	tests := []struct {
		name   string
		body   string
		status int
		want   string // the exact body, or a problem's code
	}{
		{"the plan's customers", `{"plan":"free","limits":` + limits + `,"price":{"amount_cents":900},"from":"2026-03-01","to":"2026-03-03"}`, 200, free},
		{"named customers", `{"plan":"free","limits":` + limits + `,"from":"2026-03-01","to":"2026-03-03","customers":["c"]}`, 200, named},
		{"one day", `{"plan":"free","limits":` + limits + `,"from":"2026-03-02","to":"2026-03-02"}`, 200, day2},
		{"a bad date", `{"plan":"free","limits":` + limits + `,"from":"2026-3-1","to":"2026-03-03"}`, 400, "validation_failed"},
		{"from after to", `{"plan":"free","limits":` + limits + `,"from":"2026-03-04","to":"2026-03-03"}`, 400, "validation_failed"},
		{"more days than a history query reads", `{"plan":"free","limits":` + limits + `,"from":"2025-01-01","to":"2026-01-02"}`, 400, "validation_failed"},
		{"a bad limit", `{"plan":"free","limits":[{"metric":"api_calls","window":"fortnight","limit":1}],"from":"2026-03-01","to":"2026-03-03"}`, 400, "validation_failed"},
		{"a negative limit", `{"plan":"free","limits":[{"metric":"api_calls","window":"day","limit":-1}],"from":"2026-03-01","to":"2026-03-03"}`, 400, "validation_failed"},
		{"an unknown plan", `{"plan":"gold","limits":` + limits + `,"from":"2026-03-01","to":"2026-03-03"}`, 404, "plan_not_found"},
		{"an unknown customer", `{"plan":"free","limits":` + limits + `,"from":"2026-03-01","to":"2026-03-03","customers":["ghost"]}`, 404, "customer_not_found"},
		{"not JSON", `{"plan":`, 400, "validation_failed"},
	}
	for _, tt := range tests {
		rec := s.do(http.MethodPost, "/v1/what-if", tt.body, "")
		got := string(trimNewline(rec.Body.Bytes()))
		if rec.Code >= 400 {
			var p struct{ Code string }
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			got = p.Code
		}
		if rec.Code != tt.status || got != tt.want {
			t.Errorf("%s: answered %d\n%s\nwant %d\n%s", tt.name, rec.Code, got, tt.status, tt.want)
		}
	}
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}
