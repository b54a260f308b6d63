package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	quotad "github.com/quotad/quotad/client"
)

// keysCmd manages the API keys quotad issues to customers.
type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Issue an API key to a customer. The key alone goes to stdout, shown this once; what it is, to stderr."`
	List   keysListCmd   `cmd:"" help:"List a customer's API keys (never the keys: their ids and prefixes)."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke an API key by its id. Rotate a key: create a new one, deploy it, then revoke the old one."`
}

type keysCreateCmd struct {
	Customer  string `arg:"" help:"The customer's id."`
	Name      string `help:"A name to recognise the key by."`
	ExpiresAt string `help:"When the key stops being accepted, RFC 3339 (e.g. 2027-01-01T00:00:00Z); never by default." placeholder:"TIME"`
}

func (x *keysCreateCmd) Run(e *env) error {
	expires, err := parseExpiresAt(x.ExpiresAt)
	if err != nil {
		return err
	}
	spec := quotad.KeySpec{Name: x.Name, ExpiresAt: expires}
	k, err := e.client.Keys.Create(e.ctx, x.Customer, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "Issued %s (prefix %s) to %s, expires %s. The key is shown this once:\n",
		k.ID, k.Prefix, k.Customer, orNever(k.ExpiresAt))
	_, err = fmt.Fprintln(e.stdout, k.Key)
	return err
}

type keysListCmd struct {
	Customer       string `arg:"" help:"The customer's id."`
	IncludeRevoked bool   `help:"List revoked keys too, with when they were revoked."`
}

func (x *keysListCmd) Run(e *env) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	list, revoked := e.client.Keys.List, ""
	if x.IncludeRevoked {
		list, revoked = e.client.Keys.ListIncludingRevoked, "\tREVOKED"
	}
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tCREATED\tEXPIRES\tLAST USED"+revoked)
	n := 0
	for k, err := range list(e.ctx, x.Customer) {
		if err != nil {
			return err
		}
		n++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", k.ID, k.Prefix, k.Name, k.CreatedAt.Format(time.RFC3339),
			orNever(k.ExpiresAt), orNever(k.LastUsedAt))
		if x.IncludeRevoked {
			at := "-"
			if k.RevokedAt != nil {
				at = k.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "\t%s", at)
		}
		fmt.Fprintln(tw)
	}
	if n == 0 {
		_, err := fmt.Fprintf(e.stdout, "%s has no API keys.\n", x.Customer)
		return err
	}
	return tw.Flush()
}

type keysRevokeCmd struct {
	ID string `arg:"" help:"The key's id (key_...), as keys list shows it."`
}

func (x *keysRevokeCmd) Run(e *env) error {
	if err := e.client.Keys.Revoke(e.ctx, x.ID); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "Revoked %s.\n", x.ID)
	return err
}

// orNever formats t, or "never" when nil.
func orNever(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

// parseExpiresAt parses an --expires-at, nil when it is not given.
func parseExpiresAt(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("--expires-at: want an RFC 3339 time such as 2027-01-01T00:00:00Z, got %q", s)
	}
	return &t, nil
}
