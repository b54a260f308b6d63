package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/catalogfile"
)

// snapshot reads the server's catalog in the file's form, with the ETag of
// every resource; customers and their overrides only when asked.
func snapshot(ctx context.Context, c *quotad.Client, customers bool) (*catalogfile.File, map[catalogfile.Ref]string, error) {
	f := &catalogfile.File{Metrics: map[string]*catalogfile.Metric{}, Plans: map[string]*catalogfile.Plan{}}
	etags := map[catalogfile.Ref]string{}
	for m, err := range c.Metrics.List(ctx) {
		if err != nil {
			return nil, nil, err
		}
		f.Metrics[m.Key] = fromMetric(m)
		etags[catalogfile.MetricRef(m.Key)] = m.ETag
	}
	for p, err := range c.Plans.List(ctx) {
		if err != nil {
			return nil, nil, err
		}
		f.Plans[p.Key] = fromPlan(p)
		etags[catalogfile.PlanRef(p.Key)] = p.ETag
	}
	if !customers {
		return f, etags, nil
	}
	f.Customers = map[string]*catalogfile.Customer{}
	for cu, err := range c.Customers.List(ctx, quotad.CustomerFilter{PageSize: 1000}) {
		if err != nil {
			return nil, nil, err
		}
		fc, err := fromCustomer(cu)
		if err != nil {
			return nil, nil, err
		}
		f.Customers[cu.ID] = fc
		etags[catalogfile.CustomerRef(cu.ID)] = cu.ETag
	}
	for _, id := range slices.Sorted(maps.Keys(f.Customers)) {
		fc := f.Customers[id]
		for o, err := range c.Overrides.List(ctx, id) {
			if err != nil {
				return nil, nil, err
			}
			fo := fromOverride(o)
			fc.Overrides = append(fc.Overrides, fo)
			etags[catalogfile.OverrideRef(id, fo.Key())] = o.ETag
		}
	}
	return f, etags, nil
}

// apply makes one change, with If-Match when it has one: a resource
// changed since it was read fails with quotad.ErrPreconditionFailed. A
// changed plan is grandfathered with grandfather.
func apply(ctx context.Context, c *quotad.Client, ch catalogfile.Change, grandfather bool) error {
	var opts []quotad.WriteOption
	if ch.IfMatch != "" {
		opts = append(opts, quotad.IfMatch(ch.IfMatch))
	}
	del := ch.Op == catalogfile.Delete
	var err error
	switch ch.Ref.Kind {
	case catalogfile.KindMetric:
		if del {
			return c.Metrics.Delete(ctx, ch.Key, opts...)
		}
		_, _, err = c.Metrics.Put(ctx, ch.Key, toMetric(ch.Metric), opts...)
	case catalogfile.KindPlan:
		if del {
			return c.Plans.Delete(ctx, ch.Key, opts...)
		}
		put := c.Plans.Put
		if grandfather {
			put = c.Plans.PutGrandfathered
		}
		_, _, err = put(ctx, ch.Key, toPlan(ch.Plan), opts...)
	case catalogfile.KindCustomer:
		if del {
			return c.Customers.Delete(ctx, ch.Key, opts...)
		}
		spec, cerr := toCustomer(ch.Customer)
		if cerr != nil {
			return cerr
		}
		if ch.Op == catalogfile.Update {
			// A catalog file does not hold a customer's state over time
			// (suspension, trial, scheduled change): the replace keeps it.
			// Read at the version the change was planned against, or the
			// PUT's If-Match fails.
			old, gerr := c.Customers.Get(ctx, ch.Key)
			if gerr != nil {
				return gerr
			}
			spec.Status, spec.StatusReason = old.Status, old.StatusReason
			spec.Trial, spec.ScheduledChange = old.Trial, old.ScheduledChange
		}
		_, _, err = c.Customers.Put(ctx, ch.Key, spec, opts...)
	case catalogfile.KindOverride:
		o := ch.Override
		if del {
			return c.Overrides.DeletePer(ctx, ch.Key, o.Metric, o.Window, deref(o.Per), opts...)
		}
		_, _, err = c.Overrides.PutPer(ctx, ch.Key, o.Metric, o.Window, deref(o.Per), toOverride(o), opts...)
	default:
		err = fmt.Errorf("%s: unknown kind of change", ch.Ref)
	}
	return err
}
