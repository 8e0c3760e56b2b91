package httplimit

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Option configures a Limiter or the middleware.
type Option func(*config)

type config struct {
	failClosed bool
	timeout    time.Duration
	prefix     string
	legacy     bool
	ietf       bool
	onError    func(r *http.Request, err error)
	onDecision func(r *http.Request, d Decision)
	quantity   func(r *http.Request) int64
	limited    http.Handler
	// The circuit breaker; off when noBreaker.
	noBreaker       bool
	breakerFailures int
	breakerCoolDown time.Duration
	now             func() time.Time // the breaker's and deny cache's clock; tests pass a fake one
	// denyMax is the deny cache's longest hold; 0 turns it off.
	denyMax time.Duration
	// wait is WithWait's longest wait; 0: never wait.
	wait time.Duration
	// limiterOpt names an option given that configures the Limiter
	// itself, which Limiter.Middleware cannot take.
	limiterOpt string
}

func newConfig(opts []Option) (config, error) {
	cfg := config{timeout: DefaultTimeout, ietf: true,
		breakerFailures: DefaultBreakerFailures, breakerCoolDown: DefaultBreakerCoolDown, now: time.Now,
		denyMax: DefaultDenyCacheMax}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.timeout <= 0 {
		return config{}, fmt.Errorf("%w: timeout %v must be positive", ErrInvalidOption, cfg.timeout)
	}
	if cfg.breakerFailures < 1 || cfg.breakerCoolDown <= 0 {
		return config{}, fmt.Errorf("%w: circuit breaker: %d failures (want 1 or more) and cool-down %v (want positive)",
			ErrInvalidOption, cfg.breakerFailures, cfg.breakerCoolDown)
	}
	if cfg.wait < 0 || cfg.wait > MaxWait {
		return config{}, fmt.Errorf("%w: wait %v must be 0 (off) up to %v", ErrInvalidOption, cfg.wait, MaxWait)
	}
	if cfg.denyMax < 0 {
		return config{}, fmt.Errorf("%w: deny cache max %v must be 0 (off) or positive", ErrInvalidOption, cfg.denyMax)
	}
	if strings.ContainsAny(cfg.prefix, "{}") {
		return config{}, fmt.Errorf("%w: key prefix %q must not hold a brace", ErrInvalidOption, cfg.prefix)
	}
	return cfg, nil
}

// WithFailOpen lets requests through, without rate-limit fields, when
// there is no decision (the server is down, slow or answers an error).
// This is the default: choose it when availability matters more than the
// limit.
func WithFailOpen() Option { return func(c *config) { c.failClosed = false } }

// WithFailClosed answers 503 Service Unavailable (an
// application/problem+json body) when there is no decision. Choose it when
// the limit protects against abuse (logins, expensive or paid calls).
func WithFailClosed() Option { return func(c *config) { c.failClosed = true } }

// WithTimeout bounds each decision, one round trip to the server, to d
// (DefaultTimeout, 100 ms, when not given; it must be positive). The
// request's own context bounds it too. For a *redis.Client or
// *redis.ClusterClient with ContextTimeoutEnabled, the client stops the
// call itself; otherwise the decision stops waiting at d and the
// abandoned call ends at the client's read timeout.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout, c.limiterOpt = d, "WithTimeout" }
}

// WithCircuitBreaker sets the circuit breaker that keeps a dead server
// from costing every request the whole timeout (on by default, with
// DefaultBreakerFailures and DefaultBreakerCoolDown). After failures
// consecutive decisions that got no answer (unreachable server, timeout),
// or at once when the server's host refuses the connection, the breaker
// opens: for coolDown every decision fails at once with ErrCircuitOpen,
// without a round trip, and the request is failed open or closed as
// usual. Then one decision goes through as a probe while the others still
// fail at once; if the server answers it, the breaker closes, otherwise
// it stays open for another coolDown. An error reply (WRONGTYPE, OOM,
// CLUSTERDOWN) comes from a server that is up and does not count.
// failures must be at least 1 and coolDown positive.
func WithCircuitBreaker(failures int, coolDown time.Duration) Option {
	return func(c *config) {
		c.breakerFailures, c.breakerCoolDown, c.limiterOpt = failures, coolDown, "WithCircuitBreaker"
	}
}

