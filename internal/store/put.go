package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/tiers"
)

// putSteps are the steps of a Put method that differ from one resource to
// another; put runs the rest.
type putSteps[T any] struct {
	// find reads the row, locking it FOR UPDATE with lock; it returns
	// notFound when there is no row.
	find     func(ctx context.Context, tx pgx.Tx, lock bool) (T, error)
	notFound error
	version  func(T) int64

	// before, if set, runs first, before the row is locked.
	before func(ctx context.Context, tx pgx.Tx) error
	// write validates the new value and writes the row, old being the row
	// as it was when exists; If-Match has passed.
	write func(ctx context.Context, tx pgx.Tx, old T, exists bool) error
	// after, if set, runs once the row is written and read back as saved.
	after func(ctx context.Context, tx pgx.Tx, saved T, exists bool) error

	resource string // of the audit entry
	customer string // of the audit entry, "" when it concerns no customer
	notify   string // kind of the change notification
	key      string // key of the change notification
}

// put creates or replaces a row in one transaction: it locks the row,
// checks w.IfMatch against its version, writes it, reads it back, records
// the audit entry and notifies the change. It reports whether the row was
// created.
func put[T any](ctx context.Context, c *core, w tiers.Write, s putSteps[T]) (T, bool, error) {
	var (
		saved   T
		created bool
	)
	err := c.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if s.before != nil {
			if err := s.before(ctx, tx); err != nil {
				return err
			}
		}
		old, err := s.find(ctx, tx, true)
		exists := err == nil
		if err != nil && !errors.Is(err, s.notFound) {
			return err
		}
		if err := w.IfMatch.Check(exists, s.version(old)); err != nil {
			return err
		}
		if err := s.write(ctx, tx, old, exists); err != nil {
			return err
		}
		if saved, err = s.find(ctx, tx, false); err != nil {
			return err
		}
		if s.after != nil {
			if err := s.after(ctx, tx, saved, exists); err != nil {
				return err
			}
		}
		created = !exists
		e := auditEntry{actor: w.Actor, action: tiers.ActionUpdate, resource: s.resource,
			customer: s.customer, after: saved}
		if exists {
			e.before = old
		} else {
			e.action = tiers.ActionCreate
		}
		return c.auditAndNotify(ctx, tx, w.At, e, s.notify, s.key)
	})
	if err != nil {
		var zero T
		return zero, false, err
	}
	return saved, created, nil
}

// upsert runs update when the row exists, else insert, which must end in
// ON CONFLICT DO NOTHING; both take args.
func upsert(ctx context.Context, tx pgx.Tx, exists bool, update, insert string, args ...any) error {
	if exists {
		_, err := tx.Exec(ctx, update, args...)
		return err
	}
	tag, err := tx.Exec(ctx, insert, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errRetry // created concurrently: replace it instead
	}
	return nil
}
