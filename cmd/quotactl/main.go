// Command quotactl is quotad's command line for operators: the catalog as
// code (export it to YAML, apply a YAML file through the admin API), a
// customer's checks and usage, its API keys and its grants, its suspension.
//
// It is built on quotad's Go client (github.com/quotad/quotad/client): every
// call to quotad is one of the client's, with its typed answers, errors
// and retries; internal/catalogfile holds the file, the comparison and the
// printed plan.
//
// Usage:
//
//	quotactl catalog export [--customers] [-o FILE]
//	quotactl catalog apply -f FILE [--dry-run] [--prune]
//	quotactl catalog diff -f FILE [--prune] [--impact [--from DATE] [--to DATE]]
//	quotactl check CUSTOMER METRIC[:COST][@SUBJECT]... [--cost N] [--subject S] [--dry-run]
//	quotactl check --api-key KEY METRIC[:COST][@SUBJECT]... [--cost N] [--subject S] [--dry-run]
//	quotactl usage CUSTOMER [--subject S]
//	quotactl entitlements CUSTOMER [--subject S]
//	quotactl set-total CUSTOMER METRIC USED
//	quotactl keys create CUSTOMER [--name NAME] [--expires-at TIME]
//	quotactl keys list CUSTOMER [--include-revoked]
//	quotactl keys revoke KEY_ID
//	quotactl grants create CUSTOMER METRIC AMOUNT [--expires-at TIME] [--priority N] [--reason TEXT] [--request-id ID]
//	quotactl grants list CUSTOMER [--all]
//	quotactl grants void GRANT_ID
//	quotactl customers suspend CUSTOMER --reason TEXT
//	quotactl customers resume CUSTOMER
//
// --url (QUOTAD_URL, default http://127.0.0.1:8080) and --token
// (QUOTAD_TOKEN) say which quotad to talk to; see --help.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/cmdline"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const defaultURL = "http://127.0.0.1:8080"

// cli is quotactl's command line.
type cli struct {
	URL     string           `help:"quotad's base URL." envvar:"QUOTAD_URL" default:"${default_url}" placeholder:"URL"`
	Token   string           `help:"Bearer token: an admin token, or a check token for check, usage and entitlements." envvar:"QUOTAD_TOKEN" placeholder:"TOKEN"`
	CACert  string           `help:"PEM file of certificate authorities to trust, besides the system's, for an https URL served with a private one's certificate." envvar:"QUOTAD_CA_CERT" placeholder:"FILE"`
	Version kong.VersionFlag `help:"Print the version and exit."`

	Catalog struct {
		Export exportCmd `cmd:"" help:"Write the catalog (metrics and plans; with --customers, customers and overrides too) as YAML."`
		Apply  applyCmd  `cmd:"" help:"Print the changes that make quotad match a catalog file, then make them."`
		Diff   diffCmd   `cmd:"" help:"Print the changes that make quotad match a catalog file, and with --impact what the changed plans would have done to their customers; write nothing."`
	} `cmd:"" help:"The catalog as code."`
	Check        checkCmd        `cmd:"" help:"Ask quotad whether a customer may use a metric now, or several at once (all or none), and print every window (exit 0 allowed, 2 denied)."`
	Usage        usageCmd        `cmd:"" help:"Print a customer's usage in every window it has a limit on (with --subject, the subject's too)."`
	Entitlements entitlementsCmd `cmd:"" help:"Print what a customer may use now: its features, its limits with their usage (with --subject, the subject's too), its live grants."`
	SetTotal     setTotalCmd     `cmd:"" name:"set-total" help:"Set a customer's total of a metric (a gauge: seats, projects) to a count, to sync it with the application's records."`
	Keys         keysCmd         `cmd:"" help:"Issue, list and revoke customers' API keys."`
	Grants       grantsCmd       `cmd:"" help:"Grant customers units beyond their plan (top-ups), list and void them."`
	Customers    customersCmd    `cmd:"" help:"Suspend and resume customers."`
}

// env is what every command runs with.
type env struct {
	ctx    context.Context
	client *quotad.Client
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
}

// newClient returns the client of the quotad at url, trusting the
// certificate authorities of the PEM file caFile ("": none) besides the
// system's.
func newClient(url, token, caFile string) (*quotad.Client, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-cert: %s holds no PEM certificate", caFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		hc.Transport = tr
	}
	return quotad.New(url,
		quotad.WithToken(token),
		quotad.WithHTTPClient(hc),
		quotad.WithUserAgent("quotactl/"+version+" quotad-go/"+quotad.Version)), nil
}

// exitCode is an exit status a command asks for without an error to print
// (a denied check).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// run is quotactl: it returns the process's exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var c cli
	parser, err := cmdline.New(&c, getenv, stdout, stderr,
		kong.Name("quotactl"),
		kong.Description("quotad's command line: the catalog as code, checks and usage."),
		kong.Vars{"version": "quotactl " + version, "default_url": defaultURL},
		kong.UsageOnError(),
	)
	if err != nil {
		fmt.Fprintln(stderr, "quotactl:", err)
		return 1
	}
	kctx, status, err := cmdline.Parse(parser, args[1:])
	if err != nil {
		fmt.Fprintln(stderr, "quotactl:", err)
		return 1
	}
	if kctx == nil { // --help or --version
		return status
	}
	client, err := newClient(c.URL, c.Token, c.CACert)
	if err != nil {
		fmt.Fprintln(stderr, "quotactl:", err)
		return 1
	}
	e := &env{ctx: ctx, client: client, stdout: stdout, stderr: stderr, now: time.Now}
	err = kctx.Run(e)
	var ec exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return int(ec)
	default:
		fmt.Fprintln(stderr, "quotactl:", err)
		return 1
	}
}
