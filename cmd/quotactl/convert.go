package main

import (
	"fmt"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/catalogfile"
)

// The conversions between the client's types, as quotad sends and takes
// them, and the catalog file's. Read: a field quotad answers with its zero
// value (an empty mode, 0 percent) is left unset, which the file's
// defaults make the same thing. Written: the file's entries are complete
// (catalogfile.Diff fills them in), and a field they leave unset is one
// the PUT leaves to its default.

func fromMetric(m quotad.Metric) *catalogfile.Metric {
	f := &catalogfile.Metric{Description: nonEmpty(m.Description)}
	if len(m.Capacity) > 0 {
		f.Capacity = make(map[string]*int64, len(m.Capacity))
		for w, v := range m.Capacity {
			f.Capacity[w] = &v
		}
	}
	for _, r := range m.CreditSchema {
		f.CreditSchema = append(f.CreditSchema, catalogfile.CreditRate{Metric: r.Metric, Credits: &r.Credits, Per: nonZero(r.Per)})
	}
	return f
}

func toMetric(f *catalogfile.Metric) quotad.MetricSpec {
	s := quotad.MetricSpec{Description: deref(f.Description)}
	if len(f.Capacity) > 0 {
		s.Capacity = make(quotad.Capacity, len(f.Capacity))
		for w, v := range f.Capacity {
			if v != nil {
				s.Capacity[w] = *v
			}
		}
	}
	for _, r := range f.CreditSchema {
		s.CreditSchema = append(s.CreditSchema, quotad.CreditRate{Metric: r.Metric, Credits: deref(r.Credits), Per: deref(r.Per)})
	}
	return s
}

func fromPlan(p quotad.Plan) *catalogfile.Plan {
	f := &catalogfile.Plan{Name: nonEmpty(p.Name), Description: nonEmpty(p.Description)}
	if p.Public {
		f.Public = new(true)
	}
	if p.Price != nil {
		f.Price = &catalogfile.Price{AmountCents: &p.Price.AmountCents, Currency: nonEmpty(p.Price.Currency), Interval: nonEmpty(p.Price.Interval)}
	}
	for _, l := range p.Limits {
		f.Limits = append(f.Limits, catalogfile.Limit{
			Metric: l.Metric, Window: l.Window, Per: nonEmpty(l.Per), Limit: &l.Limit, Mode: nonEmpty(l.Mode),
			OveragePercent: nonZero(int64(l.OveragePercent)), OveragePriceMicros: l.OveragePriceMicros,
			Ceiling: l.Ceiling, Algorithm: nonEmpty(l.Algorithm), Burst: l.Burst,
		})
	}
	f.SetFeatureValues(p.Features)
	return f
}

func toPlan(f *catalogfile.Plan) quotad.PlanSpec {
	s := quotad.PlanSpec{Name: deref(f.Name), Description: deref(f.Description), Public: deref(f.Public)}
	if f.Price != nil {
		s.Price = &quotad.Price{AmountCents: deref(f.Price.AmountCents), Currency: deref(f.Price.Currency), Interval: deref(f.Price.Interval)}
	}
	for _, l := range f.Limits {
		s.Limits = append(s.Limits, quotad.Limit{
			Metric: l.Metric, Window: l.Window, Per: deref(l.Per), Limit: deref(l.Limit), Mode: deref(l.Mode),
			OveragePercent: int(deref(l.OveragePercent)), OveragePriceMicros: l.OveragePriceMicros,
			Ceiling: l.Ceiling, Algorithm: deref(l.Algorithm), Burst: l.Burst,
		})
	}
	s.Features = f.FeatureValues()
	return s
}

func fromCustomer(c quotad.Customer) (*catalogfile.Customer, error) {
	f := &catalogfile.Customer{Plan: &c.Plan, Name: nonEmpty(c.Name)}
	if c.BillingAnchorDay != nil {
		f.BillingAnchorDay = new(int64(*c.BillingAnchorDay))
	}
	if c.TimeZone != "" {
		f.TimeZone = new(c.TimeZone)
	}
	if err := f.SetMetadataObject(c.Metadata); err != nil {
		return nil, fmt.Errorf("customer %s: %w", c.ID, err)
	}
	return f, nil
}

// toCustomer leaves out the customer's overrides: they are written on
// their own.
func toCustomer(f *catalogfile.Customer) (quotad.CustomerSpec, error) {
	s := quotad.CustomerSpec{Plan: deref(f.Plan), Name: deref(f.Name)}
	if f.BillingAnchorDay != nil {
		s.BillingAnchorDay = new(int(*f.BillingAnchorDay))
	}
	s.TimeZone = deref(f.TimeZone)
	md, err := f.MetadataObject()
	if err != nil {
		return s, err
	}
	s.Metadata = md
	return s, nil
}

func fromOverride(o quotad.Override) catalogfile.Override {
	return catalogfile.Override{
		Metric: o.Metric, Window: o.Window, Per: nonEmpty(o.Per), Limit: &o.Limit, Mode: nonEmpty(o.Mode),
		OveragePercent: nonZero(int64(o.OveragePercent)), OveragePriceMicros: o.OveragePriceMicros,
		Ceiling: o.Ceiling, Algorithm: nonEmpty(o.Algorithm), Burst: o.Burst,
		ExpiresAt: o.ExpiresAt, Reason: nonEmpty(o.Reason),
	}
}

// toOverride leaves out the override's metric, window and per: they are
// its address.
func toOverride(f *catalogfile.Override) quotad.OverrideSpec {
	return quotad.OverrideSpec{
		Limit: deref(f.Limit), Mode: deref(f.Mode),
		OveragePercent: int(deref(f.OveragePercent)), OveragePriceMicros: f.OveragePriceMicros,
		Ceiling: f.Ceiling, Algorithm: deref(f.Algorithm), Burst: f.Burst,
		ExpiresAt: f.ExpiresAt, Reason: deref(f.Reason),
	}
}

// nonEmpty is nil for "", else a pointer to a copy of s.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nonZero is nil for 0, else a pointer to a copy of v.
func nonZero(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
