package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Problem types of the bodies the middleware writes (RFC 9457).
const (
	// ProblemQuotaExceeded is the type of a 429's body, the problem type
	// draft-ietf-httpapi-ratelimit-headers registers.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// problemBlank is RFC 9457's type for a problem that is only its status.
	problemBlank = "about:blank"
)

// Middleware returns net/http middleware that decides every request
// against policies with one round trip to the server (see NewLimiter for
// how), under the key that key gives it. A request key finds no key for
// passes unlimited.
//
// An allowed request goes on to the next handler with the RateLimit-Policy
// and RateLimit fields set (and X-RateLimit-* with WithLegacyHeaders). A
// refused one gets the same fields, Retry-After (delta seconds, unless a
// policy can never allow it) and 429 Too Many Requests with an
// application/problem+json body naming the refusing policies. When there
// is no decision, the request goes on without fields (WithFailOpen, the
// default) or gets 503 Service Unavailable (WithFailClosed). docs/http.md
// gives each field's derivation from the server's reply.
//
// The error is ErrInvalidPolicy or ErrInvalidOption; the returned
// middleware is safe for concurrent use.
func Middleware(client redis.UniversalClient, policies []Policy, key KeyFunc, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, fmt.Errorf("%w: nil KeyFunc", ErrInvalidOption)
	}
	l, err := newLimiter(client, policies, cfg)
	if err != nil {
		return nil, err
	}
	return l.middleware(key, cfg), nil
}

// Middleware returns net/http middleware deciding every request with l,
// as the package's Middleware does, for a caller that keeps the Limiter
// (to read its Stats, or share it between handlers). The options are the
// middleware's (fail open or closed, fields, hooks, quantity); those that
// configure a Limiter (WithTimeout, WithKeyPrefix, WithCircuitBreaker,
// WithoutCircuitBreaker, WithDenyCache) belong to NewLimiter and are
// ErrInvalidOption here.
func (l *Limiter) Middleware(key KeyFunc, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.limiterOpt != "" {
		return nil, fmt.Errorf("%w: %s configures the Limiter: give it to NewLimiter", ErrInvalidOption, cfg.limiterOpt)
	}
	if key == nil {
		return nil, fmt.Errorf("%w: nil KeyFunc", ErrInvalidOption)
	}
	return l.middleware(key, cfg), nil
}

func (l *Limiter) middleware(key KeyFunc, cfg config) func(http.Handler) http.Handler {
	m := &middleware{limiter: l, key: key, cfg: cfg, policyField: l.PolicyField()}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(next, w, r) })
	}
}

type middleware struct {
	limiter     *Limiter
	key         KeyFunc
	cfg         config
	policyField string // RateLimit-Policy's value: it never changes
}

func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	key, ok := m.key(r)
	if !ok {
		next.ServeHTTP(w, r)
		return
	}
	n := int64(1)
	if m.cfg.quantity != nil {
		n = m.cfg.quantity(r)
	}
	d, err := m.limiter.AllowN(r.Context(), key, n)
	if err != nil {
		m.cfg.undecided(next, w, r, err)
		return
	}
	if m.cfg.onDecision != nil {
		m.cfg.onDecision(r, d)
	}
	m.answer(next, w, r, d)
}

// answer answers r by the decision d: its fields, then next for an
// allowed request, the limited handler or a 429 problem for a refused one.
func (m *middleware) answer(next http.Handler, w http.ResponseWriter, r *http.Request, d Decision) {
	m.setFields(w.Header(), d)
	if d.Allowed {
		next.ServeHTTP(w, r)
		return
	}
	if m.cfg.limited != nil {
		m.cfg.limited.ServeHTTP(w, r)
		return
	}
	writeProblem(w, limitedProblem(d))
}

// limitedProblem is the body of a 429 for the refused decision d.
func limitedProblem(d Decision) problem {
	p := problem{Type: ProblemQuotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests, Violated: d.Violated()}
	if wait, ok := d.RetryAfter(); ok {
		p.Detail = fmt.Sprintf("Too many requests: retry in %d s.", seconds(wait))
	} else {
		p.Detail = "The request is larger than the whole quota of a policy: it can never be allowed."
	}
	return p
}

// setFields sets the rate-limit fields a decision gives (docs/http.md),
// and Retry-After for a refused one that can be retried.
func (m *middleware) setFields(h http.Header, d Decision) {
	if wait, ok := d.RetryAfter(); ok {
		h.Set("Retry-After", strconv.FormatInt(seconds(wait), 10))
	}
	if m.cfg.ietf {
		h.Set("RateLimit-Policy", m.policyField)
		h.Set("RateLimit", RateLimitField(d))
	}
	if m.cfg.legacy {
		if i := d.Binding(); i >= 0 {
			b := d.Results[i]
			h.Set("X-RateLimit-Limit", strconv.FormatInt(b.Limit, 10))
			h.Set("X-RateLimit-Remaining", strconv.FormatInt(b.Remaining, 10))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(b.ResetAfter), 10))
		}
	}
}

// RateLimitField returns the value of the RateLimit field for d: a
// structured-field List with one Item per policy, in order,
// `"<name>";r=<Remaining>;t=<ResetAfter in seconds, rounded up>`. The
// names must be valid policy names, as a Limiter's decisions' are.
func RateLimitField(d Decision) string {
	var b strings.Builder
	for i, r := range d.Results {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(r.Policy)) // names are validated: plain ASCII
		b.WriteString(";r=")
		b.WriteString(strconv.FormatInt(min(r.Remaining, maxSFInteger), 10))
		b.WriteString(";t=")
		b.WriteString(strconv.FormatInt(seconds(r.ResetAfter), 10))
	}
	return b.String()
}

// PolicyField returns the value of the RateLimit-Policy field for the
// limiter's policies: one Item per policy, `"<name>";q=<quota>;w=<window
// seconds>` (see Policy and docs/http.md for q and w).
func (l *Limiter) PolicyField() string {
	items := make([]string, len(l.policies))
	for i := range l.policies {
		items[i] = l.policies[i].item
	}
	return strings.Join(items, ", ")
}

// seconds is d in whole seconds rounded up, as delay-seconds (0 or more),
// clamped to the largest structured-field Integer.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, maxSFInteger)
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	body, err := json.Marshal(p)
	if err != nil { // strings and ints only: cannot fail
		body = []byte(`{"type":"about:blank"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
