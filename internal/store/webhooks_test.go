package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotad/quotad/internal/tiers"
	"github.com/quotad/quotad/internal/webhooks"
)

const secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func mustPutWebhook(t testing.TB, db webhooks.Store, id string, events []webhooks.EventType, thresholds []int) webhooks.Webhook {
	t.Helper()
	w, _, err := db.PutWebhook(context.Background(), write("ops"), webhooks.Webhook{
		ID: id, URL: "https://hooks.example.com/" + id, Events: events, Thresholds: thresholds, Secret: secretA,
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWebhookLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)

	w, created, err := db.Webhooks.PutWebhook(ctx, write("ops"), webhooks.Webhook{
		ID: "billing", URL: "https://a.example/", Events: webhooks.EventTypes, Thresholds: []int{80, 100}, Secret: secretA,
	}, true)
	if err != nil || !created || w.Version != 1 || w.Secret != secretA || w.SecretHint != "whsec_MfKQ…" || !w.CreatedAt.Equal(t0) {
		t.Fatalf("create = %+v, %t, %v", w, created, err)
	}
	// A replace that keeps the secret, then one that changes it.
	w, created, err = db.Webhooks.PutWebhook(ctx, tiers.Write{Actor: "ops", At: t0, IfMatch: tiers.Precondition{Set: true, Versions: []int64{1}}},
		webhooks.Webhook{ID: "billing", URL: "https://b.example/", Events: []webhooks.EventType{webhooks.LimitReached}, Thresholds: []int{50}, Secret: "whsec_other"}, true)
	if err != nil || created || w.Version != 2 || w.Secret != secretA || w.URL != "https://b.example/" ||
		!slices.Equal(w.Events, []webhooks.EventType{webhooks.LimitReached}) || !slices.Equal(w.Thresholds, []int{50}) {
		t.Fatalf("replace = %+v, %t, %v", w, created, err)
	}
	const secretB = "whsec_" + "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	if w, _, err = db.Webhooks.PutWebhook(ctx, write("ops"), webhooks.Webhook{ID: "billing", URL: "https://b.example/",
		Events: webhooks.EventTypes, Thresholds: []int{80}, Secret: secretB}, false); err != nil || w.Secret != secretB {
		t.Fatalf("replace secret = %+v, %v", w, err)
	}
	stale := tiers.Write{Actor: "ops", At: t0, IfMatch: tiers.Precondition{Set: true, Versions: []int64{1}}}
	if _, _, err := db.Webhooks.PutWebhook(ctx, stale, w, true); !errors.Is(err, tiers.ErrPreconditionFailed) {
		t.Errorf("stale put: %v", err)
	}
	if err := db.Webhooks.DeleteWebhook(ctx, stale, "billing"); !errors.Is(err, tiers.ErrPreconditionFailed) {
		t.Errorf("stale delete: %v", err)
	}
	if err := db.Webhooks.DeleteWebhook(ctx, write("ops"), "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Webhooks.FindWebhook(ctx, "billing"); !errors.Is(err, webhooks.ErrWebhookNotFound) {
		t.Errorf("find deleted: %v", err)
	}
	if err := db.Webhooks.DeleteWebhook(ctx, write("ops"), "billing"); !errors.Is(err, webhooks.ErrWebhookNotFound) {
		t.Errorf("delete missing: %v", err)
	}
	if _, _, err := db.Webhooks.FindDeliveries(ctx, webhooks.DeliveryFilter{Webhook: "billing", Limit: 10}); !errors.Is(err, webhooks.ErrWebhookNotFound) {
		t.Errorf("deliveries of missing: %v", err)
	}

	// The audit log has every write, with hints and never a secret.
	events, _, err := db.Audit.FindAuditEvents(ctx, tiers.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action+" "+e.Resource)
		for _, img := range []string{string(e.Before), string(e.After)} {
			if strings.Contains(img, secretA[6:]) || strings.Contains(img, secretB[6:]) {
				t.Errorf("audit event %d shows a secret: %s", e.ID, img)
			}
		}
	}
	want := []string{"delete webhooks/billing", "update webhooks/billing", "update webhooks/billing", "create webhooks/billing"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit = %v, want %v", actions, want)
	}
	var before struct {
		SecretHint string `json:"secret_hint"`
	}
	if err := json.Unmarshal(events[0].Before, &before); err != nil || before.SecretHint != "whsec_BBBB…" {
		t.Errorf("audit image %s lacks the hint", events[0].Before)
	}
}

