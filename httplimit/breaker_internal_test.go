package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// stepClock is a fake clock for the breaker: it moves only when told.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }

// TestBreakerStates walks the breaker through its states with a fake clock:
// each step advances the clock, asks allow, and reports an outcome when
// the decision went through.
func TestBreakerStates(t *testing.T) {
	type step struct {
		advance time.Duration
		ok      bool    // allow's answer
		probe   bool    // allow's probe
		report  outcome // reported when ok
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"opens after 3 failures, not before", []step{
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: false},
			{advance: 9 * time.Second, ok: false},
		}},
		{"an answer resets the streak", []step{
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: true, report: answered},
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: true, report: answered},
		}},
		{"a refused connection opens at once", []step{
			{ok: true, report: refused},
			{ok: false},
		}},
		{"a caller that gave up counts nothing", []step{
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: true, report: unknown},
			{ok: true, report: unknown},
			{ok: true, report: answered},
		}},
		{"half-open: one probe after the cool-down, its success closes", []step{
			{ok: true, report: refused},
			{advance: 10*time.Second - 1, ok: false},
			{advance: 1, ok: true, probe: true, report: answered},
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: true, report: answered},
		}},
		{"half-open: a failed probe opens for another cool-down", []step{
			{ok: true, report: failed},
			{ok: true, report: failed},
			{ok: true, report: failed},
			{advance: 10 * time.Second, ok: true, probe: true, report: failed},
			{ok: false},
			{advance: 10*time.Second - 1, ok: false},
			{advance: 1, ok: true, probe: true, report: refused},
			{advance: 10 * time.Second, ok: true, probe: true, report: answered},
			{ok: true, report: answered},
		}},
		{"half-open: a probe whose caller gave up lets the next decision probe", []step{
			{ok: true, report: refused},
			{advance: 10 * time.Second, ok: true, probe: true, report: unknown},
			{ok: true, probe: true, report: answered},
			{ok: true, report: answered},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
			b := &breaker{failures: 3, coolDown: 10 * time.Second, now: clock.now}
			for i, s := range tc.steps {
				clock.t = clock.t.Add(s.advance)
				ok, probe := b.allow()
				if ok != s.ok || probe != s.probe {
					t.Fatalf("step %d: allow() = %v, %v; want %v, %v", i+1, ok, probe, s.ok, s.probe)
				}
				if ok {
					b.done(probe, s.report)
				}
			}
		})
	}
}

// TestBreakerOneProbe: while the half-open breaker's probe is in flight,
// every other decision is refused, whatever the clock says.
func TestBreakerOneProbe(t *testing.T) {
	clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
	b := &breaker{failures: 1, coolDown: time.Second, now: clock.now}
	if ok, _ := b.allow(); !ok {
		t.Fatal("a new breaker refuses")
	}
	b.done(false, failed)
	clock.t = clock.t.Add(time.Second)
	if ok, probe := b.allow(); !ok || !probe {
		t.Fatalf("allow() after the cool-down = %v, %v; want the probe", ok, probe)
	}
	for i := range 5 {
		clock.t = clock.t.Add(time.Minute)
		if ok, probe := b.allow(); ok || probe {
			t.Fatalf("allow() %d while the probe is in flight = %v, %v; want refused", i+1, ok, probe)
		}
	}
	b.done(true, answered)
	if ok, probe := b.allow(); !ok || probe {
		t.Fatalf("allow() after a good probe = %v, %v; want closed", ok, probe)
	}
}

func TestClassify(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	refusedErr := &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want outcome
	}{
		{context.Background(), nil, answered},
		{context.Background(), redis.Nil, answered}, // an error reply
		{context.Background(), fmt.Errorf("%w: odd", ErrBadReply), answered},
		{context.Background(), context.DeadlineExceeded, failed},
		{context.Background(), errors.New("EOF"), failed},
		{context.Background(), fmt.Errorf("httplimit: CL.THROTTLE: %w", refusedErr), refused},
		{context.Background(), &net.OpError{Op: "read", Err: syscall.ECONNREFUSED}, failed},
		{done, context.Canceled, unknown},
		{done, redis.Nil, answered},
	} {
		if got := classify(tc.ctx, tc.err); got != tc.want {
			t.Errorf("classify(ctx err %v, %v) = %d, want %d", tc.ctx.Err(), tc.err, got, tc.want)
		}
	}
}
