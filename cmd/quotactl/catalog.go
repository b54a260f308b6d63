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
	changes, err := plan(e, x.File, x.Prune)
	if err != nil {
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

type diffCmd struct {
	File   string `short:"f" required:"" help:"The catalog file to compare with the server." placeholder:"FILE" type:"existingfile"`
	Prune  bool   `help:"Also list what apply --prune would delete."`
	Impact bool   `help:"For each plan whose limits or price the file changes, replay its customers' recorded usage against the file's limits (a what-if): who would have been denied, and what overage would have earned."`
	From   string `help:"The first day replayed by --impact (YYYY-MM-DD; default: 29 days before --to)." placeholder:"DATE"`
	To     string `help:"The last day replayed by --impact (YYYY-MM-DD; default: today, UTC)." placeholder:"DATE"`
}

// Run prints the changes that make the server match the file, as apply
// --dry-run does, then with --impact what each changed plan's new limits
// would have done to its customers. It writes nothing.
func (x *diffCmd) Run(e *env) error {
	if !x.Impact && (x.From != "" || x.To != "") {
		return errors.New("--from and --to go with --impact")
	}
	from, to, err := impactDays(x.From, x.To, e.now())
	if err != nil {
		return err
	}
	changes, err := plan(e, x.File, x.Prune)
	if err != nil || !x.Impact {
		return err
	}
	return printImpact(e, changes, from, to)
}

// plan reads the catalog file at path and the server's catalog, and
// prints and returns the changes that make the server match the file
// (deletions too with prune; without it, what the file leaves out is
// listed as kept).
func plan(e *env, path string, prune bool) ([]catalogfile.Change, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := catalogfile.Parse(path, data)
	if err != nil {
		return nil, badFile(e, err)
	}
	f, etags, err := snapshot(e.ctx, e.client, doc.File.Customers != nil)
	if err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	now := e.now()
	have, err := catalogfile.Normalize(f, now)
	if err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	want, err := catalogfile.Validate(doc, have, now)
	if err != nil {
		return nil, badFile(e, err)
	}
	changes := catalogfile.Diff(want, have, etags, prune)
	var kept []catalogfile.Ref
	if !prune {
		kept = catalogfile.Unpruned(want, have)
	}
	return changes, catalogfile.Print(e.stdout, changes, kept)
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
