package catalogfile

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/quotad/quotad/internal/tiers"
)

// Kind is a kind of catalog resource.
type Kind uint8

// The kinds, in the order they are created (and deleted in reverse).
const (
	KindMetric Kind = iota + 1
	KindPlan
	KindCustomer
	KindOverride
)

var kindNames = [...]string{"", "metric", "plan", "customer", "override"}

func (k Kind) String() string { return kindNames[k] }

// Ref names one resource: a metric or plan by key, a customer by id, an
// override as "customer metric/window".
type Ref struct {
	Kind Kind
	Name string
}

func (r Ref) String() string { return r.Kind.String() + " " + r.Name }

// MetricRef, PlanRef, CustomerRef and OverrideRef name resources.
func MetricRef(key string) Ref  { return Ref{KindMetric, key} }
func PlanRef(key string) Ref    { return Ref{KindPlan, key} }
func CustomerRef(id string) Ref { return Ref{KindCustomer, id} }

// OverrideRef names customer's override on metric and window.
func OverrideRef(customer, metric, window string) Ref {
	return Ref{KindOverride, customer + " " + metric + "/" + window}
}

// Op is what a change does.
type Op uint8

// The operations.
const (
	Create Op = iota + 1
	Update
	Delete
)

func (o Op) sign() string { return [...]string{"", "+", "~", "-"}[o] }

// Change is one write that takes the server toward the file.
type Change struct {
	Op  Op
	Ref Ref
	// Key is the metric or plan key or the customer id; for an override,
	// its customer's id.
	Key string
	// The resource's new value, one of them set to match Ref.Kind, for
	// Create and Update: the body to PUT. A Delete of an override has
	// Override set with its metric and window only.
	Metric   *Metric
	Plan     *Plan
	Customer *Customer // without overrides: they are changes of their own
	Override *Override
	// Fields lists what an Update changes.
	Fields []FieldChange
	// IfMatch is the ETag the resource had when it was read, for Update and
	// Delete: the write must fail if it has changed since.
	IfMatch string
}

// FieldChange is one field an update changes, its values as printed.
type FieldChange struct {
	Field    string
	Old, New string
}

// none stands for a field that is not set.
const none = "(none)"

// Diff returns the changes that make have (a server's catalog, with the
// ETag of every resource in etags) what want (a file's) says, in the order
// they can be made: metrics, plans, customers then overrides created or
// updated, then overrides, customers, plans and metrics deleted. Sections
// want leaves out are left alone. Nothing is deleted unless prune is set,
// and then only what a section of want leaves out: a customer's overrides
// are deleted with it, and expired overrides are never pruned (they count
// for nothing and export leaves them out).
func Diff(want, have *Catalog, etags map[Ref]string, prune bool) []Change {
	var upserts [KindOverride + 1][]Change
	var deletes [KindOverride + 1][]Change
	put := func(ref Ref, key string, exists bool, oldF, newF []field, c Change) {
		c.Ref, c.Key = ref, key
		if !exists {
			c.Op = Create
			upserts[ref.Kind] = append(upserts[ref.Kind], c)
			return
		}
		if c.Fields = diffFields(oldF, newF); len(c.Fields) > 0 {
			c.Op, c.IfMatch = Update, etags[ref]
			upserts[ref.Kind] = append(upserts[ref.Kind], c)
		}
	}
	del := func(ref Ref, key string, c Change) {
		c.Op, c.Ref, c.Key, c.IfMatch = Delete, ref, key, etags[ref]
		deletes[ref.Kind] = append(deletes[ref.Kind], c)
	}

	if want.Metrics != nil {
		for _, key := range sortedKeys(want.Metrics) {
			m := fromMetric(want.Metrics[key])
			old, ok := have.Metrics[key]
			put(MetricRef(key), key, ok, metricFields(fromMetric(old)), metricFields(m), Change{Metric: m})
		}
		if prune {
			for _, key := range missing(have.Metrics, want.Metrics) {
				del(MetricRef(key), key, Change{})
			}
		}
	}
	if want.Plans != nil {
		for _, key := range sortedKeys(want.Plans) {
			p := fromPlan(want.Plans[key])
			old, ok := have.Plans[key]
			put(PlanRef(key), key, ok, planFields(fromPlan(old)), planFields(p), Change{Plan: p})
		}
		if prune {
			for _, key := range missing(have.Plans, want.Plans) {
				del(PlanRef(key), key, Change{})
			}
		}
	}
	if want.Customers != nil {
		for _, id := range sortedKeys(want.Customers) {
			a := want.Customers[id]
			cu := fromCustomer(a.Customer)
			old, ok := have.Customers[id]
			put(CustomerRef(id), id, ok, customerFields(fromCustomer(old.Customer)), customerFields(cu), Change{Customer: cu})
			for _, key := range sortedLimitKeys(a.Overrides) {
				o := fromOverride(a.Overrides[key])
				oldO, ok := old.Overrides[key]
				put(OverrideRef(id, o.Metric, o.Window), id, ok, overrideFields(fromOverride(oldO)), overrideFields(o), Change{Override: o})
			}
			if prune {
				for _, key := range sortedLimitKeys(old.Overrides) {
					if _, ok := a.Overrides[key]; !ok && !old.Overrides[key].Expired {
						w := key.Window.String()
						del(OverrideRef(id, key.Metric, w), id, Change{Override: &Override{Metric: key.Metric, Window: w}})
					}
				}
			}
		}
		if prune {
			for _, id := range missing(have.Customers, want.Customers) {
				del(CustomerRef(id), id, Change{})
			}
		}
	}
	var out []Change
	for k := KindMetric; k <= KindOverride; k++ {
		out = append(out, upserts[k]...)
	}
	for k := KindOverride; k >= KindMetric; k-- {
		out = append(out, deletes[k]...)
	}
	return out
}

