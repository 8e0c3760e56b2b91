package httplimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultLeaseTTL is the lease's ttl of a ConcurrencyPolicy without TTL.
const DefaultLeaseTTL = time.Minute

// ConcurrencyPolicy caps the requests in flight per key (CC.ACQUIRE): at
// most Max units are held at once, each request holding its quantity (1,
// or WithQuantity's) from before the handler runs until it returns.
type ConcurrencyPolicy struct {
	// Name identifies the policy in the RateLimit and RateLimit-Policy
	// fields and in the server's key, as Policy.Name.
	Name string
	// Max is the units held at most at once: 1 up to MaxCount.
	Max int64
	// TTL is how long a lease outlives a process that died holding it
	// (the server frees it then). Zero: DefaultLeaseTTL, and a handler
	// that runs longer loses its lease. Set: the lease is renewed every
	// TTL/2 while the handler runs, so a handler may run as long as it
	// needs. Whole milliseconds, 1 ms up to MaxPeriod.
	TTL time.Duration
}

// ConcurrencyMiddleware returns net/http middleware that caps the requests
// in flight per key: CC.ACQUIRE before the handler (one round trip,
// bounded by WithTimeout), CC.RELEASE when the handler returns — also
// when it panics — and CC.RENEW every TTL/2 while it runs (a TTL given).
// A request key finds no key for passes unlimited.
//
// An admitted request gets RateLimit-Policy `"<name>";q=<Max>;qu="concurrent-requests"`
// and RateLimit `"<name>";r=<remaining>` (and X-RateLimit-Limit and
// -Remaining with WithLegacyHeaders); a refused one the same fields with
// `;t=<seconds until the earliest lease expires>`, Retry-After (the same
// seconds), and 429 with the quota-exceeded problem body (or
// WithLimitedHandler's answer). Retry-After is only a bound: a release
// frees a unit sooner. With no decision (the server down, slow or
// answering an error), the request goes on unlimited (WithFailOpen, the
// default) or gets 503 (WithFailClosed); a failed release or renewal is
// passed to WithErrorHandler, and the lease then frees itself at its ttl.
//
// With WithWait(max), a request that finds every unit held waits for one
// instead of a 429: the acquire carries WAIT (max, cut to leave the
// timeout before the request context's deadline), the server keeps its
// place in the key's line (first come, first served) and answers it when
// a release or an expiry frees its units, and the handler runs then; a
// wait that ends first gets the 429 as without the option. A request whose
// context ends while it waits (its client gone) gives its place up
// (CC.RELEASE of the id it waited under, sent before the middleware
// returns; a grant that crosses it is released when it arrives), is not
// passed to the handler, and gets 503 with ErrRequestEnded passed to
// WithErrorHandler. The decision's time bound becomes the timeout plus
// the wait, and the client's own read timeout must exceed that too
// (go-redis's ReadTimeout, 3 s by default), or ContextTimeoutEnabled be
// set.
//
// Of the options, WithFailOpen, WithFailClosed, WithTimeout,
// WithKeyPrefix, WithLegacyHeaders, WithoutIETFHeaders, WithErrorHandler,
// WithQuantity (the units a request holds; 1 up to MaxCount), WithWait
// and WithLimitedHandler apply; the others are ignored. The error is
// ErrInvalidPolicy or ErrInvalidOption.
func ConcurrencyMiddleware(client redis.UniversalClient, p ConcurrencyPolicy, key KeyFunc, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	}
	if key == nil {
		return nil, fmt.Errorf("%w: nil KeyFunc", ErrInvalidOption)
	}
	if err := checkName(p.Name); err != nil {
		return nil, err
	}
	if p.Max < 1 || p.Max > MaxCount {
		return nil, fmt.Errorf("%w: %q: max %d out of range 1 to 2^40", ErrInvalidPolicy, p.Name, p.Max)
	}
	if p.TTL < 0 || p.TTL > MaxPeriod || p.TTL%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: %q: ttl %v must be 0 or whole milliseconds from 1ms up to 3660 days", ErrInvalidPolicy, p.Name, p.TTL)
	}
	m := &inFlight{client: client, p: p, key: key, cfg: cfg, ttl: p.TTL}
	if m.ttl == 0 {
		m.ttl = DefaultLeaseTTL
	}
	m.wait = (cfg.wait + time.Millisecond - 1) / time.Millisecond * time.Millisecond
	m.policyField = fmt.Sprintf("%q;q=%d;qu=\"concurrent-requests\"", p.Name, p.Max)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(next, w, r) })
	}, nil
}

