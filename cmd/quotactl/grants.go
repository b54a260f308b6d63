package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	quotad "github.com/quotad/quotad/client"
)

// grantsCmd manages customers' grants: units beyond their plan that
// checks a hard daily, weekly or monthly limit denies draw on.
type grantsCmd struct {
	Create grantsCreateCmd `cmd:"" help:"Grant a customer units of a metric (a top-up): checks its hard day, week or month limits deny draw on them. Prints the grant's id."`
	List   grantsListCmd   `cmd:"" help:"List a customer's live grants in drawing order (with --all, used up, expired and voided ones too)."`
	Void   grantsVoidCmd   `cmd:"" help:"Void what remains of a grant: no check draws on it from then on."`
}

type grantsCreateCmd struct {
	Customer  string `arg:"" help:"The customer's id."`
	Metric    string `arg:"" help:"The metric's key."`
	Amount    int64  `arg:"" help:"How many units."`
	ExpiresAt string `help:"When what remains stops being drawn, RFC 3339 (e.g. 2027-01-01T00:00:00Z); never by default." placeholder:"TIME"`
	Priority  *int   `help:"Grants with the lowest number are drawn first (0 by default)."`
	Reason    string `help:"Why, for the record (e.g. the order it was bought with)."`
	RequestID string `help:"Makes the creation safe to repeat: a repeat returns the grant the first made." placeholder:"ID"`
}

func (x *grantsCreateCmd) Run(e *env) error {
	expires, err := parseExpiresAt(x.ExpiresAt)
	if err != nil {
		return err
	}
	spec := quotad.GrantSpec{Metric: x.Metric, Amount: x.Amount, Priority: x.Priority, Reason: x.Reason, RequestID: x.RequestID,
		ExpiresAt: expires}
	g, err := e.client.Grants.Create(e.ctx, x.Customer, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "Granted %d %s to %s (priority %d), expires %s:\n", g.Amount, g.Metric, g.Customer, g.Priority,
		orNever(g.ExpiresAt))
	_, err = fmt.Fprintln(e.stdout, g.ID)
	return err
}

type grantsListCmd struct {
	Customer string `arg:"" help:"The customer's id."`
	All      bool   `help:"Every grant: used up, expired and voided ones too."`
}

func (x *grantsListCmd) Run(e *env) error {
	list, err := e.client.Grants.List(e.ctx, x.Customer, x.All)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(e.stdout, "%s has no grants.\n", x.Customer)
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMETRIC\tAMOUNT\tREMAINING\tPRIORITY\tEXPIRES\tVOIDED\tREASON")
	for _, g := range list {
		voided := "-"
		if g.VoidedAt != nil {
			voided = g.VoidedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", g.ID, g.Metric, g.Amount, g.Remaining, g.Priority,
			orNever(g.ExpiresAt), voided, g.Reason)
	}
	return tw.Flush()
}

type grantsVoidCmd struct {
	ID string `arg:"" help:"The grant's id (grt_...), as grants list shows it."`
}

func (x *grantsVoidCmd) Run(e *env) error {
	if err := e.client.Grants.Void(e.ctx, x.ID); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "Voided %s.\n", x.ID)
	return err
}
