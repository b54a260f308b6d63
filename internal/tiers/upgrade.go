package tiers

// Upgrade is the plan a denied check's answer offers: the plan, its name
// and price, and its limit on the window that denied the check (nil: the
// plan does not limit the metric in that window).
type Upgrade struct {
	Plan  string
	Name  string
	Price Price
	Limit *int64
}

// Need is room a denied check needs in one window of a metric: a plan
// admits the check there when it does not limit Metric in Window for Per,
// or when its limit is at least Units (the window's usage plus the check's
// cost).
type Need struct {
	Metric string
	Window Window
	Per    Per
	Units  int64
}

// CheapestUpgrade returns, of plans, the one to offer a customer on plan
// current whose check needs needs (needs[0] the window that denied it):
// the cheapest public plan, by price per month, in current's currency,
// other than current, that admits every need; of plans as cheap, the
// first by key. ok is false when none does.
func CheapestUpgrade(plans []Plan, current Plan, needs []Need) (u Upgrade, ok bool) {
	if len(needs) == 0 {
		return Upgrade{}, false
	}
	var best *Plan
	var bestLimit *int64
	for i := range plans {
		p := &plans[i]
		if !p.Public || p.Key == current.Key || p.Price.Currency != current.Price.Currency {
			continue
		}
		limit, admits := admitsAll(p, needs)
		if !admits {
			continue
		}
		if best == nil || cheaper(p, best) {
			best, bestLimit = p, limit
		}
	}
	if best == nil {
		return Upgrade{}, false
	}
	return Upgrade{Plan: best.Key, Name: best.Name, Price: best.Price, Limit: bestLimit}, true
}

// admitsAll reports whether plan p admits every need, and its limit on
// needs[0] (nil: none).
func admitsAll(p *Plan, needs []Need) (first *int64, ok bool) {
	for i, n := range needs {
		l := p.limitOn(n)
		if l != nil && l.Limit < n.Units {
			return nil, false
		}
		if i == 0 && l != nil {
			v := l.Limit
			first = &v
		}
	}
	return first, true
}

// limitOn returns p's limit on n's metric, window and scope, nil if none.
func (p *Plan) limitOn(n Need) *Limit {
	for i := range p.Limits {
		if l := &p.Limits[i]; l.Metric == n.Metric && l.Window == n.Window && l.Per == n.Per {
			return l
		}
	}
	return nil
}

// cheaper reports whether a costs less per month than b; of plans as
// cheap, the one first by key.
func cheaper(a, b *Plan) bool {
	pa, pb := perYear(a.Price), perYear(b.Price)
	if pa != pb {
		return pa < pb
	}
	return a.Key < b.Key
}

// perYear is a price's amount over a year, in cents: twelve times its
// price per month, so that prices of every interval compare exactly.
func perYear(p Price) int64 {
	switch p.Interval {
	case "day":
		return p.AmountCents * 365
	case "week":
		return p.AmountCents * 52
	case "year":
		return p.AmountCents
	default: // month
		return p.AmountCents * 12
	}
}
