package tiers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The specs below are client input as decoded from JSON: pointers tell a
// missing field from a zero one. Validate turns a spec into a domain value or
// a *ValidationError naming every bad field. A PUT is a full replace, so a
// field left out takes its default.
//
// A field tagged nullable:"true" may also be sent as null, meaning not set,
// so that what GET returns can be PUT back; the API refuses null anywhere
// else. openapi.yaml marks the same fields nullable, and a test keeps the two
// in step.

// LimitSpec is a limit as a client writes it.
type LimitSpec struct {
	Metric             string  `json:"metric"`
	Window             string  `json:"window"`
	Limit              *int64  `json:"limit"`
	Mode               string  `json:"mode" nullable:"true"`
	OveragePercent     *int64  `json:"overage_percent" nullable:"true"`
	OveragePriceMicros *int64  `json:"overage_price_micros" nullable:"true"`
	Ceiling            *int64  `json:"ceiling" nullable:"true"`
	Algorithm          *string `json:"algorithm" nullable:"true"`
	Burst              *int64  `json:"burst" nullable:"true"`
	// Per is "customer" (the default) or "subject".
	Per *string `json:"per" nullable:"true"`
	// Rollover: see Limit.Rollover.
	Rollover *Rollover `json:"rollover" nullable:"true"`
}

// MetricSpec is the body of PUT /v1/metrics/{metric}.
type MetricSpec struct {
	Description  *string           `json:"description" nullable:"true"`
	Capacity     map[string]*int64 `json:"capacity" nullable:"true"`
	CreditSchema []CreditRateSpec  `json:"credit_schema" nullable:"true"`
}

// CreditRateSpec is one entry of a metric's credit_schema as a client
// writes it: the metric that draws on the pool, and at what rate.
type CreditRateSpec struct {
	Metric  string `json:"metric"`
	Credits *int64 `json:"credits"`
	Per     *int64 `json:"per" nullable:"true"`
}

// PriceSpec is a plan's price as a client writes it.
type PriceSpec struct {
	AmountCents *int64  `json:"amount_cents" nullable:"true"`
	Currency    *string `json:"currency" nullable:"true"`
	Interval    *string `json:"interval" nullable:"true"`
}

// PlanSpec is the body of PUT /v1/plans/{plan}.
type PlanSpec struct {
	Name        *string `json:"name" nullable:"true"`
	Description *string `json:"description" nullable:"true"`
	// Public: the plan may be offered as a denied check's upgrade;
	// absent or null: false.
	Public *bool       `json:"public" nullable:"true"`
	Price  *PriceSpec  `json:"price" nullable:"true"`
	Limits []LimitSpec `json:"limits" nullable:"true"`
	// Features maps feature keys to their values (see ParseFeatureValue).
	Features map[string]json.RawMessage `json:"features" nullable:"true"`
}

// CustomerSpec is the body of PUT /v1/customers/{customer}.
type CustomerSpec struct {
	Plan             *string         `json:"plan"`
	Name             *string         `json:"name" nullable:"true"`
	BillingAnchorDay *int64          `json:"billing_anchor_day" nullable:"true"`
	TimeZone         *string         `json:"time_zone" nullable:"true"` // IANA name; absent or null: UTC
	Metadata         json.RawMessage `json:"metadata" nullable:"true"`
	// Status is "active" (the default) or "suspended", for StatusReason.
	Status          *string              `json:"status" nullable:"true"`
	StatusReason    *string              `json:"status_reason" nullable:"true"`
	Trial           *TrialSpec           `json:"trial" nullable:"true"`
	ScheduledChange *ScheduledChangeSpec `json:"scheduled_change" nullable:"true"`
}

// OverrideSpec is the body of PUT /v1/customers/{customer}/overrides/{metric}/{window}.
// Its address (customer, metric, window and per) is the request's: Per,
// when set, must repeat the per the override is addressed by (see
// Validate), so that a body never contradicts its URL.
type OverrideSpec struct {
	Limit              *int64     `json:"limit"`
	Mode               string     `json:"mode" nullable:"true"`
	OveragePercent     *int64     `json:"overage_percent" nullable:"true"`
	OveragePriceMicros *int64     `json:"overage_price_micros" nullable:"true"`
	Ceiling            *int64     `json:"ceiling" nullable:"true"`
	Algorithm          *string    `json:"algorithm" nullable:"true"`
	Burst              *int64     `json:"burst" nullable:"true"`
	ExpiresAt          *time.Time `json:"expires_at" nullable:"true"`
	Reason             *string    `json:"reason" nullable:"true"`
	Per                *string    `json:"per" nullable:"true"`
	Rollover           *Rollover  `json:"rollover" nullable:"true"`
}

