package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/quotad/quotad/internal/dbtest"
	"github.com/quotad/quotad/internal/store"
	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

// Webhook tests run quotad binaries that deliver to a receiver on
// loopback, which only QUOTAD_WEBHOOK_ALLOW_PRIVATE permits, and retry
// after milliseconds instead of seconds.
var hookEnv = []string{"QUOTAD_WEBHOOK_ALLOW_PRIVATE=true", "QUOTAD_WEBHOOK_RETRY_BASE=20ms"}

// receiver is a webhook receiver in the test: it verifies every request's
// signature with the reference library, answers what answer says, and
// records deliveries by webhook-id.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	// answer decides the status of the nth request (from 1) of a message;
	// it may block.
	answer func(r *http.Request, n int) int

	inFlight  map[string]int
	overlaps  []string
	requests  map[string]int
	delivered map[string]int
	bodies    map[string][]byte
	changed   chan struct{}
}

func newReceiver(t testing.TB, answer func(r *http.Request, n int) int) *receiver {
	rc := &receiver{t: t, answer: answer, inFlight: map[string]int{}, requests: map[string]int{},
		delivered: map[string]int{}, bodies: map[string][]byte{}, changed: make(chan struct{}, 1)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	wh, err := standardwebhooks.NewWebhook(rc.secret)
	if err == nil {
		err = wh.Verify(body, r.Header)
	}
	if err != nil {
		rc.mu.Unlock()
		rc.t.Errorf("message %s: signature does not verify: %v", id, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.inFlight[id]++
	if rc.inFlight[id] > 1 {
		rc.overlaps = append(rc.overlaps, id)
	}
	rc.requests[id]++
	n := rc.requests[id]
	rc.bodies[id] = body
	rc.mu.Unlock()
	rc.signal()

	status := rc.answer(r, n)

	rc.mu.Lock()
	rc.inFlight[id]--
	if status/100 == 2 && r.Context().Err() == nil {
		rc.delivered[id]++
	}
	rc.mu.Unlock()
	w.WriteHeader(status)
	rc.signal()
}

func (rc *receiver) signal() {
	select {
	case rc.changed <- struct{}{}:
	default:
	}
}

// waitFor waits, up to a deadline, until cond holds of the receiver.
func (rc *receiver) waitFor(what string, cond func() bool) {
	rc.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		rc.mu.Lock()
		ok := cond()
		rc.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-rc.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			rc.t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// mustCreateWebhook registers rc (created without a secret: quotad makes
// one, shown in this answer only) and returns the answer.
func mustCreateWebhook(t testing.TB, s *testServer, rc *receiver, id string) map[string]any {
	t.Helper()
	body := fmt.Sprintf(`{"url": %q, "events": ["usage.threshold", "usage.limit_reached"], "thresholds": [100, 80]}`, rc.srv.URL+"/hooks")
	got := s.mustDo(http.StatusCreated, "PUT", "/v1/webhooks/"+id, body).JSON(t)
	secret, _ := got["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") || got["secret_hint"] != webhooks.SecretHint(secret) {
		t.Fatalf("created webhook: secret %q, hint %v", secret, got["secret_hint"])
	}
	rc.mu.Lock()
	rc.secret = secret
	rc.mu.Unlock()
	return got
}

// mustRecord records events the way detection does.
func mustRecord(t testing.TB, schema *dbtest.Schema, events ...webhooks.Event) {
	t.Helper()
	db, err := store.New(context.Background(), schema.Pool)
	if err != nil {
		t.Fatal(err)
	}
	n, err := db.Webhooks.RecordEvents(context.Background(), events)
	if err != nil || n != len(events) {
		t.Fatalf("RecordEvents = %d, %v; want %d new", n, err, len(events))
	}
}

func thresholdEvent(customer string, threshold int) webhooks.Event {
	start := time.Now().UTC().Truncate(24 * time.Hour)
	return webhooks.Event{
		Type: webhooks.Threshold, Customer: customer, Metric: "api_calls", Window: tiers.Day,
		Start: start, End: start.Add(24 * time.Hour), Threshold: threshold, Limit: 1000,
		Used: int64(threshold * 10), At: time.Now().UTC(),
	}
}

type deliveryList struct {
	Deliveries []webhooks.Delivery `json:"deliveries"`
	NextCursor string              `json:"next_cursor"`
}

func deliveriesOf(t testing.TB, s *testServer, id string) []webhooks.Delivery {
	t.Helper()
	var l deliveryList
	if err := json.Unmarshal(s.mustDo(http.StatusOK, "GET", "/v1/webhooks/"+id+"/deliveries", "").Body, &l); err != nil {
		t.Fatal(err)
	}
	return l.Deliveries
}

// waitForDelivery polls, up to a deadline, the webhook's only delivery
// until cond holds of it, and returns it.
func waitForDelivery(t testing.TB, s *testServer, id string, cond func(webhooks.Delivery) bool) webhooks.Delivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got := deliveriesOf(t, s, id)
		if len(got) == 1 && cond(got[0]) {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries of %s = %+v, want one that is done", id, got)
		}
		<-tick.C
	}
}

// A receiver that fails twice gets the event on the third attempt, signed
// so that the reference library verifies it; the deliveries list says so.
// The secret shows only in the creation's answer and never in the audit log.
func TestWebhookRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	s := MustStartProcess(t, schema, hookEnv...).server(t)
	rc := newReceiver(t, func(_ *http.Request, n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	created := mustCreateWebhook(t, s, rc, "billing")

	mustRecord(t, schema, thresholdEvent("acme", 80))
	rc.waitFor("the event is delivered", func() bool { return len(rc.delivered) == 1 })

	var id string
	for k := range rc.delivered {
		id = k
	}
	var p struct {
		Type string
		Data map[string]any
	}
	if err := json.Unmarshal(rc.bodies[id], &p); err != nil || p.Type != "usage.threshold" ||
		p.Data["customer"] != "acme" || p.Data["threshold"] != float64(80) || p.Data["limit"] != float64(1000) {
		t.Errorf("payload %s (%v)", rc.bodies[id], err)
	}
	// The answer reaches the receiver before the outcome is committed.
	d := waitForDelivery(t, s, "billing", func(d webhooks.Delivery) bool { return d.Status == webhooks.Delivered })
	if d.ID != id || d.Status != webhooks.Delivered || d.Attempts != 3 || d.LastStatus != http.StatusNoContent ||
		d.DeliveredAt == nil || d.NextAttemptAt != nil || d.Event.Threshold != 80 || d.Event.Customer != "acme" {
		t.Errorf("delivery = %+v, want %s delivered on attempt 3 with 204", d, id)
	}
	if rc.requests[id] != 3 {
		t.Errorf("receiver saw %d requests, want 3", rc.requests[id])
	}

	secret := created["secret"].(string)
	read := s.mustDo(http.StatusOK, "GET", "/v1/webhooks/billing", "")
	if strings.Contains(string(read.Body), secret) || read.JSON(t)["secret"] != nil {
		t.Errorf("GET shows the secret: %s", read.Body)
	}
	audit := s.mustDo(http.StatusOK, "GET", "/v1/audit", "")
	if strings.Contains(string(audit.Body), secret) || !strings.Contains(string(audit.Body), "webhooks/billing") {
		t.Errorf("audit log: %s", audit.Body)
	}
}

// A quotad killed while the receiver holds its request (the delivery
// claimed, not yet recorded) loses nothing: its transaction dies with it
// and another process delivers the event.
func TestWebhookDeliveredAfterKill(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	first := MustStartProcess(t, schema, hookEnv...)
	s := first.server(t)
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			<-r.Context().Done() // held until the sender goes away
		}
		return http.StatusOK
	})
	mustCreateWebhook(t, s, rc, "billing")
	mustRecord(t, schema, thresholdEvent("acme", 100))
	rc.waitFor("the first process sends", func() bool { return len(rc.requests) == 1 })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done

	second := MustStartProcess(t, schema, hookEnv...)
	rc.waitFor("the event arrives", func() bool { return len(rc.delivered) == 1 })
	for id, n := range rc.requests {
		if n != 2 || rc.delivered[id] != 1 {
			t.Errorf("message %s: %d requests, %d delivered; want 2 and 1", id, n, rc.delivered[id])
		}
	}
	d := waitForDelivery(t, second.server(t), "billing", func(d webhooks.Delivery) bool { return d.Status == webhooks.Delivered })
	if d.Attempts != 1 {
		t.Errorf("attempts = %d, want 1 (the killed one was never recorded)", d.Attempts)
	}
}