// WithoutCircuitBreaker turns the circuit breaker off: every decision
// tries the server, and waits up to the timeout when it is down.
func WithoutCircuitBreaker() Option {
	return func(c *config) { c.noBreaker, c.limiterOpt = true, "WithoutCircuitBreaker" }
}

// WithDenyCache sets the longest time the deny cache repeats a refusal
// without asking the server (DefaultDenyCacheMax, 1 s, when not given; 0
// turns the cache off). After the server refuses a key and quantity with
// a retry_after of r, the same key and quantity are refused locally until
// min(r, max) has passed (max for a request that can never be allowed),
// with the fields of the server's reply, their times reduced by the time
// passed. So an abusive client hammering one key costs the server one
// round trip per max instead of one per request, and an operator who
// deletes or raises the key is obeyed within max. The cache only refuses
// what the server refused: it never admits a request. It holds at most
// DenyCacheEntries refusals, the oldest dropped first. max must not be
// negative.
func WithDenyCache(max time.Duration) Option {
	return func(c *config) { c.denyMax, c.limiterOpt = max, "WithDenyCache" }
}

// MaxWait bounds WithWait: the server caps any wait by its max-wait
// setting (default 10 s) anyway.
const MaxWait = time.Minute

// WithWait makes a request that would be refused wait instead, when the
// server would admit it within max: the server keeps its place in line
// (first come, first served per key) and answers it allowed at its turn,
// so the handler runs late rather than the client getting a 429 and
// retrying. A request that could not be admitted within max is refused at
// once, as without the option. The decision's time bound becomes the
// timeout plus max; the client's own read timeout (go-redis's ReadTimeout,
// 3 s by default) must exceed that too, or ContextTimeoutEnabled be set.
// Any policies take it: one is decided by its own command, several (GCRA)
// by one CL.THROTTLEALL … WAIT, which admits them all at one turn or none;
// max runs from 1 ms to MaxWait, in whole milliseconds (rounded up), 0 turns it off.
// ConcurrencyMiddleware takes it too: a request waits for a release (a
// unit freed) instead of a 429, at most max and never past its context's
// deadline less the timeout.
func WithWait(max time.Duration) Option {
	return func(c *config) { c.wait, c.limiterOpt = max, "WithWait" }
}

// WithKeyPrefix puts prefix before every key the limiter writes on the
// server (default none), to keep several applications apart on one
// server. It must hold no brace.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) { c.prefix, c.limiterOpt = prefix, "WithKeyPrefix" }
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (delta seconds) for the most restrictive policy
// (Decision.Binding).
func WithLegacyHeaders() Option { return func(c *config) { c.legacy = true } }

// WithoutIETFHeaders leaves out the RateLimit-Policy and RateLimit fields
// (sent by default).
func WithoutIETFHeaders() Option { return func(c *config) { c.ietf = false } }

// WithErrorHandler calls f for every request that got no decision, before
// it is failed open or closed: to log, or count failures. f runs on the
// request's goroutine and must not write the response.
func WithErrorHandler(f func(r *http.Request, err error)) Option {
	return func(c *config) { c.onError = f }
}

// WithOnDecision calls f with every decision, allowed or refused, before
// the response is written: for metrics. f runs on the request's goroutine
// and must not write the response.
func WithOnDecision(f func(r *http.Request, d Decision)) Option {
	return func(c *config) { c.onDecision = f }
}

// WithQuantity sets what a request costs (default 1): 0 peeks, a
// negative or too large value (above MaxQuantity) is a failure
// (ErrInvalidQuantity) handled as fail open or closed says.
func WithQuantity(f func(r *http.Request) int64) Option {
	return func(c *config) { c.quantity = f }
}

// WithLimitedHandler replaces the default answer to a refused request
// (429 with an application/problem+json body). h is called with the
// rate-limit fields and Retry-After already set, and writes the response.
func WithLimitedHandler(h http.Handler) Option { return func(c *config) { c.limited = h } }

// undecided answers a request that got no decision (err): on_error sees
// it, then it is failed closed (503) or passed on to next (fail open).
func (c *config) undecided(next http.Handler, w http.ResponseWriter, r *http.Request, err error) {
	if c.onError != nil {
		c.onError(r, err)
	}
	if c.failClosed {
		writeProblem(w, problem{Type: problemBlank, Title: http.StatusText(http.StatusServiceUnavailable),
			Status: http.StatusServiceUnavailable, Detail: "The rate limiter is unavailable."})
		return
	}
	next.ServeHTTP(w, r)
}