// Validate returns the metric key describes, with Version and times unset.
func (s MetricSpec) Validate(key string) (Metric, error) {
	var p problems
	if !ValidKey(key) {
		p.add("metric", keyRule)
	}
	m := Metric{Key: key, Capacity: map[Window]int64{}}
	if s.Description != nil {
		p.checkText("description", *s.Description, maxDescriptionLen)
		m.Description = *s.Description
	}
	for name, v := range s.Capacity {
		field := "capacity." + name
		w, ok := ParseWindow(name)
		if !ok || !w.Resets() {
			// Spare capacity is for elastic limits, which a total has not.
			p.add(field, "must be a window: second, minute, hour, day, week or month")
			continue
		}
		if v == nil {
			p.add(field, "must be an integer")
			continue
		}
		p.checkCount(field, *v)
		m.Capacity[w] = *v
	}
	m.CreditSchema = s.validateCreditSchema(key, &p)
	sortFields(p.list)
	return m, p.err()
}

// validateCreditSchema checks the rules of a credit schema that need no
// other metric: every entry names a metric other than pool, once, with
// credits and per in 1..MaxLimit (per 1 when left out). Whether the
// metrics it names may draw on pool is CheckCreditPools'.
func (s MetricSpec) validateCreditSchema(pool string, p *problems) []CreditRate {
	out := make([]CreditRate, 0, len(s.CreditSchema))
	if len(s.CreditSchema) > maxCreditRates {
		p.add("credit_schema", fmt.Sprintf("must have at most %d entries", maxCreditRates))
	}
	seen := make(map[string]int, len(s.CreditSchema))
	for i, rs := range s.CreditSchema {
		path := fmt.Sprintf("credit_schema[%d]", i)
		before := len(p.list)
		r := CreditRate{Metric: rs.Metric, Per: 1}
		switch {
		case rs.Metric == "":
			p.add(path+".metric", "is required")
		case !ValidKey(rs.Metric):
			p.add(path+".metric", keyRule)
		case rs.Metric == pool:
			p.add(path+".metric", "must name another metric: a pool cannot draw on itself")
		}
		if rs.Credits == nil {
			p.add(path+".credits", "is required")
		} else {
			p.checkRate(path+".credits", *rs.Credits)
			r.Credits = *rs.Credits
		}
		if rs.Per != nil {
			p.checkRate(path+".per", *rs.Per)
			r.Per = *rs.Per
		}
		if len(p.list) > before {
			continue
		}
		if j, dup := seen[r.Metric]; dup {
			p.add(path+".metric", fmt.Sprintf("duplicates credit_schema[%d]: a metric appears at most once", j))
			continue
		}
		seen[r.Metric] = i
		out = append(out, r)
	}
	return out
}

// Validate returns the plan key describes, with Version and times unset.
// Whether its metrics are declared is the store's to check.
func (s PlanSpec) Validate(key string) (Plan, error) {
	var p problems
	if !ValidKey(key) {
		p.add("plan", keyRule)
	}
	pl := Plan{
		Key:    key,
		Name:   key,
		Price:  Price{Currency: "USD", Interval: "month"},
		Limits: make([]Limit, 0, len(s.Limits)),
	}
	if s.Name != nil {
		p.checkText("name", *s.Name, maxNameLen)
		if strings.TrimSpace(*s.Name) == "" {
			p.add("name", "must not be empty")
		}
		pl.Name = *s.Name
	}
	if s.Description != nil {
		p.checkText("description", *s.Description, maxDescriptionLen)
		pl.Description = *s.Description
	}
	if s.Public != nil {
		pl.Public = *s.Public
	}
	if s.Price != nil {
		pl.Price = s.Price.validate(&p)
	}
	if len(s.Limits) > maxLimitsPerPlan {
		p.add("limits", fmt.Sprintf("must have at most %d entries", maxLimitsPerPlan))
	}
	seen := make(map[LimitKey]int, len(s.Limits))
	for i, ls := range s.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		l, ok := ls.validate(path, &p)
		if !ok {
			continue
		}
		if j, dup := seen[l.Key()]; dup {
			p.add(path, fmt.Sprintf("duplicates limits[%d]: %s", j, UniqueLimitRule))
			continue
		}
		seen[l.Key()] = i
		pl.Limits = append(pl.Limits, l)
	}
	pl.Features = validateFeatures(s.Features, &p)
	return pl, p.err()
}

