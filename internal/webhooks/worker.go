package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/quotad/quotad/internal/quota"
)

// Message is a claimed delivery: one event for one webhook, ready to POST.
type Message struct {
	ID        string // webhook-id: MessageID of the delivery's row
	Webhook   string
	URL       string
	Secret    string
	Event     Event
	Attempts  int       // attempts made before this one
	CreatedAt time.Time // when the delivery was queued: the event's time
}

// Outcome is what became of one attempt.
type Outcome struct {
	Status Status    // Delivered, Pending (to retry at Next) or Failed
	At     time.Time // when the attempt was made
	Next   time.Time // Pending only
	// HTTPStatus is the receiver's answer, 0 if it gave none.
	HTTPStatus int
	Error      string // why the attempt failed; "" when delivered
}

// Outbox is the queue of deliveries, kept in PostgreSQL by internal/store.
type Outbox interface {
	// Deliver claims one pending delivery due at now that no other
	// claimer holds, calls send with it while holding it, and records
	// send's outcome (attempts + 1) before releasing it. It reports false
	// when nothing was due. A claimer that dies before recording the
	// outcome releases the delivery unchanged, for another (or itself,
	// restarted) to claim. Safe for concurrent use; no delivery is held by
	// two claimers at once.
	Deliver(ctx context.Context, now time.Time, send func(context.Context, Message) Outcome) (bool, error)
}

// Result is what Observe hears of each attempt.
type Result struct {
	Message  Message
	Outcome  Outcome
	Duration time.Duration
}

// Worker delivers the outbox's messages: Workers goroutines each claim one
// due delivery at a time, POST it signed, and record the outcome. They wake
// on Wake (new deliveries) and every Poll (retries coming due).
type Worker struct {
	Outbox  Outbox
	Client  *http.Client // NewClient's, with its timeout and address check
	Clock   quota.Clock  // schedules retries; the system clock if nil
	Backoff Backoff      // DefaultBackoff if zero
	Workers int          // 4 if 0 or less
	Poll    time.Duration
	// StoreTimeout bounds how long an attempt waits for the outbox's
	// store, before and after the receiver's answer: an attempt as a
	// whole takes at most twice this and the client's timeout, so that a
	// store gone silent holds no goroutine (and no shutdown) for ever.
	// quota.DefaultBackgroundTimeout if 0 or less.
	StoreTimeout time.Duration
	Log          *slog.Logger
	// Observe, if set, hears every attempt's outcome.
	Observe func(Result)

	once sync.Once
	wake chan struct{}
}

func (w *Worker) init() {
	w.once.Do(func() {
		if w.Clock == nil {
			w.Clock = quota.SystemClock{}
		}
		if w.Backoff.Base == 0 {
			w.Backoff = DefaultBackoff
		}
		if w.Workers <= 0 {
			w.Workers = 4
		}
		if w.Poll <= 0 {
			w.Poll = time.Second
		}
		if w.Log == nil {
			w.Log = slog.New(slog.DiscardHandler)
		}
		if w.Client == nil {
			w.Client = NewClient(0, false)
		}
		if w.StoreTimeout <= 0 {
			w.StoreTimeout = quota.DefaultBackgroundTimeout
		}
		w.wake = make(chan struct{}, 1)
	})
}

// Wake tells a sleeping goroutine that deliveries may be due.
func (w *Worker) Wake() {
	w.init()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends. A delivery in flight then finishes (within
// the client's timeout) and is recorded; Run returns after. One goroutine
// polls; the others wait to be woken, by Wake or by a peer that found
// work, so that an idle process makes one query per Poll.
func (w *Worker) Run(ctx context.Context) {
	w.init()
	var wg sync.WaitGroup
	for i := range w.Workers {
		wg.Go(func() { w.loop(ctx, i == 0) })
	}
	wg.Wait()
}

func (w *Worker) loop(ctx context.Context, polls bool) {
	timer := time.NewTimer(w.Poll)
	defer timer.Stop()
	var tick <-chan time.Time
	if polls {
		tick = timer.C
	}
	work := polls // the poller looks at once
	for ctx.Err() == nil {
		if work {
			found, err := w.DeliverOne(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				w.Log.Warn("webhook outbox unreachable; will retry", "error", err)
			case found:
				// More may be due: let a sleeping peer look too, and
				// look again.
				w.Wake()
				continue
			}
		}
		if polls {
			timer.Reset(w.Poll)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-tick:
		}
		work = true
	}
}

// DeliverOne claims and attempts one due delivery, if any, within
// AttemptTimeout. Until a delivery is claimed, the end of ctx ends the
// call; an attempt under way is not cut short by it: it ends within the
// client's timeout, and its outcome is recorded.
func (w *Worker) DeliverOne(ctx context.Context) (bool, error) {
	w.init()
	bounded, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.AttemptTimeout())
	defer cancel()
	var sending atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		if !sending.Load() {
			cancel()
		}
	})
	defer stop()
	return w.Outbox.Deliver(bounded, w.Clock.Now(), func(ctx context.Context, m Message) Outcome {
		sending.Store(true)
		return w.attempt(ctx, m)
	})
}

