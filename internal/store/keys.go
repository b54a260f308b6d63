package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/keys"
	"github.com/quotad/quotad/internal/tiers"
)

var _ keys.Store = (*Keys)(nil)

// Notifications about API keys (the key is the key's id). Like every
// notification they are sent in the writing transaction: another process
// hears of a revocation once it commits.
const (
	NotifyKeyCreated = "key_created"
	NotifyKeyRevoked = "key_revoked"
)

type apiKeyRow struct {
	ID         string
	Customer   string
	Name       string
	Prefix     string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

func toKey(r apiKeyRow) keys.Key {
	return keys.Key{ID: r.ID, Customer: r.Customer, Name: r.Name, Prefix: r.Prefix, CreatedAt: utc(r.CreatedAt),
		ExpiresAt: utcPtr(r.ExpiresAt), LastUsedAt: utcPtr(r.LastUsedAt), RevokedAt: utcPtr(r.RevokedAt)}
}

type liveKeyRow struct {
	ID         string
	Customer   string
	Digest     []byte
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
}

func toLive(r liveKeyRow) keys.Live {
	k := keys.Live{ID: r.ID, Customer: r.Customer, ExpiresAt: utcPtr(r.ExpiresAt), LastUsedAt: utcPtr(r.LastUsedAt)}
	copy(k.Digest[:], r.Digest)
	return k
}

const keyColumns = `id, customer_id AS customer, name, prefix, created_at, expires_at, last_used_at, revoked_at`

// findKey returns the key id, revoked or not; with live, only a key not
// revoked, locked.
func findKey(ctx context.Context, q querier, id string, live bool) (keys.Key, error) {
	sql := `SELECT ` + keyColumns + ` FROM api_keys WHERE id = $1`
	if live {
		sql += ` AND revoked_at IS NULL FOR UPDATE`
	}
	return findOne(ctx, q, sql, keys.ErrKeyNotFound, toKey, id)
}

// CreateKey stores k, whose secret has the SHA-256 digest, and records its
// creation in the audit log (the key's fields, never the secret). A key
// beyond the cap of live keys per customer (SetCaps) is a
// *tiers.CapError.
func (ks *Keys) CreateKey(ctx context.Context, w tiers.Write, k keys.Key, digest keys.Digest) (keys.Key, error) {
	err := ks.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := ks.checkKeyCap(ctx, tx, k.Customer, w.At); err != nil {
			return err
		}
		const q = `
			INSERT INTO api_keys (id, customer_id, name, prefix, digest, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`
		if _, err := tx.Exec(ctx, q, k.ID, k.Customer, k.Name, k.Prefix, digest[:], w.At, k.ExpiresAt); err != nil {
			if isCode(err, "23503") { // foreign_key_violation: no such customer
				return tiers.ErrCustomerNotFound
			}
			return err
		}
		k.CreatedAt = w.At.UTC()
		e := auditEntry{actor: w.Actor, action: tiers.ActionCreate, resource: "keys/" + k.ID, customer: k.Customer, after: k}
		return ks.core.auditAndNotify(ctx, tx, w.At, e, NotifyKeyCreated, k.ID)
	})
	if err != nil {
		return keys.Key{}, fmt.Errorf("create api key[%s] of customer[%s]: %w", k.ID, k.Customer, err)
	}
	return k, nil
}

// checkKeyCap checks the cap of live keys per customer before a key of
// customer is created at now. It locks the customer's row first, so that
// concurrent creations for one customer count one after the other.
func (ks *Keys) checkKeyCap(ctx context.Context, tx pgx.Tx, customer string, now time.Time) error {
	if ks.core.caps.KeysPerCustomer == 0 {
		return nil
	}
	// NO KEY UPDATE: it does not hold back the inserts that merely
	// reference the customer (counters, history).
	const lock = `SELECT 1 FROM customers WHERE id = $1 FOR NO KEY UPDATE`
	var one int
	if err := tx.QueryRow(ctx, lock, customer).Scan(&one); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return tiers.ErrCustomerNotFound
		}
		return err
	}
	// A statement of its own, after the lock: its snapshot sees the keys
	// of a creation that held the lock before this one.
	const count = `
		SELECT count(*) FROM api_keys
		WHERE customer_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`
	var n int64
	if err := tx.QueryRow(ctx, count, customer, now).Scan(&n); err != nil {
		return err
	}
	return ks.core.caps.Check(tiers.CapKeysPerCustomer, n+1)
}

