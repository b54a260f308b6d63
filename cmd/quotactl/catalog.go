package main

import (
	"errors"
	"fmt"
	"os"

	quotad "github.com/quotad/quotad/client"
	"github.com/quotad/quotad/internal/catalogfile"
)

type exportCmd struct {
	Customers bool   `help:"Include customers and their overrides (expired overrides are left out: they could not be applied again)."`
	Output    string `short:"o" help:"Write to this file instead of standard output." placeholder:"FILE" type:"path"`
}

func (x *exportCmd) Run(e *env) error {
	f, _, err := snapshot(e.ctx, e.client, x.Customers)
	if err != nil {
		return fmt.Errorf("read the catalog: %w", err)
	}
	c, err := catalogfile.Normalize(f, e.now())
	if err != nil {
		return fmt.Errorf("read the catalog: %w", err)
	}
	out, err := catalogfile.Encode(catalogfile.Export(c, x.Customers))
	if err != nil {
		return err
	}
	if x.Output == "" {
		_, err = e.stdout.Write(out)
		return err
	}
	return os.WriteFile(x.Output, out, 0o644)
}

type applyCmd struct {
	File   string `short:"f" required:"" help:"The catalog file to apply." placeholder:"FILE" type:"existingfile"`
	DryRun bool   `help:"Print the changes only; write nothing."`
	Prune  bool   `help:"Also delete what the file does not name, in the sections it has (a file without customers: deletes no customer)."`
	// Grandfather: a plan whose price, limits or features change gets a
	// new version either way; this keeps its customers on theirs.
	Grandfather bool `help:"Keep the customers of a changed plan on the version they are on; only customers new to it get the new version (by default its customers follow)."`
}

func (x *applyCmd) Run(e *env) error {
	data, err := os.ReadFile(x.File)
	if err != nil {
		return err
	}
	doc, err := catalogfile.Parse(x.File, data)
	if err != nil {
		return badFile(e, err)
	}
	f, etags, err := snapshot(e.ctx, e.client, doc.File.Customers != nil)
	if err != nil {
		return fmt.Errorf("read the catalog: %w", err)
	}
	now := e.now()
	have, err := catalogfile.Normalize(f, now)
	if err != nil {
		return fmt.Errorf("read the catalog: %w", err)
	}
	want, err := catalogfile.Validate(doc, have, now)
	if err != nil {
		return badFile(e, err)
	}
	changes := catalogfile.Diff(want, have, etags, x.Prune)
	var kept []catalogfile.Ref
	if !x.Prune {
		kept = catalogfile.Unpruned(want, have)
	}
	if err := catalogfile.Print(e.stdout, changes, kept); err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	if x.DryRun {
		_, err := fmt.Fprintln(e.stdout, "Dry run: nothing was written.")
		return err
	}
	if testHookBeforeApply != nil {
		testHookBeforeApply()
	}
	for i, c := range changes {
		err := apply(e.ctx, e.client, c, x.Grandfather)
		if err == nil {
			continue
		}
		if errors.Is(err, quotad.ErrPreconditionFailed) {
			fmt.Fprintf(e.stderr, "! %s: changed by someone else since it was read; re-run to see the new plan\n", c.Ref)
		} else {
			fmt.Fprintf(e.stderr, "! %s: %v\n", c.Ref, err)
		}
		fmt.Fprintf(e.stderr, "Stopped after %d of %s.\n", i, count(len(changes), "change"))
		return exitCode(1)
	}
	_, err = fmt.Fprintf(e.stdout, "Applied %s.\n", count(len(changes), "change"))
	return err
}

// testHookBeforeApply, when set by a test, runs between planning and the
// first write: where another writer's change would be caught by If-Match.
var testHookBeforeApply func()

// badFile prints every problem of a file, one a line, and fails.
func badFile(e *env, err error) error {
	fmt.Fprintln(e.stderr, err)
	var errs catalogfile.Errors
	if errors.As(err, &errs) {
		fmt.Fprintf(e.stderr, "%s: %s; nothing was written.\n", errs[0].File, count(len(errs), "problem"))
	}
	return exitCode(1)
}

// count says n things: "1 change", "2 changes".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