type inFlight struct {
	client      redis.UniversalClient
	p           ConcurrencyPolicy
	key         KeyFunc
	cfg         config
	ttl         time.Duration // the lease's ttl sent
	wait        time.Duration // WithWait's longest wait, whole ms; 0: never wait
	policyField string
}

// acquired is CC.ACQUIRE's reply.
type acquired struct {
	limited    bool
	remaining  int64
	retryAfter time.Duration // negative: never (or allowed)
	lease      string
}

func (m *inFlight) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	key, ok := m.key(r)
	if !ok {
		next.ServeHTTP(w, r)
		return
	}
	skey := serverKey(m.cfg.prefix, m.p.Name, key)
	a, err := m.acquire(r.Context(), skey, r)
	if errors.Is(err, ErrRequestEnded) {
		// The client is gone (or out of time): no handler, no unlimited
		// pass; the place in line is given up already.
		if m.cfg.onError != nil {
			m.cfg.onError(r, err)
		}
		writeProblem(w, problem{Type: problemBlank, Title: http.StatusText(http.StatusServiceUnavailable),
			Status: http.StatusServiceUnavailable, Detail: "The request ended while it waited for a unit of its in-flight limit."})
		return
	}
	if err != nil {
		m.cfg.undecided(next, w, r, err)
		return
	}
	m.setFields(w.Header(), a)
	if a.limited {
		if m.cfg.limited != nil {
			m.cfg.limited.ServeHTTP(w, r)
			return
		}
		p := problem{Type: ProblemQuotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests, Violated: []string{m.p.Name}}
		if a.retryAfter >= 0 {
			p.Detail = fmt.Sprintf("Too many requests in flight: retry in at most %d s.", seconds(a.retryAfter))
		} else {
			p.Detail = "The request holds more than the whole quota of the policy: it can never be allowed."
		}
		writeProblem(w, p)
		return
	}
	stop := m.renewing(r, skey, a.lease)
	defer func() {
		// Runs when the handler returns and when it panics (the panic
		// goes on after): the units are freed either way.
		stop()
		if err := m.release(r.Context(), skey, a.lease); err != nil && m.cfg.onError != nil {
			m.cfg.onError(r, err)
		}
	}()
	next.ServeHTTP(w, r)
}

// release sends CC.RELEASE of lease, bounded by the timeout but not by
// ctx's end (a request's context may have ended; its units must be freed).
func (m *inFlight) release(ctx context.Context, skey, lease string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.timeout)
	defer cancel()
	if err := m.client.Do(ctx, "CC.RELEASE", skey, lease).Err(); err != nil {
		return fmt.Errorf("httplimit: CC.RELEASE: %w", err)
	}
	return nil
}

// waitFor is how long the acquire of a request with context ctx may wait:
// WithWait's max, cut so that the reply comes the timeout before ctx's
// deadline; whole milliseconds, 0 for none.
func (m *inFlight) waitFor(ctx context.Context) time.Duration {
	w := m.wait
	if d, ok := ctx.Deadline(); ok {
		w = min(w, time.Until(d)-m.cfg.timeout)
	}
	return max(w/time.Millisecond*time.Millisecond, 0)
}

// waitID makes the lease id an acquire waits under: the middleware's own,
// so that it can give its place up (CC.RELEASE of it) whatever became of
// the acquire.
func waitID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "h" + hex.EncodeToString(b[:])
}

// ccReply is a CC.ACQUIRE's answer.
type ccReply struct {
	v   []any
	err error
}

// acquireWaiting sends CC.ACQUIRE args … ID <its own> WAIT wait and waits
// for the answer, which comes when the units are granted or the wait ends
// (at most the timeout plus wait later). When parent ends first, the
// place is given up: CC.RELEASE of the id (it leaves the line, or frees the
// units granted meanwhile), and the answer still to come is read in the
// background, its units released should the server have granted them after
// that release. The error then wraps ErrRequestEnded.
func (m *inFlight) acquireWaiting(parent context.Context, skey string, wait time.Duration, args []any) (acquired, error) {
	id := waitID()
	args = append(args, "ID", id, "WAIT", strconv.FormatInt(wait.Milliseconds(), 10)+"ms")
	// The call is bounded by its own deadline, not by parent: a client
	// that stops reading at parent's end would leave the answer (maybe a
	// grant) unread on a connection still in use.
	call, cancel := context.WithTimeout(context.WithoutCancel(parent), m.cfg.timeout+wait)
	ch := make(chan ccReply, 1)
	go func() {
		v, err := m.client.Do(call, args...).Slice()
		ch <- ccReply{v, err}
	}()
	var cause error
	select {
	case rp := <-ch:
		cancel()
		return parseAcquire(rp.v, rp.err)
	case <-parent.Done():
		cause = fmt.Errorf("%w: %w", ErrRequestEnded, context.Cause(parent))
	case <-call.Done():
		// A client that does not stop at the deadline by itself: go on,
		// as after a timeout, and tidy up as after an ended request.
		cause = fmt.Errorf("httplimit: CC.ACQUIRE: %w", context.DeadlineExceeded)
	}
	relErr := m.release(parent, skey, id)
	go func() {
		rp := <-ch
		cancel()
		if a, err := parseAcquire(rp.v, rp.err); err == nil && !a.limited {
			// Granted after the release above (the server asked again
			// for the waiter): freed now. Should this fail, the lease
			// frees itself at its ttl.
			_ = m.release(parent, skey, id)
		}
	}()
	if relErr != nil {
		return acquired{}, fmt.Errorf("%w (giving its place up: %w)", cause, relErr)
	}
	return acquired{}, cause
}

