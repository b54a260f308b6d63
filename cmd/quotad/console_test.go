package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The console's tests drive /console/ in a real browser, headless Chromium
// (Debian's package chromium), against quotad started by run. Without the
// browser they skip, except in CI (CI set), where they fail.

// consoleWait bounds each browser step: a bound, not a measurement (the
// steps wait for DOM conditions and return as soon as they hold).
const consoleWait = 60 * time.Second

// findBrowser returns the path of Chromium.
func findBrowser(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI must run the console's browser tests")
	}
	t.Skip("chromium is not installed (apt-get install chromium): skipping the console's browser tests")
	return ""
}

// MustBrowser starts a headless Chromium for the test and returns its
// context; tabs are made from it with newTab.
func MustBrowser(t testing.TB) context.Context {
	t.Helper()
	path := findBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, without a timeout
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consoleTab is one browser tab (its own sessionStorage) on the console,
// recording the JavaScript dialogs that open (and dismissing them), uncaught
// exceptions and Content-Security-Policy violations.
type consoleTab struct {
	t   testing.TB
	ctx context.Context
	url string

	mu       sync.Mutex
	dialogs  []string
	problems []string
}

func newTab(t testing.TB, browser context.Context, base string) *consoleTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tab := &consoleTab{t: t, ctx: ctx, url: base + "/console/"}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	messages := chromedp.Console(ctx)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tab.mu.Lock()
			tab.dialogs = append(tab.dialogs, string(ev.Type)+": "+ev.Message)
			tab.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				tab.mu.Lock()
				tab.problems = append(tab.problems, m.String())
				tab.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		tab.mu.Lock()
		defer tab.mu.Unlock()
		for _, p := range tab.problems {
			t.Errorf("console page: %s", p)
		}
	})
	return tab
}

// do runs steps, failing the test on an error.
func (tab *consoleTab) do(steps ...chromedp.Action[chromedp.Void]) {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, consoleWait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tab.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression.
func evalIn[T any](tab *consoleTab, expr string) T {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, consoleWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tab.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the JavaScript expression is truthy; what says what
// was awaited, for the failure message.
func (tab *consoleTab) waitFor(what, expr string) {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, consoleWait)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(consoleWait))); err != nil {
		main, _ := chromedp.Run(tab.ctx, chromedp.Evaluate[string](`document.querySelector('main')?.innerText ?? ''`))
		tab.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, main)
	}
}

