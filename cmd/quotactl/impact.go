package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/catalogfile"
)

// impactSpan is how many days --impact replays when --from is not given.
const impactSpan = 30

// impactDays returns the days --impact replays: from and to as given, to
// defaulting to today (UTC) and from to the impactSpan days ending at to.
func impactDays(from, to string, now time.Time) (string, string, error) {
	if to == "" {
		to = now.UTC().Format(time.DateOnly)
	}
	last, err := time.Parse(time.DateOnly, to)
	if err != nil {
		return "", "", fmt.Errorf("--to %q: want a date, YYYY-MM-DD", to)
	}
	if from == "" {
		from = last.AddDate(0, 0, -(impactSpan - 1)).Format(time.DateOnly)
	}
	first, err := time.Parse(time.DateOnly, from)
	if err != nil {
		return "", "", fmt.Errorf("--from %q: want a date, YYYY-MM-DD", from)
	}
	if first.After(last) {
		return "", "", errors.New("--from must not be after --to")
	}
	return from, to, nil
}

// repriced reports whether c changes an existing plan's limits or price:
// the changes a what-if can replay. A new plan has no customers yet.
func repriced(c catalogfile.Change) bool {
	if c.Op != catalogfile.Update || c.Ref.Kind != catalogfile.KindPlan {
		return false
	}
	for _, f := range c.Fields {
		if strings.HasPrefix(f.Field, "limits[") || strings.HasPrefix(f.Field, "price.") {
			return true
		}
	}
	return false
}

// printImpact replays, for each plan whose limits or price changes
// change, the recorded usage of its customers from from to to against
// the file's limits, and prints what it found.
func printImpact(e *env, changes []catalogfile.Change, from, to string) error {
	replayed := false
	for _, c := range changes {
		if !repriced(c) {
			continue
		}
		replayed = true
		p := toPlan(c.Plan)
		w, err := e.client.Plans.WhatIf(e.ctx, quotad.WhatIfSpec{Plan: c.Key, Limits: p.Limits, Price: p.Price, From: from, To: to})
		if err != nil {
			return fmt.Errorf("what-if of plan %s: %w", c.Key, err)
		}
		if err := printWhatIf(e, w); err != nil {
			return err
		}
	}
	if !replayed {
		_, err := fmt.Fprintln(e.stdout, "\nNo plan's limits or price change: nothing to replay.")
		return err
	}
	return nil
}

// printWhatIf writes one plan's replay: a row per customer whose figures
// are not all zero, the total, and the limits that could not be replayed.
func printWhatIf(e *env, w *quotad.WhatIf) error {
	fmt.Fprintf(e.stdout, "\nImpact on plan %s, its customers' usage from %s to %s replayed against the file's limits (%s):\n",
		w.Plan, w.From, w.To, count(int(w.CustomersReplayed), "customer"))
	cur := w.Price.Currency
	if cur == "" {
		cur = "USD"
	}
	if len(w.Customers) == 0 {
		fmt.Fprintln(e.stdout, "    no customer would have been denied or charged overage.")
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "    CUSTOMER\tPERIODS OVER\tDENIED\tOVERAGE\tOVERAGE REVENUE\tDENIED THEN\tOVERAGE THEN")
		row := func(name string, f quotad.WhatIfFigures, r quotad.WhatIfRecorded) {
			fmt.Fprintf(tw, "    %s\t%d\t%d\t%d\t%s\t%d\t%d\n", name, f.PeriodsOver, f.DeniedUnits, f.OverageUnits,
				money(f.OverageRevenueMicros, cur), r.DeniedUnits, r.OverageUnits)
		}
		for _, c := range w.Customers {
			row(c.Customer, c.WhatIfFigures, c.Recorded)
		}
		row("total", w.Total, w.Recorded)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range w.NotReplayed {
		limit := n.Metric + "/" + n.Window
		if n.Per != "" {
			limit += " per " + n.Per
		}
		fmt.Fprintf(e.stdout, "    not replayed: %s: %s\n", limit, n.Reason)
	}
	_, err := fmt.Fprintln(e.stdout, "    DENIED THEN and OVERAGE THEN are what the current limits did over the same days.")
	return err
}

// money writes micros (millionths of a currency unit) as an amount in cur,
// with two decimals or as many more as it needs: "USD 0.015", "EUR 12.00".
func money(micros int64, cur string) string {
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s %d.%s", cur, micros/1_000_000, frac)
}
