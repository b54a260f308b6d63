package catalogfile

import (
	"fmt"
	"io"
)

// Print writes changes as a plan a person can review, one line per
// resource and one more per field an update changes (- for a delete), then
// kept: what the server holds that the file does not name and that apply,
// without prune, leaves alone (see Unpruned):
//
//	~ metric api_calls
//	    capacity.day: 10000000 → 20000000
//	+ plan team
//
//	1 to create, 1 to update, 0 to delete.
//	Not in the file, left as they are (--prune would delete them):
//	    plan free
//
// Strings are quoted; (none) is a field that is not set.
func Print(w io.Writer, changes []Change, kept []Ref) error {
	if err := printChanges(w, changes, len(kept) > 0); err != nil {
		return err
	}
	if len(kept) == 0 {
		return nil
	}
	head := "Not in the file, left as they are (--prune would delete them):"
	if len(kept) == 1 {
		head = "Not in the file, left as it is (--prune would delete it):"
	}
	if _, err := fmt.Fprintln(w, head); err != nil {
		return err
	}
	for _, r := range kept {
		if _, err := fmt.Fprintf(w, "    %s\n", r); err != nil {
			return err
		}
	}
	return nil
}

func printChanges(w io.Writer, changes []Change, more bool) error {
	if len(changes) == 0 {
		msg := "No changes: the server matches the file."
		if more {
			msg = "No changes: what the file names matches the server."
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	var counts [Delete + 1]int
	for _, c := range changes {
		counts[c.Op]++
		if _, err := fmt.Fprintf(w, "%s %s\n", c.Op.sign(), c.Ref); err != nil {
			return err
		}
		for _, f := range c.Fields {
			if _, err := fmt.Fprintf(w, "    %s: %s → %s\n", f.Field, f.Old, f.New); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "\n%d to create, %d to update, %d to delete.\n", counts[Create], counts[Update], counts[Delete])
	return err
}