func event(typ webhooks.EventType, customer string, threshold int, at time.Time) webhooks.Event {
	start := at.Truncate(24 * time.Hour)
	return webhooks.Event{Type: typ, Customer: customer, Metric: "api_calls", Window: tiers.Day,
		Start: start, End: start.Add(24 * time.Hour), Threshold: threshold, Limit: 100, Used: 90, At: at}
}

// Events are recorded once, and queued for the webhooks subscribed to
// them: to their type and, for usage.threshold, their threshold.
func TestRecordEventsAndWatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	if w, err := db.Webhooks.Watches(ctx); err != nil || !w.Empty() {
		t.Fatalf("Watches with no webhook = %+v, %v", w, err)
	}
	mustPutWebhook(t, db.Webhooks, "all", webhooks.EventTypes, []int{80, 100})
	mustPutWebhook(t, db.Webhooks, "limits", []webhooks.EventType{webhooks.LimitReached}, []int{50})
	mustPutWebhook(t, db.Webhooks, "ninety", []webhooks.EventType{webhooks.Threshold}, []int{90, 100})
	w, err := db.Webhooks.Watches(ctx)
	if err != nil || len(w.Types) != len(webhooks.EventTypes) || !slices.Equal(w.Thresholds, []int{80, 90, 100}) {
		t.Errorf("Watches = %+v, %v; want every type and thresholds 80, 90, 100 (not 50)", w, err)
	}

	batch := []webhooks.Event{
		event(webhooks.Threshold, "acme", 80, t0),     // all
		event(webhooks.Threshold, "acme", 100, t0),    // all, ninety
		event(webhooks.Threshold, "acme", 50, t0),     // nobody
		event(webhooks.LimitReached, "acme", 0, t0),   // all, limits
		event(webhooks.OverageStarted, "acme", 0, t0), // all
		event(webhooks.Threshold, "acme", 80, t0),     // a repeat within the batch
		event(webhooks.Threshold, "globex", 90, t0),   // ninety
	}
	n, err := db.Webhooks.RecordEvents(ctx, batch)
	if err != nil || n != 6 {
		t.Fatalf("RecordEvents = %d, %v; want 6 new", n, err)
	}
	if n, err := db.Webhooks.RecordEvents(ctx, batch[:2]); err != nil || n != 0 {
		t.Errorf("RecordEvents again = %d, %v; want 0 new", n, err)
	}
	count := func(id string) int {
		list, _, err := db.Webhooks.FindDeliveries(ctx, webhooks.DeliveryFilter{Webhook: id, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list {
			if d.Status != webhooks.Pending || d.Attempts != 0 || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(t0) || !d.CreatedAt.Equal(t0) {
				t.Errorf("%s: new delivery %+v", id, d)
			}
		}
		return len(list)
	}
	for id, want := range map[string]int{"all": 4, "limits": 1, "ninety": 2} {
		if got := count(id); got != want {
			t.Errorf("deliveries of %s = %d, want %d", id, got, want)
		}
	}
}

// Claims skip deliveries another claimer holds, take only due ones, and
// record the outcome; a claimer that ends without an outcome leaves the
// delivery as it was.
func TestDeliverClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustPutWebhook(t, db.Webhooks, "all", webhooks.EventTypes, []int{80})
	if _, err := db.Webhooks.RecordEvents(ctx, []webhooks.Event{
		event(webhooks.LimitReached, "a", 0, t0), event(webhooks.LimitReached, "b", 0, t0.Add(time.Minute)),
	}); err != nil {
		t.Fatal(err)
	}
	if found, err := db.Webhooks.Deliver(ctx, t0.Add(-time.Second), func(context.Context, webhooks.Message) webhooks.Outcome {
		t.Error("a delivery not yet due was claimed")
		return webhooks.Outcome{}
	}); found || err != nil {
		t.Errorf("Deliver before due = %t, %v", found, err)
	}

	// One claimer holds the first delivery while another claims: it gets
	// the second, and then nothing.
	holding, release := make(chan webhooks.Message), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := db.Webhooks.Deliver(ctx, t0.Add(time.Hour), func(_ context.Context, m webhooks.Message) webhooks.Outcome {
			holding <- m
			<-release
			return webhooks.Outcome{Status: webhooks.Pending, At: t0.Add(time.Hour), Next: t0.Add(2 * time.Hour), HTTPStatus: 500, Error: "receiver answered 500"}
		})
		if err != nil {
			t.Error(err)
		}
	})
	first := <-holding
	var second webhooks.Message
	found, err := db.Webhooks.Deliver(ctx, t0.Add(time.Hour), func(_ context.Context, m webhooks.Message) webhooks.Outcome {
		second = m
		return webhooks.Outcome{Status: webhooks.Delivered, At: t0.Add(time.Hour), HTTPStatus: 204}
	})
	if !found || err != nil || second.ID == first.ID || second.Event.Customer != "b" || first.Event.Customer != "a" ||
		first.Secret != secretA || !strings.HasPrefix(first.URL, "https://") || first.Attempts != 0 {
		t.Fatalf("second claim = %+v, %t, %v; first %+v", second, found, err, first)
	}
	if found, err := db.Webhooks.Deliver(ctx, t0.Add(time.Hour), func(context.Context, webhooks.Message) webhooks.Outcome {
		t.Error("a held delivery was claimed twice")
		return webhooks.Outcome{}
	}); found || err != nil {
		t.Errorf("third claim = %t, %v; want nothing", found, err)
	}
	close(release)
	wg.Wait()

	list, _, err := db.Webhooks.FindDeliveries(ctx, webhooks.DeliveryFilter{Webhook: "all", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	page2, _, err := db.Webhooks.FindDeliveries(ctx, webhooks.DeliveryFilter{Webhook: "all", Limit: 1, Before: mustID(t, list[0].ID)})
	if err != nil || len(list) != 1 || len(page2) != 1 {
		t.Fatalf("pages: %+v, %+v, %v", list, page2, err)
	}
	b, a := list[0], page2[0] // newest first
	if b.ID != second.ID || b.Status != webhooks.Delivered || b.Attempts != 1 || b.LastStatus != 204 || b.DeliveredAt == nil || b.NextAttemptAt != nil {
		t.Errorf("delivered: %+v", b)
	}
	if a.ID != first.ID || a.Status != webhooks.Pending || a.Attempts != 1 || a.LastStatus != 500 || a.LastError != "receiver answered 500" ||
		a.NextAttemptAt == nil || !a.NextAttemptAt.Equal(t0.Add(2*time.Hour)) || a.LastAttemptAt == nil {
		t.Errorf("retried: %+v", a)
	}
}

func mustID(t testing.TB, id string) int64 {
	t.Helper()
	n, ok := webhooks.ParseMessageID(id)
	if !ok {
		t.Fatalf("bad message id %q", id)
	}
	return n
}

// Webhooks list by id, a page at a time, each with its secret for the
// service (whose answers show only the hint).
func TestFindWebhooksPages(t *testing.T) {
	t.Parallel()
	db := MustOpen(t)
	ctx := context.Background()
	for _, id := range []string{"c", "a", "b"} {
		mustPutWebhook(t, db.Webhooks, id, nil, []int{80})
	}
	var got []string
	page := tiers.Page{Limit: 2}
	for {
		list, more, err := db.Webhooks.FindWebhooks(ctx, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range list {
			if w.Secret == "" || w.SecretHint != webhooks.SecretHint(w.Secret) {
				t.Errorf("webhook %s: secret %q, hint %q", w.ID, w.Secret, w.SecretHint)
			}
			got = append(got, w.ID)
		}
		if !more {
			break
		}
		page.After = list[len(list)-1].ID
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("pages list %v, want a, b, c", got)
	}
}

// The deliveries of one webhook, customer and metric go out in the order
// their events happened: while an earlier one is pending (held by another
// claimer, or failed and waiting for its next attempt) a later one is not
// claimed; other customers' deliveries go on meanwhile.
func TestDeliverInOrderPerCustomerAndMetric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t)
	mustPutWebhook(t, db.Webhooks, "all", webhooks.EventTypes, []int{80, 100})
	if _, err := db.Webhooks.RecordEvents(ctx, []webhooks.Event{
		event(webhooks.Threshold, "a", 80, t0), event(webhooks.Threshold, "a", 100, t0.Add(time.Second)),
		event(webhooks.Threshold, "b", 80, t0.Add(2*time.Second)),
	}); err != nil {
		t.Fatal(err)
	}
	due := t0.Add(time.Hour)
	retry := webhooks.Outcome{Status: webhooks.Pending, At: due, Next: due.Add(time.Hour), HTTPStatus: 503, Error: "receiver answered 503"}
	delivered := webhooks.Outcome{Status: webhooks.Delivered, At: due, HTTPStatus: 204}

	// a's 80 % is held by one claimer: another gets b's, not a's 100 %.
	holding, release := make(chan webhooks.Message), make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer func() { free(); wg.Wait() }() // a failed test still lets the claimer go
	wg.Go(func() {
		if _, err := db.Webhooks.Deliver(ctx, due, func(_ context.Context, m webhooks.Message) webhooks.Outcome {
			holding <- m
			<-release
			return retry
		}); err != nil {
			t.Error(err)
		}
	})
	first := <-holding
	claim := func(at time.Time, o webhooks.Outcome) (webhooks.Message, bool) {
		t.Helper()
		var got webhooks.Message
		found, err := db.Webhooks.Deliver(ctx, at, func(_ context.Context, m webhooks.Message) webhooks.Outcome { got = m; return o })
		if err != nil {
			t.Fatal(err)
		}
		return got, found
	}
	if first.Event.Customer != "a" || first.Event.Threshold != 80 {
		t.Fatalf("first claim: %+v, want a's 80 %%", first.Event)
	}
	if m, found := claim(due, delivered); !found || m.Event.Customer != "b" {
		t.Fatalf("claim beside a's 80 %%: %+v (%t), want b's", m.Event, found)
	}
	if m, found := claim(due, delivered); found {
		t.Fatalf("claimed %s's %d %% while a's 80 %% was held", m.Event.Customer, m.Event.Threshold)
	}
	free() // a's 80 % failed: it waits an hour
	wg.Wait()
	if m, found := claim(due, delivered); found {
		t.Fatalf("claimed %s's %d %% while a's 80 %% waits for its next attempt", m.Event.Customer, m.Event.Threshold)
	}
	if m, found := claim(due.Add(time.Hour), delivered); !found || m.ID != first.ID {
		t.Fatalf("after an hour: %+v (%t), want a's 80 %% again", m.Event, found)
	}
	if m, found := claim(due.Add(time.Hour), delivered); !found || m.Event.Customer != "a" || m.Event.Threshold != 100 {
		t.Fatalf("then: %+v (%t), want a's 100 %%", m.Event, found)
	}
}
