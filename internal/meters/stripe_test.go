package meters_test

import (
	"bytes"
	"context"
	"go/build"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/meters"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/quota/quotafake"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
)

// stripeMock runs stripe-mock on a loopback port; it fails in CI and skips
// elsewhere when stripe-mock is not installed.
type stripeMock struct {
	t    *testing.T
	bin  string
	addr string
	cmd  *exec.Cmd
}

func startStripeMock(t *testing.T) *stripeMock {
	t.Helper()
	// On the PATH, or where go install puts it.
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		if p := filepath.Join(build.Default.GOPATH, "bin", "stripe-mock"); build.Default.GOPATH != "" {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("stripe-mock is not installed (go install github.com/stripe/stripe-mock@latest); CI must run this test")
		}
		t.Skip("stripe-mock is not installed (go install github.com/stripe/stripe-mock@latest): skipping")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m := &stripeMock{t: t, bin: bin, addr: addr}
	m.start()
	t.Cleanup(m.stop)
	return m
}

func (m *stripeMock) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "-http-addr", m.addr) // loopback only
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	// Wait until it listens: a bound on the wait, polled.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", m.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-deadline:
			m.t.Fatalf("stripe-mock did not listen on %s: %v", m.addr, err)
		case <-tick.C:
		}
	}
}

func (m *stripeMock) stop() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
		m.cmd = nil
	}
}

// recorder is a reverse proxy in front of stripe-mock that records every
// meter event it forwards (stripe-mock keeps no state).
type recorder struct {
	mu   sync.Mutex
	sent []url.Values
	// hold, if set, is called before forwarding.
	hold func()
}

func (r *recorder) events() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

