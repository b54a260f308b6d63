package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quotad/quotad/internal/quota"
	"github.com/quotad/quotad/internal/tiers"
)

// Request ids make checks and refunds idempotent for 24 hours: the first
// use of an id is claimed in the transaction that charges (or refunds), so
// the claim and the charge commit or vanish together; a check's answer is
// kept with its claim.

// claim records a request id (with its answer, if known), or returns what
// was recorded under it within the last 24 hours. An expired record is taken over. A concurrent claim of
// the same id waits for the first to commit or roll back.
func claim(ctx context.Context, q querier, c quota.Claim) (*quota.Recorded, error) {
	const claimQ = `
		INSERT INTO request_ids AS r (customer_id, kind, request_id, metric, cost, created_at, answer)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (customer_id, kind, request_id) DO UPDATE
		SET metric = EXCLUDED.metric, cost = EXCLUDED.cost, answer = EXCLUDED.answer, created_at = EXCLUDED.created_at
		WHERE r.created_at <= EXCLUDED.created_at - interval '24 hours'
		RETURNING true`
	var claimed bool
	err := q.QueryRow(ctx, claimQ, c.Customer, string(c.Kind), c.ID, c.Metric, c.Cost, c.At, c.Answer).Scan(&claimed)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	const findQ = `SELECT metric, cost, answer, created_at FROM request_ids WHERE customer_id = $1 AND kind = $2 AND request_id = $3`
	var rec quota.Recorded
	if err := q.QueryRow(ctx, findQ, c.Customer, string(c.Kind), c.ID).Scan(&rec.Metric, &rec.Cost, &rec.Answer, &rec.At); err != nil {
		return nil, err
	}
	return &rec, nil
}

// keep stores the answer of a claimed check.
func keep(ctx context.Context, q querier, c quota.Claim, answer []byte) error {
	const q1 = `UPDATE request_ids SET answer = $4 WHERE customer_id = $1 AND kind = $2 AND request_id = $3`
	_, err := q.Exec(ctx, q1, c.Customer, string(c.Kind), c.ID, answer)
	return err
}

// Claim implements quota.Requests: claimBatch claims per statement, each a
// transaction of its own; a second statement reads what was recorded under
// the ids some found used. An id claimed twice in c is claimed once: the
// second finds the first.
func (l *Ledger) Claim(ctx context.Context, c []quota.Claim) error {
	for len(c) > 0 {
		batch := c[:min(len(c), claimBatch)]
		c = c[len(batch):]
		err := retry(func() error { return l.claimAll(ctx, batch) })
		switch {
		case isCode(err, "23503") && len(batch) > 1:
			// A customer went while the batch ran: each claim again alone,
			// so that only its own check learns it.
			for i := range batch {
				if err := l.Claim(ctx, batch[i:i+1]); err != nil {
					return err
				}
			}
		case isCode(err, "23503"):
			return tiers.ErrCustomerNotFound
		case err != nil:
			return fmt.Errorf("claim %d request ids: %w", len(batch), mapErr(err))
		}
	}
	return nil
}

// claimBatch is how many request ids one statement claims.
const claimBatch = 1000

// requestKey names a request id.
type requestKey struct {
	customer, kind, id string
}

// claimAll claims the ids of c in one statement (in the order of their
// keys, so that two processes' batches lock them in one order), and reads
// what was recorded under those it found used.
func (l *Ledger) claimAll(ctx context.Context, c []quota.Claim) error {
	first := make(map[requestKey]int, len(c)) // the claim of each id that goes to the store
	var order []int
	for i := range c {
		c[i].Found = nil
		k := requestKey{c[i].Customer, string(c[i].Kind), c[i].ID}
		if _, ok := first[k]; !ok {
			first[k] = i
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(c[a].Customer, c[b].Customer), cmp.Compare(c[a].Kind, c[b].Kind), cmp.Compare(c[a].ID, c[b].ID))
	})
	n := len(order)
	customers, kinds, ids, metrics := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	costs, ats, answers := make([]int64, n), make([]time.Time, n), make([][]byte, n)
	for j, i := range order {
		x := &c[i]
		customers[j], kinds[j], ids[j], metrics[j] = x.Customer, string(x.Kind), x.ID, x.Metric
		costs[j], ats[j], answers[j] = x.Cost, x.At, x.Answer
	}
	const claimQ = `
		INSERT INTO request_ids AS r (customer_id, kind, request_id, metric, cost, created_at, answer)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::timestamptz[], $7::jsonb[])
		ON CONFLICT (customer_id, kind, request_id) DO UPDATE
		SET metric = EXCLUDED.metric, cost = EXCLUDED.cost, answer = EXCLUDED.answer, created_at = EXCLUDED.created_at
		WHERE r.created_at <= EXCLUDED.created_at - interval '24 hours'
		RETURNING customer_id, kind, request_id`
	rows, err := l.core.pool.Query(ctx, claimQ, customers, kinds, ids, metrics, costs, ats, answers)
	if err != nil {
		return err
	}
	claimed := map[requestKey]bool{}
	var k requestKey
	if _, err := pgx.ForEachRow(rows, []any{&k.customer, &k.kind, &k.id}, func() error {
		claimed[k] = true
		return nil
	}); err != nil {
		return err
	}
	// Ids found used: what was recorded under them, read after the claim
	// committed (a claim of the same id by another transaction in flight
	// made it wait for that one to end).
	var used []int
	for _, i := range order {
		if !claimed[requestKey{c[i].Customer, string(c[i].Kind), c[i].ID}] {
			used = append(used, i)
		}
	}
	for _, i := range used {
		rec, err := claim(ctx, l.core.pool, c[i])
		if err != nil {
			return err
		}
		c[i].Found = rec
	}
	// A second claim of an id in c finds the first.
	for i := range c {
		k := requestKey{c[i].Customer, string(c[i].Kind), c[i].ID}
		j := first[k]
		if j == i {
			continue
		}
		if c[j].Found != nil {
			c[i].Found = c[j].Found
		} else {
			c[i].Found = &quota.Recorded{Metric: c[j].Metric, Cost: c[j].Cost, Answer: c[j].Answer}
		}
	}
	return nil
}

// Recorded implements quota.Requests.
func (l *Ledger) Recorded(ctx context.Context, customer, requestID string, now time.Time) (*quota.Recorded, error) {
	const q = `
		SELECT metric, cost, answer, created_at FROM request_ids
		WHERE customer_id = $1 AND kind = 'check' AND request_id = $2
		  AND created_at > $3::timestamptz - interval '24 hours' AND answer IS NOT NULL`
	var rec quota.Recorded
	err := l.core.pool.QueryRow(ctx, q, customer, requestID, now).Scan(&rec.Metric, &rec.Cost, &rec.Answer, &rec.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find request id: %w", mapErr(err))
	}
	return &rec, nil
}
