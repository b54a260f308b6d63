package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	quotad "github.com/quotad/quotad/client"
)

type checkCmd struct {
	Customer string   `arg:"" help:"The customer's id; left out with --api-key, whose customer it is."`
	Metrics  []string `arg:"" optional:"" name:"metric" help:"What to charge, as METRIC[:COST][@SUBJECT]: a metric, with its cost after a colon (default 1) and its subject after an @ (default --subject). Several make one check of items, allowed on all of them or none."`
	APIKey   string   `name:"api-key" help:"Check by an API key quotad issued (qk_...), in place of CUSTOMER: quotad finds the customer, and every argument is a metric. Limits per subject count the key apart unless --subject names one." placeholder:"KEY"`
	Cost     *int64   `help:"Units a check of one metric would use (default 1; the same as METRIC:COST)." placeholder:"N"`
	Subject  string   `help:"Who within the customer spends the units (an end user, an IP, an API key's id), for every metric named without @SUBJECT: the limits per subject count it apart." placeholder:"SUBJECT"`
	DryRun   bool     `help:"Answer as if checked, but charge nothing."`
}

// parseItem reads METRIC[:COST][@SUBJECT]. A metric key holds neither ':'
// nor '@' and a cost only digits, so the first '@' starts the subject,
// which may hold both (ops@example.com, ip:10.0.0.1).
func parseItem(arg string) (quotad.CheckItem, error) {
	spec, subject, hasSubject := strings.Cut(arg, "@")
	metric, cost, hasCost := strings.Cut(spec, ":")
	item := quotad.CheckItem{Metric: metric, Subject: subject}
	switch {
	case metric == "":
		return item, fmt.Errorf("%q: want METRIC[:COST][@SUBJECT], with a metric", arg)
	case hasSubject && subject == "":
		return item, fmt.Errorf("%q: the subject after @ is empty", arg)
	case hasCost:
		n, err := strconv.ParseInt(cost, 10, 64)
		if err != nil || n < 1 {
			return item, fmt.Errorf("%q: the cost after : must be a whole number of at least 1", arg)
		}
		item.Cost = n
	}
	return item, nil
}

// request is the check the command line asks for: of one metric as
// before, or of items when it names several.
func (x *checkCmd) request() (quotad.CheckRequest, error) {
	req := quotad.CheckRequest{Customer: x.Customer, DryRun: x.DryRun}
	metrics := x.Metrics
	if x.APIKey != "" {
		// The key stands for the customer: the first argument is a metric.
		req.Customer, req.APIKey = "", x.APIKey
		metrics = append([]string{x.Customer}, metrics...)
	} else if len(metrics) == 0 {
		return req, errors.New("want CUSTOMER METRIC...: name at least one metric (or, with --api-key KEY, no customer)")
	}
	items := make([]quotad.CheckItem, len(metrics))
	for i, arg := range metrics {
		it, err := parseItem(arg)
		if err != nil {
			return req, err
		}
		if it.Subject == "" {
			it.Subject = x.Subject
		}
		items[i] = it
	}
	if x.Cost != nil {
		switch {
		case len(items) > 1:
			return req, errors.New("--cost is the cost of a check of one metric: give each metric its own as METRIC:COST")
		case items[0].Cost != 0:
			return req, fmt.Errorf("%q has a cost already: give it once, with --cost or METRIC:COST", metrics[0])
		case *x.Cost < 1:
			// The client leaves a cost of 0 out, which quotad reads as 1.
			return req, fmt.Errorf("--cost must be at least 1, got %d", *x.Cost)
		}
		items[0].Cost = *x.Cost
	}
	for i := range items {
		items[i].Cost = max(items[i].Cost, 1)
	}
	if len(items) == 1 {
		req.Metric, req.Cost, req.Subject = items[0].Metric, items[0].Cost, items[0].Subject
	} else {
		req.Items = items
	}
	return req, nil
}

