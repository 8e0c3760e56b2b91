package httplimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds one decision (one round trip) unless WithTimeout
// says otherwise.
const DefaultTimeout = 100 * time.Millisecond

// Limiter decides requests against a set of policies with one round trip
// per decision. It is safe for concurrent use; it holds no connection of
// its own (the client does).
type Limiter struct {
	client   redis.UniversalClient
	policies []compiled
	prefix   string
	timeout  time.Duration
	// wait is WithWait's longest wait (0: none), sent as waitArg.
	wait    time.Duration
	waitArg string
	// bounded is true when the client itself stops a call at its
	// context's deadline (ContextTimeoutEnabled), so no goroutine is
	// needed to enforce the timeout.
	bounded bool
	// breaker is nil when WithoutCircuitBreaker turned it off.
	breaker *breaker
	// deny is nil when WithDenyCache(0) turned it off.
	deny *denyCache
	// refusals ends decisions in flight when a dial is refused.
	refusals refusals

	decisions, local, roundTrips, errs atomic.Uint64
}

// Stats counts a Limiter's work since it was made. Hit rate of the deny
// cache: Local / Decisions; round trips saved: Local.
type Stats struct {
	// Decisions is every call of Allow and AllowN with a valid quantity:
	// the sum of Local, RoundTrips and the calls the open circuit breaker
	// failed at once.
	Decisions uint64 `json:"decisions"`
	// Local is the decisions the deny cache answered, without a round trip.
	Local uint64 `json:"local"`
	// RoundTrips is the commands sent to the server, answered or not.
	RoundTrips uint64 `json:"round_trips"`
	// Errors is the decisions that ended without a decision: no answer in
	// time, an error reply, a bad reply, or an open circuit breaker.
	Errors uint64 `json:"errors"`
}

// Stats returns the limiter's counters. Each is read atomically, the four
// not together: under load they may be a few decisions apart.
func (l *Limiter) Stats() Stats {
	return Stats{Decisions: l.decisions.Load(), Local: l.local.Load(), RoundTrips: l.roundTrips.Load(), Errors: l.errs.Load()}
}

// NewLimiter returns a Limiter deciding with client (a *redis.Client, a
// *redis.ClusterClient or any redis.UniversalClient) under policies, in
// order. One policy is decided with its own command; several (all GCRA)
// with one CL.THROTTLEALL, so that a request consumes from every policy
// or from none. Of the options, WithTimeout, WithKeyPrefix,
// WithCircuitBreaker, WithoutCircuitBreaker and WithDenyCache apply; the
// others concern the middleware and are ignored here.
func NewLimiter(client redis.UniversalClient, policies []Policy, opts ...Option) (*Limiter, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newLimiter(client, policies, cfg)
}

func newLimiter(client redis.UniversalClient, policies []Policy, cfg config) (*Limiter, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	}
	cs, err := compileAll(policies)
	if err != nil {
		return nil, err
	}
	l := &Limiter{client: client, policies: cs, prefix: cfg.prefix, timeout: cfg.timeout}
	if cfg.wait > 0 {
		ms := (cfg.wait + time.Millisecond - 1) / time.Millisecond
		l.wait = ms * time.Millisecond
		l.waitArg = strconv.FormatInt(int64(ms), 10) + "ms"
	}
	if !cfg.noBreaker {
		l.breaker = &breaker{failures: cfg.breakerFailures, coolDown: cfg.breakerCoolDown, now: cfg.now}
	}
	if cfg.denyMax > 0 {
		l.deny = newDenyCache(cfg.denyMax, DenyCacheEntries, cfg.now)
		l.deny.slack = l.wait
	}
	l.refusals.watchDials(client)
	switch c := client.(type) {
	case *redis.Client:
		l.bounded = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		l.bounded = c.Options().ContextTimeoutEnabled
	}
	return l, nil
}

// Policies returns the limiter's policies, in order.
func (l *Limiter) Policies() []Policy {
	out := make([]Policy, len(l.policies))
	for i, c := range l.policies {
		out[i] = c.Policy
	}
	return out
}

// ServerKey returns the key the server holds for policy (by name) and the
// client key: prefix + policy + ":{" + tag + "}", where tag is the key
// itself, or a hash of it when it is empty, longer than 128 bytes, holds a
// brace or starts with '=' (see the package documentation).
func (l *Limiter) ServerKey(policy, key string) string {
	return serverKey(l.prefix, policy, key)
}

// serverKey is the server's key for policy and the client key under prefix.
func serverKey(prefix, policy, key string) string {
	return prefix + policy + ":{" + hashTag(key) + "}"
}

