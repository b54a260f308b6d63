package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/quota"
)

// Checks that reach Redis while calls of their shard are on their way go
// together in the next call, one script call for all of them: a group
// commit. No timer holds a check back: a check that finds fewer than
// lanesInFlight calls of its shard on their way goes at once, alone if it
// is alone; one that finds them all on their way waits for one to come
// back, then goes with every check that waited meanwhile (at most
// maxBatch in one call). So an idle Redis costs a check one round trip,
// and a busy one gathers more checks into each call: Redis reads, runs
// and answers one command for them all.
const (
	lanesInFlight = 2
	maxBatch      = 64
)

// lane is one shard's calls: those on their way, and the checks waiting
// for the next.
type lane struct {
	mu      sync.Mutex
	queue   []*pending
	sending int // calls on their way, or about to be
}

// pending is one check's part of a call.
type pending struct {
	op   *quota.SharedOp
	err  error
	done chan struct{} // closed when answered; nil for the check that sends
}

// laneOf returns the lane of a shard (see Shard).
func (s *Store) laneOf(shard int) *lane {
	if shard <= 0 || shard >= len(s.slots) {
		return &s.single
	}
	p := &s.slots[shard]
	if l := p.Load(); l != nil {
		return l
	}
	p.CompareAndSwap(nil, &lane{})
	return p.Load()
}

// Run implements quota.SharedStore: op goes in the next call of its
// shard's script, made by this goroutine when the shard's lane has room.
func (s *Store) Run(_ context.Context, op *quota.SharedOp) error {
	if _, err := s.conn(); err != nil { // and so Shard knows a cluster's slots
		return unavailable(err)
	}
	p := &pending{op: op}
	l := s.laneOf(s.Shard(&op.Charges[0]))
	l.mu.Lock()
	if l.sending < lanesInFlight {
		l.sending++
		l.mu.Unlock()
		s.send([]*pending{p})
		s.next(l)
		return p.err
	}
	p.done = make(chan struct{})
	l.queue = append(l.queue, p)
	l.mu.Unlock()
	<-p.done // a call answers, or fails, within the store's timeout
	return p.err
}

// next sends the checks waiting in l, from a goroutine of its own, or
// gives l's room back when none waits.
func (s *Store) next(l *lane) {
	l.mu.Lock()
	n := min(len(l.queue), maxBatch)
	if n == 0 {
		l.sending--
		l.mu.Unlock()
		return
	}
	batch := make([]*pending, n)
	copy(batch, l.queue)
	l.queue = l.queue[:copy(l.queue, l.queue[n:])]
	l.mu.Unlock()
	go func() {
		s.send(batch)
		for _, p := range batch {
			close(p.done)
		}
		s.next(l)
	}()
}

// send makes one call of the script for batch and fills in each check's
// answer, or its error.
func (s *Store) send(batch []*pending) {
	fail := func(err error) {
		for _, p := range batch {
			p.err = unavailable(err)
		}
	}
	client, err := s.conn()
	if err != nil {
		fail(err)
		return
	}
	keys, args := s.call(batch)
	// Redis's own timeout, not what is left of a check's: a call is judged
	// by how Redis answers (a failure takes its shard out of use, see
	// quota.Failover), never by how long a check waited elsewhere before
	// it, nor by its client hanging up.
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	v, err := s.script.Exec(ctx, client, keys, args).ToArray()
	if err != nil {
		fail(err)
		return
	}
	if err := answer(batch, v); err != nil {
		fail(fmt.Errorf("the script's answer: %w", err))
	}
}

// answer fills in each check's answer from the script's (see apply.lua).
func answer(batch []*pending, v []rueidis.RedisMessage) error {
	if len(v) < 1+len(batch) {
		return fmt.Errorf("%d values for %d checks", len(v), len(batch))
	}
	at, err := v[0].AsInt64()
	if err != nil {
		return err
	}
	v = v[1:]
	for _, p := range batch {
		if len(v) == 0 {
			return errors.New("too few values")
		}
		outcome, err := v[0].AsInt64()
		if err != nil {
			return err
		}
		v = v[1:]
		op := p.op
		op.AnsweredMs, op.Written = at, outcome == 1
		switch outcome {
		case 1, 2: // the keys held what the check expected
			op.Found = append(op.Found, op.Expect...)
		case 0:
			if len(v) < len(op.Expect) {
				return errors.New("too few values")
			}
			for _, m := range v[:len(op.Expect)] {
				state, err := m.ToString()
				if err != nil {
					return err
				}
				op.Found = append(op.Found, state)
			}
			v = v[len(op.Expect):]
		default:
			return fmt.Errorf("outcome %d", outcome)
		}
	}
	if len(v) != 0 {
		return fmt.Errorf("%d values too many", len(v))
	}
	return nil
}