// Two processes share the outbox: every event arrives, and no message is
// ever sent by both at once.
func TestWebhookTwoProcessesShareTheOutbox(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	a := MustStartProcess(t, schema, hookEnv...)
	MustStartProcess(t, schema, hookEnv...)
	rc := newReceiver(t, func(_ *http.Request, n int) int {
		if n == 1 {
			return http.StatusInternalServerError // every message is retried once
		}
		return http.StatusOK
	})
	mustCreateWebhook(t, a.server(t), rc, "billing")
	const customers = 30
	var events []webhooks.Event
	for i := range customers {
		events = append(events, thresholdEvent(fmt.Sprintf("c%d", i), 80), thresholdEvent(fmt.Sprintf("c%d", i), 100))
	}
	mustRecord(t, schema, events...)
	rc.waitFor("every event arrives", func() bool { return len(rc.delivered) == len(events) })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.overlaps) > 0 {
		t.Errorf("messages sent twice at once: %v", rc.overlaps)
	}
	for id, n := range rc.delivered {
		if n != 1 || rc.requests[id] != 2 {
			t.Errorf("message %s: delivered %d times in %d requests, want once in 2", id, n, rc.requests[id])
		}
	}
}

// Without QUOTAD_WEBHOOK_ALLOW_PRIVATE, a webhook cannot name a loopback
// address (400 on url), and quotad does not connect to a loopback
// receiver named by a host name: the attempt fails, saying why.
func TestWebhookRefusesLoopback(t *testing.T) {
	t.Parallel()
	schema := dbtest.New(t)
	s := MustStartProcess(t, schema).server(t)
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusOK })
	r := s.mustDo(http.StatusBadRequest, "PUT", "/v1/webhooks/billing", fmt.Sprintf(`{"url": %q}`, rc.srv.URL+"/hooks"))
	if body := string(r.Body); !strings.Contains(body, `"field":"url"`) || !strings.Contains(body, "QUOTAD_WEBHOOK_ALLOW_PRIVATE") {
		t.Errorf("PUT of a loopback address: %s, want a validation error on url naming the setting", body)
	}
	byName := strings.Replace(rc.srv.URL, "127.0.0.1", "localhost", 1) + "/hooks"
	s.mustDo(http.StatusCreated, "PUT", "/v1/webhooks/billing", fmt.Sprintf(`{"url": %q}`, byName))
	mustRecord(t, schema, thresholdEvent("acme", 80))
	d := waitForDelivery(t, s, "billing", func(d webhooks.Delivery) bool { return d.Attempts > 0 })
	if d.Status != webhooks.Pending || d.LastStatus != 0 || !strings.Contains(d.LastError, "refused to connect to ") ||
		!strings.Contains(d.LastError, "127.0.0.1") && !strings.Contains(d.LastError, "::1") {
		t.Errorf("delivery = %+v, want pending, refused", d)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.requests) != 0 {
		t.Errorf("the receiver got %d messages", len(rc.requests))
	}
}
