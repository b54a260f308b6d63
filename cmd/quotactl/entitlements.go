package main

import (
	"fmt"
	"slices"
	"text/tabwriter"
)

type entitlementsCmd struct {
	Customer string `arg:"" help:"The customer's id."`
	Subject  string `help:"A subject of the customer's: its windows of the limits per subject are listed too." placeholder:"SUBJECT"`
}

// Run prints what the customer may use now: its features, its limits with
// their usage, its live grants.
func (x *entitlementsCmd) Run(e *env) error {
	a, err := e.client.Entitlements(e.ctx, x.Customer, x.Subject)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s on plan %s (%s)\n", a.Customer, a.Plan, a.Status)
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	if len(a.Features) == 0 {
		fmt.Fprintln(tw, "No feature is granted.")
	} else {
		fmt.Fprintln(tw, "FEATURE\tVALUE")
		keys := make([]string, 0, len(a.Features))
		for k := range a.Features {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%v\n", k, a.Features[k])
		}
	}
	fmt.Fprintln(tw)
	if len(a.Limits) == 0 {
		fmt.Fprintln(tw, "No limit applies.")
	} else {
		fmt.Fprintln(tw, "METRIC\tSUBJECT\tWINDOW\tMODE\tLIMIT\tUSED\tREMAINING\tRESET AT")
		for _, l := range a.Limits {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", l.Metric, orDash(l.Subject), l.Window, l.Mode, l.Limit, l.Used, l.Remaining, resetAt(l.ResetAt))
		}
	}
	fmt.Fprintln(tw)
	if len(a.Grants) == 0 {
		fmt.Fprintln(tw, "No live grant.")
	} else {
		fmt.Fprintln(tw, "GRANT\tMETRIC\tREMAINING\tAMOUNT\tPRIORITY\tEXPIRES AT")
		for _, g := range a.Grants {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", g.ID, g.Metric, g.Remaining, g.Amount, g.Priority, orNever(g.ExpiresAt))
		}
	}
	return tw.Flush()
}