// AttemptTimeout bounds one call of DeliverOne: the store's time to claim
// a delivery and to record its outcome, and the receiver's to answer.
func (w *Worker) AttemptTimeout() time.Duration {
	w.init()
	client := w.Client.Timeout
	if client <= 0 {
		client = DefaultTimeout
	}
	return 2*w.StoreTimeout + client
}

func (w *Worker) attempt(ctx context.Context, m Message) Outcome {
	start := time.Now()
	o := w.post(ctx, m)
	o.At = w.Clock.Now()
	attempt := m.Attempts + 1
	if o.Status != Delivered {
		if next, ok := w.Backoff.Next(attempt, m.CreatedAt, o.At); ok {
			o.Status, o.Next = Pending, next
		} else {
			o.Status = Failed
		}
	}
	d := time.Since(start)
	attrs := []any{"webhook", m.Webhook, "event", m.ID, "type", m.Event.Type, "attempt", attempt,
		"status", o.HTTPStatus, "outcome", string(o.Status), "duration_ms", d.Milliseconds()}
	switch o.Status {
	case Delivered:
		w.Log.Info("webhook delivered", attrs...)
	case Pending:
		w.Log.Warn("webhook delivery failed; will retry", append(attrs, "error", o.Error, "next_attempt_at", o.Next)...)
	default:
		w.Log.Warn("webhook delivery failed for good", append(attrs, "error", o.Error)...)
	}
	if w.Observe != nil {
		w.Observe(Result{Message: m, Outcome: o, Duration: d})
	}
	return o
}

// maxErrorLen bounds what is kept of an error or a receiver's answer.
const maxErrorLen = 500

// post sends m once; the outcome it returns is Delivered or, for any
// failure, Pending (attempt decides between retrying and failing).
func (w *Worker) post(ctx context.Context, m Message) Outcome {
	fail := func(status int, err string) Outcome {
		return Outcome{Status: Pending, HTTPStatus: status, Error: cleanError(err)}
	}
	body, err := Payload(m.Event)
	if err != nil {
		return fail(0, err.Error())
	}
	// The timestamp receivers compare with their own clocks: the wall
	// clock's, whatever schedules retries.
	sentAt := time.Now()
	sig, err := Signature(m.Secret, m.ID, sentAt, body)
	if err != nil {
		return fail(0, err.Error())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(body))
	if err != nil {
		return fail(0, err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "quotad-webhooks")
	req.Header.Set(standardwebhooks.HeaderWebhookID, m.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(sentAt.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := w.Client.Do(req)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return fail(0, refused.Error())
		}
		return fail(0, err.Error())
	}
	defer resp.Body.Close()
	// Read a little of the answer, so the connection may be reused and a
	// failure says something.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return Outcome{Status: Delivered, HTTPStatus: resp.StatusCode}
	}
	msg := fmt.Sprintf("receiver answered %d", resp.StatusCode)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		msg += " (redirects are not followed)"
	}
	if len(answer) > 0 {
		msg += ": " + string(answer)
	}
	return fail(resp.StatusCode, msg)
}

// cleanError makes s fit to keep: valid UTF-8 without NUL (as PostgreSQL's
// text wants), at most maxErrorLen bytes.
func cleanError(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", "?")
	if len(s) <= maxErrorLen {
		return s
	}
	s = s[:maxErrorLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
