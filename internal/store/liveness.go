package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Liveness judges whether PostgreSQL answers at all, apart from how fast:
// a busy machine (queues, scheduling, connections all in use) makes it
// slow, a network that drops packets or a server that hangs makes it
// silent. It pings PostgreSQL on a connection of its own, outside the
// pool, so that a pool in full use does not look like silence, and judges
// it silent when a ping has had no byte back:
//
//   - for the silence timeout, while the ping itself was not acknowledged
//     by the server's host (the network, or the host, is gone);
//   - for four silence timeouts (at least a second) otherwise: the host
//     has the ping, but PostgreSQL, or a proxy in between, says nothing.
//     A PostgreSQL on a saturated machine can take far longer than the
//     silence timeout to answer, and is waited for.
//
// On Linux the kernel says when the connection last received a byte and
// whether what was sent was acknowledged, so a process too busy to read
// its answers does not take itself for cut off; elsewhere a ping is given
// the longer time. A ping or a connection that fails outright (refused,
// reset) is judged at once.
//
// It implements quota.Liveness: calls wait for a PostgreSQL judged alive,
// and give up once it is judged silent.
type Liveness struct {
	config   *pgx.ConnConfig
	silence  time.Duration // no byte back, nothing acknowledged
	mute     time.Duration // no byte back, what was sent acknowledged
	every    time.Duration
	state    atomic.Pointer[liveState]
	onChange func(alive bool, err error)
}

// liveState is one judgement: alive, and ctx, which ends when it no
// longer is.
type liveState struct {
	ctx    context.Context
	cancel context.CancelFunc
	alive  bool
}

// errSilent says a ping, or a new connection, had no answer within the
// silence timeout.
var errSilent = errors.New("no answer from PostgreSQL")

// NewLiveness returns a judge of whether db's PostgreSQL answers, with
// db's connection settings and silence as its timeout (see Liveness); it
// starts judging it alive. onChange (if not nil) hears every change of
// judgement, with the error that made it. Call Run to keep it judging.
func NewLiveness(db *DB, silence time.Duration, onChange func(alive bool, err error)) *Liveness {
	cfg := db.pool.Config().ConnConfig.Copy()
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.RuntimeParams["application_name"] = cfg.RuntimeParams["application_name"] + " liveness"
	l := &Liveness{config: cfg, silence: silence, mute: max(4*silence, time.Second),
		every: max(silence/2, 10*time.Millisecond), onChange: onChange}
	ctx, cancel := context.WithCancel(context.Background())
	l.state.Store(&liveState{ctx: ctx, cancel: cancel, alive: true})
	return l
}

// Alive returns a context that ends once PostgreSQL is judged silent, and
// whether it is judged alive now (if not, the context has ended).
func (l *Liveness) Alive() (context.Context, bool) {
	s := l.state.Load()
	return s.ctx, s.alive
}

// judge records a judgement; only Run's goroutine makes them.
func (l *Liveness) judge(alive bool, err error) {
	cur := l.state.Load()
	if cur.alive == alive {
		return
	}
	if alive {
		ctx, cancel := context.WithCancel(context.Background())
		l.state.Store(&liveState{ctx: ctx, cancel: cancel, alive: true})
	} else {
		cur.cancel()
		l.state.Store(&liveState{ctx: cur.ctx, cancel: cur.cancel})
	}
	if l.onChange != nil {
		l.onChange(alive, err)
	}
}

// Run pings PostgreSQL every half silence timeout until ctx ends,
// judging it alive or silent.
func (l *Liveness) Run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeQuietly(conn)
		}
	}()
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	retried := false
	for ctx.Err() == nil {
		err := l.round(ctx, &conn)
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, errSilent) && !retried && l.state.Load().alive {
			// The connection alone may have gone (PostgreSQL ended the
			// session): a new one decides.
			retried = true
			continue
		}
		retried = false
		l.judge(err == nil, err)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// round connects if there is no connection, and pings; a connection that
// failed is closed and forgotten.
func (l *Liveness) round(ctx context.Context, conn **pgx.Conn) error {
	if *conn == nil {
		c, err := l.connect(ctx)
		if err != nil {
			return err
		}
		*conn = c
	}
	if err := l.ping(ctx, *conn); err != nil {
		closeQuietly(*conn)
		*conn = nil
		return err
	}
	return nil
}

// connect opens the liveness connection, judging PostgreSQL silent if it
// has not answered within four silence timeouts (it goes on waiting up to
// the connect timeout).
func (l *Liveness) connect(ctx context.Context) (*pgx.Conn, error) {
	type result struct {
		conn *pgx.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := pgx.ConnectConfig(ctx, l.config)
		done <- result{c, err}
	}()
	wait := time.NewTimer(l.mute)
	defer wait.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return nil, fmt.Errorf("liveness connection: %w", mapErr(r.err))
			}
			return r.conn, nil
		case <-wait.C:
			l.judge(false, fmt.Errorf("%w: a new connection had no answer within %s", errSilent, l.mute))
		}
	}
}

// ping sends PostgreSQL an empty statement on conn and waits for its
// answer until it is judged silent (see Liveness).
func (l *Liveness) ping(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	sent := time.Now()
	go func() { done <- conn.Ping(ctx) }()
	wait := time.NewTimer(l.silence)
	defer wait.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("liveness ping: %w", mapErr(err))
			}
			return nil
		case <-wait.C:
			age := time.Since(sent)
			tcp, known := tcpStateOf(conn.PgConn().Conn())
			switch {
			case known && tcp.quiet < age && tcp.quiet < l.silence:
				// A byte came back since the ping went: PostgreSQL
				// answers, this process has not read it yet.
				wait.Reset(l.silence - tcp.quiet)
				continue
			case (!known || !tcp.unacked) && age < l.mute:
				// The host has the ping (or this system cannot tell):
				// PostgreSQL is slow, or mute; it gets the longer time.
				wait.Reset(min(l.mute-age, l.silence))
				continue
			}
			cancel()
			<-done
			if known && tcp.unacked {
				return fmt.Errorf("%w: a ping was neither acknowledged nor answered within %s", errSilent, l.silence)
			}
			return fmt.Errorf("%w: a ping had no byte back within %s", errSilent, l.mute)
		}
	}
}

// closeQuietly closes conn, waiting at most a second: a connection to a
// silent server is closed without its goodbye.
func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// tcpState is what the kernel knows of a TCP connection (see tcpStateOf).
type tcpState struct {
	quiet   time.Duration // since a byte was last received
	unacked bool          // some of what was sent is not acknowledged
}

// netConnOf unwraps a TLS connection to the TCP one beneath.
func netConnOf(c net.Conn) net.Conn {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok {
		return u.NetConn()
	}
	return c
}
