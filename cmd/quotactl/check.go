package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	quotad "github.com/quotad/quotad/client"
)

type checkCmd struct {
	Customer string `arg:"" help:"The customer's id."`
	Metric   string `arg:"" help:"The metric's key."`
	Cost     int64  `default:"1" help:"Units the check would use."`
	DryRun   bool   `help:"Answer as if checked, but charge nothing."`
}

func (x *checkCmd) Run(e *env) error {
	if x.Cost < 1 {
		// The client leaves a cost of 0 out, which quotad reads as 1.
		return fmt.Errorf("--cost must be at least 1, got %d", x.Cost)
	}
	a, err := e.client.Check(e.ctx, quotad.CheckRequest{Customer: x.Customer, Metric: x.Metric, Cost: x.Cost, DryRun: x.DryRun})
	if err != nil {
		return err
	}
	decision := "allowed"
	switch {
	case !a.Allowed && a.RetryAfter != nil:
		decision = fmt.Sprintf("denied: retry after %ds", *a.RetryAfter)
	case !a.Allowed:
		decision = "denied: the check can never pass"
	case a.Overage:
		decision = "allowed, as overage"
	case a.Elastic:
		decision = "allowed, on spare capacity"
	}
	if x.DryRun {
		decision += " (dry run: nothing charged)"
	}
	if a.Degraded {
		decision += " (degraded: some windows could not be consulted)"
	}
	fmt.Fprintf(e.stdout, "%s %s cost %d: %s\n", x.Customer, x.Metric, x.Cost, decision)
	if len(a.Limits) == 0 {
		fmt.Fprintln(e.stdout, "No limit applies.")
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "WINDOW\tMODE\tLIMIT\tUSED\tREMAINING\tSTATE\tRESET AT")
		for _, w := range a.Limits {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", w.Window, w.Mode, w.Limit, w.Used, w.Remaining, w.State, w.ResetAt.Format(time.RFC3339))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if !a.Allowed {
		return exitCode(2)
	}
	return nil
}

type usageCmd struct {
	Customer string `arg:"" help:"The customer's id."`
}

func (x *usageCmd) Run(e *env) error {
	a, err := e.client.Usage(e.ctx, x.Customer)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s on plan %s\n", a.Customer, a.Plan)
	if len(a.Usage) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No limit applies.")
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tWINDOW\tLIMIT\tUSED\tREMAINING\tOVERAGE\tRESET AT")
	for _, w := range a.Usage {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", w.Metric, w.Window, w.Limit, w.Used, w.Remaining, w.Overage, w.ResetAt.Format(time.RFC3339))
	}
	return tw.Flush()
}
