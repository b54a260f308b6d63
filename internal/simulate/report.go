package simulate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/quotad/quotad/internal/tiers"
)

// WriteTable writes the report as an aligned text table, one row per
// algorithm, the exact reference first.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s; limit %d per %s (hard)", Count(r.Checks, "check"), Count(r.Customers, "customer"), r.Limit, r.Window)
	if r.Burst != r.Limit && slices.ContainsFunc(r.Results, func(x Result) bool { return x.Algorithm == tiers.TokenBucket.String() }) {
		fmt.Fprintf(&b, ", token bucket burst %d", r.Burst)
	}
	b.WriteString("\n\n")
	// Right-aligned cells, but for the names, padded to one width.
	width := len("algorithm")
	for i := range r.Results {
		width = max(width, len(r.Results[i].Algorithm))
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tchecks\tadmitted\twrongly admitted\tp99/max customer\twrongly denied\tp99/max customer\twrong\tcustomers\tpeak in window\tovershoot\tbytes/key\t\n", width, "algorithm")
	for i := range r.Results {
		res := &r.Results[i]
		bytes := "-"
		if res.BytesPerKey > 0 {
			bytes = fmt.Sprintf("%.0f", res.BytesPerKey)
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d (%s)\t%s/%s\t%d (%s)\t%s/%s\t%s\t%d/%d\t%d\t%s\t%s\t\n",
			width, res.Algorithm, res.Checks, res.Admitted,
			res.WronglyAdmitted, percent(res.WronglyAdmitted, res.Checks), pct(res.AdmittedP99), pct(res.AdmittedMax),
			res.WronglyDenied, percent(res.WronglyDenied, res.Checks), pct(res.DeniedP99), pct(res.DeniedMax),
			percent(res.Wrong(), res.Checks), res.CustomersAdmitted, res.CustomersDenied, res.Peak, overshoot(res.Peak, r.Limit), bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nwrong: the algorithm's decision differs from the exact moving window's, given the units\n" +
		"the algorithm admitted to the customer in the window before the check.\n" +
		"p99/max customer: over customers, the share of a customer's checks wrongly decided.\n" +
		"customers: how many customers had a check wrongly admitted / wrongly denied.\n" +
		"peak in window: the most units admitted to one customer in any moving window of the limit's length.\n")
	if r.MemoryKeys > 0 {
		fmt.Fprintf(&b, "bytes/key: live heap of quotad's counter per key, over %d keys each filled to the limit in one window.\n", r.MemoryKeys)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// percent formats n of total as a percentage.
func percent(n, total int64) string {
	if total == 0 {
		return pct(0)
	}
	return pct(float64(n) / float64(total))
}

func pct(share float64) string { return fmt.Sprintf("%.4f%%", share*100) }

// overshoot formats the units a peak went over the limit and the peak's
// ratio to the limit.
func overshoot(peak, limit int64) string {
	return fmt.Sprintf("+%d (%.2fx)", max(0, peak-limit), float64(peak)/float64(limit))
}

// Count returns n and noun, in the plural unless n is 1.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
