package webhooks

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/quotad/quotad/internal/tiers"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)

func sampleEvent(typ EventType) Event {
	return Event{
		Type: typ, Customer: "acme", Metric: "api_calls", Window: tiers.Day,
		Start: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC),
		Threshold: 80, Limit: 100000, Used: 80013, At: t0,
	}
}

// The payload's bytes are a wire form: they change only on purpose.
func TestPayloadGolden(t *testing.T) {
	for _, typ := range EventTypes {
		t.Run(string(typ), func(t *testing.T) {
			got, err := Payload(sampleEvent(typ))
			if err != nil {
				t.Fatal(err)
			}
			path := "testdata/" + strings.TrimPrefix(string(typ), "usage.") + ".golden.json"
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got)+"\n" != string(want) {
				t.Errorf("Payload = %s\nwant      %s", got, want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	b := DefaultBackoff
	ceilings := []struct {
		n    int
		want time.Duration
	}{{1, 5 * time.Second}, {2, 10 * time.Second}, {3, 20 * time.Second}, {10, 2560 * time.Second}, {11, time.Hour}, {100, time.Hour}}
	for _, c := range ceilings {
		if got := b.Ceiling(c.n); got != c.want {
			t.Errorf("Ceiling(%d) = %s, want %s", c.n, got, c.want)
		}
	}
	b.Int64N = rand.New(rand.NewPCG(1, 2)).Int64N
	var low, high bool
	for n := 1; n <= 20; n++ {
		for range 200 {
			d := b.Delay(n)
			if d < 0 || d > b.Ceiling(n) {
				t.Fatalf("Delay(%d) = %s, outside [0, %s]", n, d, b.Ceiling(n))
			}
			low = low || d < b.Ceiling(n)/4
			high = high || d > b.Ceiling(n)*3/4
		}
	}
	if !low || !high {
		t.Errorf("delays are not spread over [0, ceiling]: low %t, high %t", low, high)
	}
	// The last attempt comes at the end of the window; one after it fails.
	created := t0
	if next, ok := b.Next(12, created, created.Add(24*time.Hour-time.Minute)); !ok || !next.Equal(created.Add(24*time.Hour)) {
		t.Errorf("Next a minute before the end = %s, %t; want the end", next, ok)
	}
	if _, ok := b.Next(13, created, created.Add(24*time.Hour)); ok {
		t.Errorf("Next at the end of the window: ok, want failed")
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		addr    string
		refused bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"::1", true},
		{"10.0.0.1", true}, {"10.255.255.255", true}, {"172.16.0.1", true}, {"172.31.255.1", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"fc00::1", true}, {"fd12:3456::1", true},
		{"0.0.0.0", true}, {"::", true}, {"0.1.2.3", true}, {"100.64.0.1", true}, {"224.0.0.1", true}, {"ff02::1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.1.2.3", true}, {"::ffff:169.254.169.254", true},
		{"8.8.8.8", false}, {"93.184.216.34", false}, {"172.32.0.1", false}, {"100.128.0.1", false},
		{"2606:4700::1111", false}, {"::ffff:8.8.8.8", false},
	}
	for _, tt := range tests {
		if got := Refused(netip.MustParseAddr(tt.addr)); got != tt.refused {
			t.Errorf("Refused(%s) = %t, want %t", tt.addr, got, tt.refused)
		}
	}
}

// The check is the dialer's, on the address it connects to: a name that
// resolves to loopback is refused as a literal is.
func TestClientRefusesPrivateAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]", "10.0.0.1", "169.254.169.254"} {
		t.Run(host, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+host+":"+port+"/", nil)
			resp, err := NewClient(time.Second, false).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("POST to %s: %v, want a RefusedError", host, err)
			}
		})
	}
	resp, err := NewClient(time.Second, true).Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatalf("with private addresses allowed: %v", err)
	}
	resp.Body.Close()
}

// fakeOutbox holds messages in memory, one claimer at a time.
type fakeOutbox struct {
	mu       sync.Mutex
	messages []*fakeMessage
}

type fakeMessage struct {
	Message
	status Status
	next   time.Time
	last   Outcome
}

