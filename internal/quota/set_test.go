package quota

import "unsafe"

// one returns c as a set of one, with outcomes out: the set is c itself
// (what a counter keeps in the charge for an undo stays in c).
func one(c *Charge, out []Outcome) []Charge {
	c.Out = out[:len(c.Spans)]
	return unsafe.Slice(c, 1)
}
