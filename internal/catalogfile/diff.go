package catalogfile

import (
	"cmp"
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
// override as "customer metric/window", "customer metric/window/subject"
// for one per subject.
type Ref struct {
	Kind Kind
	Name string
}

func (r Ref) String() string { return r.Kind.String() + " " + r.Name }

// MetricRef, PlanRef, CustomerRef and OverrideRef name resources.
func MetricRef(key string) Ref  { return Ref{KindMetric, key} }
func PlanRef(key string) Ref    { return Ref{KindPlan, key} }
func CustomerRef(id string) Ref { return Ref{KindCustomer, id} }

// OverrideRef names customer's override on the metric, window and per of
// k.
func OverrideRef(customer string, k tiers.LimitKey) Ref {
	return Ref{KindOverride, customer + " " + k.String()}
}

// Key returns the metric, window and per the override is on; a window or
// per that is not one is the zero value.
func (o *Override) Key() tiers.LimitKey { return fileKey(o.Metric, o.Window, o.Per) }

// fileKey returns the key a file's limit or override names.
func fileKey(metric, window string, per *string) tiers.LimitKey {
	k := tiers.LimitKey{Metric: metric}
	k.Window, _ = tiers.ParseWindow(window)
	if per != nil {
		k.Per, _ = tiers.ParsePer(*per)
	}
	return k
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
	// Override set with its metric, window and per only.
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
// they can be made: metrics (those without a credit schema first, then
// the credit pools, a pool that lets a metric go before the one that takes
// it: see orderPools), plans, customers then overrides created or
// updated, then overrides, customers, plans and metrics (pools first)
// deleted. Sections
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
		upserts[KindMetric] = orderPools(upserts[KindMetric], want.Metrics, have.Metrics)
		if prune {
			// A pool goes before the metrics it names.
			gone := missing(have.Metrics, want.Metrics)
			isPool := func(key string) int { return min(1, len(have.Metrics[key].CreditSchema)) }
			slices.SortStableFunc(gone, func(a, b string) int { return cmp.Compare(isPool(b), isPool(a)) })
			for _, key := range gone {
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
				put(OverrideRef(id, key), id, ok, overrideFields(fromOverride(oldO)), overrideFields(o), Change{Override: o})
			}
			if prune {
				for _, key := range sortedLimitKeys(old.Overrides) {
					if _, ok := a.Overrides[key]; !ok && !old.Overrides[key].Expired {
						o := &Override{Metric: key.Metric, Window: key.Window.String(), Per: perField(key.Per)}
						del(OverrideRef(id, key), id, Change{Override: o})
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

// orderPools orders the changes of metrics (in key order) so that the
// server can make each in turn: first the metrics without a credit schema
// in want (a pool names only declared metrics, and a metric that stops
// being a pool lets its metrics go), then the pools, each after the pools
// that let go, in have, a metric it takes or the pool itself (a metric
// draws on at most one pool, a pool on none). Pools that wait on each
// other in a ring stay in key order: the server refuses the first, and
// the file has to be applied in two steps.
func orderPools(changes []Change, want, have map[string]tiers.Metric) []Change {
	var plain, pools []Change
	for _, c := range changes {
		if len(want[c.Key].CreditSchema) == 0 {
			plain = append(plain, c)
		} else {
			pools = append(pools, c)
		}
	}
	names := func(m tiers.Metric, metric string) bool {
		return slices.ContainsFunc(m.CreditSchema, func(r tiers.CreditRate) bool { return r.Metric == metric })
	}
	// before[q] counts the pools q waits for.
	before := make(map[string]int, len(pools))
	after := make(map[string][]string, len(pools)) // p → the pools that wait for p
	for _, p := range pools {
		for _, r := range have[p.Key].CreditSchema {
			if names(want[p.Key], r.Metric) {
				continue // p keeps it
			}
			for _, q := range pools {
				if q.Key != p.Key && (names(want[q.Key], r.Metric) || q.Key == r.Metric) {
					before[q.Key]++
					after[p.Key] = append(after[p.Key], q.Key)
				}
			}
		}
	}
	out := plain
	done := make(map[string]bool, len(pools))
	for len(out) < len(changes) {
		next := -1
		for i, p := range pools {
			if !done[p.Key] && before[p.Key] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // a ring: the first left, in key order
			for i, p := range pools {
				if !done[p.Key] {
					next = i
					break
				}
			}
		}
		p := pools[next]
		done[p.Key] = true
		out = append(out, p)
		for _, q := range after[p.Key] {
			before[q]--
		}
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
	for _, r := range m.CreditSchema {
		prefix := "credit_schema[" + r.Metric + "]."
		fs = append(fs, field{prefix + "credits", num(r.Credits)}, field{prefix + "per", num(r.Per)})
	}
	return fs
}

func planFields(p *Plan) []field {
	fs := []field{{"name", str(p.Name)}, {"description", str(p.Description)}}
	if p.Public != nil && *p.Public {
		fs = append(fs, field{"public", "true"}) // false is the default: no change from absent
	}
	if p.Price != nil {
		fs = append(fs,
			field{"price.amount_cents", num(p.Price.AmountCents)},
			field{"price.currency", str(p.Price.Currency)},
			field{"price.interval", str(p.Price.Interval)})
	}
	for _, l := range p.Limits {
		prefix := fmt.Sprintf("limits[%s].", fileKey(l.Metric, l.Window, l.Per))
		for _, f := range limitFields(&Override{
			Limit: l.Limit, Mode: l.Mode, OveragePercent: l.OveragePercent,
			OveragePriceMicros: l.OveragePriceMicros, Ceiling: l.Ceiling, Algorithm: l.Algorithm, Burst: l.Burst,
			Rollover: l.Rollover,
		}) {
			fs = append(fs, field{prefix + f.name, f.value})
		}
	}
	return append(fs, featureFields(p.Features)...)
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
		{"rollover.max", num(rolloverMax(o.Rollover))},
	}
}

// rolloverMax returns r's max, nil when there is no rollover.
func rolloverMax(r *Rollover) *int64 {
	if r == nil {
		return nil
	}
	return &r.Max
}

func customerFields(c *Customer) []field {
	fs := []field{{"plan", str(c.Plan)}, {"name", str(c.Name)}, {"billing_anchor_day", num(c.BillingAnchorDay)},
		{"time_zone", str(c.TimeZone)}}
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