func (s PriceSpec) validate(p *problems) Price {
	pr := Price{Currency: "USD", Interval: "month"}
	if s.AmountCents != nil {
		if *s.AmountCents < 0 || *s.AmountCents > MaxLimit {
			p.add("price.amount_cents", fmt.Sprintf("must be an integer between 0 and %d", MaxLimit))
		}
		pr.AmountCents = *s.AmountCents
	}
	if s.Currency != nil {
		if !isCurrency(*s.Currency) {
			p.add("price.currency", "must be a three-letter ISO 4217 code in upper case, e.g. USD")
		}
		pr.Currency = *s.Currency
	}
	if s.Interval != nil {
		switch *s.Interval {
		case "day", "week", "month", "year":
		default:
			p.add("price.interval", "must be one of day, week, month, year")
		}
		pr.Interval = *s.Interval
	}
	return pr
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// validate checks one plan limit; ok is false when it is unusable.
func (s LimitSpec) validate(path string, p *problems) (Limit, bool) {
	before := len(p.list)
	l := Limit{Metric: s.Metric}
	if !ValidKey(s.Metric) {
		if s.Metric == "" {
			p.add(path+".metric", "is required")
		} else {
			p.add(path+".metric", keyRule)
		}
	}
	w, ok := ParseWindow(s.Window)
	switch {
	case s.Window == "":
		p.add(path+".window", "is required")
	case !ok:
		p.add(path+".window", windowRule)
	}
	l.Window = w
	if s.Per != nil {
		l.Per, _ = p.checkPer(path+".per", *s.Per)
	}
	terms := limitTerms{
		Limit: s.Limit, Mode: s.Mode, OveragePercent: s.OveragePercent,
		OveragePriceMicros: s.OveragePriceMicros, Ceiling: s.Ceiling,
		Algorithm: s.Algorithm, Burst: s.Burst, Rollover: s.Rollover,
	}
	terms.apply(path, &l, p)
	return l, len(p.list) == before
}

// limitTerms are the fields a plan limit and an override share.
type limitTerms struct {
	Limit              *int64
	Mode               string
	OveragePercent     *int64
	OveragePriceMicros *int64
	Ceiling            *int64
	Algorithm          *string
	Burst              *int64
	Rollover           *Rollover
}

// apply validates t into l, whose window is set (or invalid, already
// reported). Fields that do not apply to the mode are errors, except their
// zero values (0 percent, null), which GET returns and a client may send
// back unchanged.
func (t limitTerms) apply(path string, l *Limit, p *problems) {
	field := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	t.applyAlgorithm(field, l, p)
	if t.Limit == nil {
		p.add(field("limit"), "is required")
	} else {
		p.checkCount(field("limit"), *t.Limit)
		l.Limit = *t.Limit
	}
	l.Mode = Hard
	if t.Mode != "" {
		m, ok := ParseMode(t.Mode)
		if !ok {
			p.add(field("mode"), "must be one of hard, soft, elastic")
			return
		}
		l.Mode = m
	}
	if l.Mode != Hard && !l.Window.Resets() {
		// A count that never resets has no period to bill overage for nor
		// a metric's spare capacity to draw on.
		p.add(field("mode"), "must be hard on window total")
	}
	if t.OveragePercent != nil && *t.OveragePercent != 0 {
		switch {
		case l.Mode != Soft:
			p.add(field("overage_percent"), "applies only to mode soft")
		case *t.OveragePercent < 0 || *t.OveragePercent > MaxOveragePercent:
			p.add(field("overage_percent"), fmt.Sprintf("must be an integer between 0 and %d", MaxOveragePercent))
		default:
			l.OveragePercent = *t.OveragePercent
		}
	}
	if t.OveragePriceMicros != nil {
		switch {
		case l.Mode != Soft:
			p.add(field("overage_price_micros"), "applies only to mode soft")
		case *t.OveragePriceMicros < 0 || *t.OveragePriceMicros > MaxLimit:
			p.add(field("overage_price_micros"), fmt.Sprintf("must be an integer between 0 and %d", MaxLimit))
		default:
			v := *t.OveragePriceMicros
			l.OveragePriceMicros = &v
		}
	}
	if t.Ceiling != nil {
		switch {
		case l.Mode != Elastic:
			p.add(field("ceiling"), "applies only to mode elastic")
		case *t.Ceiling > MaxLimit || *t.Ceiling < 0:
			p.add(field("ceiling"), fmt.Sprintf("must be an integer between limit and %d", MaxLimit))
		case t.Limit != nil && *t.Ceiling < *t.Limit:
			p.add(field("ceiling"), "must be at least limit")
		case l.Burst != nil && *t.Ceiling < *l.Burst:
			// A token bucket admits up to its burst before any elastic
			// allowance: a ceiling below it would bound nothing.
			p.add(field("ceiling"), "must be at least burst")
		default:
			v := *t.Ceiling
			l.Ceiling = &v
		}
	}
	if r := t.Rollover; r != nil {
		switch {
		case l.Mode != Hard || l.Window != Day && l.Window != Week && l.Window != Month:
			p.add(field("rollover"), "applies only to hard limits of a day, week or month")
		case l.Per != PerCustomer:
			p.add(field("rollover"), "applies only to customer-wide limits (not per subject)")
		case r.Max < 1 || r.Max > MaxLimit:
			p.add(field("rollover.max"), fmt.Sprintf("must be an integer between 1 and %d", MaxLimit))
		default:
			l.Rollover = &Rollover{Max: r.Max}
		}
	}
}

const algorithmRule = "must be one of sliding_window, fixed_window, sliding_log, token_bucket"

// applyAlgorithm validates the algorithm and burst of t into l. A null is
// not set; any algorithm named on a long window is an error, the default's
// name too: GET shows none there.
func (t limitTerms) applyAlgorithm(field func(string) string, l *Limit, p *problems) {
	// known: the algorithm is understood, so whether a burst applies can
	// be told.
	known := true
	if t.Algorithm != nil {
		a, ok := ParseAlgorithm(*t.Algorithm)
		switch {
		case !ok:
			p.add(field("algorithm"), algorithmRule)
			known = false
		case l.Window.Valid() && !l.Window.Short():
			p.add(field("algorithm"), "applies only to short windows: second, minute")
			known = false
		default:
			l.Algorithm = a
		}
	}
	if t.Burst != nil {
		switch {
		case known && l.Algorithm != TokenBucket:
			p.add(field("burst"), "applies only to algorithm token_bucket")
		case *t.Burst < 1 || *t.Burst > MaxLimit:
			p.add(field("burst"), fmt.Sprintf("must be an integer between 1 and %d", MaxLimit))
		case known:
			v := *t.Burst
			l.Burst = &v
		}
	}
	if l.Algorithm == SlidingLog && t.Limit != nil && *t.Limit > MaxLogLimit && *t.Limit <= MaxLimit {
		p.add(field("limit"), fmt.Sprintf("must be at most %d with algorithm sliding_log", MaxLogLimit))
	}
}

// Validate returns the customer id describes, with Version and times unset.
// Whether its plans exist is the store's to check. The anchor is set as if
// the customer were new; the store carries a pinned period over on replace
// (and resolves a scheduled change at the period's end by it). A trial's
// end and a scheduled change's instant must lie after now.
func (s CustomerSpec) Validate(id string, now time.Time) (Customer, error) {
	var p problems
	if !ValidCustomerID(id) {
		p.add("customer", customerIDRule)
	}
	c := Customer{ID: id, Metadata: json.RawMessage(`{}`), TimeZone: DefaultTimeZone}
	switch {
	case s.Plan == nil || *s.Plan == "":
		p.add("plan", "is required")
	case !ValidKey(*s.Plan):
		p.add("plan", keyRule)
	default:
		c.Plan = *s.Plan
	}
	if s.Name != nil {
		p.checkText("name", *s.Name, maxNameLen)
		c.Name = *s.Name
	}
	if s.BillingAnchorDay != nil {
		d := *s.BillingAnchorDay
		if d < 1 || d > 28 {
			p.add("billing_anchor_day", "must be an integer between 1 and 28")
		} else {
			day := int(d)
			c.BillingAnchorDay = &day
			c.Anchor.Day = day
		}
	}
	if s.TimeZone != nil {
		if loc, err := LoadZone(*s.TimeZone); err != nil {
			p.list = append(p.list, err.(*ValidationError).Fields...)
		} else {
			c.TimeZone, c.Anchor.Loc = *s.TimeZone, loc
		}
	}
	if len(s.Metadata) > 0 && !bytes.Equal(bytes.TrimSpace(s.Metadata), []byte("null")) {
		md, err := normalizeMetadata(s.Metadata)
		if err != nil {
			p.add("metadata", err.Error())
		} else {
			c.Metadata = md
		}
	}
	s.validateLifecycle(&p, &c, now)
	return c, p.err()
}

// normalizeMetadata checks that raw is a JSON object PostgreSQL's jsonb can
// hold and returns it re-encoded.
func normalizeMetadata(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("must be a single JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON object")
	}
	if err := checkJSONText(obj, 0); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

const maxMetadataDepth = 32

// Bounds on metadata numbers. PostgreSQL's jsonb stores numbers as numeric,
// which refuses a scale above 16383 digits; these bounds keep well inside it.
const (
	maxNumberScale    = 1000
	maxNumberExponent = 1000
)

// storableNumber reports whether the JSON number n has at most
// maxNumberScale digits after its decimal point and an exponent within
// ±maxNumberExponent.
func storableNumber(n string) bool {
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	if hasExp {
		e, err := strconv.Atoi(exp)
		if err != nil || e < -maxNumberExponent || e > maxNumberExponent {
			return false
		}
	}
	_, frac, _ := strings.Cut(mantissa, ".")
	return len(frac) <= maxNumberScale
}

// checkJSONText rejects what jsonb cannot store (NUL in strings) and absurd nesting.
func checkJSONText(v any, depth int) error {
	if depth > maxMetadataDepth {
		return fmt.Errorf("must be nested at most %d levels deep", maxMetadataDepth)
	}
	switch t := v.(type) {
	case json.Number:
		if !storableNumber(string(t)) {
			return fmt.Errorf("numbers must have at most %d digits after the decimal point and an exponent between -%d and %d",
				maxNumberScale, maxNumberExponent, maxNumberExponent)
		}
	case string:
		if strings.IndexByte(t, 0) >= 0 {
			return fmt.Errorf("must not contain NUL characters")
		}
	case map[string]any:
		for k, e := range t {
			if strings.IndexByte(k, 0) >= 0 {
				return fmt.Errorf("must not contain NUL characters")
			}
			if err := checkJSONText(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range t {
			if err := checkJSONText(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxYear is the last year an RFC 3339 time can name.
const maxYear = 9999

// checkExpiry validates an override's expires_at, if set: it must lie
// after now (and before year 10000). It returns the time as Instant
// keeps it.
func (p *problems) checkExpiry(at *time.Time, now time.Time) *time.Time {
	if at == nil {
		return nil
	}
	t := at.UTC()
	switch {
	case t.Year() > maxYear:
		// RFC 3339 (and so JSON) has four-digit years: such a time, read
		// with a negative offset, could be stored but never written back.
		p.add("expires_at", "must lie before 10000-01-01T00:00:00Z")
	case !t.After(now):
		p.add("expires_at", "must lie in the future")
	}
	t = Instant(t)
	return &t
}

// Validate returns the override the spec describes for customer on
// metric+window, customer-wide or per subject as per says ("" is
// "customer"), with Version and times unset. The spec's own per, if set,
// must be the same. expires_at must lie after now.
func (s OverrideSpec) Validate(customer, metric, window, per string, now time.Time) (Override, error) {
	var p problems
	k := p.overrideKey(customer, metric, window, per)
	o := Override{Customer: customer, Limit: Limit{Metric: metric, Window: k.Window, Per: k.Per}}
	// The body's per, if any, must repeat the address's; an address whose
	// per is none is reported once, above.
	if _, addressed := ParsePer(per); s.Per != nil && (addressed || per == "") {
		if body, ok := p.checkPer("per", *s.Per); ok && body != k.Per {
			p.add("per", fmt.Sprintf("must be %s, as the override's address says (per-subject overrides are addressed with ?per=subject)", k.Per))
		}
	}
	terms := limitTerms{
		Limit: s.Limit, Mode: s.Mode, OveragePercent: s.OveragePercent,
		OveragePriceMicros: s.OveragePriceMicros, Ceiling: s.Ceiling,
		Algorithm: s.Algorithm, Burst: s.Burst, Rollover: s.Rollover,
	}
	terms.apply("", &o.Limit, &p)
	o.ExpiresAt = p.checkExpiry(s.ExpiresAt, now)
	if s.Reason != nil {
		p.checkText("reason", *s.Reason, maxReasonLen)
		o.Reason = *s.Reason
	}
	return o, p.err()
}
