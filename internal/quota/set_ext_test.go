package quota_test

import (
	"unsafe"

	"github.com/quotad/quotad/internal/quota"
)

// one returns c as a set of one, with outcomes out: the set is c itself
// (what a counter keeps in the charge for an undo stays in c).
func one(c *quota.Charge, out []quota.Outcome) []quota.Charge {
	c.Out = out[:len(c.Spans)]
	return unsafe.Slice(c, 1)
}
