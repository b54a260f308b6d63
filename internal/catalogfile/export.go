package catalogfile

import (
	"bytes"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/quotad/quotad/internal/tiers"
)

// Export returns the file of c: its metrics and plans, and its customers
// too when c has them and customers is set. The file is canonical: limits
// and overrides sorted by metric and window, defaults written where they
// say something (mode, price) and left out where they are empty. Expired
// overrides are left out: quotad refuses an expires_at in the past, so
// they could not be applied again.
func Export(c *Catalog, customers bool) *File {
	f := &File{Metrics: map[string]*Metric{}, Plans: map[string]*Plan{}}
	for key, m := range c.Metrics {
		f.Metrics[key] = fromMetric(m)
	}
	for key, p := range c.Plans {
		f.Plans[key] = fromPlan(p)
	}
	if customers && c.Customers != nil {
		f.Customers = make(map[string]*Customer, len(c.Customers))
		for id, a := range c.Customers {
			cu := fromCustomer(a.Customer)
			for _, key := range sortedLimitKeys(a.Overrides) {
				if o := a.Overrides[key]; !o.Expired {
					cu.Overrides = append(cu.Overrides, *fromOverride(o))
				}
			}
			f.Customers[id] = cu
		}
	}
	return f
}

// Encode writes f as YAML, keys in a stable order, indented by two.
func Encode(f *File) ([]byte, error) {
	// A section present but empty is written {}: it still means "there are
	// none" to --prune. Struct tags cannot tell it from one left out.
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	add := func(key string, section any) error {
		var n yaml.Node
		if err := n.Encode(section); err != nil {
			return fmt.Errorf("encode catalog: %s: %w", key, err)
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, &n)
		return nil
	}
	for _, s := range []struct {
		key     string
		present bool
		value   any
	}{
		{"metrics", f.Metrics != nil, f.Metrics},
		{"plans", f.Plans != nil, f.Plans},
		{"customers", f.Customers != nil, f.Customers},
	} {
		if s.present {
			if err := add(s.key, s.value); err != nil {
				return nil, err
			}
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	return b.Bytes(), nil
}

func sortedLimitKeys(m map[tiers.LimitKey]tiers.Override) []tiers.LimitKey {
	keys := make([]tiers.LimitKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, tiers.CompareLimitKeys)
	return keys
}

func ptr[T any](v T) *T { return &v }

// nonZero returns a pointer to v, or nil for v's zero value.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func fromMetric(m tiers.Metric) *Metric {
	f := &Metric{Description: nonZero(m.Description)}
	if len(m.Capacity) > 0 {
		f.Capacity = make(map[string]*int64, len(m.Capacity))
		for w, v := range m.Capacity {
			f.Capacity[w.String()] = ptr(v)
		}
	}
	for _, r := range m.CreditSchema {
		rate := CreditRate{Metric: r.Metric, Credits: ptr(r.Credits)}
		if r.Per != 1 { // the default
			rate.Per = ptr(r.Per)
		}
		f.CreditSchema = append(f.CreditSchema, rate)
	}
	return f
}

func fromPlan(p tiers.Plan) *Plan {
	f := &Plan{
		Name:        ptr(p.Name),
		Description: nonZero(p.Description),
		Public:      nonZero(p.Public),
		Price:       &Price{AmountCents: ptr(p.Price.AmountCents), Currency: ptr(p.Price.Currency), Interval: ptr(p.Price.Interval)},
	}
	for key, v := range p.Features {
		if f.Features == nil {
			f.Features = make(map[string]*yaml.Node, len(p.Features))
		}
		f.Features[key] = featureNode(v)
	}
	limits := slices.Clone(p.Limits)
	slices.SortFunc(limits, func(a, b tiers.Limit) int { return tiers.CompareLimitKeys(a.Key(), b.Key()) })
	for _, l := range limits {
		t := fromLimit(l)
		f.Limits = append(f.Limits, Limit{
			Metric: l.Metric, Window: l.Window.String(), Per: t.Per, Limit: t.Limit, Mode: t.Mode,
			OveragePercent: t.OveragePercent, OveragePriceMicros: t.OveragePriceMicros,
			Ceiling: t.Ceiling, Algorithm: t.Algorithm, Burst: t.Burst, Rollover: t.Rollover,
		})
	}
	return f
}

// fromLimit returns the terms of l as an override writes them.
func fromLimit(l tiers.Limit) *Override {
	canonLimit(&l)
	o := &Override{
		Metric: l.Metric, Window: l.Window.String(), Per: perField(l.Per), Limit: ptr(l.Limit), Mode: ptr(l.Mode.String()),
		OveragePercent: nonZero(l.OveragePercent), OveragePriceMicros: l.OveragePriceMicros,
		Ceiling: l.Ceiling, Burst: l.Burst, Rollover: fromRollover(l.Rollover),
	}
	if l.Window.Short() && l.Algorithm != tiers.SlidingWindow {
		o.Algorithm = ptr(l.Algorithm.String())
	}
	return o
}

// perField is the per a file writes for p: none for the customer, the
// default.
func perField(p tiers.Per) *string {
	if p == tiers.PerCustomer {
		return nil
	}
	return ptr(p.String())
}

func fromCustomer(c tiers.Customer) *Customer {
	f := &Customer{Plan: ptr(c.Plan), Name: nonZero(c.Name)}
	if c.BillingAnchorDay != nil {
		f.BillingAnchorDay = ptr(int64(*c.BillingAnchorDay))
	}
	if c.TimeZone != "" && c.TimeZone != tiers.DefaultTimeZone {
		f.TimeZone = ptr(c.TimeZone) // UTC, the default, is left out
	}
	// Metadata was validated into a JSON object on its way in.
	f.Metadata, _ = jsonToNode(c.Metadata)
	return f
}

func fromOverride(o tiers.Override) *Override {
	f := fromLimit(o.Limit)
	if o.ExpiresAt != nil {
		f.ExpiresAt = ptr(o.ExpiresAt.UTC())
	}
	f.Reason = nonZero(o.Reason)
	return f
}