// Unpruned returns what Diff with prune would delete and without it
// leaves alone: what the server holds, in the sections want has, that want
// does not name. They are in the order they would be created.
func Unpruned(want, have *Catalog) []Ref {
	var out []Ref
	for _, c := range Diff(want, have, nil, true) {
		if c.Op == Delete {
			out = append(out, c.Ref)
		}
	}
	// Diff deletes kinds in the reverse of their order.
	slices.SortStableFunc(out, func(a, b Ref) int { return int(a.Kind) - int(b.Kind) })
	return out
}

// missing returns, sorted, the keys of have that want lacks: what a
// section of a file prunes.
func missing[V, W any](have map[string]V, want map[string]W) []string {
	var out []string
	for _, key := range sortedKeys(have) {
		if _, ok := want[key]; !ok {
			out = append(out, key)
		}
	}
	return out
}

// field is one field of a resource as printed; value "" is not set.
type field struct{ name, value string }

func diffFields(old, new []field) []FieldChange {
	oldV := make(map[string]string, len(old))
	for _, f := range old {
		oldV[f.name] = f.value
	}
	newV := make(map[string]string, len(new))
	for _, f := range new {
		newV[f.name] = f.value
	}
	// Fields in the new value's order, then those only the old one has.
	var out []FieldChange
	add := func(name string) {
		o, n := oldV[name], newV[name]
		if o == n {
			return
		}
		out = append(out, FieldChange{Field: name, Old: orNone(o), New: orNone(n)})
	}
	for _, f := range new {
		add(f.name)
	}
	for _, f := range old {
		if _, ok := newV[f.name]; !ok {
			add(f.name)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return strconv.Quote(*p)
}

func num(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

func metricFields(m *Metric) []field {
	fs := []field{{"description", str(m.Description)}}
	for _, w := range tiers.Windows {
		fs = append(fs, field{"capacity." + w.String(), num(m.Capacity[w.String()])})
	}
	return fs
}

func planFields(p *Plan) []field {
	fs := []field{{"name", str(p.Name)}, {"description", str(p.Description)}}
	if p.Price != nil {
		fs = append(fs,
			field{"price.amount_cents", num(p.Price.AmountCents)},
			field{"price.currency", str(p.Price.Currency)},
			field{"price.interval", str(p.Price.Interval)})
	}
	for _, l := range p.Limits {
		prefix := fmt.Sprintf("limits[%s/%s].", l.Metric, l.Window)
		for _, f := range limitFields(&Override{
			Limit: l.Limit, Mode: l.Mode, OveragePercent: l.OveragePercent,
			OveragePriceMicros: l.OveragePriceMicros, Ceiling: l.Ceiling, Algorithm: l.Algorithm, Burst: l.Burst,
		}) {
			fs = append(fs, field{prefix + f.name, f.value})
		}
	}
	return fs
}

func limitFields(o *Override) []field {
	return []field{
		{"limit", num(o.Limit)},
		{"mode", str(o.Mode)},
		{"overage_percent", num(o.OveragePercent)},
		{"overage_price_micros", num(o.OveragePriceMicros)},
		{"ceiling", num(o.Ceiling)},
		{"algorithm", str(o.Algorithm)},
		{"burst", num(o.Burst)},
	}
}

func customerFields(c *Customer) []field {
	fs := []field{{"plan", str(c.Plan)}, {"name", str(c.Name)}, {"billing_anchor_day", num(c.BillingAnchorDay)}}
	md := ""
	if c.Metadata != nil {
		// Both sides were validated: the conversion cannot fail.
		raw, _ := nodeToJSON(c.Metadata, "metadata")
		md = string(json.RawMessage(raw))
	}
	return append(fs, field{"metadata", md})
}

func overrideFields(o *Override) []field {
	fs := limitFields(o)
	at := ""
	if o.ExpiresAt != nil {
		at = o.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return append(fs, field{"expires_at", at}, field{"reason", str(o.Reason)})
}
