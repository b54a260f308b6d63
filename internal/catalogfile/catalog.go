package catalogfile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Catalog is a catalog normalised: the values quotad stores, with every
// default applied. A file and a server's answers both become one, so that
// comparing them compares what counts.
type Catalog struct {
	// Metrics, Plans and Customers are nil for a section the file leaves
	// out; a server's catalog has all three (Customers only when read).
	Metrics   map[string]tiers.Metric
	Plans     map[string]tiers.Plan
	Customers map[string]Account
}

// Account is a customer and its overrides.
type Account struct {
	Customer  tiers.Customer
	Overrides map[tiers.LimitKey]tiers.Override
}

// Validate checks a parsed file and returns the catalog it describes. The
// metrics limits and overrides name must be declared by the file or, when
// it has no metrics section, by server; likewise the plans customers are
// on. The file's credit pools keep their rules among the file's metrics
// (tiers.CheckCreditPools). Overrides must expire after now. Every problem
// is returned, those Parse found with the others, as Errors, each with its
// line and field.
func Validate(doc *Document, server *Catalog, now time.Time) (*Catalog, error) {
	n := &normalizer{name: doc.Name, line: doc.Line, now: now}
	c := n.catalog(doc.File)
	for _, key := range sortedKeys(c.Metrics) {
		if !n.invalid[key] { // else its schema lost entries: their indexes say nothing
			n.fromTiers(tiers.CheckCreditPools(c.Metrics[key], c.Metrics), "metrics."+key, nil)
		}
	}
	canonSchemas(c)
	metrics, plans := c.Metrics, c.Plans
	if metrics == nil && server != nil {
		metrics = server.Metrics
	}
	if plans == nil && server != nil {
		plans = server.Plans
	}
	for _, key := range sortedKeys(doc.File.Plans) {
		for i, l := range doc.File.Plans[key].Limits {
			declared(n, fmt.Sprintf("plans.%s.limits[%d].metric", key, i), "metric", l.Metric, metrics)
		}
	}
	for _, id := range sortedKeys(doc.File.Customers) {
		cu := doc.File.Customers[id]
		if cu.Plan != nil {
			declared(n, fmt.Sprintf("customers.%s.plan", id), "plan", *cu.Plan, plans)
		}
		for i, o := range cu.Overrides {
			declared(n, fmt.Sprintf("customers.%s.overrides[%d].metric", id, i), "metric", o.Metric, metrics)
		}
	}
	errs := slices.Clone(doc.errs)
	for _, e := range n.errs {
		if !doc.decodedBadly(e.Field) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		errs.sort()
		return nil, errs
	}
	return c, nil
}

// Normalize returns the catalog of f as read from a server: its overrides
// are kept even when expired (Expired set by now), and nothing is checked
// against anything else. An error means the server answered something it
// does not accept itself.
func Normalize(f *File, now time.Time) (*Catalog, error) {
	n := &normalizer{name: "server", line: func(string) int { return 0 }, now: now, read: true}
	c := n.catalog(f)
	if len(n.errs) > 0 {
		return nil, n.errs
	}
	canonSchemas(c)
	return c, nil
}

// canonSchemas sorts the credit schemas of c by metric: a schema's order
// says nothing, so it is compared and exported in one.
func canonSchemas(c *Catalog) {
	for _, m := range c.Metrics {
		slices.SortFunc(m.CreditSchema, func(a, b tiers.CreditRate) int { return strings.Compare(a.Metric, b.Metric) })
	}
}

type normalizer struct {
	name string
	line func(field string) int
	now  time.Time
	// read: the values come from a server, whose expired overrides stand.
	read bool
	errs Errors
	// invalid holds the metrics whose entries validation refused.
	invalid map[string]bool
}

func (n *normalizer) fail(field, msg string) {
	n.errs = append(n.errs, Error{File: n.name, Line: n.line(field), Field: field, Message: msg})
}

// fromTiers reports the problems of a tiers.ValidationError: fields named
// in rename (the resource's own key, say) become those, others are put
// under prefix.
func (n *normalizer) fromTiers(err error, prefix string, rename map[string]string) {
	if err == nil {
		return
	}
	ve, ok := err.(*tiers.ValidationError)
	if !ok {
		n.fail(prefix, err.Error())
		return
	}
	for _, f := range ve.Fields {
		field, ok := rename[f.Field]
		if !ok {
			field = prefix + "." + f.Field
		}
		n.fail(field, f.Message)
	}
}

// declared reports name, of a metric or plan, unless known has it. Names
// that are not valid keys are reported by validation already.
func declared[V any](n *normalizer, field, kind, name string, known map[string]V) {
	if _, ok := known[name]; ok || !tiers.ValidKey(name) {
		return
	}
	n.fail(field, fmt.Sprintf("%s %q is not declared", kind, name))
}

