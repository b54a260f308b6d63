package main

import (
	"fmt"
)

// customersCmd changes a customer's status.
type customersCmd struct {
	Suspend customersSuspendCmd `cmd:"" help:"Suspend a customer: its checks, reservations, feature checks, gRPC descriptors and forward-auth requests are refused (403 customer_suspended) in every quotad process; nothing is counted. Admin reads and usage still answer."`
	Resume  customersResumeCmd  `cmd:"" help:"Make a suspended customer active again."`
}

type customersSuspendCmd struct {
	Customer string `arg:"" help:"The customer's id."`
	Reason   string `help:"Why (e.g. card declined): the refusals' detail gives it." required:""`
}

func (x *customersSuspendCmd) Run(e *env) error {
	cu, err := e.client.Customers.Suspend(e.ctx, x.Customer, x.Reason)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s suspended: %s\n", cu.ID, cu.StatusReason)
	return err
}

type customersResumeCmd struct {
	Customer string `arg:"" help:"The customer's id."`
}

func (x *customersResumeCmd) Run(e *env) error {
	cu, err := e.client.Customers.Resume(e.ctx, x.Customer)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s active\n", cu.ID)
	return err
}
