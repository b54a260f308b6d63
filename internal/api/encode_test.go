package api

import (
	"bytes"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// checkResponse is the body of a check's answer, as encoding/json writes
// it: what appendCheckAnswer writes by hand. A check of one metric names
// it and its cost; a check of items lists them instead.
type checkResponse struct {
	Allowed    bool          `json:"allowed"`
	Customer   string        `json:"customer"`
	Metric     *string       `json:"metric,omitempty"`
	Cost       *int64        `json:"cost,omitempty"`
	Overage    bool          `json:"overage"`
	Elastic    bool          `json:"elastic"`
	RetryAfter *int64        `json:"retry_after"`
	Degraded   bool          `json:"degraded"`
	Granted    int64         `json:"granted,omitempty"`
	Limits     []windowState `json:"limits"`
	Items      []itemState   `json:"items,omitempty"`
	// Code and Detail are set when the check is denied.
	Code    string       `json:"code,omitempty"`
	Detail  string       `json:"detail,omitempty"`
	Upgrade *upgradeBody `json:"upgrade,omitempty"`
}

type windowState struct {
	Metric    string       `json:"metric"`
	Subject   string       `json:"subject,omitempty"`
	Window    tiers.Window `json:"window"`
	Limit     int64        `json:"limit"`
	Used      int64        `json:"used"`
	Remaining int64        `json:"remaining"`
	ResetAt   *time.Time   `json:"reset_at"`
	Mode      tiers.Mode   `json:"mode"`
	State     quota.State  `json:"state"`
}

type itemState struct {
	Metric    string        `json:"metric"`
	Subject   string        `json:"subject,omitempty"`
	Cost      int64         `json:"cost"`
	Allowed   bool          `json:"allowed"`
	Remaining *int64        `json:"remaining"`
	Limits    []windowState `json:"limits"`
}

// newCheckResponse is the body of a check's answer.
func newCheckResponse(d quota.Decision) checkResponse {
	resp := checkResponse{
		Allowed: d.Allowed, Customer: d.Customer,
		Overage: d.Overage, Elastic: d.Elastic, Degraded: d.Degraded, Granted: d.Granted,
		Limits: newWindowStates(d.Limits, d.Metric),
	}
	if d.Items == nil {
		resp.Metric, resp.Cost = &d.Metric, &d.Cost
	} else {
		resp.Items = make([]itemState, len(d.Items))
		for i, it := range d.Items {
			resp.Items[i] = itemState{Metric: it.Metric, Subject: it.Subject, Cost: it.Cost, Allowed: it.Allowed,
				Remaining: it.Remaining, Limits: newWindowStates(it.Limits, it.Metric)}
		}
	}
	if !d.Never {
		ra := d.RetryAfter
		resp.RetryAfter = &ra
	}
	switch {
	case d.Allowed:
	case d.Never:
		resp.Code, resp.Detail = codeCostExceedsLimit, neverDetail(&d)
	default:
		resp.Code, resp.Detail = codeQuotaExceeded, deniedDetail(&d)
	}
	resp.Upgrade = newUpgradeBody(d.Upgrade)
	return resp
}

// newWindowStates is the limits of an answer: each window names its
// metric, metric where it names none.
func newWindowStates(ws []quota.WindowResult, metric string) []windowState {
	out := make([]windowState, len(ws))
	for i, w := range ws {
		out[i] = windowState{Metric: w.Metric, Subject: w.Subject, Window: w.Window, Limit: w.Limit, Used: w.Used,
			Remaining: w.Remaining, ResetAt: resetAt(w.ResetAt), Mode: w.Mode, State: w.State}
		if w.Metric == "" {
			out[i].Metric = metric
		}
	}
	return out
}

// encodeWithJSON is how the check answer was written before
// appendCheckAnswer: json.Encoder over newCheckResponse.
func encodeWithJSON(d quota.Decision) ([]byte, error) {
	var buf bytes.Buffer
	err := writeJSONBody(&buf, newCheckResponse(d))
	return buf.Bytes(), err
}

// assertSameAnswer checks that appendCheckAnswer writes exactly what
// encoding/json writes for d, or declines exactly when encoding/json fails.
func assertSameAnswer(t *testing.T, d quota.Decision) {
	t.Helper()
	want, err := encodeWithJSON(d)
	prefix := []byte("prefix")
	got, ok := appendCheckAnswer(prefix, &d)
	switch {
	case err != nil && ok:
		t.Fatalf("encoding/json fails (%v) but appendCheckAnswer writes %s for %+v", err, got, d)
	case err == nil && !ok:
		t.Fatalf("appendCheckAnswer declines what encoding/json writes as %s", want)
	case !ok && string(got) != "prefix":
		t.Fatalf("appendCheckAnswer declined but changed dst to %q", got)
	case ok && !bytes.Equal(got[len(prefix):], want):
		t.Fatalf("appendCheckAnswer writes\n%s\nencoding/json\n%s", got[len(prefix):], want)
	}
}

func TestAppendCheckAnswer(t *testing.T) {
	reset := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
	window := func(w tiers.Window, m tiers.Mode, s quota.State, at time.Time) quota.WindowResult {
		return quota.WindowResult{Window: w, Mode: m, Limit: 100, Used: 40, Remaining: 60, ResetAt: at, State: s, Length: time.Second}
	}
	ok := window(tiers.Second, tiers.Hard, quota.StateOK, reset)
	denied := benchDecision
	denied.Allowed, denied.RetryAfter = false, 17
	denied.Limits = []quota.WindowResult{ok, window(tiers.Day, tiers.Hard, quota.StateExceeded, reset.Add(14*time.Hour))}
	never := denied
	never.Never, never.RetryAfter = true, 0
	degraded := benchDecision
	degraded.Degraded, degraded.Limits = true, degraded.Limits[:1]
	noLimits := benchDecision
	noLimits.Limits = nil
	emptyLimits := benchDecision
	emptyLimits.Limits = []quota.WindowResult{}
	every := benchDecision
	every.Overage, every.Elastic, every.Cost, every.RetryAfter = true, true, 1_000_000_000, -3
	every.Limits = nil
	for w := tiers.Second; w <= tiers.Total; w++ {
		for m := tiers.Hard; m <= tiers.Elastic; m++ {
			for _, s := range []quota.State{quota.StateOK, quota.StateOverage, quota.StateElastic, quota.StateExceeded} {
				every.Limits = append(every.Limits, window(w, m, s, reset))
			}
		}
	}
	named := func(customer, metric string, state quota.State) quota.Decision {
		d := benchDecision
		d.Customer, d.Metric = customer, metric
		d.Limits = []quota.WindowResult{window(tiers.Minute, tiers.Soft, state, reset)}
		return d
	}
	at := func(tm time.Time) quota.Decision {
		d := benchDecision
		d.Limits = []quota.WindowResult{window(tiers.Month, tiers.Elastic, quota.StateElastic, tm)}
		return d
	}
	numbers := benchDecision
	numbers.Limits = []quota.WindowResult{{Window: tiers.Week, Mode: tiers.Soft, Limit: 9007199254740991,
		Used: -9223372036854775808, Remaining: 9223372036854775807, ResetAt: reset, State: quota.StateOverage}}
	badWindow := benchDecision
	badWindow.Limits = []quota.WindowResult{window(0, tiers.Hard, quota.StateOK, reset)}
	badWindow2 := benchDecision
	badWindow2.Limits = []quota.WindowResult{ok, window(tiers.Total+1, tiers.Hard, quota.StateOK, reset)}
	full := denied
	full.Never, full.RetryAfter = true, 0
	full.Limits = []quota.WindowResult{ok, window(tiers.Total, tiers.Hard, quota.StateExceeded, time.Time{})}
	badMode := benchDecision
	badMode.Limits = []quota.WindowResult{window(tiers.Day, 0, quota.StateOK, reset)}
	badMode2 := benchDecision
	badMode2.Limits = []quota.WindowResult{window(tiers.Day, tiers.Elastic+1, quota.StateOK, reset)}
	of := func(w quota.WindowResult, metric, subject string) quota.WindowResult {
		w.Metric, w.Subject = metric, subject
		return w
	}
	pooled := benchDecision
	pooled.Limits = []quota.WindowResult{of(ok, "api_calls", ""), of(ok, "api_calls", "user/7"), of(ok, "credits", "")}
	remaining := int64(12)
	items := quota.Decision{Allowed: true, Customer: "acme", Overage: true,
		Limits: []quota.WindowResult{of(ok, "a", ""), of(ok, "b", "alice"), of(ok, "credits", "")}}
	items.Items = []quota.ItemResult{
		{Metric: "a", Cost: 2, Allowed: true, Remaining: &remaining, Limits: items.Limits[:1]},
		{Metric: "b", Subject: "alice", Cost: 1, Allowed: true, Remaining: &remaining, Limits: items.Limits[1:]},
		{Metric: "c", Cost: 3, Allowed: true},
	}
	itemsDenied := items
	itemsDenied.Allowed, itemsDenied.RetryAfter = false, 9
	itemsDenied.Items = []quota.ItemResult{items.Items[0], {Metric: "b", Subject: "alice", Cost: 5, RetryAfter: 9,
		Limits: []quota.WindowResult{of(window(tiers.Minute, tiers.Hard, quota.StateExceeded, reset), "b", "alice")}}}
	itemsDenied.Limits = append(items.Limits[:1:1], itemsDenied.Items[1].Limits...)
	itemsNever := itemsDenied
	itemsNever.Never, itemsNever.RetryAfter = true, 0
	itemsNever.Items = []quota.ItemResult{items.Items[0], itemsDenied.Items[1]}
	itemsNever.Items[1].Never, itemsNever.Items[1].RetryAfter = true, 0
	badItemWindow := items
	badItemWindow.Items = []quota.ItemResult{{Metric: "a", Limits: []quota.WindowResult{window(0, tiers.Hard, quota.StateOK, reset)}}}
	limit := int64(10_000)
	upgrade := denied
	upgrade.Upgrade = &tiers.Upgrade{Plan: "pro", Name: "Pro", Limit: &limit,
		Price: tiers.Price{AmountCents: 4900, Currency: "USD", Interval: "month"}}
	unlimited := never
	unlimited.Upgrade = &tiers.Upgrade{Plan: `a"b<c>`, Name: "Énterprise\u2028", Price: tiers.Price{Interval: "year"}}
	emptyItems := quota.Decision{Allowed: true, Customer: "acme", Degraded: true, Limits: []quota.WindowResult{},
		Items: []quota.ItemResult{{Metric: "a", Cost: 1, Allowed: true, Limits: []quota.WindowResult{}}}}

	for name, d := range map[string]quota.Decision{
		"allowed, two windows":             benchDecision,
		"denied":                           denied,
		"never passes: retry_after null":   never,
		"degraded":                         degraded,
		"no limits (nil)":                  noLimits,
		"no limits (empty)":                emptyLimits,
		"every window, mode and state":     every,
		"zero decision":                    {},
		"extreme numbers":                  numbers,
		"customer with punctuation":        named("user@example.com:1", "api_calls", quota.StateOK),
		"HTML characters":                  named(`a<b>&c`, "m&m", "<ok>"),
		"quotes and backslashes":           named(`a"b\c`, `"`, `\`),
		"control characters":               named("a\x00b\x01\n\t\r\b\f\x1f", "\x7f", "ok"),
		"non-ASCII":                        named("acmé", "日本語", "ünïcode"),
		"line and paragraph separators":    named("a\u2028b\u2029c", "m", "ok"),
		"invalid UTF-8":                    named("a\xffb", "\xed\xa0\x80", "\xc3"),
		"empty strings":                    named("", "", ""),
		"time with nanoseconds":            at(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)),
		"time with trailing zero nanos":    at(time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC)),
		"time east of UTC":                 at(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("IST", 5*3600+1800))),
		"time west of UTC":                 at(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", -8*3600))),
		"time with an odd offset":          at(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600+61))),
		"time in a named location":         at(time.Date(2026, 7, 1, 12, 0, 0, 0, mustLoadLocation(t, "Europe/Paris"))),
		"time of year 0":                   at(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time of year 9999":                at(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)),
		"zero time":                        at(time.Time{}),
		"time of year 10000":               at(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time of year -1":                  at(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time with a 24 hour offset":       at(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))),
		"time with a -25 hour offset":      at(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", -25*3600))),
		"time with a 23:59 offset":         at(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60))),
		"time with a 100 hour offset":      at(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 100*3600))),
		"window 0":                         badWindow,
		"window beyond total":              badWindow2,
		"a full total, which never resets": full,
		"mode 0":                           badMode,
		"mode beyond elastic":              badMode2,
		"windows of a subject and a pool":  pooled,
		"items":                            items,
		"items, one denied":                itemsDenied,
		"items, one never passes":          itemsNever,
		"items, a bad window":              badItemWindow,
		"items, degraded without limits":   emptyItems,
		"denied with an upgrade":           upgrade,
		"never, an unlimited upgrade":      unlimited,
	} {
		t.Run(name, func(t *testing.T) { assertSameAnswer(t, d) })
	}
}

func mustLoadLocation(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	return loc
}

// FuzzAppendCheckAnswer compares appendCheckAnswer with encoding/json on
// arbitrary decisions: of one metric (items 0) or of items, with windows
// that name their metric (or not) and subject (or not).
func FuzzAppendCheckAnswer(f *testing.F) {
	f.Add(true, "acme", "api_calls", int64(1), false, int64(0), false, uint8(1), uint8(1), "ok", int64(100), int64(1), int64(99), int64(1795341601), int64(0), 0, "", "", uint8(0))
	f.Add(false, "a<b>", "m\u2028", int64(-1), true, int64(3), true, uint8(6), uint8(3), "exceeded", int64(0), int64(-5), int64(1<<62), int64(-62135596800), int64(999999999), -3600*25, "", "", uint8(0))
	f.Add(false, "\xff", "\"", int64(7), false, int64(-2), false, uint8(0), uint8(4), "", int64(0), int64(0), int64(0), int64(253402300800), int64(5), 3600*24, "", "", uint8(0))
	f.Add(true, "acme", "api_calls", int64(2), false, int64(0), false, uint8(2), uint8(1), "ok", int64(10), int64(2), int64(8), int64(1795341601), int64(0), 0, "user/7", "credits", uint8(0))
	f.Add(false, "acme", "a", int64(3), true, int64(0), false, uint8(1), uint8(2), "exceeded", int64(2), int64(0), int64(2), int64(1795341601), int64(0), 0, "alice", "b", uint8(3))
	f.Add(true, "acme", "", int64(0), false, int64(0), true, uint8(5), uint8(1), "ok", int64(1), int64(1), int64(0), int64(1795341601), int64(0), 60, "\"<&>", "\x00", uint8(2))
	// A total: no reset (the zero time), in any zone.
	f.Add(false, "acme", "seats", int64(1), true, int64(0), false, uint8(7), uint8(1), "exceeded", int64(10), int64(10), int64(0), int64(-62135596800), int64(0), 3600, "", "", uint8(0))
	f.Fuzz(func(t *testing.T, allowed bool, customer, metric string, cost int64, never bool, retryAfter int64, degraded bool,
		w, m uint8, state string, limit, used, remaining, unix, nsec int64, offset int, subject, other string, items uint8) {
		d := quota.Decision{Allowed: allowed, Customer: customer, Metric: metric, Cost: cost, Never: never,
			RetryAfter: retryAfter, Degraded: degraded, Elastic: !allowed, Overage: degraded}
		zone := time.FixedZone("", offset%(200*3600))
		at := time.Unix(unix, nsec).In(zone)
		for i := range int(w%3) + 1 {
			// Windows of the check's metric, of the other metric (a pool,
			// another item) and of no metric (an answer kept before
			// windows named theirs), for the customer or the subject.
			win := quota.WindowResult{Metric: []string{metric, other, ""}[i], Window: tiers.Window(w) + tiers.Window(i),
				Mode: tiers.Mode(m), Limit: limit, Used: used, Remaining: remaining, ResetAt: at, State: quota.State(state)}
			if i%2 == 1 {
				win.Subject = subject
			}
			d.Limits = append(d.Limits, win)
		}
		for i := range int(items % 4) {
			it := quota.ItemResult{Metric: []string{metric, other, ""}[i], Subject: []string{"", subject, subject}[i],
				Cost: cost + int64(i), Allowed: allowed || i == 0, Never: never && i == 1, Limits: d.Limits[min(i, len(d.Limits)):]}
			if i != 1 {
				it.Remaining = &remaining
			}
			d.Items = append(d.Items, it)
		}
		assertSameAnswer(t, d)
	})
}

// A denial says the limit is reached only when a window that denied it
// has nothing left; a cost larger than what remains is told so.
func TestDeniedDetail(t *testing.T) {
	t.Parallel()
	window := func(metric string, w tiers.Window, limit, used int64, s quota.State) quota.WindowResult {
		return quota.WindowResult{Metric: metric, Window: w, Mode: tiers.Hard, Limit: limit, Used: used, Remaining: max(0, limit-used), State: s}
	}
	one := func(cost int64, ws ...quota.WindowResult) quota.Decision {
		return quota.Decision{Customer: "acme", Metric: "llm_tokens", Cost: cost, RetryAfter: 7, Limits: ws}
	}
	for _, tc := range []struct {
		name string
		d    quota.Decision
		want string
	}{
		{"nothing left", one(1, window("llm_tokens", tiers.Day, 1000, 1000, quota.StateExceeded)),
			"the customer's limit on this metric is reached; retry after 7 s"},
		{"994 asked, 988 left", one(994, window("llm_tokens", tiers.Day, 1000, 12, quota.StateExceeded)),
			"the customer's limit on this metric cannot take this request: it needs 994, 988 remain; retry after 7 s"},
		{"the denying window with the fewest left", one(30, window("llm_tokens", tiers.Minute, 100, 80, quota.StateExceeded),
			window("llm_tokens", tiers.Day, 1000, 985, quota.StateExceeded), window("llm_tokens", tiers.Month, 10, 0, quota.StateOK)),
			"the customer's limit on this metric cannot take this request: it needs 30, 15 remain; retry after 7 s"},
		{"one denying window spent", one(30, window("llm_tokens", tiers.Minute, 100, 80, quota.StateExceeded),
			window("llm_tokens", tiers.Day, 1000, 1000, quota.StateExceeded)),
			"the customer's limit on this metric is reached; retry after 7 s"},
		{"a credit pool's window", one(5, window("credits", tiers.Month, 100, 98, quota.StateExceeded)),
			"the customer's credit pool credits cannot pay for this request: 2 remain, fewer than it needs; retry after 7 s"},
		{"items: the first denied", quota.Decision{Customer: "acme", RetryAfter: 7, Items: []quota.ItemResult{
			{Metric: "a", Cost: 1, Allowed: true, Limits: []quota.WindowResult{window("a", tiers.Day, 10, 0, quota.StateOK)}},
			{Metric: "b", Cost: 4, Limits: []quota.WindowResult{window("b", tiers.Day, 10, 8, quota.StateExceeded)}},
		}}, "items[1]: the customer's limit on this metric cannot take this request: it needs 4, 2 remain; retry after 7 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deniedDetail(&tc.d); got != tc.want {
				t.Errorf("detail %q, want %q", got, tc.want)
			}
			assertSameAnswer(t, tc.d)
		})
	}
}