// FindKey returns the key id, revoked or not.
func (ks *Keys) FindKey(ctx context.Context, id string) (keys.Key, error) {
	k, err := findKey(ctx, ks.core.pool, id, false)
	if err != nil {
		return keys.Key{}, fmt.Errorf("find api key[%s]: %w", id, mapErr(err))
	}
	return k, nil
}

// FindKeys returns one page of a customer's keys ordered by id: those not
// revoked, or every one with f.IncludeRevoked.
func (ks *Keys) FindKeys(ctx context.Context, customer string, f keys.Filter) ([]keys.Key, bool, error) {
	const q = `SELECT ` + keyColumns + ` FROM api_keys
		WHERE customer_id = $1 AND id > $2 AND ($3::boolean OR revoked_at IS NULL) ORDER BY id LIMIT $4`
	list, more, err := findPage(ctx, ks.core.pool, "api keys", f.Limit, toKey, q, customer, f.After, f.IncludeRevoked)
	if err != nil || len(list) > 0 {
		return list, more, err
	}
	// No keys: is there such a customer?
	var exists bool
	if err := ks.core.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM customers WHERE id = $1)`, customer).Scan(&exists); err != nil {
		return nil, false, fmt.Errorf("find customer[%s]: %w", customer, mapErr(err))
	}
	if !exists {
		return nil, false, fmt.Errorf("find api keys of customer[%s]: %w", customer, tiers.ErrCustomerNotFound)
	}
	return list, false, nil
}

// RevokeKey revokes the live key id and records it in the audit log; a
// key revoked already is keys.ErrKeyNotFound.
func (ks *Keys) RevokeKey(ctx context.Context, w tiers.Write, id string) (keys.Key, error) {
	var old keys.Key
	err := ks.core.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if old, err = findKey(ctx, tx, id, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = $2 WHERE id = $1`, id, w.At); err != nil {
			return err
		}
		e := auditEntry{actor: w.Actor, action: tiers.ActionDelete, resource: "keys/" + id, customer: old.Customer, before: old}
		return ks.core.auditAndNotify(ctx, tx, w.At, e, NotifyKeyRevoked, id)
	})
	if err != nil {
		return keys.Key{}, fmt.Errorf("revoke api key[%s]: %w", id, err)
	}
	return old, nil
}

// LiveKeys returns every key neither revoked nor expired at now, with its
// digest.
func (ks *Keys) LiveKeys(ctx context.Context, now time.Time) ([]keys.Live, error) {
	const q = `
		SELECT id, customer_id AS customer, digest, expires_at, last_used_at FROM api_keys
		WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)`
	rows, err := ks.core.pool.Query(ctx, q, now)
	if err != nil {
		return nil, fmt.Errorf("query live api keys: %w", mapErr(err))
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[liveKeyRow])
	if err != nil {
		return nil, fmt.Errorf("scan live api keys: %w", mapErr(err))
	}
	out := make([]keys.Live, len(list))
	for i, r := range list {
		out[i] = toLive(r)
	}
	return out, nil
}

// LiveKey returns the key id, with its digest, unless it is revoked.
func (ks *Keys) LiveKey(ctx context.Context, id string) (keys.Live, error) {
	const q = `
		SELECT id, customer_id AS customer, digest, expires_at, last_used_at FROM api_keys
		WHERE id = $1 AND revoked_at IS NULL`
	k, err := findOne(ctx, ks.core.pool, q, keys.ErrKeyNotFound, toLive, id)
	if err != nil {
		return keys.Live{}, fmt.Errorf("find live api key[%s]: %w", id, mapErr(err))
	}
	return k, nil
}

// TouchKeys sets each key's last use, in one statement; a last use never
// moves back, and keys gone meanwhile are skipped.
func (ks *Keys) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	ats := make([]time.Time, 0, len(used))
	for id, at := range used {
		ids = append(ids, id)
		ats = append(ats, at)
	}
	const q = `
		UPDATE api_keys k SET last_used_at = u.at
		FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)
		WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`
	err := retry(func() error {
		_, err := ks.core.pool.Exec(ctx, q, ids, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch %d api keys: %w", len(ids), mapErr(err))
	}
	return nil
}
