package tiers

import (
	"errors"
	"fmt"
)

// Caps bound how many objects of each kind may exist, so that an admin
// token, leaked or driven by a script gone wrong, cannot grow without end
// what PostgreSQL stores and what every process keeps in memory (every
// live API key is in each process's verifier). A cap of 0 is no cap.
//
// Only creations are counted against a cap: replacing an existing
// customer or webhook always goes through, and deleting one (revoking a
// key, or its expiry) frees a place.
type Caps struct {
	// Customers bounds the customers.
	Customers int
	// KeysPerCustomer bounds each customer's live API keys: neither
	// revoked nor expired.
	KeysPerCustomer int
	// Webhooks bounds the webhooks.
	Webhooks int
}

// DefaultCaps are quotad's caps unless configured otherwise.
var DefaultCaps = Caps{Customers: 1_000_000, KeysPerCustomer: 100, Webhooks: 100}

// CapKind names one of Caps' caps.
type CapKind uint8

// The kinds of capped objects.
const (
	CapCustomers CapKind = iota + 1
	CapKeysPerCustomer
	CapWebhooks
)

// ErrCapReached: creating the object would pass its cap. It comes as a
// *CapError, which says which cap.
var ErrCapReached = errors.New("cap reached")

// CapError is ErrCapReached for one cap; its text is meant for clients.
type CapError struct {
	Kind CapKind
	Cap  int
}

func (e *CapError) Error() string {
	switch e.Kind {
	case CapKeysPerCustomer:
		return fmt.Sprintf("the customer has %d live API keys, its cap: revoke one first (the cap is --max-keys-per-customer)", e.Cap)
	case CapWebhooks:
		return fmt.Sprintf("%d webhooks exist, the cap: delete one first (the cap is --max-webhooks)", e.Cap)
	default:
		return fmt.Sprintf("%d customers exist, the cap: delete one first (the cap is --max-customers)", e.Cap)
	}
}

// Is makes a CapError match ErrCapReached.
func (e *CapError) Is(target error) bool { return target == ErrCapReached }

// Check returns a *CapError when n objects of kind, the one being created
// included, would pass its cap.
func (c Caps) Check(kind CapKind, n int64) error {
	limit := c.Of(kind)
	if limit > 0 && n > int64(limit) {
		return &CapError{Kind: kind, Cap: limit}
	}
	return nil
}

// Of returns the cap of kind (0: none).
func (c Caps) Of(kind CapKind) int {
	switch kind {
	case CapCustomers:
		return c.Customers
	case CapKeysPerCustomer:
		return c.KeysPerCustomer
	case CapWebhooks:
		return c.Webhooks
	}
	return 0
}
