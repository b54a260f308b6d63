package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Notification payloads are "<kind>:<key>". They are sent inside the
// writing transaction, so listeners hear of a change only once it commits.
const (
	notifyMetric   = "metric"
	notifyPlan     = "plan"
	notifyCustomer = "customer"
)

func notify(ctx context.Context, tx pgx.Tx, channel, kind, key string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, kind+":"+key); err != nil {
		return fmt.Errorf("notify %s %s: %w", kind, key, err)
	}
	return nil
}
