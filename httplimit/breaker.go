package httplimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Circuit breaker defaults (WithCircuitBreaker).
const (
	// DefaultBreakerFailures is how many consecutive failed decisions open
	// the breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerCoolDown is how long an open breaker refuses every
	// decision before it lets one probe through.
	DefaultBreakerCoolDown = time.Second
)

// breaker is a circuit breaker in front of the server: closed, it lets
// every decision through and counts consecutive failures; after failures
// of them in a row, or at once when the server refused the connection, it
// opens and refuses every decision without a round trip (ErrCircuitOpen)
// for coolDown; then it is half-open: one decision goes through as a
// probe (the others are still refused), and the probe's success closes
// it, its failure opens it for another coolDown.
//
// So a dead server costs a request one mutex and one clock read instead
// of the whole timeout. Safe for concurrent use.
type breaker struct {
	failures int           // consecutive failures that open it, >= 1
	coolDown time.Duration // time open before a probe, > 0
	now      func() time.Time

	mu       sync.Mutex
	state    breakerState // guarded by mu
	streak   int          // consecutive failures while closed
	openedAt time.Time    // when it last opened
}

type breakerState int

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerProbing // half-open with its one probe in flight
)

// allow reports whether a decision may go to the server now. probe is true
// for the one decision a half-open breaker lets through; its outcome must
// be reported with done.
func (b *breaker) allow() (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case breakerClosed:
		return true, false
	case breakerOpen:
		if b.now().Sub(b.openedAt) < b.coolDown {
			return false, false
		}
		b.state = breakerProbing
		return true, true
	}
	return false, false // a probe is in flight
}

// outcome is what a decision the breaker let through says of the server.
type outcome int

const (
	// answered: the server answered (a decision, an error reply, a reply
	// of the wrong shape): it is up.
	answered outcome = iota
	// failed: the server could not be reached or did not answer in time.
	failed
	// refused: the server's host refused the connection: it is down.
	refused
	// unknown: the caller gave up first; the round trip says nothing.
	unknown
)

// done records the outcome of a decision allow let through (probe as allow
// returned it).
func (b *breaker) done(probe bool, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case probe && o == unknown:
		// The probe says nothing: the next decision probes again.
		b.state = breakerOpen
	case probe && o == answered:
		b.state, b.streak = breakerClosed, 0
	case probe:
		b.state, b.openedAt = breakerOpen, b.now()
	case b.state != breakerClosed || o == unknown:
		// A decision that started before the breaker opened, or that
		// says nothing.
	case o == answered:
		b.streak = 0
	default:
		b.streak++
		if o == refused || b.streak >= b.failures {
			b.state, b.openedAt, b.streak = breakerOpen, b.now(), 0
		}
	}
}

// classify returns the outcome of a round trip that ended with err, made
// under ctx (the caller's context, before the limiter's timeout). An error
// reply (WRONGTYPE, OOM, CLUSTERDOWN, …) and a reply of the wrong shape
// come from a server that answers.
func classify(ctx context.Context, err error) outcome {
	var rerr redis.Error
	switch {
	case err == nil, errors.As(err, &rerr), errors.Is(err, ErrBadReply):
		return answered
	case ctx.Err() != nil:
		return unknown
	case isRefused(err):
		return refused
	}
	return failed
}

// isRefused reports whether err is a connection the server's host refused
// (nothing listens on the port): the server is down, not slow, so the
// breaker opens without waiting for more failures.
func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}