func newRecorder(t *testing.T, target string) (*recorder, string) {
	u, _ := url.Parse("http://" + target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		form, err := url.ParseQuery(string(body))
		if err != nil {
			t.Error(err)
		}
		rec.mu.Lock()
		rec.sent = append(rec.sent, form)
		hold := rec.hold
		rec.mu.Unlock()
		if hold != nil {
			hold()
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

func TestStripeMeterEvents(t *testing.T) {
	m := startStripeMock(t)
	rec, base := newRecorder(t, m.addr)
	ctx := context.Background()
	schema := dbtest.New(t)
	db, err := store.New(ctx, schema.Pool)
	if err != nil {
		t.Fatal(err)
	}
	db.SetStripeMetrics([]string{"api_calls"})
	t0 := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	clock := quotafake.NewClock(t0)
	// As quotad does: meter events over the outbox's own pool.
	outbox, err := db.OpenOutbox(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(outbox.Close)
	s := &meters.Sender{Outbox: outbox, APIBase: base, APIKey: "sk_test_123", Meters: map[string]string{"api_calls": "api_calls"},
		Clock: clock, Client: &http.Client{Timeout: 10 * time.Second}}
	var skipped int
	s.ObserveCut = func(c meters.Cut) { skipped += c.Skipped }
	// Usage comes from real checks, counted in PostgreSQL, whose history
	// the engine flushes as quotad does every few seconds.
	w := tiers.Write{Actor: "ops", At: t0}
	var limits []tiers.Limit
	for _, m := range []string{"api_calls", "storage"} {
		if _, _, err := db.Catalog.PutMetric(ctx, w, tiers.Metric{Key: m}); err != nil {
			t.Fatal(err)
		}
		limits = append(limits, tiers.Limit{Metric: m, Window: tiers.Month, Limit: 1000, Mode: tiers.Hard})
	}
	if _, _, err := db.Catalog.PutPlan(ctx, w, tiers.Plan{Key: "free", Name: "Free", Limits: limits,
		Price: tiers.Price{Currency: "USD", Interval: "month"}}, false); err != nil {
		t.Fatal(err)
	}
	for id, meta := range map[string]string{"acme": `{"stripe_customer_id": "cus_acme"}`, "nobody": `{}`} {
		if _, _, err := db.Catalog.PutCustomer(ctx, w, tiers.Customer{ID: id, Plan: "free", Metadata: []byte(meta)}); err != nil {
			t.Fatal(err)
		}
	}
	engine := quota.New(quota.Options{Catalog: tiers.NewCache(db.Catalog, 0), Counts: db.Ledger, Requests: db.Ledger, Maintenance: db.Ledger, Audits: db.Audit,
		History: db.History, Clock: clock,
		StoreTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = engine.Close(ctx) })
	use := func(customer string, n int64) {
		t.Helper()
		for _, r := range []quota.Request{
			{Customer: customer, Metric: "api_calls", Cost: n},
			{Customer: customer, Metric: "storage", Cost: n},      // not sent to Stripe
			{Customer: customer, Metric: "api_calls", Cost: 5000}, // denied: not sent
		} {
			if _, err := engine.Check(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := engine.FlushHistory(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := func(i int, value, identifier string) {
		t.Helper()
		got := rec.events()
		if len(got) <= i {
			t.Fatalf("stripe got %d events, want at least %d", len(got), i+1)
		}
		e := got[i]
		if e.Get("event_name") != "api_calls" || e.Get("payload[stripe_customer_id]") != "cus_acme" || e.Get("payload[value]") != value {
			t.Fatalf("event %d = %v, want api_calls of cus_acme, value %s", i, e, value)
		}
		if identifier != "" && e.Get("identifier") != identifier {
			t.Fatalf("event %d identifier %q, want %q", i, e.Get("identifier"), identifier)
		}
	}

	// Real usage goes as one event; a customer without a Stripe id is
	// skipped and counted.
	use("acme", 3)
	use("acme", 2)
	use("nobody", 9)
	if err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(0, "5", "")
	if len(rec.events()) != 1 || skipped != 1 {
		t.Fatalf("events %v, skipped %d; want 1 event, 1 skipped", rec.events(), skipped)
	}

	// Stripe down: the event stays, and goes with the same identifier once
	// stripe-mock is back.
	use("acme", 7)
	m.stop()
	clock.Set(t0.Add(time.Minute))
	if err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(1, "7", "")
	first := rec.events()[1].Get("identifier")
	if st, err := outbox.MeterStats(ctx); err != nil || st.Pending != 1 {
		t.Fatalf("stats %+v, %v; want 1 pending", st, err)
	}
	m.start()
	clock.Set(t0.Add(time.Hour))
	if err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(2, "7", first)
	if st, err := outbox.MeterStats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("stats %+v, %v; want none pending", st, err)
	}

	// A send cut short (the process dies mid-send: its transaction never
	// commits) loses nothing: the next sends the same event.
	use("acme", 4)
	clock.Set(t0.Add(2 * time.Hour))
	dying, die := context.WithCancel(ctx)
	release := make(chan struct{})
	rec.mu.Lock()
	rec.hold = func() { die(); <-release }
	rec.mu.Unlock()
	go func() { <-dying.Done(); close(release) }()
	_ = s.Tick(dying)
	rec.mu.Lock()
	rec.hold = nil
	rec.mu.Unlock()
	want(3, "4", "")
	cut := rec.events()[3].Get("identifier")
	if err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(4, "4", cut)
	if n := len(rec.events()); n != 5 {
		t.Fatalf("stripe got %d events, want 5: %v", n, rec.events())
	}
	if st, err := outbox.MeterStats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("stats %+v, %v; want none pending", st, err)
	}
}

// killedEnv names, for the child process of TestStripeSendKilled, the
// database URL, Stripe's base URL and the instant to send at.
const killedEnv = "QUOTAD_TEST_METERS_CHILD"

// TestStripeSendKilled kills a real process while Stripe holds its meter
// event, then sends from another: the event was kept in the outbox, and
// goes again with the identifier the dead process sent, so that Stripe,
// which may have counted the first, counts it once.
func TestStripeSendKilled(t *testing.T) {
	if os.Getenv(killedEnv) != "" {
		t.Skip("the child's test runs in TestStripeSendKilledChild")
	}
	m := startStripeMock(t)
	rec, base := newRecorder(t, m.addr)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	rec.hold = func() {
		arrived <- struct{}{}
		<-release
	}
	ctx := context.Background()
	schema := dbtest.New(t)
	db, err := store.New(ctx, schema.Pool)
	if err != nil {
		t.Fatal(err)
	}
	db.SetStripeMetrics([]string{"api_calls"})
	t0 := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	w := tiers.Write{Actor: "ops", At: t0}
	if _, _, err := db.Catalog.PutMetric(ctx, w, tiers.Metric{Key: "api_calls"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutPlan(ctx, w, tiers.Plan{Key: "free", Name: "Free", Price: tiers.Price{Currency: "USD", Interval: "month"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Catalog.PutCustomer(ctx, w, tiers.Customer{ID: "acme", Plan: "free", Metadata: []byte(`{"stripe_customer_id": "cus_acme"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.History.AddHistory(ctx, []quota.HistoryDelta{{Customer: "acme", Metric: "api_calls", Date: t0, Used: 6}}); err != nil {
		t.Fatal(err)
	}

	// The child cuts the minute and sends; Stripe holds the request.
	at := t0.Add(time.Minute)
	child := exec.Command(os.Args[0], "-test.run", "^TestStripeSendKilledChild$", "-test.v")
	child.Env = append(os.Environ(), killedEnv+"="+schema.URL+" "+base+" "+at.Format(time.RFC3339Nano))
	out := &bytes.Buffer{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		_ = child.Process.Kill()
		t.Fatalf("the child sent nothing in a minute:\n%s", out)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	close(release) // Stripe received the event: it may have counted it
	rec.mu.Lock()
	rec.hold = nil
	rec.mu.Unlock()

	// Another process sends the same event again.
	outbox, err := db.OpenOutbox(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(outbox.Close)
	s := &meters.Sender{Outbox: outbox, APIBase: base, APIKey: "sk_test_123", Meters: map[string]string{"api_calls": "api_calls"},
		Clock: quotafake.NewClock(at), Client: &http.Client{Timeout: 10 * time.Second}}
	if err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got := rec.events()
	if len(got) != 2 {
		t.Fatalf("stripe got %d events, want the killed send and its retry: %v\nchild:\n%s", len(got), got, out)
	}
	for i, e := range got {
		if e.Get("payload[value]") != "6" || e.Get("payload[stripe_customer_id]") != "cus_acme" {
			t.Errorf("event %d = %v, want 6 units of cus_acme", i, e)
		}
	}
	if a, b := got[0].Get("identifier"), got[1].Get("identifier"); a == "" || a != b {
		t.Errorf("identifiers %q then %q: a retry must send the same", a, b)
	}
	if st, err := outbox.MeterStats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("stats %+v, %v; want none pending", st, err)
	}
}

// TestStripeSendKilledChild is TestStripeSendKilled's child process: it
// sends the outbox's meter events at the given instant, and is killed
// mid-send.
func TestStripeSendKilledChild(t *testing.T) {
	env := strings.Fields(os.Getenv(killedEnv))
	if len(env) != 3 {
		t.Skip("run by TestStripeSendKilled")
	}
	at, err := time.Parse(time.RFC3339Nano, env[2])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, env[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	outbox, err := db.OpenOutbox(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := &meters.Sender{Outbox: outbox, APIBase: env[1], APIKey: "sk_test_123", Meters: map[string]string{"api_calls": "api_calls"},
		Clock: quotafake.NewClock(at), Client: &http.Client{Timeout: time.Hour}}
	t.Fatalf("the send returned (%v): it should have been killed while Stripe held it", s.Tick(ctx))
}