// text returns the text of the first element matching a CSS selector.
func (tab *consoleTab) text(sel string) string {
	tab.t.Helper()
	return evalIn[string](tab, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ''`, sel))
}

// signIn opens the console and signs in with token.
func (tab *consoleTab) signIn(token string) {
	tab.t.Helper()
	tab.do(
		chromedp.Navigate(tab.url),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
	)
	tab.waitFor("the customers page", `document.querySelector('#customers') !== null`)
}

// open goes to a route of the console (#/...) in the signed-in tab.
func (tab *consoleTab) open(route string) {
	tab.t.Helper()
	tab.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, route)))
}

// barUsed is the JavaScript for the used units the usage bar of key shows.
func barUsed(key string) string {
	return fmt.Sprintf(`document.querySelector('#limits tr[data-key=%q] [role=progressbar]')?.getAttribute('aria-valuenow')`, key)
}

// mustSeedConsole declares what the console tests look at: a metric, two
// plans, customers acme and beta on free, and one whose name is markup.
func mustSeedConsole(s *testServer) {
	s.t.Helper()
	s.mustDo(201, "PUT", "/v1/metrics/api_calls", `{"description": "Calls to the public API", "capacity": {"day": 10000000}}`)
	s.mustDo(201, "PUT", "/v1/plans/free", `{"name": "Free", "price": {"amount_cents": 0, "currency": "USD", "interval": "month"},
		"limits": [{"metric": "api_calls", "window": "minute", "limit": 600}, {"metric": "api_calls", "window": "day", "limit": 1000}]}`)
	s.mustDo(201, "PUT", "/v1/plans/pro", `{"name": "Pro", "price": {"amount_cents": 4900, "currency": "USD", "interval": "month"},
		"limits": [{"metric": "api_calls", "window": "second", "limit": 50},
		           {"metric": "api_calls", "window": "day", "limit": 100000, "mode": "soft", "overage_percent": 20, "overage_price_micros": 1000}]}`)
	s.mustDo(201, "PUT", "/v1/customers/acme", `{"plan": "free", "name": "Acme Inc."}`)
	s.mustDo(201, "PUT", "/v1/customers/beta", `{"plan": "free", "name": "Beta Labs"}`)
	// A zone of UTC's offset by another name: the plan change below keeps it.
	s.mustDo(201, "PUT", "/v1/customers/globex", `{"plan": "pro", "name": "Globex", "time_zone": "Etc/GMT"}`)
	s.mustDo(201, "PUT", "/v1/customers/xss", `{"plan": "free", "name": "<img src=x onerror=alert(1)>"}`)
}

func TestConsoleInBrowser(t *testing.T) {
	browser := MustBrowser(t)
	// Webhooks may deliver to the test's receiver on loopback.
	s := MustStartServer(t, nil, map[string]string{"QUOTAD_WEBHOOK_ALLOW_PRIVATE": "true"})
	mustSeedConsole(s)

	t.Run("no token goes to sign-in", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.do(chromedp.Navigate(tab.url + "#/customers/acme"))
		tab.waitFor("the sign-in form", `document.querySelector('#token') !== null && location.hash === '#/signin'`)
		if got := tab.text("main"); strings.Contains(got, "Acme Inc.") {
			t.Errorf("the page without a token shows customer data: %q", got)
		}
		// A stored token the API refuses (401) sends the page back to sign-in too.
		tab.do(chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('quotad.adminToken', 'wrong'); location.hash = '#/customers/acme'`))
		tab.waitFor("sign-in after a 401", `location.hash === '#/signin' && document.querySelector('#token') !== null`)
		if got := evalIn[*string](tab, `sessionStorage.getItem('quotad.adminToken')`); got != nil {
			t.Errorf("the refused token is still stored: %q", *got)
		}
	})

	t.Run("sign in", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.do(
			chromedp.Navigate(tab.url),
			chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"),
			chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		)
		tab.waitFor("the refusal", `document.querySelector('#signin-form .error')?.textContent.includes('not valid')`)
		if got := evalIn[*string](tab, `sessionStorage.getItem('quotad.adminToken')`); got != nil {
			t.Errorf("a refused token was stored: %q", *got)
		}
		// With the keyboard alone: Enter in the field submits.
		tab.do(
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#token').value = ''`),
			chromedp.SendKeys(chromedp.CSS("#token"), adminToken+"\r"),
		)
		tab.waitFor("the customers page", `document.querySelector('#customers') !== null`)
		if got := evalIn[string](tab, `sessionStorage.getItem('quotad.adminToken')`); got != adminToken {
			t.Errorf("stored token %q, want the admin token", got)
		}
		if got := evalIn[string](tab, `location.href + document.cookie`); strings.Contains(got, adminToken) {
			t.Errorf("the token is in the URL or a cookie: %q", got)
		}
	})

	t.Run("find a customer", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#q"), "INC"),
			chromedp.Click(chromedp.CSS(`#customer-search button[type=submit]`)),
		)
		// By name, ignoring case: only Acme Inc.
		tab.waitFor("acme alone", `(() => { const ids = [...document.querySelectorAll('#customers tbody tr td:first-child')].map((td) => td.textContent);
			return ids.length === 1 && ids[0] === 'acme'; })()`)
		// By plan: only globex is on pro.
		tab.open("#/customers?plan=pro")
		tab.waitFor("globex alone", `(() => { const ids = [...document.querySelectorAll('#customers tbody tr td:first-child')].map((td) => td.textContent);
			return ids.length === 1 && ids[0] === 'globex'; })()`)
		tab.open("#/customers?q=acme")
		tab.waitFor("the acme link", `document.querySelector('#customers a[href="#/customers/acme"]') !== null`)
		tab.do(chromedp.Click(chromedp.CSS(`#customers a[href="#/customers/acme"]`)))
		tab.waitFor("acme's page", `document.querySelector('#customer-name')?.textContent === 'Acme Inc.'`)
	})

	t.Run("usage bar moves with checks", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/beta")
		tab.waitFor("beta's day bar at 0", barUsed("api_calls/day")+` === '0'`)
		for range 7 {
			s.mustDo(200, "POST", "/v1/check", `{"customer": "beta", "metric": "api_calls", "cost": 3}`, "Authorization", "Bearer "+checkToken)
		}
		// The page refreshes by itself: the bar reaches 21 without a reload.
		tab.waitFor("beta's day bar at 21", barUsed("api_calls/day")+` === '21'`)
		if got := tab.text(`#limits tr[data-key="api_calls/day"] td:nth-child(7)`); got != "21 / 1,000" {
			t.Errorf("used cell %q, want %q (thousands separator)", got, "21 / 1,000")
		}
	})

	t.Run("add an override and see the effective limit change", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/acme")
		tab.waitFor("acme's day limit 1000", `document.querySelector('#limits tr[data-key="api_calls/day"] [role=progressbar]')?.getAttribute('aria-valuemax') === '1000'`)
		tab.do(chromedp.Click(chromedp.CSS("#add-override")))
		tab.waitFor("the override form", `document.querySelector('#ov-limit') !== null`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-metric"), "api_calls"),
			chromedp.SetValue(chromedp.CSS("#ov-window"), "day"),
			chromedp.SendKeys(chromedp.CSS("#ov-limit"), "25000"),
			chromedp.SendKeys(chromedp.CSS("#ov-reason"), "launch week"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		tab.waitFor("the day limit at 25000 from an override", `(() => { const tr = document.querySelector('#limits tr[data-key="api_calls/day"]');
			return tr && tr.querySelector('[role=progressbar]').getAttribute('aria-valuemax') === '25000' && tr.children[4].textContent.startsWith('override'); })()`)
		tab.waitFor("the override listed", `document.querySelector('#overrides tr[data-key="api_calls/day"]')?.textContent.includes('launch week')`)
		r := s.mustDo(200, "GET", "/v1/customers/acme/limits", "")
		if !strings.Contains(string(r.Body), `"limit":25000`) {
			t.Errorf("the API does not show the override: %s", r.Body)
		}
		// Adding it again is refused in the page: it would replace it.
		tab.do(chromedp.Click(chromedp.CSS("#add-override")))
		tab.waitFor("the override form", `document.querySelector('#ov-limit')?.value === ''`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-metric"), "api_calls"),
			chromedp.SetValue(chromedp.CSS("#ov-window"), "day"),
			chromedp.SendKeys(chromedp.CSS("#ov-limit"), "1"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		tab.waitFor("the refusal", `document.querySelector('#override-msg .error')?.textContent.includes('edit it instead')`)
		if r := s.mustDo(200, "GET", "/v1/customers/acme/overrides/api_calls/day", ""); !strings.Contains(string(r.Body), `"limit":25000`) {
			t.Errorf("the second add replaced the override: %s", r.Body)
		}
	})

	t.Run("a concurrent edit is a 412, shown", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/beta/overrides/api_calls/minute", `{"limit": 100, "reason": "first"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/beta")
		tab.waitFor("beta's override", `document.querySelector('#overrides tr[data-key="api_calls/minute"] [data-action=edit]') !== null`)
		tab.do(chromedp.Click(chromedp.CSS(`#overrides tr[data-key="api_calls/minute"] [data-action=edit]`)))
		tab.waitFor("the edit form", `document.querySelector('#ov-limit')?.value === '100'`)
		// Someone else edits it meanwhile.
		s.mustDo(200, "PUT", "/v1/customers/beta/overrides/api_calls/minute", `{"limit": 200, "reason": "someone else"}`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-limit"), "300"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		tab.waitFor("the 412 shown", `document.querySelector('#override-msg .error')?.textContent.includes('412')`)
		tab.waitFor("the list reloaded with their change", `document.querySelector('#overrides tr[data-key="api_calls/minute"]')?.textContent.includes('someone else')`)
		r := s.mustDo(200, "GET", "/v1/customers/beta/overrides/api_calls/minute", "")
		if !strings.Contains(string(r.Body), `"limit":200`) {
			t.Errorf("the stale edit was written: %s", r.Body)
		}
	})

	t.Run("chart, plan change, usage reset, statement and audit trail", func(t *testing.T) {
		for range 5 {
			s.mustDo(200, "POST", "/v1/check", `{"customer": "globex", "metric": "api_calls", "cost": 2}`, "Authorization", "Bearer "+checkToken)
		}
		today := time.Now().UTC().Format(time.DateOnly)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/globex")
		tab.waitFor("today's bar in the chart", fmt.Sprintf(`document.querySelector('#chart g[data-date=%q] title')?.textContent.includes('10 used')`, today))
		if n := evalIn[int](tab, `document.querySelectorAll('#chart svg g[data-date]').length`); n != 90 {
			t.Errorf("the chart has %d days, want 90", n)
		}
		tab.waitFor("the statement", `document.querySelector('#statement-total')?.textContent.includes('$')`)

		// Plan change, confirmed in the page's dialog.
		tab.do(
			chromedp.SetValue(chromedp.CSS("#plan-select"), "free"),
			chromedp.Click(chromedp.CSS(`#plan-form button[type=submit]`)),
		)
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("plan free", `document.querySelector('#customer-plan')?.textContent === 'free'`)
		if r := s.mustDo(200, "GET", "/v1/customers/globex", ""); !strings.Contains(string(r.Body), `"plan":"free"`) {
			t.Errorf("the plan did not change: %s", r.Body)
		} else if !strings.Contains(string(r.Body), `"time_zone":"Etc/GMT"`) {
			t.Errorf("the plan change lost the time zone: %s", r.Body)
		}
		tab.waitFor("the plan change in the audit trail", `document.querySelector('#customer-audit')?.textContent.includes('"pro" → "free"')`)

		// Usage reset: cancelled first, then confirmed.
		tab.waitFor("globex's day bar at 10", barUsed("api_calls/day")+` === '10'`)
		tab.do(chromedp.Click(chromedp.CSS(`#reset-form button[type=submit]`)))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
		tab.waitFor("the dialog closed", `!document.querySelector('#confirm').open`)
		if r := s.mustDo(200, "GET", "/v1/customers/globex/usage", ""); !strings.Contains(string(r.Body), `"used":10`) {
			t.Errorf("a cancelled reset reset: %s", r.Body)
		}
		tab.do(chromedp.Click(chromedp.CSS(`#reset-form button[type=submit]`)))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("globex's day bar at 0", barUsed("api_calls/day")+` === '0'`)
		tab.waitFor("the reset in the audit trail", `[...document.querySelectorAll('#customer-audit td')].some((td) => td.textContent === 'reset')`)
	})

	t.Run("plans, metrics, webhooks and the audit log", func(t *testing.T) {
		delivered := make(chan struct{}, 1)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			select {
			case delivered <- struct{}{}:
			default:
			}
		}))
		t.Cleanup(hook.Close)
		s.mustDo(201, "PUT", "/v1/webhooks/ops-alerts", `{"url": "`+hook.URL+`/quotad", "events": ["usage.threshold"], "thresholds": [50]}`)
		s.mustDo(201, "PUT", "/v1/customers/hooked", `{"plan": "free", "name": "Hooked"}`)
		s.mustDo(200, "POST", "/v1/check", `{"customer": "hooked", "metric": "api_calls", "cost": 600}`, "Authorization", "Bearer "+checkToken)
		select {
		case <-delivered:
		case <-time.After(consoleWait):
			t.Fatal("no webhook delivery")
		}

		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/plans")
		tab.waitFor("the Pro plan", `document.querySelector('main')?.textContent.includes('Pro (pro)')`)
		if got := tab.text("main"); !strings.Contains(got, "$49.00") || !strings.Contains(got, "100,000") {
			t.Errorf("plans page lacks Pro's price or day limit: %q", got)
		}
		tab.open("#/metrics")
		tab.waitFor("api_calls' capacity", `document.querySelector('main')?.textContent.includes('day: 10,000,000')`)
		tab.open("#/webhooks")
		tab.waitFor("the webhook", `document.querySelector('main a[href="#/webhooks/ops-alerts"]') !== null`)
		tab.do(chromedp.Click(chromedp.CSS(`main a[href="#/webhooks/ops-alerts"]`)))
		tab.waitFor("its delivery", `document.querySelector('main table')?.textContent.includes('usage.threshold api_calls/day 50%')`)
		tab.open("#/audit?customer=hooked")
		tab.waitFor("hooked's creation", `document.querySelector('main table')?.textContent.includes('customers/hooked')`)
		if got := tab.text("main table"); strings.Contains(got, "customers/acme") {
			t.Errorf("the audit log filtered on hooked shows acme's events: %q", got)
		}
	})

	t.Run("metrics page shows global usage per window against capacity", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/metrics/gpu_seconds", `{"capacity": {"minute": 100000, "day": 1000}}`)
		s.mustDo(201, "PUT", "/v1/metrics/exports", `{}`)
		bar := func(key string) string {
			return fmt.Sprintf(`document.querySelector('#global-usage tr[data-key=%q] [role=progressbar]')?.getAttribute('aria-valuenow')`, key)
		}
		// Two customers, neither limited on the metric: global usage counts them all.
		s.mustDo(200, "POST", "/v1/check", `{"customer": "acme", "metric": "gpu_seconds", "cost": 30}`, "Authorization", "Bearer "+checkToken)
		s.mustDo(200, "POST", "/v1/check", `{"customer": "beta", "metric": "gpu_seconds", "cost": 20}`, "Authorization", "Bearer "+checkToken)

		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/metrics")
		tab.waitFor("gpu_seconds' day bar at 50", bar("gpu_seconds/day")+` === '50'`)
		tab.waitFor("gpu_seconds' minute bar", bar("gpu_seconds/minute")+` !== undefined`)
		if got := tab.text(`#global-usage tr[data-key="gpu_seconds/day"] td:nth-child(4)`); got != "50 / 1,000" {
			t.Errorf("day used cell %q, want %q", got, "50 / 1,000")
		}
		if got := tab.text(`#global-usage tr[data-key="gpu_seconds/minute"] td:nth-child(6)`); got != "process" {
			t.Errorf("minute counted %q, want process (no Redis)", got)
		}
		if got := evalIn[string](tab, `document.querySelector('#global-usage tr[data-key="gpu_seconds/minute"] [role=progressbar]').getAttribute('aria-valuemax')`); got != "100000" {
			t.Errorf("minute bar's maximum %q, want the capacity 100000", got)
		}
		if got := tab.text("#global-usage"); strings.Contains(got, "exports") {
			t.Errorf("a metric without capacity is listed: %q", got)
		}
		// The page reloads by itself: the day fills up and shows it.
		s.mustDo(200, "POST", "/v1/check", `{"customer": "acme", "metric": "gpu_seconds", "cost": 950}`, "Authorization", "Bearer "+checkToken)
		tab.waitFor("gpu_seconds' day bar full", bar("gpu_seconds/day")+` === '1000' && document.querySelector('#global-usage tr[data-key="gpu_seconds/day"]').classList.contains('state-exceeded')`)
		if got := tab.text(`#global-usage tr[data-key="gpu_seconds/day"] td:nth-child(5)`); got != "0" {
			t.Errorf("day remaining %q, want 0", got)
		}
	})

	t.Run("window states and pages of customers", func(t *testing.T) {
		for i := range 26 {
			s.mustDo(201, "PUT", fmt.Sprintf("/v1/customers/page-%02d", i), `{"plan": "free"}`)
		}
		s.mustDo(201, "PUT", "/v1/customers/page-00/overrides/api_calls/minute", `{"limit": 5000}`)
		s.mustDo(201, "PUT", "/v1/customers/page-00/overrides/api_calls/day", `{"limit": 100, "mode": "soft", "overage_percent": 50}`)
		s.mustDo(200, "POST", "/v1/check", `{"customer": "page-00", "metric": "api_calls", "cost": 120}`, "Authorization", "Bearer "+checkToken)
		s.mustDo(201, "PUT", "/v1/customers/page-01/overrides/api_calls/day", `{"limit": 100}`)
		s.mustDo(200, "POST", "/v1/check", `{"customer": "page-01", "metric": "api_calls", "cost": 100}`, "Authorization", "Bearer "+checkToken)

		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		state := func(key string) string {
			return fmt.Sprintf(`document.querySelector('#limits tr[data-key=%q] .badge')?.textContent`, key)
		}
		tab.open("#/customers/page-00")
		tab.waitFor("page-00's day in overage", state("api_calls/day")+` === 'overage' && `+state("api_calls/minute")+` === 'ok'`)
		tab.open("#/customers/page-01")
		tab.waitFor("page-01's day exceeded", state("api_calls/day")+` === 'exceeded'`)

		ids := `[...document.querySelectorAll('#customers tbody tr td:first-child')].map((td) => td.textContent).join(' ')`
		first := make([]string, 25)
		for i := range first {
			first[i] = fmt.Sprintf("page-%02d", i)
		}
		tab.open("#/customers?q=page-")
		tab.waitFor("the first 25", fmt.Sprintf(`%s === %q`, ids, strings.Join(first, " ")))
		tab.do(chromedp.Click(chromedp.CSS(`#customers .pager a:last-child`)))
		tab.waitFor("the last one", fmt.Sprintf(`%s === 'page-25'`, ids))
		tab.do(chromedp.Click(chromedp.CSS(`#customers .pager a:first-child`)))
		tab.waitFor("the first 25 again", fmt.Sprintf(`%s === %q`, ids, strings.Join(first, " ")))
	})

	t.Run("phone width, labels", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		tab.signIn(adminToken)
		tab.open("#/customers/acme")
		tab.waitFor("the whole page", `document.querySelector('#limits table') && document.querySelector('#chart svg') && document.querySelector('#add-override') && document.querySelector('#customer-audit table') && document.querySelector('#statement-total')`)
		tab.do(chromedp.Click(chromedp.CSS("#add-override")))
		tab.waitFor("the override form", `document.querySelector('#ov-limit') !== null`)
		// (A mobile viewport widens to its content, so compare with the device's width.)
		if w := evalIn[int](tab, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("the page is %d px wide on a 390 px phone: it scrolls sideways", w)
		}
		unlabelled := evalIn[[]string](tab, `[...document.querySelectorAll('input, select, textarea')].filter((e) => !e.labels || e.labels.length === 0).map((e) => e.id || e.outerHTML)`)
		if len(unlabelled) != 0 {
			t.Errorf("controls without a label: %q", unlabelled)
		}
	})

	t.Run("issue an API key in the page and check with it", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/keyed", `{"plan": "free", "name": "Keyed"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/keyed")
		tab.waitFor("the keys section", `document.querySelector('#keys')?.textContent.includes('No live API keys')`)
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#key-name"), "ci"),
			chromedp.Click(chromedp.CSS("#key-issue")),
		)
		tab.waitFor("the new key, shown once", `/^qk_[0-9A-Za-z]{32}$/.test(document.querySelector('#new-key')?.value ?? '') && document.querySelector('#key-issued')?.textContent.includes('shown this once')`)
		key := evalIn[string](tab, `document.querySelector('#new-key').value`)
		if !evalIn[bool](tab, `document.querySelector('#new-key').readOnly`) {
			t.Error("the new key's field is not read-only")
		}
		tab.waitFor("the key listed", fmt.Sprintf(`(() => { const tr = document.querySelector('#keys tbody tr');
			return tr !== null && tr.querySelector('.key-name')?.textContent === 'ci' && tr.textContent.includes(%q) && !tr.textContent.includes(%q); })()`, key[:8], key))
		if got := tab.text("#keys tbody tr td:nth-child(5)"); got != "never" {
			t.Errorf("last used %q, want never", got)
		}
		if got := evalIn[string](tab, `JSON.stringify(sessionStorage) + JSON.stringify(localStorage) + location.href + document.cookie`); strings.Contains(got, key) || strings.Contains(got, key[:8]) {
			t.Errorf("the key is kept in storage, the URL or a cookie: %q", got)
		}

		// The key checks for keyed: the answer names it, and its usage counts it.
		r := s.mustDo(200, "POST", "/v1/check", `{"api_key": "`+key+`", "metric": "api_calls", "cost": 4}`, "Authorization", "Bearer "+checkToken)
		if got := r.JSON(t)["customer"]; got != "keyed" {
			t.Errorf("the check by key was for %v, want keyed", got)
		}
		tab.waitFor("keyed's day bar at 4", barUsed("api_calls/day")+` === '4'`)

		// Gone once the page is left: another page, then this one again.
		tab.open("#/customers")
		tab.waitFor("the customers page", `document.querySelector('#customers') !== null`)
		tab.open("#/customers/keyed")
		tab.waitFor("the key listed again", `document.querySelector('#keys tbody tr .key-name')?.textContent === 'ci'`)
		if got := evalIn[string](tab, `document.documentElement.outerHTML + [...document.querySelectorAll('input')].map((i) => i.value).join(' ') +
			JSON.stringify(sessionStorage) + JSON.stringify(localStorage) + location.href`); strings.Contains(got, key) {
			t.Error("the key is still in the page (or its storage) after navigation")
		}
		if n := evalIn[int](tab, `document.querySelectorAll('#new-key').length`); n != 0 {
			t.Errorf("%d new-key fields after navigation, want 0", n)
		}
	})

	t.Run("an API key's errors show the problem's detail", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/keyed")
		tab.waitFor("the issue form", `document.querySelector('#key-expires') !== null && document.querySelector('#keys table, #keys p') !== null`)
		// An expiry in the past: the API's 400, its detail and field error shown.
		tab.do(
			chromedp.SetValue(chromedp.CSS("#key-expires"), "2020-01-01T00:00"),
			chromedp.Click(chromedp.CSS("#key-issue")),
		)
		tab.waitFor("the refusal", `document.querySelector('#key-msg .error')?.textContent.includes('expires_at')`)
		if n := evalIn[int](tab, `document.querySelectorAll('#new-key').length`); n != 0 {
			t.Errorf("a refused key shows %d new-key fields", n)
		}
		if strings.Contains(tab.text("#key-msg .error"), "HTTP 400") {
			t.Errorf("the error shows the status, not the problem's detail: %q", tab.text("#key-msg .error"))
		}
	})

	t.Run("revoke an API key in the page", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/revoked", `{"plan": "free", "name": "Revoked"}`)
		created := s.mustDo(201, "POST", "/v1/customers/revoked/keys", `{"name": "old"}`).JSON(t)
		key, _ := created["key"].(string)
		id, _ := created["id"].(string)
		s.mustDo(200, "POST", "/v1/check", `{"api_key": "`+key+`", "metric": "api_calls"}`, "Authorization", "Bearer "+checkToken)

		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/revoked")
		row := fmt.Sprintf(`#keys tr[data-key-id=%q]`, id)
		tab.waitFor("the key listed", fmt.Sprintf(`document.querySelector(%q) !== null`, row+" [data-action=revoke]"))
		// Cancelled first: the key still works.
		tab.do(chromedp.Click(chromedp.CSS(row + " [data-action=revoke]")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open && document.querySelector('#confirm-text').textContent.includes('old')`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
		tab.waitFor("the dialog closed", `!document.querySelector('#confirm').open`)
		s.mustDo(200, "POST", "/v1/check", `{"api_key": "`+key+`", "metric": "api_calls"}`, "Authorization", "Bearer "+checkToken)

		tab.do(chromedp.Click(chromedp.CSS(row + " [data-action=revoke]")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("the key gone from the list", fmt.Sprintf(`document.querySelector(%q) === null && document.querySelector('#key-msg .notice')?.textContent.includes('revoked')`, row))
		// The 204 came before the page showed it; this process refuses the
		// key from then on.
		r := s.do("POST", "/v1/check", `{"api_key": "`+key+`", "metric": "api_calls"}`, "Authorization", "Bearer "+checkToken)
		if r.Status != http.StatusForbidden || r.JSON(t)["code"] != "invalid_api_key" {
			t.Errorf("check with the revoked key: %d %s, want 403 invalid_api_key", r.Status, r.Body)
		}
		s.mustDo(404, "GET", "/v1/keys/"+id, "")
		tab.waitFor("the revocation in the audit trail", fmt.Sprintf(`[...document.querySelectorAll('#customer-audit tbody tr')].some((tr) => tr.children[2]?.textContent === 'delete' && tr.children[3]?.textContent === %q)`, "keys/"+id))
	})

	t.Run("an API key named with markup shows as text", func(t *testing.T) {
		const name = "<img src=x onerror=alert(1)>"
		s.mustDo(201, "PUT", "/v1/customers/keymarkup", `{"plan": "free"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/keymarkup")
		tab.waitFor("the issue form", `document.querySelector('#key-name') !== null && document.querySelector('#keys p, #keys table') !== null`)
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#key-name"), name),
			chromedp.Click(chromedp.CSS("#key-issue")),
		)
		tab.waitFor("the key listed", `document.querySelector('#keys tbody tr .key-name') !== null && document.querySelector('#new-key') !== null`)
		if got := tab.text("#keys tbody tr .key-name"); got != name {
			t.Errorf("the key's name shows as %q, want %q as text", got, name)
		}
		if got := tab.text("#key-issued"); !strings.Contains(got, name) {
			t.Errorf("the issued notice %q lacks the name as text", got)
		}
		if n := evalIn[int](tab, `document.querySelectorAll('main img').length`); n != 0 {
			t.Errorf("the page has %d img elements: the key's name was parsed as HTML", n)
		}
		// The revocation's question names it as text too.
		tab.do(chromedp.Click(chromedp.CSS("#keys tbody tr [data-action=revoke]")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		if got := tab.text("#confirm-text"); !strings.Contains(got, name) {
			t.Errorf("the confirmation %q lacks the name as text", got)
		}
		tab.do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
		tab.waitFor("a refresh", `(() => { window.__seen = window.__seen || document.querySelector('#limits table'); return document.querySelector('#limits table') !== window.__seen; })()`)
		tab.mu.Lock()
		defer tab.mu.Unlock()
		if len(tab.dialogs) != 0 {
			t.Errorf("dialogs opened: %q", tab.dialogs)
		}
	})

	t.Run("limits per subject: labelled, a subject's usage looked up, overrides per subject", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/plans/team", `{"name": "Team", "limits": [
			{"metric": "api_calls", "window": "day", "limit": 1000},
			{"metric": "api_calls", "window": "day", "per": "subject", "limit": 100},
			{"metric": "api_calls", "window": "minute", "per": "subject", "limit": 50}]}`)
		s.mustDo(201, "PUT", "/v1/customers/subjects", `{"plan": "team", "name": "Subjects Co"}`)
		check := func(subject string, cost int) {
			t.Helper()
			s.mustDo(200, "POST", "/v1/check", fmt.Sprintf(`{"customer": "subjects", "metric": "api_calls", "subject": %q, "cost": %d}`, subject, cost), "Authorization", "Bearer "+checkToken)
		}
		check("user-42", 7)
		check("user-7", 3)

		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		// The plan's limit per subject is labelled; its customer-wide one looks as ever.
		tab.open("#/plans")
		planRow := func(key string) string { return fmt.Sprintf(`[data-plan=team] tr[data-key=%q]`, key) }
		tab.waitFor("team's limits", fmt.Sprintf(`document.querySelector(%q) !== null`, planRow("api_calls/day/subject")))
		if got := tab.text(planRow("api_calls/day/subject") + " td:nth-child(2)"); got != "day per subject" {
			t.Errorf("the plan's limit per subject shows window %q, want %q", got, "day per subject")
		}
		if got := tab.text(planRow("api_calls/day") + " td:nth-child(2)"); got != "day" {
			t.Errorf("the plan's customer-wide limit shows window %q, want %q", got, "day")
		}

		// The customer's page: the customer's windows with their bars, each
		// limit per subject labelled, waiting for a subject.
		tab.open("#/customers/subjects")
		tab.waitFor("the customer's day bar at 10", barUsed("api_calls/day")+` === '10'`)
		perSubject := `#limits tr[data-key="api_calls/day/subject"]`
		tab.waitFor("the limit per subject listed", fmt.Sprintf(`document.querySelector(%q)?.textContent.includes('look one up')`, perSubject))
		if got := tab.text(perSubject + " td:nth-child(2)"); got != "day per subject" {
			t.Errorf("the limit per subject shows window %q, want %q", got, "day per subject")
		}
		if got := tab.text(`#limits tr[data-key="api_calls/day"] td:nth-child(2)`); got != "day" {
			t.Errorf("the customer-wide limit shows window %q, want %q", got, "day")
		}
		if n := evalIn[int](tab, fmt.Sprintf(`document.querySelectorAll(%q).length`, perSubject+" [role=progressbar]")); n != 0 {
			t.Errorf("the limit per subject has %d bars without a subject, want 0", n)
		}

		// A subject looked up: its windows beside the customer's, labelled.
		subjectBar := func(window, subject string) string {
			return fmt.Sprintf(`document.querySelector('#limits tr[data-key="api_calls/%s/subject"][data-subject=%q] [role=progressbar]')?.getAttribute('aria-valuenow')`, window, subject)
		}
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#subject"), "user-42"),
			chromedp.Click(chromedp.CSS(`#subject-form button[type=submit]`)),
		)
		// (The minute's bar is there too; a sliding window's count may fade
		// as the minute turns, so only the day's is compared.)
		tab.waitFor("user-42's day bar at 7", subjectBar("day", "user-42")+` === '7' && `+subjectBar("minute", "user-42")+` != null`)
		if got := tab.text(perSubject + `[data-subject="user-42"] td:nth-child(2)`); got != "day per subject user-42" {
			t.Errorf("user-42's window shows %q, want %q", got, "day per subject user-42")
		}
		if got := tab.text(perSubject + `[data-subject="user-42"] td:nth-child(7)`); got != "7 / 100" {
			t.Errorf("user-42's used cell %q, want %q", got, "7 / 100")
		}
		if got := evalIn[string](tab, barUsed("api_calls/day")); got != "10" {
			t.Errorf("the customer's day bar shows %q beside the subject's, want 10", got)
		}
		if got := tab.text("#subject-msg"); !strings.Contains(got, "user-42") {
			t.Errorf("the lookup does not say whose windows show: %q", got)
		}
		// It refreshes by itself, as the customer's bars do.
		check("user-42", 5)
		tab.waitFor("user-42's day bar at 12 and the customer's at 15", subjectBar("day", "user-42")+` === '12' && `+barUsed("api_calls/day")+` === '15'`)

		// Another subject replaces it; one the API would refuse is not sent.
		tab.do(
			chromedp.SetValue(chromedp.CSS("#subject"), "user-7"),
			chromedp.Click(chromedp.CSS(`#subject-form button[type=submit]`)),
		)
		tab.waitFor("user-7's day bar at 3, user-42's gone", subjectBar("day", "user-7")+` === '3' && `+subjectBar("day", "user-42")+` === undefined`)
		tab.do(chromedp.SetValue(chromedp.CSS("#subject"), "not a subject"))
		if !evalIn[bool](tab, `document.querySelector('#subject').validity.patternMismatch`) {
			t.Error("a subject with spaces matches the input's pattern")
		}
		tab.do(chromedp.SetValue(chromedp.CSS("#subject"), "ops@example.com/ip:10.0.0.1"))
		if evalIn[bool](tab, `document.querySelector('#subject').validity.patternMismatch`) {
			t.Error("a subject of every allowed character does not match the input's pattern")
		}
		tab.do(chromedp.Click(chromedp.CSS(`#subject-form button[type=submit]`)))
		tab.waitFor("the subject's empty windows", subjectBar("day", "ops@example.com/ip:10.0.0.1")+` === '0'`)
		tab.do(chromedp.Click(chromedp.CSS("#subject-clear")))
		tab.waitFor("the customer's windows alone", fmt.Sprintf(`document.querySelector(%q)?.textContent.includes('look one up') && document.querySelector('#limits tr[data-subject]') === null`, perSubject))

		// An override per subject: added, listed and labelled, edited and
		// deleted through ?per=subject, the customer-wide one apart.
		tab.do(chromedp.Click(chromedp.CSS("#add-override")))
		tab.waitFor("the override form", `document.querySelector('#ov-per') !== null`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-metric"), "api_calls"),
			chromedp.SetValue(chromedp.CSS("#ov-window"), "day"),
			chromedp.SetValue(chromedp.CSS("#ov-per"), "subject"),
			chromedp.SendKeys(chromedp.CSS("#ov-limit"), "500"),
			chromedp.SendKeys(chromedp.CSS("#ov-reason"), "power users"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		ovRow := `#overrides tr[data-key="api_calls/day/subject"]`
		tab.waitFor("the override per subject listed", fmt.Sprintf(`document.querySelector(%q)?.textContent.includes('power users')`, ovRow))
		if got := tab.text(ovRow + " td:nth-child(2)"); got != "day per subject" {
			t.Errorf("the override per subject shows window %q, want %q", got, "day per subject")
		}
		tab.waitFor("the limit per subject at 500 from the override", fmt.Sprintf(`(() => { const tr = document.querySelector(%q);
			return tr && tr.children[2].textContent === '500' && tr.children[4].textContent === 'override'; })()`, perSubject))
		if r := s.mustDo(200, "GET", "/v1/customers/subjects/overrides/api_calls/day?per=subject", ""); !strings.Contains(string(r.Body), `"limit":500`) {
			t.Errorf("the API does not show the override per subject: %s", r.Body)
		}
		s.mustDo(404, "GET", "/v1/customers/subjects/overrides/api_calls/day", "")

		// Adding it again is refused in the page; the customer-wide one is another override.
		tab.do(chromedp.Click(chromedp.CSS("#add-override")))
		tab.waitFor("the override form", `document.querySelector('#ov-limit')?.value === ''`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-metric"), "api_calls"),
			chromedp.SetValue(chromedp.CSS("#ov-window"), "day"),
			chromedp.SetValue(chromedp.CSS("#ov-per"), "subject"),
			chromedp.SendKeys(chromedp.CSS("#ov-limit"), "1"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		tab.waitFor("the refusal", `document.querySelector('#override-msg .error')?.textContent.includes('day per subject already')`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-per"), "customer"),
			chromedp.SetValue(chromedp.CSS("#ov-limit"), "2000"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		tab.waitFor("both overrides listed", `document.querySelector('#overrides tr[data-key="api_calls/day"]') !== null && document.querySelector('#overrides tr[data-key="api_calls/day/subject"]') !== null`)
		tab.waitFor("the customer's day limit at 2000", `document.querySelector('#limits tr[data-key="api_calls/day"] [role=progressbar]')?.getAttribute('aria-valuemax') === '2000'`)

		// Edited: its address stays, per subject.
		tab.do(chromedp.Click(chromedp.CSS(ovRow + " [data-action=edit]")))
		tab.waitFor("the edit form", `document.querySelector('#ov-limit')?.value === '500'`)
		if got := evalIn[string](tab, `(() => { const s = document.querySelector('#ov-per'); return s.value + (s.disabled ? ' disabled' : ''); })()`); got != "subject disabled" {
			t.Errorf("the edit form's per is %q, want %q", got, "subject disabled")
		}
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ov-limit"), "600"),
			chromedp.Click(chromedp.CSS("#ov-save")),
		)
		tab.waitFor("the override per subject at 600", fmt.Sprintf(`document.querySelector(%q)?.children[2].textContent === '600'`, ovRow))
		if r := s.mustDo(200, "GET", "/v1/customers/subjects/overrides/api_calls/day?per=subject", ""); !strings.Contains(string(r.Body), `"limit":600`) {
			t.Errorf("the edit did not reach the override per subject: %s", r.Body)
		}
		if r := s.mustDo(200, "GET", "/v1/customers/subjects/overrides/api_calls/day", ""); !strings.Contains(string(r.Body), `"limit":2000`) {
			t.Errorf("the edit changed the customer-wide override: %s", r.Body)
		}

		// Deleted after the page's question: the customer-wide one stays.
		tab.do(chromedp.Click(chromedp.CSS(ovRow + " [data-action=delete]")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open && document.querySelector('#confirm-text').textContent.includes('per subject')`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("the override per subject gone", fmt.Sprintf(`document.querySelector(%q) === null && document.querySelector('#override-msg .notice')?.textContent.includes('deleted')`, ovRow))
		s.mustDo(404, "GET", "/v1/customers/subjects/overrides/api_calls/day?per=subject", "")
		s.mustDo(200, "GET", "/v1/customers/subjects/overrides/api_calls/day", "")
		tab.waitFor("the plan's limit per subject again", fmt.Sprintf(`document.querySelector(%q)?.children[4].textContent === 'plan'`, perSubject))
	})

	t.Run("metrics page: credit pools, and an edit keeps the schema", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/metrics/gpt4_tokens", `{"description": "<img src=x onerror=alert(1)>"}`)
		s.mustDo(201, "PUT", "/v1/metrics/images", `{}`)
		s.mustDo(201, "PUT", "/v1/metrics/credits", `{"description": "Credits", "capacity": {"day": 1000000},
			"credit_schema": [{"metric": "gpt4_tokens", "credits": 3, "per": 100}, {"metric": "images", "credits": 10}]}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/metrics")
		row := func(key string) string { return fmt.Sprintf(`#metrics tr[data-key=%q]`, key) }
		tab.waitFor("the pool's schema", fmt.Sprintf(`document.querySelector(%q) !== null`, row("credits")+` li[data-metric="images"]`))
		for sel, want := range map[string]string{
			row("credits") + ` li[data-metric="gpt4_tokens"]`: "3 credits per 100 gpt4_tokens",
			row("credits") + ` li[data-metric="images"]`:      "10 credits per unit of images",
			row("gpt4_tokens") + ` [data-pool="credits"]`:     "Draws on pool credits: 3 credits per 100 gpt4_tokens",
			row("images") + ` [data-pool="credits"]`:          "Draws on pool credits: 10 credits per unit of images",
			row("api_calls") + " td:nth-child(4)":             "—",
		} {
			if got := tab.text(sel); got != want {
				t.Errorf("%s shows %q, want %q", sel, got, want)
			}
		}
		// A description with markup shows as text, in the list and in the form.
		if got := tab.text(row("gpt4_tokens") + " td:nth-child(2)"); got != "<img src=x onerror=alert(1)>" {
			t.Errorf("gpt4_tokens' description shows as %q, want it as text", got)
		}
		tab.do(chromedp.Click(chromedp.CSS(row("gpt4_tokens") + " [data-action=edit]")))
		tab.waitFor("gpt4_tokens' form", `document.querySelector('#mt-description')?.value === '<img src=x onerror=alert(1)>'`)
		if n := evalIn[int](tab, `document.querySelectorAll('main img').length`); n != 0 {
			t.Errorf("the page has %d img elements: a description was parsed as HTML", n)
		}

		// Saving the pool's capacity sends its schema back, untouched.
		tab.do(chromedp.Click(chromedp.CSS(row("credits") + " [data-action=edit]")))
		tab.waitFor("the pool's form, its schema in it", `document.querySelectorAll('#mt-rates [data-rate]').length === 2 && document.querySelector('#mt-capacity-day')?.value === '1000000'`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#mt-capacity-day"), "2000000"),
			chromedp.Click(chromedp.CSS("#mt-save")),
		)
		tab.waitFor("the save", `document.querySelector('#metric-msg .notice')?.textContent.includes('credits saved')`)
		r := s.mustDo(200, "GET", "/v1/metrics/credits", "")
		if body := string(r.Body); !strings.Contains(body, `"capacity":{"day":2000000}`) ||
			!strings.Contains(body, `"credit_schema":[{"metric":"gpt4_tokens","credits":3,"per":100},{"metric":"images","credits":10,"per":1}]`) ||
			!strings.Contains(body, `"description":"Credits"`) {
			t.Errorf("after saving the capacity the pool is %s, want its schema and description as they were", body)
		}

		// The schema edited: images no longer draws on it.
		tab.do(chromedp.Click(chromedp.CSS(row("credits") + " [data-action=edit]")))
		tab.waitFor("the pool's form", `document.querySelectorAll('#mt-rates [data-rate]').length === 2`)
		tab.do(
			chromedp.Click(chromedp.CSS(`#mt-rates [data-rate]:nth-child(2) [data-action=remove-rate]`)),
			chromedp.SetValue(chromedp.CSS(`#mt-rates [data-rate]:nth-child(1) [data-field=credits]`), "4"),
			chromedp.Click(chromedp.CSS("#mt-save")),
		)
		tab.waitFor("images drawing on nothing", fmt.Sprintf(`document.querySelector(%q)?.textContent === '—' && document.querySelector(%q)?.textContent === '4 credits per 100 gpt4_tokens'`,
			row("images")+" td:nth-child(4)", row("credits")+` li[data-metric="gpt4_tokens"]`))
		if r := s.mustDo(200, "GET", "/v1/metrics/credits", ""); !strings.Contains(string(r.Body), `"credit_schema":[{"metric":"gpt4_tokens","credits":4,"per":100}]`) {
			t.Errorf("the edited schema is not the pool's: %s", r.Body)
		}
		// A schema the API refuses shows its field error.
		tab.do(chromedp.Click(chromedp.CSS(row("gpt4_tokens") + " [data-action=edit]")))
		tab.waitFor("gpt4_tokens' form", `document.querySelector('#metric-editor h3')?.textContent.includes('gpt4_tokens')`)
		tab.do(
			chromedp.Click(chromedp.CSS("#mt-add-rate")),
			chromedp.SetValue(chromedp.CSS(`#mt-rates [data-rate] [data-field=metric]`), "images"),
			chromedp.SetValue(chromedp.CSS(`#mt-rates [data-rate] [data-field=credits]`), "1"),
			chromedp.Click(chromedp.CSS("#mt-save")),
		)
		tab.waitFor("the refusal", `document.querySelector('#metric-msg .error')?.textContent.includes('credit_schema')`)

		// An edit made meanwhile by someone else is a 412, shown, and nothing is overwritten.
		tab.do(chromedp.Click(chromedp.CSS(row("images") + " [data-action=edit]")))
		tab.waitFor("images' form", `document.querySelector('#metric-editor h3')?.textContent.includes('images')`)
		s.mustDo(200, "PUT", "/v1/metrics/images", `{"description": "someone else"}`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#mt-description"), "mine"),
			chromedp.Click(chromedp.CSS("#mt-save")),
		)
		tab.waitFor("the 412 shown", `document.querySelector('#metric-msg .error')?.textContent.includes('412')`)
		tab.waitFor("the list reloaded with their change", fmt.Sprintf(`document.querySelector(%q)?.textContent === 'someone else'`, row("images")+" td:nth-child(2)"))
		tab.mu.Lock()
		defer tab.mu.Unlock()
		if len(tab.dialogs) != 0 {
			t.Errorf("dialogs opened: %q", tab.dialogs)
		}
	})

	t.Run("a name with markup shows as text", func(t *testing.T) {
		const name = "<img src=x onerror=alert(1)>"
		tab := newTab(t, browser, s.URL)
		// The detector works: a dialog the page opens is seen.
		tab.do(chromedp.Navigate(tab.url), chromedp.WaitVisible(chromedp.CSS("#token")))
		tab.do(chromedp.Evaluate[chromedp.Void](`alert('control')`))
		tab.mu.Lock()
		seen := len(tab.dialogs)
		tab.dialogs = nil
		tab.mu.Unlock()
		if seen != 1 {
			t.Fatalf("the dialog detector saw %d dialogs of a control alert, want 1", seen)
		}

		tab.signIn(adminToken)
		tab.open("#/customers?q=xss")
		tab.waitFor("xss listed", `document.querySelector('#customers tbody tr td:nth-child(2)') !== null`)
		if got := tab.text("#customers tbody tr td:nth-child(2)"); got != name {
			t.Errorf("list shows name %q, want %q as text", got, name)
		}
		tab.open("#/customers/xss")
		tab.waitFor("xss's page", `document.querySelector('#customer-name') !== null && document.querySelector('#limits table') !== null`)
		if got := tab.text("#customer-name"); got != name {
			t.Errorf("heading %q, want %q as text", got, name)
		}
		if n := evalIn[int](tab, `document.querySelectorAll('main img, table img').length`); n != 0 {
			t.Errorf("the page has %d img elements: the name was parsed as HTML", n)
		}
		// Give an injected image every chance to fail and fire: wait for
		// the usage refresh to run again.
		tab.waitFor("a refresh", `(() => { window.__seen = window.__seen || document.querySelector('#limits table'); return document.querySelector('#limits table') !== window.__seen; })()`)
		tab.mu.Lock()
		defer tab.mu.Unlock()
		if len(tab.dialogs) != 0 {
			t.Errorf("dialogs opened: %q", tab.dialogs)
		}
	})
}

// TestConsoleServing checks the console's files and headers over plain
// HTTP: they need no token, the data calls do.
func TestConsoleServing(t *testing.T) {
	t.Parallel()
	s := MustStartServer(t, nil, nil)
	cases := []struct {
		path, contentType string
		want              int
	}{
		{"/console/", "text/html", http.StatusOK},
		{"/console/js/app.js", "text/javascript", http.StatusOK},
		{"/console/app.css", "text/css", http.StatusOK},
		{"/console/nope.js", "", http.StatusNotFound},
		{"/console/js/", "", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			r := s.do("GET", c.path, "", "Authorization", "")
			if r.Status != c.want {
				t.Fatalf("status %d, want %d", r.Status, c.want)
			}
			if c.contentType != "" && !strings.HasPrefix(r.Header.Get("Content-Type"), c.contentType) {
				t.Errorf("Content-Type %q, want %s", r.Header.Get("Content-Type"), c.contentType)
			}
			for name, want := range map[string]string{
				"X-Frame-Options":        "DENY",
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "no-referrer",
			} {
				if got := r.Header.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			csp := r.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "connect-src 'self'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("Content-Security-Policy %q allows inline code", csp)
			}
		})
	}
	t.Run("the page has no inline script or style", func(t *testing.T) {
		body := string(s.mustDo(200, "GET", "/console/", "", "Authorization", "").Body)
		for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onload=", "http://", "https://"} {
			if strings.Contains(body, bad) {
				t.Errorf("index.html contains %q", bad)
			}
		}
	})
	t.Run("data calls need the admin token", func(t *testing.T) {
		for _, path := range []string{"/v1/customers", "/v1/plans", "/v1/audit"} {
			if r := s.do("GET", path, "", "Authorization", ""); r.Status != http.StatusUnauthorized {
				t.Errorf("GET %s without a token: %d, want 401", path, r.Status)
			}
			if r := s.do("GET", path, "", "Authorization", "Bearer "+checkToken); r.Status != http.StatusForbidden {
				t.Errorf("GET %s with a check token: %d, want 403", path, r.Status)
			}
		}
	})
}

// TestConsoleScreenshots writes the customer page at 1280 px and at phone
// width as PNGs into the directory QUOTAD_CONSOLE_SCREENSHOTS names (the
// README's screenshots: QUOTAD_CONSOLE_SCREENSHOTS=../../docs from
// cmd/quotad); it skips when the variable is unset.
func TestConsoleScreenshots(t *testing.T) {
	dir := os.Getenv("QUOTAD_CONSOLE_SCREENSHOTS")
	if dir == "" {
		t.Skip("QUOTAD_CONSOLE_SCREENSHOTS is unset")
	}
	browser := MustBrowser(t)
	s := MustStartServer(t, nil, nil)
	mustSeedConsole(s)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day", `{"limit": 1500, "mode": "soft", "overage_percent": 50, "reason": "launch week", "expires_at": "2030-01-01T00:00:00Z"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/minute", `{"limit": 5000, "reason": "batch import"}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/overrides/api_calls/day?per=subject", `{"limit": 1200, "reason": "per end user"}`)
	s.mustDo(201, "POST", "/v1/customers/acme/keys", `{"name": "production backend"}`)
	s.mustDo(201, "POST", "/v1/customers/acme/keys", `{"name": "ci", "expires_at": "2030-01-01T00:00:00Z"}`)
	for i := range 9 {
		subject := []string{"user-42", "user-7"}[i%2]
		s.mustDo(200, "POST", "/v1/check", `{"customer": "acme", "metric": "api_calls", "subject": "`+subject+`", "cost": `+strconv.Itoa(150+i*17)+`}`, "Authorization", "Bearer "+checkToken)
	}
	for _, size := range []struct {
		name          string
		width, height int64
		opts          []chromedp.EmulateViewportOption
	}{
		{"console-customer-1280.png", 1280, 900, nil},
		{"console-customer-phone.png", 390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulatePortrait}},
	} {
		tab := newTab(t, browser, s.URL)
		tab.do(chromedp.EmulateViewport(size.width, size.height, size.opts...))
		tab.signIn(adminToken)
		tab.open("#/customers/acme")
		tab.waitFor("the page loaded", `document.querySelector('#limits table') && document.querySelector('#chart svg') && document.querySelector('#overrides table') && document.querySelector('#keys table') && document.querySelector('#customer-audit table')`)
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#subject"), "user-42"),
			chromedp.Click(chromedp.CSS(`#subject-form button[type=submit]`)),
		)
		tab.waitFor("user-42's windows", `document.querySelector('#limits tr[data-subject="user-42"] [role=progressbar]') !== null`)
		tab.do(chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); window.scrollTo(0, 0)`))
		ctx, cancel := context.WithTimeout(tab.ctx, consoleWait)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+size.name, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s/%s (%d bytes)", dir, size.name, len(png))
	}
}