// Allow takes one unit for key from every policy; see AllowN.
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN takes n units (0 up to MaxQuantity; 0 peeks without consuming)
// for key from every policy, atomically: either every policy allows and
// all are consumed, or the decision refuses and nothing is. It makes one
// round trip, bounded by the limiter's timeout (and by ctx), unless the
// deny cache still holds the server's refusal of the same key and
// quantity (WithDenyCache): then it refuses at once, with the cached
// decision's times reduced by the time passed; or unless the circuit
// breaker is open: then it returns ErrCircuitOpen at once.
//
// A non-nil error means there is no decision: the server could not be
// reached in time, answered an error (WRONGTYPE, CLUSTERDOWN, OOM, …),
// answered something that is not a limiter reply (ErrBadReply), or failed
// recently (ErrCircuitOpen).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if n < 0 || n > MaxQuantity {
		return Decision{}, fmt.Errorf("%w: %d is out of range 0 to 2^40", ErrInvalidQuantity, n)
	}
	l.decisions.Add(1)
	if l.deny != nil {
		if d, ok := l.deny.get(key, n); ok {
			l.local.Add(1)
			return d, nil
		}
	}
	d, err := l.roundTrip(ctx, key, n)
	if err != nil {
		l.errs.Add(1)
		return Decision{}, err
	}
	if l.deny != nil && !d.Allowed {
		l.deny.put(key, n, d)
	}
	return d, nil
}

// roundTrip asks the server, through the circuit breaker.
func (l *Limiter) roundTrip(ctx context.Context, key string, n int64) (Decision, error) {
	if l.breaker == nil {
		l.roundTrips.Add(1)
		return l.decide(ctx, key, n)
	}
	ok, probe := l.breaker.allow()
	if !ok {
		return Decision{}, ErrCircuitOpen
	}
	l.roundTrips.Add(1)
	d, err := l.decide(ctx, key, n)
	l.breaker.done(probe, classify(ctx, err))
	return d, err
}

// decide makes the round trip of AllowN.
func (l *Limiter) decide(parent context.Context, key string, n int64) (Decision, error) {
	refusable, refuse := context.WithCancelCause(parent)
	defer refuse(nil)
	defer l.refusals.watch(refuse)()
	ctx, cancel := context.WithTimeout(refusable, l.timeout+l.wait)
	defer cancel()
	args := l.command(key, n)
	v, err := l.do(ctx, args)
	if err != nil {
		if cause := context.Cause(refusable); cause != nil && isRefused(cause) {
			// A dial was refused while this decision waited: the server
			// is down (refusals).
			return Decision{}, fmt.Errorf("httplimit: %s: %w", args[0], cause)
		}
		if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
			// The client's own error for a call cut short (an i/o timeout
			// at the deadline, a dial given up): say that the deadline is why.
			return Decision{}, fmt.Errorf("httplimit: %s: %w: %w", args[0], cerr, err)
		}
		return Decision{}, fmt.Errorf("httplimit: %s: %w", args[0], err)
	}
	return l.parse(v)
}

// ctxErr is ctx.Err(), or context.DeadlineExceeded once the deadline has
// passed even if ctx's timer has not fired yet (a socket deadline set from
// it may fire first).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// command builds the one command deciding key: the policy's own command,
// or CL.THROTTLEALL for several.
func (l *Limiter) command(key string, n int64) []any {
	if len(l.policies) == 1 {
		c := &l.policies[0]
		args := make([]any, 0, 3+len(c.params)+len(c.suffix))
		args = append(args, c.cmd, l.ServerKey(c.Name, key))
		args = append(args, c.params...)
		args = append(args, n)
		args = append(args, c.suffix...)
		if l.wait > 0 {
			args = append(args, "WAIT", l.waitArg)
		}
		return args
	}
	args := make([]any, 0, 3+5*len(l.policies))
	args = append(args, "CL.THROTTLEALL")
	for i := range l.policies {
		c := &l.policies[i]
		args = append(args, l.ServerKey(c.Name, key))
		args = append(args, c.params...)
		args = append(args, n)
	}
	if l.wait > 0 {
		// One wait for the call: every policy admits at one instant.
		args = append(args, "WAIT", l.waitArg)
	}
	return args
}

