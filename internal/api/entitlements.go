package api

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/quotad/quotad/internal/grants"
	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// entitlementsAnswer is the body of GET /v1/customers/{id}/entitlements:
// what an application needs to draw a pricing page or a paywall.
type entitlementsAnswer struct {
	Customer string                        `json:"customer"`
	Plan     string                        `json:"plan"`
	Status   string                        `json:"status"`
	Features map[string]tiers.FeatureValue `json:"features"`
	Limits   []entitlementLimit            `json:"limits"`
	Grants   []entitlementGrant            `json:"grants"`
}

// entitlementLimit is one window of an effective limit, with its usage.
type entitlementLimit struct {
	Metric string `json:"metric"`
	// Per and Subject: "subject" and the subject, on the windows of a
	// limit per subject; absent on the customer's.
	Per       *tiers.Per   `json:"per,omitempty"`
	Subject   string       `json:"subject,omitempty"`
	Window    tiers.Window `json:"window"`
	Limit     int64        `json:"limit"`
	Mode      tiers.Mode   `json:"mode"`
	Used      int64        `json:"used"`
	Remaining int64        `json:"remaining"`
	// ResetAt is null for a window that never resets (total).
	ResetAt *time.Time `json:"reset_at"`
}

// entitlementGrant is one live grant: what is left of it.
type entitlementGrant struct {
	ID        string     `json:"id"`
	Metric    string     `json:"metric"`
	Amount    int64      `json:"amount"`
	Remaining int64      `json:"remaining"`
	Priority  int        `json:"priority"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// entitlements answers a customer's features, limits with their usage and
// live grants in one call, as checks see them (see
// quota.Engine.Entitlements): from memory for a customer this process
// checks, grants read only for a customer that has some. The answer is
// appended to a pooled buffer (appendEntitlements), as a check's is.
func (h *usageHandlers) entitlements(c echo.Context) error {
	q := c.QueryParams()
	subject := q.Get("subject")
	if q.Has("subject") && !tiers.ValidSubject(subject) {
		return invalid("subject", tiers.SubjectRule)
	}
	ctx := c.Request().Context()
	e, err := h.checker.Entitlements(ctx, param(c, "customer"), subject)
	if err != nil {
		return err
	}
	var live []grants.Grant
	if h.grants != nil {
		if live, err = h.grants.Live(ctx, e.Account.Customer, e.At); err != nil {
			return err
		}
	}
	bp := answerPool.Get().(*[]byte)
	b, ok := appendEntitlements((*bp)[:0], &e, live)
	if !ok {
		answerPool.Put(bp)
		return errAnswerNotEncoded
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.WriteHeader(http.StatusOK)
	_, err = res.Write(b)
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		answerPool.Put(bp)
	}
	return err
}

// newEntitlementsAnswer is the answer as a struct: what
// appendEntitlements writes, byte for byte, is what encoding/json makes of
// it (TestAppendEntitlements compares them).
func newEntitlementsAnswer(e *quota.Entitlements, live []grants.Grant) entitlementsAnswer {
	a := entitlementsAnswer{Customer: e.Account.Customer.ID, Plan: e.Account.Plan.Key, Status: string(e.Account.Customer.Status),
		Features: e.Features, Limits: make([]entitlementLimit, len(e.Usage)), Grants: make([]entitlementGrant, len(live))}
	if a.Features == nil {
		a.Features = map[string]tiers.FeatureValue{}
	}
	for i, u := range e.Usage {
		l := entitlementLimit{Metric: u.Metric, Subject: u.Subject, Window: u.Window, Limit: u.Limit, Mode: u.Mode,
			Used: u.Used, Remaining: u.Remaining, ResetAt: resetAt(u.ResetAt)}
		if u.Subject != "" {
			per := tiers.PerSubject
			l.Per = &per
		}
		a.Limits[i] = l
	}
	for i, g := range live {
		a.Grants[i] = entitlementGrant{ID: g.ID, Metric: g.Metric, Amount: g.Amount, Remaining: g.Remaining,
			Priority: g.Priority, ExpiresAt: g.ExpiresAt}
	}
	return a
}

// appendEntitlements appends the JSON of newEntitlementsAnswer(e, live)
// and a newline, as json.Encoder writes it. ok is false, with dst as it
// was, when e holds what encoding/json refuses (an invalid window or mode,
// a time it cannot write).
func appendEntitlements(dst []byte, e *quota.Entitlements, live []grants.Grant) (_ []byte, ok bool) {
	n0 := len(dst)
	b := append(dst, `{"customer":`...)
	b = appendJSONString(b, e.Account.Customer.ID)
	b = append(b, `,"plan":`...)
	b = appendJSONString(b, e.Account.Plan.Key)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(e.Account.Customer.Status))
	b = append(b, `,"features":{`...)
	if len(e.Features) > 0 {
		keys := make([]string, 0, len(e.Features))
		for k := range e.Features {
			keys = append(keys, k)
		}
		slices.Sort(keys) // encoding/json's order
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			switch v := e.Features[k].Any().(type) {
			case bool:
				b = strconv.AppendBool(b, v)
			case int64:
				b = strconv.AppendInt(b, v, 10)
			case string:
				b = appendJSONString(b, v)
			}
		}
	}
	b = append(b, `},"limits":[`...)
	for i := range e.Usage {
		u := &e.Usage[i]
		if !u.Window.Valid() || u.Mode < tiers.Hard || u.Mode > tiers.Elastic {
			return dst[:n0], false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendJSONString(b, u.Metric)
		if u.Subject != "" {
			b = append(b, `,"per":"`...)
			b = append(b, tiers.PerSubject.String()...)
			b = append(b, `","subject":`...)
			b = appendJSONString(b, u.Subject)
		}
		b = append(b, `,"window":"`...)
		b = append(b, u.Window.String()...)
		b = append(b, `","limit":`...)
		b = strconv.AppendInt(b, u.Limit, 10)
		b = append(b, `,"mode":"`...)
		b = append(b, u.Mode.String()...)
		b = append(b, `","used":`...)
		b = strconv.AppendInt(b, u.Used, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, u.Remaining, 10)
		b = append(b, `,"reset_at":`...)
		switch {
		case u.ResetAt.IsZero():
			b = append(b, "null"...) // a total never resets
		default:
			if b, ok = appendJSONTime(b, u.ResetAt); !ok {
				return dst[:n0], false
			}
		}
		b = append(b, '}')
	}
	b = append(b, `],"grants":[`...)
	for i := range live {
		g := &live[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, g.ID)
		b = append(b, `,"metric":`...)
		b = appendJSONString(b, g.Metric)
		b = append(b, `,"amount":`...)
		b = strconv.AppendInt(b, g.Amount, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, g.Remaining, 10)
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, int64(g.Priority), 10)
		b = append(b, `,"expires_at":`...)
		switch {
		case g.ExpiresAt == nil:
			b = append(b, "null"...)
		default:
			if b, ok = appendJSONTime(b, *g.ExpiresAt); !ok {
				return dst[:n0], false
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...), true
}