func (x *checkCmd) Run(e *env) error {
	req, err := x.request()
	if err != nil {
		return err
	}
	a, err := e.client.Check(e.ctx, req)
	if err != nil {
		if x.APIKey != "" && errors.Is(err, quotad.ErrMetricNotFound) {
			return fmt.Errorf("%w (with --api-key, every argument is a metric: the key names the customer)", err)
		}
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
	if req.Items == nil {
		what := fmt.Sprintf("%s %s cost %d", a.Customer, req.Metric, req.Cost)
		if req.Subject != "" {
			what += " subject " + req.Subject
		}
		fmt.Fprintf(e.stdout, "%s: %s\n", what, decision)
	} else {
		fmt.Fprintf(e.stdout, "%s, %d items: %s\n", a.Customer, len(req.Items), decision)
	}
	if a.Detail != "" {
		fmt.Fprintln(e.stdout, a.Detail)
	}
	if len(a.Items) > 0 {
		if err := printItems(e.stdout, a.Items); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
	}
	if len(a.Limits) == 0 {
		fmt.Fprintln(e.stdout, "No limit applies.")
	} else if err := printWindows(e.stdout, a.Limits); err != nil {
		return err
	}
	if !a.Allowed {
		return exitCode(2)
	}
	return nil
}

// orDash is s, or "-" for none (a customer's window has no subject).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printItems prints each item's answer in a check of items: whether its
// windows admit it, and the fewest units of its metric they still admit.
func printItems(w io.Writer, items []quotad.CheckItemResult) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tMETRIC\tSUBJECT\tCOST\tALLOWED\tREMAINING")
	for i, it := range items {
		allowed, remaining := "no", "-"
		if it.Allowed {
			allowed = "yes"
		}
		if it.Remaining != nil {
			remaining = strconv.FormatInt(*it.Remaining, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", i+1, it.Metric, orDash(it.Subject), it.Cost, allowed, remaining)
	}
	return tw.Flush()
}

// printWindows prints every window a check covered: the customer's, its
// subjects', and those of the credit pools its metrics draw on.
func printWindows(w io.Writer, limits []quotad.CheckLimit) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tSUBJECT\tWINDOW\tMODE\tLIMIT\tUSED\tREMAINING\tSTATE\tRESET AT")
	for _, l := range limits {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", l.Metric, orDash(l.Subject), l.Window, l.Mode, l.Limit, l.Used, l.Remaining, l.State, resetAt(l.ResetAt))
	}
	return tw.Flush()
}

// resetAt is a window's reset as the tables print it: "never" for a
// total, which the client reads as the zero time.
func resetAt(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(time.RFC3339)
}

type setTotalCmd struct {
	Customer string `arg:"" help:"The customer's id."`
	Metric   string `arg:"" help:"The metric whose total (its limit of window total: seats, projects) to set."`
	Used     int64  `arg:"" help:"The count to set, from the application's own records; it may exceed the limit."`
}

func (x *setTotalCmd) Run(e *env) error {
	u, err := e.client.Customers.SetTotal(e.ctx, x.Customer, x.Metric, x.Used)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s %s total: %d used of %d, %d remaining\n", x.Customer, u.Metric, u.Used, u.Limit, u.Remaining)
	return err
}

type usageCmd struct {
	Customer string `arg:"" help:"The customer's id."`
	Subject  string `help:"A subject of the customer's (an end user, an IP, an API key's id): its windows of the limits per subject are listed too, after the customer's." placeholder:"SUBJECT"`
}

func (x *usageCmd) Run(e *env) error {
	var a *quotad.Usage
	var err error
	if x.Subject != "" {
		a, err = e.client.SubjectUsage(e.ctx, x.Customer, x.Subject)
	} else {
		a, err = e.client.Usage(e.ctx, x.Customer)
	}
	if err != nil {
		return err
	}
	if x.Subject != "" {
		fmt.Fprintf(e.stdout, "%s on plan %s, subject %s\n", a.Customer, a.Plan, x.Subject)
	} else {
		fmt.Fprintf(e.stdout, "%s on plan %s\n", a.Customer, a.Plan)
	}
	if len(a.Usage) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No limit applies.")
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tSUBJECT\tWINDOW\tLIMIT\tUSED\tREMAINING\tOVERAGE\tRESET AT")
	perSubject := false
	for _, w := range a.Usage {
		perSubject = perSubject || w.Subject != ""
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", w.Metric, orDash(w.Subject), w.Window, w.Limit, w.Used, w.Remaining, w.Overage, resetAt(w.ResetAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if x.Subject != "" && !perSubject {
		_, err := fmt.Fprintf(e.stdout, "No limit of %s counts per subject: %s's units count in the customer's windows only.\n", a.Customer, x.Subject)
		return err
	}
	return nil
}