// do sends one command. When the client does not stop at ctx's deadline
// by itself, the call runs in a goroutine that do stops waiting for: the
// request goes on at the deadline while the abandoned call ends at the
// client's own read timeout.
func (l *Limiter) do(ctx context.Context, args []any) (any, error) {
	if l.bounded {
		return l.client.Do(ctx, args...).Result()
	}
	type reply struct {
		v   any
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		v, err := l.client.Do(ctx, args...).Result()
		ch <- reply{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// parse turns the server's reply into a Decision, refusing anything that
// is not shaped like the limiter's reply.
func (l *Limiter) parse(v any) (Decision, error) {
	d := Decision{Allowed: true, Results: make([]Result, len(l.policies))}
	if len(l.policies) == 1 {
		r, err := parseResult(v, &l.policies[0])
		if err != nil {
			return Decision{}, err
		}
		d.Results[0] = r
		d.Allowed = !r.Limited
		return d, nil
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != len(l.policies) {
		return Decision{}, fmt.Errorf("%w: CL.THROTTLEALL answered %T of %d, want %d arrays", ErrBadReply, v, lenOf(v), len(l.policies))
	}
	for i := range arr {
		r, err := parseResult(arr[i], &l.policies[i])
		if err != nil {
			return Decision{}, err
		}
		d.Results[i] = r
		if r.Limited {
			d.Allowed = false
		}
	}
	return d, nil
}

func lenOf(v any) int {
	if a, ok := v.([]any); ok {
		return len(a)
	}
	return 0
}

// parseResult reads one limiter reply: at least five integers, limited
// 0 or 1, limit, remaining and reset_after not negative, retry_after -1 or
// more, times that fit a time.Duration.
func parseResult(v any, c *compiled) (Result, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 5 {
		return Result{}, fmt.Errorf("%w: %s for %q: %T of %d, want an array of at least 5 integers", ErrBadReply, c.cmd, c.Name, v, lenOf(v))
	}
	var n [5]int64
	for i := range n {
		x, ok := arr[i].(int64)
		if !ok {
			return Result{}, fmt.Errorf("%w: %s for %q: field %d is %T, want an integer", ErrBadReply, c.cmd, c.Name, i+1, arr[i])
		}
		n[i] = x
	}
	maxTime := int64(math.MaxInt64 / c.unit)
	switch {
	case n[0] != 0 && n[0] != 1:
		return Result{}, fmt.Errorf("%w: %s for %q: limited = %d", ErrBadReply, c.cmd, c.Name, n[0])
	case n[1] < 0 || n[2] < 0 || n[2] > n[1]:
		return Result{}, fmt.Errorf("%w: %s for %q: limit %d, remaining %d", ErrBadReply, c.cmd, c.Name, n[1], n[2])
	case n[3] < -1 || n[3] > maxTime || n[4] < 0 || n[4] > maxTime:
		return Result{}, fmt.Errorf("%w: %s for %q: retry_after %d, reset_after %d", ErrBadReply, c.cmd, c.Name, n[3], n[4])
	case n[0] == 0 && n[3] != -1:
		return Result{}, fmt.Errorf("%w: %s for %q: allowed with retry_after %d", ErrBadReply, c.cmd, c.Name, n[3])
	}
	r := Result{
		Policy:     c.Name,
		Limited:    n[0] == 1,
		Limit:      n[1],
		Remaining:  n[2],
		RetryAfter: -1,
		ResetAfter: time.Duration(n[4]) * c.unit,
	}
	if n[3] >= 0 {
		r.RetryAfter = time.Duration(n[3]) * c.unit
	}
	return r, nil
}

// Decision is the outcome of one request against every policy.
type Decision struct {
	// Allowed is true when every policy allowed the request (and it was
	// consumed from each).
	Allowed bool
	// Results holds one Result per policy, in the limiter's order.
	Results []Result
}

// Result is one policy's part of a Decision: the server's five integers,
// times as durations.
type Result struct {
	// Policy is the policy's name.
	Policy string
	// Limited is true when this policy refused the request.
	Limited bool
	// Limit is the policy's whole quota (GCRA: burst + 1).
	Limit int64
	// Remaining is what the key has left after this request, 0 or more.
	// In a refused CL.THROTTLEALL, a policy that would have allowed reports
	// what a peek would (nothing was consumed).
	Remaining int64
	// RetryAfter is how long until this same request would be allowed by
	// this policy; negative when it is allowed, and when it never can be
	// (its quantity exceeds the whole Limit). Whole seconds for GCRA, whole
	// milliseconds otherwise, rounded up by the server.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to fresh (its whole
	// Limit available); 0 when it holds nothing.
	ResetAfter time.Duration
}

// RetryAfter returns, for a refused decision, how long until the request
// could be allowed: the longest RetryAfter among the refusing policies.
// ok is false when the decision allowed the request, and when a refusing
// policy can never allow it.
func (d Decision) RetryAfter() (wait time.Duration, ok bool) {
	if d.Allowed {
		return 0, false
	}
	for _, r := range d.Results {
		if !r.Limited {
			continue
		}
		if r.RetryAfter < 0 {
			return 0, false
		}
		wait = max(wait, r.RetryAfter)
	}
	return wait, true
}

// Binding returns the index in Results of the most restrictive policy, the
// one the legacy X-RateLimit-* headers describe (-1 when Results is
// empty). For a refused decision it is the refusing policy that never
// allows, else the one with the longest RetryAfter; for an allowed one,
// the policy with the fewest Remaining, the longest ResetAfter breaking a
// tie. Earlier policies win remaining ties.
func (d Decision) Binding() int {
	best := -1
	for i, r := range d.Results {
		if best < 0 {
			best = i
			continue
		}
		b := d.Results[best]
		if !d.Allowed {
			switch {
			case !r.Limited:
			case !b.Limited:
				best = i
			case b.RetryAfter < 0:
			case r.RetryAfter < 0 || r.RetryAfter > b.RetryAfter:
				best = i
			}
			continue
		}
		if r.Remaining < b.Remaining || r.Remaining == b.Remaining && r.ResetAfter > b.ResetAfter {
			best = i
		}
	}
	return best
}

// Violated returns the names of the policies that refused the request, in
// order (none when it was allowed).
func (d Decision) Violated() []string {
	var names []string
	for _, r := range d.Results {
		if r.Limited {
			names = append(names, r.Policy)
		}
	}
	return names
}
