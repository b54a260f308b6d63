package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
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

// newTab opens a tab; opts are the tab context's (a browser context of its own, say).
func newTab(t testing.TB, browser context.Context, base string, opts ...chromedp.ContextOption) *consoleTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, opts...)
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

// mustEditPlan writes plan key through the API with change made to it,
// sending the rest back as GET gave it (a change of public or of the
// description alone makes no new version).
func mustEditPlan(t testing.TB, s *testServer, key string, change func(spec map[string]any)) {
	t.Helper()
	p := s.mustDo(200, "GET", "/v1/plans/"+key, "").JSON(t)
	spec := map[string]any{}
	for _, f := range []string{"name", "description", "public", "price", "limits", "features"} {
		spec[f] = p[f]
	}
	change(spec)
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	s.mustDo(200, "PUT", "/v1/plans/"+key, string(b))
}

// mustSetPublic makes plan key public or not through the API.
func mustSetPublic(t testing.TB, s *testServer, key string, public bool) {
	t.Helper()
	mustEditPlan(t, s, key, func(spec map[string]any) { spec["public"] = public })
}

// mustSeedDayUsedUp puts customer id on free with its day's 1,000 units
// used: an override lifts free's minute (600), which would deny them at once.
func mustSeedDayUsedUp(s *testServer, id string) {
	s.t.Helper()
	s.mustDo(201, "PUT", "/v1/customers/"+id, `{"plan": "free", "name": "Day used up"}`)
	s.mustDo(201, "PUT", "/v1/customers/"+id+"/overrides/api_calls/minute", `{"limit": 5000, "reason": "batch import"}`)
	s.mustDo(200, "POST", "/v1/check", `{"customer": "`+id+`", "metric": "api_calls", "cost": 1000}`, "Authorization", "Bearer "+checkToken)
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

	t.Run("the sign-in page shows no menu", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.do(chromedp.Navigate(tab.url), chromedp.WaitVisible(chromedp.CSS("#token")))
		// Hidden as the page sees it: not drawn, not in the layout, not
		// reachable with Tab.
		shown := `(() => { const nav = document.querySelector('#nav'), out = document.querySelector('#signout');
			return getComputedStyle(nav).display !== 'none' || out.getClientRects().length > 0; })()`
		if evalIn[bool](tab, shown) {
			t.Errorf("the menu shows on the sign-in page: nav display %q", evalIn[string](tab, `getComputedStyle(document.querySelector('#nav')).display`))
		}
		tab.do(chromedp.SendKeys(chromedp.CSS("#token"), adminToken+"\r"))
		tab.waitFor("the menu, once signed in", shown+` && document.querySelector('#customers') !== null`)
		tab.do(chromedp.Click(chromedp.CSS("#signout")))
		tab.waitFor("the menu hidden again after signing out", `location.hash === '#/signin' && getComputedStyle(document.querySelector('#nav')).display === 'none'`)
	})

	t.Run("the page's icon is served, and nothing is refused", func(t *testing.T) {
		// A browser context of its own: the browser keeps the icons it
		// fetched for the other tabs, and would not ask again.
		tab := newTab(t, browser, s.URL, chromedp.WithNewBrowserContext())
		type answer struct {
			url, mime string
			status    int64
		}
		var (
			mu      sync.Mutex
			answers []answer
		)
		icon := make(chan answer, 1)
		responses := chromedp.Events(tab.ctx, network.ResponseReceived)
		go func() {
			for ev, err := range responses {
				if err != nil {
					return
				}
				a := answer{url: ev.Response.URL, mime: ev.Response.MimeType, status: ev.Response.Status}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if strings.Contains(a.url, "favicon") {
					select {
					case icon <- a:
					default:
					}
				}
			}
		}()
		tab.do(chromedp.Navigate(tab.url), chromedp.WaitVisible(chromedp.CSS("#token")))
		// The browser asks for the icon once the page has loaded: wait for
		// its answer, whichever address it asks.
		select {
		case a := <-icon:
			if a.status != http.StatusOK || !strings.HasPrefix(a.mime, "image/") {
				t.Errorf("the icon %s: %d %s, want 200 and an image", a.url, a.status, a.mime)
			}
		case <-time.After(consoleWait):
			t.Fatal("the browser asked for no icon")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range answers {
			if a.status == http.StatusUnauthorized {
				t.Errorf("GET %s was answered 401", a.url)
			}
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
		// The stale editor is closed: saving it again would only meet
		// another 412. The message points where the list is: above it.
		if n := evalIn[int](tab, `document.querySelectorAll('#override-editor').length`); n != 0 {
			t.Errorf("the stale editor is still open after the 412 (%d editors)", n)
		}
		msg := tab.text("#override-msg .error")
		if !strings.Contains(msg, "list above") || strings.Contains(msg, "below") {
			t.Errorf("the 412's message %q does not point to the list above it", msg)
		}
		if !evalIn[bool](tab, `!!(document.querySelector('#overrides').compareDocumentPosition(document.querySelector('#override-msg')) & Node.DOCUMENT_POSITION_FOLLOWING)`) {
			t.Error("the message is not below the list it says is above")
		}
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
		// globex was created today: the chart's fewest days.
		if n := evalIn[int](tab, `document.querySelectorAll('#chart svg g[data-date]').length`); n != 7 {
			t.Errorf("the chart has %d days, want 7", n)
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

	t.Run("features: values now, overrides set, edited and removed", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/plans/featured", `{"name": "Featured", "limits": [{"metric": "api_calls", "window": "day", "limit": 1000}],
			"features": {"sso": false, "max_projects": 3, "support": "email"}}`)
		s.mustDo(201, "PUT", "/v1/customers/feat", `{"plan": "featured", "name": "Feat"}`)
		s.mustDo(201, "PUT", "/v1/customers/feat/features/beta_ui", `{"value": true, "expires_at": "2030-01-01T00:00:00Z", "reason": "pilot"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/feat")
		row := func(key string) string { return fmt.Sprintf(`#features tr[data-feature=%q]`, key) }
		cells := func(key string) string {
			return evalIn[string](tab, fmt.Sprintf(`[...document.querySelector(%q)?.children ?? []].slice(0, 6).map((td) => td.textContent).join(' | ')`, row(key)))
		}
		tab.waitFor("the features", fmt.Sprintf(`document.querySelector(%q) !== null`, row("support")))
		for key, want := range map[string]string{
			"max_projects": "max_projects | 3 | plan | — |  | ",
			"sso":          "sso | false | plan | — |  | ",
			"support":      `support | "email" | plan | — |  | `,
		} {
			if got := cells(key); got != want {
				t.Errorf("%s reads %q, want %q", key, got, want)
			}
		}
		if got := cells("beta_ui"); !strings.HasPrefix(got, "beta_ui | true | override | true | ") || !strings.Contains(got, "2030") || !strings.HasSuffix(got, " | pilot") {
			t.Errorf("beta_ui reads %q, want true from an override until 2030, reason pilot", got)
		}

		// Set: from a plan's feature's row (sso, a boolean), and from the
		// form for one of each type.
		tab.do(chromedp.Click(chromedp.CSS(row("sso") + " [data-action=override]")))
		tab.waitFor("sso's form", `document.querySelector('#ft-key')?.value === 'sso' && document.querySelector('#ft-key').disabled && document.querySelector('#ft-type').value === 'boolean'`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ft-value"), "true"),
			chromedp.SetValue(chromedp.CSS("#ft-expires"), "2030-01-01T00:00"),
			chromedp.SendKeys(chromedp.CSS("#ft-reason"), "SSO pilot"),
			chromedp.Click(chromedp.CSS("#ft-save")),
		)
		tab.waitFor("sso true from an override", fmt.Sprintf(`document.querySelector(%q)?.children[2].textContent === 'override' && document.querySelector('#feature-msg .notice') !== null`, row("sso")))
		if got := cells("sso"); !strings.HasPrefix(got, "sso | true | override | true | ") || !strings.HasSuffix(got, " | SSO pilot") {
			t.Errorf("sso reads %q", got)
		}
		for _, c := range []struct{ key, typ, value, want string }{
			{"max_projects", "integer", "10", "10"},
			{"support", "text", "priority", `"priority"`},
			{"exports", "boolean", "true", "true"},
		} {
			tab.do(chromedp.Click(chromedp.CSS("#add-feature")))
			tab.waitFor("the feature form", `document.querySelector('#ft-key')?.value === '' && !document.querySelector('#ft-key').disabled`)
			tab.do(
				chromedp.SendKeys(chromedp.CSS("#ft-key"), c.key),
				chromedp.SetValue(chromedp.CSS("#ft-type"), c.typ),
				chromedp.Evaluate[chromedp.Void](`document.querySelector('#ft-type').dispatchEvent(new Event('change'))`),
				chromedp.SetValue(chromedp.CSS("#ft-value"), c.value),
				chromedp.Click(chromedp.CSS("#ft-save")),
			)
			tab.waitFor(c.key+" from an override", fmt.Sprintf(`document.querySelector(%q)?.children[2].textContent === 'override'`, row(c.key)))
			if got := tab.text(row(c.key) + " td:nth-child(2)"); got != c.want {
				t.Errorf("%s's value now %q, want %q", c.key, got, c.want)
			}
		}
		r := s.mustDo(200, "GET", "/v1/customers/feat/features", "").JSON(t)
		if got, want := fmt.Sprint(r["features"]), "map[beta_ui:true exports:true max_projects:10 sso:true support:priority]"; got != want {
			t.Errorf("the API's features %s, want %s", got, want)
		}

		// Refused: an expiry in the past, with the problem's field; the
		// same override again (it would replace it).
		tab.do(chromedp.Click(chromedp.CSS("#add-feature")))
		tab.waitFor("the feature form", `document.querySelector('#ft-key')?.value === ''`)
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#ft-key"), "audit_export"),
			chromedp.SetValue(chromedp.CSS("#ft-expires"), "2020-01-01T00:00"),
			chromedp.Click(chromedp.CSS("#ft-save")),
		)
		tab.waitFor("the refusal", `document.querySelector('#feature-msg .error')?.textContent.includes('expires_at')`)
		s.mustDo(404, "DELETE", "/v1/customers/feat/features/audit_export", "")
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ft-key"), "sso"),
			chromedp.SetValue(chromedp.CSS("#ft-expires"), ""),
			chromedp.Click(chromedp.CSS("#ft-save")),
		)
		tab.waitFor("the refusal", `document.querySelector('#feature-msg .error')?.textContent.includes('edit it instead')`)

		// Edited, with the version shown.
		tab.do(chromedp.Click(chromedp.CSS(row("max_projects") + " [data-action=edit]")))
		tab.waitFor("max_projects' form", `document.querySelector('#ft-value')?.value === '10' && document.querySelector('#ft-type').value === 'integer'`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ft-value"), "25"),
			chromedp.Click(chromedp.CSS("#ft-save")),
		)
		tab.waitFor("max_projects at 25", fmt.Sprintf(`document.querySelector(%q)?.children[1].textContent === '25'`, row("max_projects")))

		// A concurrent edit is a 412: the stale editor closes, the list
		// shows their change.
		tab.do(chromedp.Click(chromedp.CSS(row("support") + " [data-action=edit]")))
		tab.waitFor("support's form", `document.querySelector('#ft-value')?.value === 'priority'`)
		s.mustDo(200, "PUT", "/v1/customers/feat/features/support", `{"value": "premium", "reason": "someone else"}`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#ft-value"), "mine"),
			chromedp.Click(chromedp.CSS("#ft-save")),
		)
		tab.waitFor("the 412 shown, the editor closed and their change listed", fmt.Sprintf(`document.querySelector('#feature-msg .error')?.textContent.includes('412')
			&& document.querySelector('#feature-editor') === null && document.querySelector(%q)?.textContent.includes('someone else')`, row("support")))

		// Removed after the page's question: the plan's value again.
		tab.do(chromedp.Click(chromedp.CSS(row("sso") + " [data-action=delete]")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open && document.querySelector('#confirm-text').textContent.includes('sso')`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("sso false from the plan", fmt.Sprintf(`document.querySelector(%q)?.children[2].textContent === 'plan'`, row("sso")))
		if got := cells("sso"); got != "sso | false | plan | — |  | " {
			t.Errorf("sso reads %q after its override's removal", got)
		}
		s.mustDo(404, "DELETE", "/v1/customers/feat/features/sso", "")
		tab.waitFor("the removal in the audit trail", `[...document.querySelectorAll('#customer-audit tbody tr')].some((tr) => tr.children[2]?.textContent === 'delete' && tr.children[3]?.textContent.includes('features/sso'))`)
	})

	t.Run("grants: issued once however often sent, drawn, voided", func(t *testing.T) {
		// (A metric without capacity: checks of one with a capacity draw on no grant.)
		s.mustDo(201, "PUT", "/v1/metrics/tokens", `{}`)
		s.mustDo(201, "PUT", "/v1/plans/daily", `{"name": "Daily", "limits": [{"metric": "tokens", "window": "day", "limit": 100}]}`)
		s.mustDo(201, "PUT", "/v1/customers/topped", `{"plan": "daily", "name": "Topped"}`)
		tab := newTab(t, browser, s.URL)
		// The answers to the page's POSTs of grants.
		posts := make(chan int64, 8)
		responses := chromedp.Events(tab.ctx, network.ResponseReceived)
		go func() {
			for ev, err := range responses {
				if err != nil {
					return
				}
				if strings.HasSuffix(ev.Response.URL, "/v1/customers/topped/grants") {
					posts <- ev.Response.Status
				}
			}
		}()
		tab.signIn(adminToken)
		tab.open("#/customers/topped")
		tab.waitFor("the grants section", `document.querySelector('#grants')?.textContent.includes('No grants') && document.querySelector('#grant-amount') !== null`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#grant-metric"), "tokens"),
			chromedp.SendKeys(chromedp.CSS("#grant-amount"), "5000"),
			chromedp.SendKeys(chromedp.CSS("#grant-priority"), "1"),
			chromedp.SetValue(chromedp.CSS("#grant-expires"), "2030-01-01T00:00"),
			chromedp.SendKeys(chromedp.CSS("#grant-reason"), "top-up pack"),
			// Sent twice before the first answer comes (a double click,
			// a double Enter): one request id, one grant.
			chromedp.Evaluate[chromedp.Void](`(() => { const f = document.querySelector('#grant-form'); f.requestSubmit(); f.requestSubmit(); })()`),
		)
		var statuses []int64
		for len(statuses) < 2 {
			select {
			case st := <-posts:
				statuses = append(statuses, st)
			case <-time.After(consoleWait):
				t.Fatalf("the page's POSTs were answered %v, want two answers", statuses)
			}
		}
		if !(statuses[0] == 201 && statuses[1] == 200 || statuses[0] == 200 && statuses[1] == 201) {
			t.Errorf("the two POSTs were answered %v, want 201 and 200 (a repeat)", statuses)
		}
		list := s.mustDo(200, "GET", "/v1/customers/topped/grants?all=true", "").JSON(t)["grants"].([]any)
		if len(list) != 1 {
			t.Fatalf("%d grants, want 1: %v", len(list), list)
		}
		g := list[0].(map[string]any)
		id, _ := g["id"].(string)
		if g["amount"] != 5000.0 || g["priority"] != 1.0 || g["reason"] != "top-up pack" || g["expires_at"] == nil {
			t.Errorf("the grant is %v", g)
		}
		row := fmt.Sprintf(`#grants tr[data-grant-id=%q]`, id)
		tab.waitFor("the grant listed", fmt.Sprintf(`document.querySelector(%q) !== null && document.querySelector('#grant-msg .notice')?.textContent.includes('5,000 units')`, row))
		cells := func() string {
			return evalIn[string](tab, fmt.Sprintf(`[...document.querySelector(%q).children].map((td) => td.textContent).join(' | ')`, row))
		}
		if got := cells(); !strings.HasPrefix(got, id+" | tokens | 5,000 | 5,000 | 1 | ") || !strings.Contains(got, "2030") || !strings.Contains(got, " | top-up pack | live | Void") {
			t.Errorf("the grant's row reads %q", got)
		}
		if got := evalIn[string](tab, `document.querySelector('#grant-amount').value`); got != "" {
			t.Errorf("the form keeps the amount %q after the grant", got)
		}

		// Checks beyond the day's 100 draw on it; the page shows what remains.
		s.mustDo(200, "POST", "/v1/check", `{"customer": "topped", "metric": "tokens", "cost": 100}`, "Authorization", "Bearer "+checkToken)
		r := s.mustDo(200, "POST", "/v1/check", `{"customer": "topped", "metric": "tokens", "cost": 10}`, "Authorization", "Bearer "+checkToken).JSON(t)
		if r["granted"] != 10.0 {
			t.Fatalf("the check beyond the limit drew %v, want 10", r["granted"])
		}
		tab.waitFor("4,990 remaining", fmt.Sprintf(`document.querySelector(%q)?.children[3].textContent === '4,990'`, row))

		// Refused: an expiry in the past shows the problem's field; nothing is granted.
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#grant-amount"), "10"),
			chromedp.SetValue(chromedp.CSS("#grant-expires"), "2020-01-01T00:00"),
			chromedp.Click(chromedp.CSS("#grant-issue")),
		)
		tab.waitFor("the refusal", `document.querySelector('#grant-msg .error')?.textContent.includes('expires_at')`)

		// Voided after the page's question (cancelled once).
		tab.do(chromedp.Click(chromedp.CSS(row + " [data-action=void]")))
		tab.waitFor("the confirmation", fmt.Sprintf(`document.querySelector('#confirm').open && document.querySelector('#confirm-text').textContent.includes(%q)`, id))
		tab.do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
		tab.waitFor("the dialog closed", `!document.querySelector('#confirm').open`)
		if n := len(s.mustDo(200, "GET", "/v1/customers/topped/grants", "").JSON(t)["grants"].([]any)); n != 1 {
			t.Fatalf("a cancelled void voided: %d live grants", n)
		}
		tab.do(chromedp.Click(chromedp.CSS(row + " [data-action=void]")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("the grant voided", fmt.Sprintf(`document.querySelector(%q)?.textContent === 'voided' && document.querySelector(%q) === null
			&& document.querySelector('#grant-msg .notice')?.textContent.includes('voided')`, row+" .badge", row+" [data-action=void]"))
		if n := len(s.mustDo(200, "GET", "/v1/customers/topped/grants", "").JSON(t)["grants"].([]any)); n != 0 {
			t.Errorf("%d live grants after the void, want 0", n)
		}
		s.mustDo(404, "DELETE", "/v1/grants/"+id, "")
		tab.waitFor("the grant's creation and void in the audit trail", fmt.Sprintf(`['create', 'delete'].every((a) => [...document.querySelectorAll('#customer-audit tbody tr')].some((tr) => tr.children[2]?.textContent === a && tr.children[3]?.textContent === %q))`, "grants/"+id))
	})

	t.Run("a new customer's chart: its days, labelled", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/newbie", `{"plan": "free", "name": "Newbie"}`)
		s.mustDo(200, "POST", "/v1/check", `{"customer": "newbie", "metric": "api_calls", "cost": 4}`, "Authorization", "Bearer "+checkToken)
		now := time.Now().UTC()
		var week []string
		for i := 6; i >= 0; i-- {
			week = append(week, now.AddDate(0, 0, -i).Format(time.DateOnly))
		}
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/newbie")
		tab.waitFor("today's bar", fmt.Sprintf(`document.querySelector('#chart g[data-date=%q] rect.used') !== null`, week[6]))
		dates := func(sel string) []string {
			return evalIn[[]string](tab, fmt.Sprintf(`[...document.querySelectorAll(%q)].map((e) => e.getAttribute('data-date'))`, sel))
		}
		// Created today: a week, not 90 days with one bar at the edge.
		if got := dates("#chart svg g[data-date]"); strings.Join(got, " ") != strings.Join(week, " ") {
			t.Errorf("the chart's days are %q, want the last 7 %q", got, week)
		}
		// Every day of a week is labelled under the axis, not the ends alone.
		if got := dates("#chart svg text.tick"); len(got) != 7 {
			t.Errorf("the axis labels %d days (%q), want 7", len(got), got)
		}
		if n := evalIn[int](tab, `document.querySelectorAll('#chart svg rect.before').length`); n != 1 {
			t.Errorf("%d shaded spans before the customer's creation, want 1", n)
		}
		if got := tab.text("#chart-span"); !strings.Contains(got, "Since the customer was created") || !strings.Contains(got, "1 day, today included") {
			t.Errorf("the chart's span reads %q", got)
		}
		// At phone width the labels thin out, still ending with today.
		ctx, cancel := context.WithTimeout(tab.ctx, consoleWait)
		defer cancel()
		ticks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`import('./js/chart.js').then((m) => {
			const days = m.dayList(new Date(), 90).map((date) => ({ date, used: 0, overage: 0, denied: 0 }));
			return [...m.usageChart('api_calls', days, 390).querySelectorAll('text.tick')].map((e) => e.getAttribute('data-date'));
		})`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if len(ticks) < 3 || len(ticks) > 6 || ticks[len(ticks)-1] != week[6] {
			t.Errorf("90 days at 390 px are labelled at %q, want 3 to 6 dates ending with today", ticks)
		}
	})

	t.Run("plurals", func(t *testing.T) {
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/newbie")
		tab.waitFor("the chart's data", `document.querySelector('#chart details summary') !== null`)
		for sel, want := range map[string]string{
			"#chart details summary": "Data (1 day with activity)",
			"#chart-span":            "1 day, today included",
			"main section p.muted":   "Refreshed every 3 seconds.",
		} {
			if got := tab.text(sel); !strings.Contains(got, want) {
				t.Errorf("%s reads %q, want %q", sel, got, want)
			}
		}
		if got := evalIn[string](tab, `document.querySelector('#chart svg').getAttribute('aria-label')`); !strings.HasSuffix(got, "last 7 days") {
			t.Errorf("the chart's label %q", got)
		}
		ctx, cancel := context.WithTimeout(tab.ctx, consoleWait)
		defer cancel()
		cases := []struct {
			n         int
			one, want string
		}{
			{0, "day", "0 days"},
			{1, "day", "1 day"},
			{2, "day", "2 days"},
			{1000, "credit", "1,000 credits"},
			{1, "denied check", "1 denied check"},
		}
		for _, c := range cases {
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`import('./js/ui.js').then((m) => m.count(%d, %q))`, c.n, c.one), chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("count(%d, %q) = %q, want %q", c.n, c.one, got, c.want)
			}
		}
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
		s.mustDo(200, "POST", "/v1/check", `{"customer": "hooked", "metric": "api_calls", "cost": 550}`, "Authorization", "Bearer "+checkToken)
		// quotad hears of the new webhook through PostgreSQL: a check made
		// before it did goes unnoticed, and the next check of the window
		// notices the crossing. So, on a busy machine, check again until
		// the delivery comes (1 unit each: the minute's 600 leave room for 50).
		deadline := time.After(consoleWait)
		for done := false; !done; {
			select {
			case <-delivered:
				done = true
			case <-time.After(time.Second):
				s.do("POST", "/v1/check", `{"customer": "hooked", "metric": "api_calls", "cost": 1}`, "Authorization", "Bearer "+checkToken)
			case <-deadline:
				t.Fatal("no webhook delivery")
			}
		}

		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/plans")
		tab.waitFor("the Pro plan", `document.querySelector('main')?.textContent.includes('Pro (pro)')`)
		if got := tab.text("main"); !strings.Contains(got, "$49.00") || !strings.Contains(got, "100,000") {
			t.Errorf("plans page lacks Pro's price or day limit: %q", got)
		}
		// 1,000 micros an overage unit: a tenth of a cent, not $0.00.
		if got := tab.text("[data-plan=pro]"); !strings.Contains(got, "20% at $0.001 / unit") {
			t.Errorf("Pro's overage price is not $0.001 a unit: %q", got)
		}
		tab.waitFor("Pro's versions", `document.querySelector('[data-plan=pro] .versions table')?.textContent.includes('$49.00 per month')`)
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
		if k := s.mustDo(200, "GET", "/v1/keys/"+id, "").JSON(t); k["revoked_at"] == nil {
			t.Errorf("the revoked key reads %v, want its revoked_at", k)
		}
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

	t.Run("suspend with a reason, then resume", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/susp", `{"plan": "free", "name": "Susp", "metadata": {"crm_id": "7"}}`)
		check := `{"customer": "susp", "metric": "api_calls"}`
		s.mustDo(200, "POST", "/v1/check", check, "Authorization", "Bearer "+checkToken)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/susp")
		tab.waitFor("the suspend form", `document.querySelector('#suspend-reason') !== null && document.querySelector('#customer-status .badge')?.textContent === 'active'`)
		tab.do(
			chromedp.SendKeys(chromedp.CSS("#suspend-reason"), "card declined"),
			chromedp.Click(chromedp.CSS("#suspend")),
		)
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open && document.querySelector('#confirm-text').textContent.includes('susp')`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("suspended, with its reason", `document.querySelector('#customer-status .badge')?.textContent === 'suspended'
			&& document.querySelector('#status-reason')?.textContent === 'card declined' && document.querySelector('#resume') !== null`)
		p := MustProblem(t, s.do("POST", "/v1/check", check, "Authorization", "Bearer "+checkToken), http.StatusForbidden, "customer_suspended")
		if d, _ := p["detail"].(string); !strings.Contains(d, "card declined") {
			t.Errorf("the refusal's detail %q lacks the reason", d)
		}
		tab.waitFor("the suspension in the audit trail", `document.querySelector('#customer-audit')?.textContent.includes('"suspended"')`)

		// The list shows it at a glance.
		tab.open("#/customers?q=susp")
		tab.waitFor("the suspended badge in the list", `document.querySelector('#customers tr[data-customer="susp"] .badge.suspended')?.title === 'card declined'`)
		if n := evalIn[int](tab, `document.querySelectorAll('#customers .badge.suspended').length`); n != 1 {
			t.Errorf("%d suspended badges in the list, want 1 (susp)", n)
		}

		// A plan change keeps the rest of the customer: still suspended.
		tab.open("#/customers/susp")
		tab.waitFor("susp's page", `document.querySelector('#resume') !== null && document.querySelector('#plan-select option[value=pro]') !== null`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#plan-select"), "pro"),
			chromedp.Click(chromedp.CSS(`#plan-form button[type=submit]`)),
		)
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("plan pro", `document.querySelector('#customer-plan')?.textContent === 'pro'`)
		c := s.mustDo(200, "GET", "/v1/customers/susp", "").JSON(t)
		if c["status"] != "suspended" || c["status_reason"] != "card declined" || fmt.Sprint(c["metadata"]) != "map[crm_id:7]" {
			t.Errorf("a plan change lost the rest of the customer: %v", c)
		}

		tab.do(chromedp.Click(chromedp.CSS("#resume")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("active again", `document.querySelector('#customer-status .badge')?.textContent === 'active' && document.querySelector('#suspend-reason') !== null`)
		s.mustDo(200, "POST", "/v1/check", check, "Authorization", "Bearer "+checkToken)
	})

	t.Run("schedule a plan change, at an instant or at the period's end, and cancel it", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/sched", `{"plan": "free", "name": "Sched"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/sched")
		tab.waitFor("the schedule form", `document.querySelector('#sc-plan') !== null`)
		// The customer's own plan is not offered.
		if got := evalIn[[]string](tab, `[...document.querySelectorAll('#sc-plan option')].map((o) => o.value)`); slices.Contains(got, "free") || !slices.Contains(got, "pro") {
			t.Errorf("plans offered %q, want pro and not free, the customer's own", got)
		}
		const local = "2031-01-15T10:30"
		want := evalIn[string](tab, fmt.Sprintf(`new Date(%q).toISOString()`, local)) // in the browser's zone
		tab.do(
			chromedp.SetValue(chromedp.CSS("#sc-plan"), "pro"),
			chromedp.SetValue(chromedp.CSS("#sc-when"), "at"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#sc-when').dispatchEvent(new Event('change'))`),
			chromedp.SetValue(chromedp.CSS("#sc-at"), local),
			chromedp.Click(chromedp.CSS("#sc-save")),
		)
		tab.waitFor("the change shown", fmt.Sprintf(`document.querySelector('#schedule-now [data-plan=pro]') !== null
			&& new Date(document.querySelector('#schedule-now time')?.getAttribute('datetime')).toISOString() === %q`, want))
		sc, _ := s.mustDo(200, "GET", "/v1/customers/sched", "").JSON(t)["scheduled_change"].(map[string]any)
		if at, _ := time.Parse(time.RFC3339, fmt.Sprint(sc["at"])); sc["plan"] != "pro" || !at.Equal(mustTime(t, want)) {
			t.Errorf("scheduled change %v, want pro at %s", sc, want)
		}
		if got := tab.text("#customer-plan"); got != "free" {
			t.Errorf("the plan is %q before the change's instant, want free", got)
		}

		tab.do(chromedp.Click(chromedp.CSS("#sc-cancel")))
		tab.waitFor("the form again", `document.querySelector('#sc-plan') !== null && document.querySelector('#schedule-msg .notice') !== null`)
		if c := s.mustDo(200, "GET", "/v1/customers/sched", "").JSON(t); c["scheduled_change"] != nil {
			t.Errorf("the scheduled change is still there: %v", c["scheduled_change"])
		}

		// At the end of the billing period: the answer's instant is shown.
		tab.do(chromedp.SetValue(chromedp.CSS("#sc-plan"), "pro"), chromedp.Click(chromedp.CSS("#sc-save")))
		tab.waitFor("the change shown", `document.querySelector('#schedule-now time') !== null`)
		sc, _ = s.mustDo(200, "GET", "/v1/customers/sched", "").JSON(t)["scheduled_change"].(map[string]any)
		now := time.Now().UTC()
		if end := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC); sc["at"] != end.Format(time.RFC3339) {
			t.Errorf("scheduled at %v, want the end of the calendar month %s", sc["at"], end.Format(time.RFC3339))
		}
		if got := evalIn[string](tab, `new Date(document.querySelector('#schedule-now time').getAttribute('datetime')).toISOString()`); !mustTime(t, got).Equal(mustTime(t, fmt.Sprint(sc["at"]))) {
			t.Errorf("the page shows %s, the API %v", got, sc["at"])
		}

		// Someone else writes the customer meanwhile (and drops the change):
		// cancelling it in the page is a 412, shown, and the customer is
		// shown as it is now.
		s.mustDo(200, "PUT", "/v1/customers/sched", `{"plan": "free", "name": "Sched (renamed)"}`)
		tab.do(chromedp.Click(chromedp.CSS("#sc-cancel")))
		tab.waitFor("the 412 shown, the customer reloaded", `document.querySelector('#schedule-msg .error')?.textContent.includes('412')
			&& document.querySelector('#customer-name')?.textContent === 'Sched (renamed)' && document.querySelector('#sc-plan') !== null`)
	})

	t.Run("start a trial, see it, cancel it", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/trialed", `{"plan": "free", "name": "Trialed"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/trialed")
		tab.waitFor("the trial form and free's limits", `document.querySelector('#trial-plan') !== null && document.querySelector('#limits tr[data-key="api_calls/minute"]') !== null`)
		const local = "2031-02-01T09:00"
		want := evalIn[string](tab, fmt.Sprintf(`new Date(%q).toISOString()`, local))
		tab.do(
			chromedp.SetValue(chromedp.CSS("#trial-plan"), "pro"),
			chromedp.SetValue(chromedp.CSS("#trial-ends"), local),
			chromedp.Click(chromedp.CSS("#trial-start")),
		)
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		// The trial shows, and its plan's limits apply now.
		tab.waitFor("the trial and pro's limits", fmt.Sprintf(`document.querySelector('#trial-now [data-plan=pro]') !== null
			&& new Date(document.querySelector('#trial-now time').getAttribute('datetime')).toISOString() === %q
			&& document.querySelector('#limits tr[data-key="api_calls/second"]') !== null`, want))
		tr, _ := s.mustDo(200, "GET", "/v1/customers/trialed", "").JSON(t)["trial"].(map[string]any)
		if tr["plan"] != "pro" || !mustTime(t, fmt.Sprint(tr["ends_at"])).Equal(mustTime(t, want)) {
			t.Errorf("trial %v, want pro until %s", tr, want)
		}
		if got := tab.text("#customer-plan"); got != "free" {
			t.Errorf("the customer's own plan shows %q, want free", got)
		}

		tab.do(chromedp.Click(chromedp.CSS("#trial-cancel")))
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("no trial, free's limits", `document.querySelector('#trial-plan') !== null && document.querySelector('#limits tr[data-key="api_calls/minute"]') !== null`)
		if c := s.mustDo(200, "GET", "/v1/customers/trialed", "").JSON(t); c["trial"] != nil {
			t.Errorf("the trial is still there: %v", c["trial"])
		}
	})

	t.Run("a trial ending in the past shows the server's field error", func(t *testing.T) {
		s.mustDo(201, "PUT", "/v1/customers/pasttrial", `{"plan": "free"}`)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/pasttrial")
		tab.waitFor("the trial form", `document.querySelector('#trial-plan') !== null`)
		tab.do(
			chromedp.SetValue(chromedp.CSS("#trial-plan"), "pro"),
			chromedp.SetValue(chromedp.CSS("#trial-ends"), "2020-01-01T00:00"),
			chromedp.Click(chromedp.CSS("#trial-start")),
		)
		tab.waitFor("the confirmation", `document.querySelector('#confirm').open`)
		tab.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
		tab.waitFor("the field error", `document.querySelector('#trial-msg .error')?.textContent.includes('trial.ends_at: must lie in the future')`)
		if c := s.mustDo(200, "GET", "/v1/customers/pasttrial", "").JSON(t); c["trial"] != nil {
			t.Errorf("a trial was saved: %v", c["trial"])
		}
	})

	t.Run("plans page: the public checkbox round-trips, and a stale save is a 412", func(t *testing.T) {
		t.Cleanup(func() {
			mustEditPlan(t, s, "pro", func(spec map[string]any) { spec["public"], spec["description"] = false, "" })
		})
		mustSetPublic(t, s, "pro", false)
		before := s.mustDo(200, "GET", "/v1/plans/pro", "").JSON(t)
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/plans")
		card := `[data-plan=pro]`
		box := `document.querySelector('#pl-public-pro')`
		tab.waitFor("Pro not public", box+`?.checked === false && document.querySelector('`+card+` [data-public]')?.textContent === 'not public'`)
		if got := tab.text(`[data-plan=pro] label.check`); got != "Public: offered as an upgrade in denials" {
			t.Errorf("the checkbox's label reads %q", got)
		}
		if !evalIn[bool](tab, `document.querySelector('[data-plan=pro] [data-action=save-public]').disabled`) {
			t.Error("Save is offered before anything changed")
		}
		// Made public: the API has it, and no new version was made.
		tab.do(chromedp.Click(chromedp.CSS("#pl-public-pro")), chromedp.Click(chromedp.CSS(card+" [data-action=save-public]")))
		tab.waitFor("Pro public", `document.querySelector('`+card+` .plan-msg .notice')?.textContent.includes('is public') && `+box+`?.checked === true
			&& document.querySelector('`+card+` [data-public]')?.textContent === 'public'`)
		after := s.mustDo(200, "GET", "/v1/plans/pro", "").JSON(t)
		if after["public"] != true || after["latest_version"] != before["latest_version"] {
			t.Errorf("after the save Pro is public %v at version %v, want public at version %v", after["public"], after["latest_version"], before["latest_version"])
		}
		// Read back from the API by a page loaded anew, then made private again.
		tab.open("#/metrics")
		tab.waitFor("the metrics page", `document.querySelector('#metrics') !== null`)
		tab.open("#/plans")
		tab.waitFor("Pro public on a new page", box+`?.checked === true && document.querySelector('`+card+` .plan-msg')?.textContent === ''`)
		tab.do(chromedp.Click(chromedp.CSS("#pl-public-pro")), chromedp.Click(chromedp.CSS(card+" [data-action=save-public]")))
		tab.waitFor("Pro not public again", `document.querySelector('`+card+` .plan-msg .notice')?.textContent.includes('no longer public') && `+box+`?.checked === false`)
		if p := s.mustDo(200, "GET", "/v1/plans/pro", "").JSON(t); p["public"] != false || p["latest_version"] != before["latest_version"] {
			t.Errorf("Pro is public %v at version %v, want not public at version %v", p["public"], p["latest_version"], before["latest_version"])
		}
		// Someone else edits Pro meanwhile: the save is a 412, nothing is
		// written, and the card shows their change.
		mustEditPlan(t, s, "pro", func(spec map[string]any) { spec["description"] = "someone else" })
		tab.do(chromedp.Click(chromedp.CSS("#pl-public-pro")), chromedp.Click(chromedp.CSS(card+" [data-action=save-public]")))
		tab.waitFor("the 412 shown, Pro as it is now", `document.querySelector('`+card+` .plan-msg .error')?.textContent.includes('412')
			&& document.querySelector('`+card+` .sub')?.textContent.includes('someone else') && `+box+`?.checked === false`)
		if p := s.mustDo(200, "GET", "/v1/plans/pro", "").JSON(t); p["public"] != false {
			t.Errorf("the stale save was written: Pro is public %v", p["public"])
		}
	})

	t.Run("upgrade: a Free customer with its day used up is offered Pro, and the dry run counts nothing", func(t *testing.T) {
		mustSetPublic(t, s, "pro", true)
		t.Cleanup(func() { mustSetPublic(t, s, "pro", false) })
		mustSeedDayUsedUp(s, "upsell")
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/upsell")
		day := `#limits tr[data-key="api_calls/day"]`
		tab.waitFor("the day used up, with its Upgrade? button", fmt.Sprintf(`document.querySelector(%q) !== null`, day+" [data-action=upgrade]"))
		if n := evalIn[int](tab, `document.querySelectorAll('#limits tr[data-key="api_calls/minute"] [data-action=upgrade]').length`); n != 0 {
			t.Errorf("the minute, with room left, offers %d Upgrade? buttons", n)
		}
		tab.do(chromedp.Click(chromedp.CSS(day + " [data-action=upgrade]")))
		tab.waitFor("Pro offered", `document.querySelector('#upgrade [data-upgrade]')?.dataset.upgrade === 'pro'`)
		if got, want := tab.text("#upgrade [data-upgrade] p:last-child"), "Upgrade: Pro (pro, $49.00 per month) would allow 100,000 per day."; got != want {
			t.Errorf("the upgrade reads %q, want %q", got, want)
		}
		// Asked as the server answers it: the page's answer is the API's.
		r := s.do("POST", "/v1/check", `{"customer": "upsell", "metric": "api_calls", "cost": 1, "dry_run": true}`)
		if u, _ := r.JSON(t)["upgrade"].(map[string]any); r.Status != 429 || u["plan"] != "pro" || u["limit"] != 100000.0 {
			t.Errorf("the API's dry run: %d %s, want 429 offering pro at 100000", r.Status, r.Body)
		}
		// Nothing counted: the usage is the 1,000 units of the seed, and
		// the day's denials are the one real denied check below, not the
		// page's dry runs too.
		// (The minute may have turned since the seed: the day has not.)
		usage := s.mustDo(200, "GET", "/v1/customers/upsell/usage", "").JSON(t)["usage"].([]any)
		for _, u := range usage {
			if u := u.(map[string]any); u["window"] == "day" && u["used"] != 1000.0 {
				t.Errorf("after the page's dry run the day's used is %v, want 1000", u["used"])
			}
		}
		s.mustDo(429, "POST", "/v1/check", `{"customer": "upsell", "metric": "api_calls", "cost": 1}`, "Authorization", "Bearer "+checkToken)
		today := time.Now().UTC().Format(time.DateOnly)
		denied := func() float64 {
			for _, d := range s.mustDo(200, "GET", "/v1/customers/upsell/usage/history?from="+today+"&to="+today, "").JSON(t)["days"].([]any) {
				if d := d.(map[string]any); d["metric"] == "api_calls" {
					return d["denied"].(float64)
				}
			}
			return 0
		}
		eventually(t, func() bool { return denied() > 0 }, "the real denied check in the usage history")
		if got := denied(); got != 1 {
			t.Errorf("the day's history counts %v denials, want 1 (the dry runs count none)", got)
		}
	})

	t.Run("upgrade: with Pro made not public, none is offered", func(t *testing.T) {
		mustSetPublic(t, s, "pro", true)
		t.Cleanup(func() { mustSetPublic(t, s, "pro", false) })
		mustSeedDayUsedUp(s, "nosale")
		tab := newTab(t, browser, s.URL)
		tab.signIn(adminToken)
		tab.open("#/customers/nosale")
		button := `#limits tr[data-key="api_calls/day"] [data-action=upgrade]`
		tab.waitFor("the day's Upgrade? button", fmt.Sprintf(`document.querySelector(%q) !== null`, button))
		tab.do(chromedp.Click(chromedp.CSS(button)))
		tab.waitFor("Pro offered", `document.querySelector('#upgrade [data-upgrade]')?.dataset.upgrade === 'pro'`)
		// The table is drawn anew at each refresh: the keyboard stays on the button.
		tab.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).focus(); window.__table = document.querySelector('#limits table')`, button)))
		tab.waitFor("a refresh, the button focused in the new table", fmt.Sprintf(`document.querySelector('#limits table') !== window.__table && document.activeElement === document.querySelector(%q)`, button))
		// The page asks the server again: no plan of its own choosing.
		mustSetPublic(t, s, "pro", false)
		tab.do(chromedp.Click(chromedp.CSS(button)))
		tab.waitFor("no upgrade", `document.querySelector('#upgrade [data-upgrade]')?.dataset.upgrade === ''`)
		if got := tab.text("#upgrade [data-upgrade]"); !strings.Contains(got, "No upgrade: no public plan would admit it") {
			t.Errorf("the answer reads %q", got)
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
		{"/console/favicon.svg", "image/svg+xml", http.StatusOK},
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
// screenshots of docs/console.md: QUOTAD_CONSOLE_SCREENSHOTS=../../docs from
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
	s.mustDo(200, "PUT", "/v1/plans/free", `{"name": "Free", "price": {"amount_cents": 0, "currency": "USD", "interval": "month"},
		"limits": [{"metric": "api_calls", "window": "minute", "limit": 600}, {"metric": "api_calls", "window": "day", "limit": 1000}],
		"features": {"sso": false, "max_projects": 3, "support": "email"}}`)
	s.mustDo(201, "PUT", "/v1/customers/acme/features/sso", `{"value": true, "expires_at": "2030-01-01T00:00:00Z", "reason": "SSO pilot"}`)
	s.mustDo(201, "POST", "/v1/customers/acme/grants", `{"metric": "api_calls", "amount": 5000, "expires_at": "2030-01-01T00:00:00Z", "reason": "top-up pack"}`)
	s.mustDo(201, "POST", "/v1/customers/acme/grants", `{"metric": "api_calls", "amount": 200, "priority": 1, "reason": "apology for the outage"}`)
	for i := range 9 {
		subject := []string{"user-42", "user-7"}[i%2]
		s.mustDo(200, "POST", "/v1/check", `{"customer": "acme", "metric": "api_calls", "subject": "`+subject+`", "cost": `+strconv.Itoa(150+i*17)+`}`, "Authorization", "Bearer "+checkToken)
	}
	// A plan change scheduled, for its part of the page.
	s.mustDo(200, "PUT", "/v1/customers/acme", `{"plan": "free", "name": "Acme Inc.", "scheduled_change": {"plan": "pro", "at": "2030-02-01T00:00:00Z"}}`)
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
		tab.waitFor("the page loaded", `document.querySelector('#limits table') && document.querySelector('#chart svg') && document.querySelector('#overrides table')
			&& document.querySelector('#features table') && document.querySelector('#grants table') && document.querySelector('#keys table') && document.querySelector('#customer-audit table')`)
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
