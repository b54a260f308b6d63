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

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)

func sampleEvent(typ EventType) Event {
	if typ == TrialEnded {
		return Event{Type: typ, Customer: "acme", Plan: "pro", NextPlan: "free", At: t0}
	}
	if typ == GrantExhausted {
		return Event{Type: typ, Customer: "acme", Metric: "api_calls", Grant: "grt_9fQ2mX7aLp3ZkR1c", Limit: 5000,
			Used: 5000, At: t0}
	}
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

// A total never ends: its events' window_end is null, not a date no one
// reaches.
func TestPayloadOfATotal(t *testing.T) {
	e := sampleEvent(Threshold)
	e.Window, e.Start, e.End = tiers.Total, quota.TotalStart, quota.TotalEnd
	got, err := Payload(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"window":"total","window_start":"1970-01-01T00:00:00Z","window_end":null,`) {
		t.Errorf("Payload = %s, want window_end null", got)
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

// Refused against IANA's IPv4 and IPv6 Special-Purpose Address
// Registries: each block that is not globally reachable, one address in
// it, and the public addresses beside them.
func TestRefused(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		refused bool
	}{
		{"loopback", "127.0.0.1", true}, {"loopback /8", "127.8.9.10", true}, {"IPv6 loopback", "::1", true},
		{"10/8", "10.0.0.1", true}, {"10/8 end", "10.255.255.255", true}, {"172.16/12", "172.16.0.1", true},
		{"172.16/12 end", "172.31.255.1", true}, {"192.168/16", "192.168.1.1", true},
		{"link-local, cloud metadata", "169.254.169.254", true}, {"IPv6 link-local", "fe80::1", true},
		{"IPv6 link-local with a zone", "fe80::1%eth0", true}, {"unique local", "fc00::1", true}, {"unique local fd", "fd12:3456::1", true},
		{"unspecified", "0.0.0.0", true}, {"IPv6 unspecified", "::", true}, {"this network", "0.1.2.3", true},
		{"shared 100.64/10", "100.64.0.1", true}, {"shared end", "100.127.255.254", true},
		{"multicast", "224.0.0.1", true}, {"IPv6 multicast", "ff02::1", true},
		{"IETF protocol assignments 192.0.0/24", "192.0.0.1", true}, {"DS-Lite B4", "192.0.0.2", true},
		{"NAT64 discovery", "192.0.0.170", true},
		{"TEST-NET-1", "192.0.2.1", true}, {"TEST-NET-2", "198.51.100.7", true}, {"TEST-NET-3", "203.0.113.9", true},
		{"6to4 relay anycast", "192.88.99.1", true},
		{"benchmarking 198.18/15", "198.18.0.1", true}, {"benchmarking end", "198.19.255.254", true},
		{"reserved 240/4", "240.0.0.1", true}, {"reserved high", "254.1.2.3", true}, {"broadcast", "255.255.255.255", true},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", true}, {"IPv4-mapped private", "::ffff:10.1.2.3", true},
		{"IPv4-mapped metadata", "::ffff:169.254.169.254", true}, {"IPv4-mapped benchmarking", "::ffff:198.18.0.1", true},
		{"IPv4-compatible loopback", "::127.0.0.1", true}, {"IPv4-compatible public", "::8.8.8.8", true},
		{"NAT64 loopback", "64:ff9b::127.0.0.1", true}, {"NAT64 private", "64:ff9b::a00:1", true},
		{"NAT64 metadata", "64:ff9b::169.254.169.254", true}, {"NAT64 benchmarking", "64:ff9b::198.18.0.1", true},
		{"NAT64 local use", "64:ff9b:1::a00:1", true}, {"NAT64 local use, public inside", "64:ff9b:1:2::8.8.8.8", true},
		{"6to4 private inside", "2002:a00:1::1", true}, {"6to4 loopback inside", "2002:7f00:1::1", true},
		{"6to4 public inside", "2002:808:808::1", true},
		{"Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, {"IETF protocol assignments 2001::/23", "2001:1::1", true},
		{"IPv6 benchmarking", "2001:2::1", true}, {"ORCHIDv2", "2001:20::1", true},
		{"IPv6 documentation", "2001:db8::1", true}, {"IPv6 documentation 3fff::/20", "3fff:0:1::1", true},
		{"discard-only", "100::1", true}, {"dummy prefix", "100:0:0:1::1", true}, {"site-local", "fec0::1", true},
		{"SRv6 SIDs", "5f00::1", true}, {"IPv6 reserved", "4000::1", true},

		{"public", "8.8.8.8", false}, {"public too", "93.184.216.34", false}, {"beside 172.16/12", "172.32.0.1", false},
		{"beside shared", "100.128.0.1", false}, {"beside 192.0.0/24", "192.0.1.1", false},
		{"beside benchmarking", "198.20.0.1", false}, {"beside benchmarking, below", "198.17.255.255", false},
		{"beside 240/4", "239.255.255.255", true}, // multicast still
		{"last before multicast", "223.255.255.254", false},
		{"IPv6 public", "2606:4700::1111", false}, {"IPv4-mapped public", "::ffff:8.8.8.8", false},
		{"NAT64 public", "64:ff9b::8.8.8.8", false}, {"beside 2001::/23", "2001:200::1", false},
		{"beside 2001:db8::/32", "2001:db9::1", false}, {"beside 2002::/16", "2003::1", false},
		{"beside 3fff::/20", "3fff:1000::1", false}, {"AS112 direct delegation", "2620:4f:8000::1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Refused(netip.MustParseAddr(tt.addr)); got != tt.refused {
				t.Errorf("Refused(%s) = %t, want %t", tt.addr, got, tt.refused)
			}
		})
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