func (f *fakeOutbox) Deliver(ctx context.Context, now time.Time, send func(context.Context, Message) Outcome) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.messages {
		if m.status == Pending && !m.next.After(now) {
			o := send(ctx, m.Message)
			m.Attempts++
			m.status, m.next, m.last = o.Status, o.Next, o
			return true, nil
		}
	}
	return false, nil
}

type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// A receiver that fails keeps getting the message, signed, on the backoff's
// schedule for 24 hours; then the delivery fails for good. One that answers
// 2xx gets it once. A redirect is a failure.
func TestWorkerRetriesThenFails(t *testing.T) {
	secret, _ := NewSecret()
	var mu sync.Mutex
	statuses := map[string]int{"/down": http.StatusServiceUnavailable, "/ok": http.StatusNoContent, "/moved": http.StatusFound}
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(body)
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("%s: %v", r.URL.Path, err)
		}
		mu.Lock()
		got[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/moved" {
			w.Header().Set("Location", "/ok")
		}
		w.WriteHeader(statuses[r.URL.Path])
	}))
	defer srv.Close()
	clock := &manualClock{now: t0}
	box := &fakeOutbox{}
	for i, path := range []string{"/down", "/ok", "/moved"} {
		box.messages = append(box.messages, &fakeMessage{status: Pending, next: t0, Message: Message{
			ID: MessageID(int64(i + 1)), Webhook: "w", URL: srv.URL + path, Secret: secret,
			Event: sampleEvent(Threshold), CreatedAt: t0,
		}})
	}
	w := &Worker{Outbox: box, Client: NewClient(time.Second, true), Clock: clock,
		Backoff: Backoff{Base: 5 * time.Second, Cap: time.Hour, Window: 24 * time.Hour, Int64N: rand.New(rand.NewPCG(3, 4)).Int64N}}
	for step := 0; ; step++ {
		if step > 1000 {
			t.Fatal("deliveries never ended")
		}
		found, err := w.DeliverOne(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if found {
			continue
		}
		// Nothing due: move the clock to the next retry, if any.
		var next time.Time
		for _, m := range box.messages {
			if m.status == Pending && (next.IsZero() || m.next.Before(next)) {
				next = m.next
			}
		}
		if next.IsZero() {
			break
		}
		if next.Before(clock.Now()) {
			t.Fatalf("a retry due at %s was not taken at %s", next, clock.Now())
		}
		clock.Set(next)
	}
	down, ok, moved := box.messages[0], box.messages[1], box.messages[2]
	if ok.status != Delivered || got["/ok"] != 1 || ok.Attempts != 1 {
		t.Errorf("/ok: %s after %d attempts (%d requests), want delivered after 1", ok.status, ok.Attempts, got["/ok"])
	}
	for _, m := range []*fakeMessage{down, moved} {
		if m.status != Failed || m.Attempts < 15 || m.Attempts > 200 || m.last.HTTPStatus == 0 || m.last.Error == "" {
			t.Errorf("%s: %s after %d attempts, last %+v; want failed after about a day of retries", m.URL, m.status, m.Attempts, m.last)
		}
		if !m.last.At.Equal(t0.Add(24 * time.Hour)) {
			t.Errorf("%s: last attempt at %s, want at the end of the window %s", m.URL, m.last.At, t0.Add(24*time.Hour))
		}
	}
	if got["/down"] != down.Attempts {
		t.Errorf("/down got %d requests for %d attempts", got["/down"], down.Attempts)
	}
	if !strings.Contains(moved.last.Error, "redirects are not followed") {
		t.Errorf("redirect error = %q", moved.last.Error)
	}
}

func TestCleanError(t *testing.T) {
	long := strings.Repeat("é", 400)
	for _, s := range []string{"plain", "nul\x00byte", "bad \xff utf8", long} {
		got := cleanError(s)
		if len(got) > maxErrorLen || strings.ContainsRune(got, 0) || !utf8.ValidString(got) || got == "" {
			t.Errorf("cleanError(%q) = %q", s, got)
		}
	}
}
