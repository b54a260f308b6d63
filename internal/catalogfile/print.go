package catalogfile

import (
	"fmt"
	"io"
)

// Print writes changes as a plan a person can review, one line per
// resource and one more per field an update changes:
//
//   - metric api_calls
//     ~ plan pro
//     limits[api_calls/day].limit: 100000 → 200000
//
//   - customer old
//
//     1 to create, 1 to update, 1 to delete.
//
// Strings are quoted; (none) is a field that is not set.
func Print(w io.Writer, changes []Change) error {
	if len(changes) == 0 {
		_, err := fmt.Fprintln(w, "No changes: the server matches the file.")
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