// acquire sends CC.ACQUIRE and reads its reply.
func (m *inFlight) acquire(parent context.Context, skey string, r *http.Request) (acquired, error) {
	n := int64(1)
	if m.cfg.quantity != nil {
		n = m.cfg.quantity(r)
	}
	if n < 1 || n > MaxQuantity {
		return acquired{}, fmt.Errorf("%w: %d is out of range 1 to 2^40 (a lease holds at least one unit)", ErrInvalidQuantity, n)
	}
	ttl := strconv.FormatInt(m.ttl.Milliseconds(), 10) + "ms"
	args := []any{"CC.ACQUIRE", skey, m.p.Max, ttl, "COST", n}
	if wait := m.waitFor(parent); wait > 0 {
		return m.acquireWaiting(parent, skey, wait, args)
	}
	ctx, cancel := context.WithTimeout(parent, m.cfg.timeout)
	defer cancel()
	v, err := m.client.Do(ctx, args...).Slice()
	return parseAcquire(v, err)
}

// parseAcquire reads CC.ACQUIRE's reply v (or its error).
func parseAcquire(v []any, err error) (acquired, error) {
	if err != nil {
		return acquired{}, fmt.Errorf("httplimit: CC.ACQUIRE: %w", err)
	}
	bad := func() (acquired, error) { return acquired{}, fmt.Errorf("%w: CC.ACQUIRE answered %v", ErrBadReply, v) }
	if len(v) != 6 {
		return bad()
	}
	var f [5]int64
	for i := range f {
		x, ok := v[i].(int64)
		if !ok {
			return bad()
		}
		f[i] = x
	}
	a := acquired{limited: f[0] != 0, remaining: f[2], retryAfter: -1}
	if f[3] >= 0 {
		a.retryAfter = time.Duration(f[3]) * time.Millisecond
	}
	switch id := v[5].(type) {
	case string:
		a.lease = id
	case nil:
		if !a.limited {
			return bad()
		}
	default:
		return bad()
	}
	return a, nil
}

// renewing renews the lease every ttl/2 while the handler runs, when the
// policy has a TTL; the returned func stops it and waits for it to end.
func (m *inFlight) renewing(r *http.Request, skey, lease string) func() {
	if m.p.TTL == 0 {
		return func() {}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(m.p.TTL / 2)
		defer t.Stop()
		ttl := strconv.FormatInt(m.p.TTL.Milliseconds(), 10) + "ms"
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.timeout)
			held, err := m.client.Do(ctx, "CC.RENEW", skey, lease, ttl).Int64()
			cancel()
			switch {
			case err != nil:
				err = fmt.Errorf("httplimit: CC.RENEW: %w", err)
			case held == 0:
				err = fmt.Errorf("httplimit: CC.RENEW: lease %q of %s no longer held (expired before its renewal)", lease, skey)
			}
			if err != nil && m.cfg.onError != nil {
				m.cfg.onError(r, err)
			}
		}
	}()
	return func() { close(done); <-ended }
}

// setFields sets the fields of a decision (see ConcurrencyMiddleware).
func (m *inFlight) setFields(h http.Header, a acquired) {
	if a.limited && a.retryAfter >= 0 {
		h.Set("Retry-After", strconv.FormatInt(seconds(a.retryAfter), 10))
	}
	if m.cfg.ietf {
		h.Set("RateLimit-Policy", m.policyField)
		v := strconv.Quote(m.p.Name) + ";r=" + strconv.FormatInt(min(a.remaining, maxSFInteger), 10)
		if a.limited && a.retryAfter >= 0 {
			v += ";t=" + strconv.FormatInt(seconds(a.retryAfter), 10)
		}
		h.Set("RateLimit", v)
	}
	if m.cfg.legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(m.p.Max, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(a.remaining, 10))
	}
}
