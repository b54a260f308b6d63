package api

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/rlheaders"
	"github.com/quotad/quotad/internal/tiers"
)

// The check answer is encoded by appending to a pooled buffer, without
// reflection, byte for byte what json.Encoder makes of newCheckResponse(d),
// the answer as a struct, which only the tests keep (TestAppendCheckAnswer
// compares them).

var answerPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 1<<10)
	return &b
}}

// maxPooledAnswer bounds the buffers kept: an answer with many windows or
// long names is left to the GC.
const maxPooledAnswer = 8 << 10

// appendCheckAnswer appends the JSON of newCheckResponse(d) and a newline,
// as json.Encoder writes it: a check of one metric names it and its cost;
// a check of items (d.Items set) lists them instead. ok is false, with dst
// as it was, when d holds what encoding/json refuses (an invalid window or
// mode, a time it cannot write as RFC 3339).
func appendCheckAnswer(dst []byte, d *quota.Decision) (_ []byte, ok bool) {
	n0 := len(dst)
	b := append(dst, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"customer":`...)
	b = appendJSONString(b, d.Customer)
	if d.Items == nil {
		b = append(b, `,"metric":`...)
		b = appendJSONString(b, d.Metric)
		b = append(b, `,"cost":`...)
		b = strconv.AppendInt(b, d.Cost, 10)
	}
	b = append(b, `,"overage":`...)
	b = strconv.AppendBool(b, d.Overage)
	b = append(b, `,"elastic":`...)
	b = strconv.AppendBool(b, d.Elastic)
	b = append(b, `,"retry_after":`...)
	if d.Never {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, d.RetryAfter, 10)
	}
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, d.Degraded)
	if d.Granted > 0 {
		b = append(b, `,"granted":`...)
		b = strconv.AppendInt(b, d.Granted, 10)
	}
	b = append(b, `,"limits":`...)
	if b, ok = appendWindows(b, d.Limits, d.Metric); !ok {
		return dst[:n0], false
	}
	if d.Items != nil {
		b = append(b, `,"items":[`...)
		for i := range d.Items {
			it := &d.Items[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendJSONString(b, it.Metric)
			if it.Subject != "" {
				b = append(b, `,"subject":`...)
				b = appendJSONString(b, it.Subject)
			}
			b = append(b, `,"cost":`...)
			b = strconv.AppendInt(b, it.Cost, 10)
			b = append(b, `,"allowed":`...)
			b = strconv.AppendBool(b, it.Allowed)
			b = append(b, `,"remaining":`...)
			if it.Remaining == nil {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendInt(b, *it.Remaining, 10)
			}
			b = append(b, `,"limits":`...)
			if b, ok = appendWindows(b, it.Limits, it.Metric); !ok {
				return dst[:n0], false
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	switch {
	case d.Allowed:
	case d.Never:
		b = append(b, `,"code":"`+codeCostExceedsLimit+`","detail":`...)
		b = appendJSONString(b, neverDetail(d))
	default:
		b = append(b, `,"code":"`+codeQuotaExceeded+`","detail":`...)
		b = appendJSONString(b, deniedDetail(d))
	}
	if d.Upgrade != nil {
		b = append(b, `,"upgrade":`...)
		b = appendUpgrade(b, d.Upgrade)
	}
	return append(b, "}\n"...), true
}

// upgradeBody is a denied check's upgrade as the API writes it.
type upgradeBody struct {
	Plan  string      `json:"plan"`
	Name  string      `json:"name"`
	Price tiers.Price `json:"price"`
	Limit *int64      `json:"limit"`
}

// newUpgradeBody returns u as the API writes it, nil for nil.
func newUpgradeBody(u *tiers.Upgrade) *upgradeBody {
	if u == nil {
		return nil
	}
	return &upgradeBody{Plan: u.Plan, Name: u.Name, Price: u.Price, Limit: u.Limit}
}

// appendUpgrade appends the JSON object of a denied check's upgrade, as
// encoding/json writes newUpgradeBody(u) (see TestAppendCheckAnswer).
func appendUpgrade(b []byte, u *tiers.Upgrade) []byte {
	b = append(b, `{"plan":`...)
	b = appendJSONString(b, u.Plan)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, u.Name)
	b = append(b, `,"price":{"amount_cents":`...)
	b = strconv.AppendInt(b, u.Price.AmountCents, 10)
	b = append(b, `,"currency":`...)
	b = appendJSONString(b, u.Price.Currency)
	b = append(b, `,"interval":`...)
	b = appendJSONString(b, u.Price.Interval)
	b = append(b, `},"limit":`...)
	if u.Limit == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *u.Limit, 10)
	}
	return append(b, '}')
}

// appendWindows appends the JSON array of windows ws, each naming its
// metric (metric, the check's, where the window names none) and, for a
// window of a limit per subject, its subject. ok is false when a window
// holds what encoding/json refuses.
func appendWindows(b []byte, ws []quota.WindowResult, metric string) (_ []byte, ok bool) {
	b = append(b, '[')
	for i := range ws {
		w := &ws[i]
		if !w.Window.Valid() || w.Mode < tiers.Hard || w.Mode > tiers.Elastic {
			return b, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendJSONString(b, windowMetric(w, metric))
		if w.Subject != "" {
			b = append(b, `,"subject":`...)
			b = appendJSONString(b, w.Subject)
		}
		b = append(b, `,"window":"`...)
		b = append(b, w.Window.String()...)
		b = append(b, `","limit":`...)
		b = strconv.AppendInt(b, w.Limit, 10)
		b = append(b, `,"used":`...)
		b = strconv.AppendInt(b, w.Used, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, w.Remaining, 10)
		b = append(b, `,"reset_at":`...)
		if w.ResetAt.IsZero() {
			b = append(b, "null"...) // a total never resets
		} else if b, ok = appendJSONTime(b, w.ResetAt); !ok {
			return b, false
		}
		b = append(b, `,"mode":"`...)
		b = append(b, w.Mode.String()...)
		b = append(b, `","state":`...)
		b = appendJSONString(b, string(w.State))
		b = append(b, '}')
	}
	return append(b, ']'), true
}

// windowMetric is the metric window w counts: its own, or, where it
// names none (an answer kept before windows named theirs), the check's.
func windowMetric(w *quota.WindowResult, check string) string {
	if w.Metric != "" {
		return w.Metric
	}
	return check
}

// codeCostExceedsLimit is the code of a check that can never pass: its
// cost is above a window's threshold, or the limit is 0.
const codeCostExceedsLimit = "cost_exceeds_limit"

// neverDetail is the detail of a check that can never pass, naming the
// window that refuses it and its limit: the first denying window whose
// limit is below the cost (above a soft limit's threshold too), else the
// first denying window (a token bucket's burst below the cost). A check
// of items names the first item that can never pass.
func neverDetail(d *quota.Decision) string {
	if d.Items != nil {
		for i := range d.Items {
			if it := &d.Items[i]; it.Never && !it.Allowed {
				one := d.Item(i)
				return "items[" + strconv.Itoa(i) + "]: " + neverDetail(&one)
			}
		}
		return "the check can never pass the customer's limits; do not retry"
	}
	var w *quota.WindowResult
	for i := range d.Limits {
		l := &d.Limits[i]
		if l.State != quota.StateExceeded {
			continue
		}
		if w == nil {
			w = l
		}
		if d.Cost > l.Limit {
			w = l
			break
		}
	}
	cost := strconv.FormatInt(d.Cost, 10)
	if w == nil {
		return "a cost of " + cost + " can never pass the customer's limits on " + d.Metric + "; do not retry"
	}
	limit := "the " + windowMetric(w, d.Metric) + "/" + w.Window.String() + " limit of " + strconv.FormatInt(w.Limit, 10)
	if w.Subject != "" {
		limit += " per subject (" + w.Subject + ")"
	}
	if !w.Window.Resets() && d.Cost <= w.Limit {
		return limit + " is reached (" + strconv.FormatInt(w.Used, 10) + " used) and never resets: a refund or a set of the total frees units; do not retry"
	}
	return "a cost of " + cost + " can never pass " + limit + "; do not retry"
}

// codeQuotaExceeded is the code of a denied check that may pass later.
const codeQuotaExceeded = "quota_exceeded"

// deniedDetail is the detail of a denied check that may pass later (not
// Never): the limit is reached when a window that denied it has nothing
// left; otherwise the check asks for more than remains, and says how much
// it needs and how much remains (in the window that denied it with the
// fewest units left), so that no client takes a check too large for now
// for a customer whose limit is spent. A check of items speaks of the
// first item denied. Only denials build it.
func deniedDetail(d *quota.Decision) string {
	retry := "; retry after " + strconv.FormatInt(d.RetryAfter, 10) + " s"
	if d.Items != nil {
		for i := range d.Items {
			if !d.Items[i].Allowed {
				one := d.Item(i)
				return "items[" + strconv.Itoa(i) + "]: " + whyDenied(&one) + retry
			}
		}
	}
	return whyDenied(d) + retry
}

// whyDenied says why a check of one metric that may pass later was
// denied (see deniedDetail).
func whyDenied(d *quota.Decision) string {
	var w *quota.WindowResult
	for i := range d.Limits {
		if l := &d.Limits[i]; l.State == quota.StateExceeded && (w == nil || l.Remaining < w.Remaining) {
			w = l
		}
	}
	switch {
	case w == nil || w.Remaining == 0:
		return "the customer's limit on this metric is reached"
	case windowMetric(w, d.Metric) != d.Metric:
		// A credit pool's window: its units are credits, not the check's.
		return "the customer's credit pool " + w.Metric + " cannot pay for this request: " +
			strconv.FormatInt(w.Remaining, 10) + " remain, fewer than it needs"
	}
	return "the customer's limit on this metric cannot take this request: it needs " + strconv.FormatInt(d.Cost, 10) +
		", " + strconv.FormatInt(w.Remaining, 10) + " remain"
}

// appendJSONTime appends t as time.Time.MarshalJSON writes it: RFC 3339
// with nanoseconds, in t's own location, quoted. ok is false, with b as it
// was, for what MarshalJSON refuses: a year outside [0,9999] or a zone
// offset of 24 hours or more.
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	text, err := t.AppendText(append(b, '"'))
	if err != nil {
		return b, false
	}
	return append(text, '"'), true
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// (with HTML escaping): plain text is copied, anything else is left to
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// errAnswerNotEncoded is the error of a check whose answer cannot be
// written: the decision holds what encoding/json refuses.
var errAnswerNotEncoded = errors.New("api: the check answer cannot be encoded as JSON")

// writeCheckAnswer writes the answer to a check decided at now: its
// headers in forms (see setCheckHeaders) and the JSON of newCheckResponse(*d). When
// d cannot be encoded it writes nothing and returns errAnswerNotEncoded,
// which the error handler answers with a logged 500.
func writeCheckAnswer(c echo.Context, forms rlheaders.Forms, status int, d *quota.Decision, now time.Time) error {
	bp := answerPool.Get().(*[]byte)
	b, ok := appendCheckAnswer((*bp)[:0], d)
	if !ok {
		answerPool.Put(bp)
		return errAnswerNotEncoded
	}
	res := c.Response()
	setCheckHeaders(res.Header(), forms, d, now)
	res.WriteHeader(status)
	_, err := res.Write(b)
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		answerPool.Put(bp)
	}
	return err
}