func (n *normalizer) catalog(f *File) *Catalog {
	c := &Catalog{}
	if f.Metrics != nil {
		c.Metrics = make(map[string]tiers.Metric, len(f.Metrics))
		for _, key := range sortedKeys(f.Metrics) {
			m, err := f.Metrics[key].spec().Validate(key)
			n.fromTiers(err, "metrics."+key, map[string]string{"metric": "metrics." + key})
			if err != nil {
				if n.invalid == nil {
					n.invalid = map[string]bool{}
				}
				n.invalid[key] = true
			}
			c.Metrics[key] = m
		}
	}
	if f.Plans != nil {
		c.Plans = make(map[string]tiers.Plan, len(f.Plans))
		for _, key := range sortedKeys(f.Plans) {
			p, err := f.Plans[key].spec().Validate(key)
			n.fromTiers(err, "plans."+key, map[string]string{"plan": "plans." + key})
			for i := range p.Limits {
				canonLimit(&p.Limits[i])
			}
			slices.SortFunc(p.Limits, func(a, b tiers.Limit) int { return tiers.CompareLimitKeys(a.Key(), b.Key()) })
			c.Plans[key] = p
		}
	}
	if f.Customers != nil {
		c.Customers = make(map[string]Account, len(f.Customers))
		for _, id := range sortedKeys(f.Customers) {
			c.Customers[id] = n.account(id, f.Customers[id])
		}
	}
	return c
}

func (n *normalizer) account(id string, f *Customer) Account {
	path := "customers." + id
	spec := tiers.CustomerSpec{Plan: f.Plan, Name: f.Name, BillingAnchorDay: f.BillingAnchorDay, TimeZone: f.TimeZone}
	if f.Metadata != nil {
		md, err := nodeToJSON(f.Metadata, path+".metadata")
		if err != nil {
			line := err.line
			if n.read {
				line = 0
			}
			n.errs = append(n.errs, Error{File: n.name, Line: line, Field: err.field, Message: err.msg})
		} else {
			spec.Metadata = md
		}
	}
	cu, err := spec.Validate(id, n.now)
	n.fromTiers(err, path, map[string]string{"customer": path})
	a := Account{Customer: cu, Overrides: make(map[tiers.LimitKey]tiers.Override, len(f.Overrides))}
	seen := make(map[tiers.LimitKey]int, len(f.Overrides))
	for i, fo := range f.Overrides {
		opath := fmt.Sprintf("%s.overrides[%d]", path, i)
		now := n.now
		if n.read {
			// What the server holds stands, expired or not.
			now = time.Time{}
		}
		o, err := fo.spec().Validate(id, fo.Metric, fo.Window, deref(fo.Per), now)
		n.fromTiers(err, opath, map[string]string{"customer": path})
		if err != nil {
			continue
		}
		canonLimit(&o.Limit)
		o.Expired = o.ExpiredAt(n.now)
		if j, dup := seen[o.Key()]; dup {
			n.fail(opath, fmt.Sprintf("duplicates overrides[%d]: %s", j, tiers.UniqueLimitRule))
			continue
		}
		seen[o.Key()] = i
		a.Overrides[o.Key()] = o
	}
	return a
}

// canonLimit drops a token bucket's burst when it equals the limit: the
// bucket's size is the same either way, and quotad shows it set.
func canonLimit(l *tiers.Limit) {
	if l.Algorithm == tiers.TokenBucket && l.Burst != nil && *l.Burst == l.Limit {
		l.Burst = nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func (m *Metric) spec() tiers.MetricSpec {
	s := tiers.MetricSpec{Description: m.Description, Capacity: m.Capacity}
	if m.CreditSchema != nil {
		s.CreditSchema = make([]tiers.CreditRateSpec, len(m.CreditSchema))
		for i, r := range m.CreditSchema {
			s.CreditSchema[i] = tiers.CreditRateSpec{Metric: r.Metric, Credits: r.Credits, Per: r.Per}
		}
	}
	return s
}

func (p *Plan) spec() tiers.PlanSpec {
	s := tiers.PlanSpec{Name: p.Name, Description: p.Description, Public: p.Public, Limits: make([]tiers.LimitSpec, len(p.Limits)),
		Features: featureSpecs(p.Features)}
	if p.Price != nil {
		s.Price = &tiers.PriceSpec{AmountCents: p.Price.AmountCents, Currency: p.Price.Currency, Interval: p.Price.Interval}
	}
	for i, l := range p.Limits {
		s.Limits[i] = tiers.LimitSpec{
			Metric: l.Metric, Window: l.Window, Limit: l.Limit, Mode: deref(l.Mode),
			OveragePercent: l.OveragePercent, OveragePriceMicros: l.OveragePriceMicros,
			Ceiling: l.Ceiling, Algorithm: l.Algorithm, Burst: l.Burst, Per: l.Per, Rollover: l.Rollover.spec(),
		}
	}
	return s
}

func (o *Override) spec() tiers.OverrideSpec {
	return tiers.OverrideSpec{
		Limit: o.Limit, Mode: deref(o.Mode), OveragePercent: o.OveragePercent,
		OveragePriceMicros: o.OveragePriceMicros, Ceiling: o.Ceiling,
		Algorithm: o.Algorithm, Burst: o.Burst, ExpiresAt: o.ExpiresAt, Reason: o.Reason, Rollover: o.Rollover.spec(),
	}
}

// spec returns r as the API takes it (nil: none).
func (r *Rollover) spec() *tiers.Rollover {
	if r == nil {
		return nil
	}
	return &tiers.Rollover{Max: r.Max}
}

// fromRollover returns r as a file writes it (nil: none).
func fromRollover(r *tiers.Rollover) *Rollover {
	if r == nil {
		return nil
	}
	return &Rollover{Max: r.Max}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
