// Package httplimit puts a cellserver rate limiter in front of net/http
// handlers: it decides each request with one round trip and turns the
// decision into an HTTP answer — 429 Too Many Requests with Retry-After and
// an application/problem+json body (RFC 9457), the RateLimit-Policy and
// RateLimit fields of draft-ietf-httpapi-ratelimit-headers, and optionally
// the legacy X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.
//
// The package depends only on go-redis, the standard library and
// internal/ratepolicy (DESIGN.md: it never imports the server's
// packages). It takes a redis.UniversalClient, so the same code works
// against a standalone server, a Raft group (a client listing the group's
// nodes) or a cluster of groups routed by hash slot.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	limit, err := httplimit.Middleware(rdb, []httplimit.Policy{
//		{Name: "burst", Burst: 19, Count: 10, Period: time.Second}, // 20 at once, 10/s
//		{Name: "daily", Burst: 9999, Count: 10000, Period: 24 * time.Hour},
//	}, httplimit.ByIP(netip.MustParsePrefix("10.0.0.0/8")), httplimit.WithFailClosed())
//	if err != nil {
//		return err
//	}
//	http.ListenAndServe(":8080", limit(mux))
//
// # Decisions
//
// One policy is decided with its algorithm's command (CL.THROTTLE for GCRA,
// TB.TAKE, LB.ADD, FW.INCR, SW.INCR or SL.ADD). Several policies must all be
// GCRA: they are decided by one CL.THROTTLEALL, so a request consumes from
// every policy or from none, and a request refused by the per-second
// policy costs nothing from the daily one. Limiter offers the same decision
// without HTTP (Allow, AllowN).
//
// # Keys
//
// The server key of a policy for a client key k is
//
//	<prefix><policy name>:{<k>}
//
// (the prefix from WithKeyPrefix, none by default), e.g. "burst:{ip:192.0.2.1}".
// The braces are a hash tag: a cluster that routes keys by hash slot keeps
// a client's keys of every policy on one group, as CL.THROTTLEALL needs.
// A key that is empty, longer than 128 bytes, holds a brace or starts with
// '=' is replaced by '=' and the unpadded base64url SHA-256 of it, so that
// no client-chosen bytes can split a client's keys or grow them without
// bound. KeyFunc helpers key by client IP (ByIP, with trusted proxies for
// X-Forwarded-For), by header (ByHeader) or by authenticated user (ByUser).
//
// # Fields
//
// For each policy, in order:
//
//	RateLimit-Policy: "<name>";q=<limit>;w=<seconds for an exhausted key to refill>
//	RateLimit:        "<name>";r=<remaining>;t=<reset_after in seconds, rounded up>
//
// Retry-After, on a 429, is the longest retry_after of the refusing
// policies in seconds, rounded up (absent when one of them can never
// allow the request). The legacy headers describe the most restrictive
// policy (Decision.Binding). docs/http.md derives each value.
//
// # Failure
//
// A decision that does not come within the timeout (WithTimeout, 100 ms by
// default), a server error or a reply of the wrong shape leaves the
// request without a decision: it passes without fields (WithFailOpen, the
// default: for availability) or is answered 503 (WithFailClosed: for abuse
// protection). WithErrorHandler sees every such error, WithOnDecision
// every decision. A circuit breaker (WithCircuitBreaker; on by default)
// stops trying a server that failed several decisions in a row, or
// refused a connection: while it is open a decision fails at once with
// ErrCircuitOpen instead of waiting for the timeout, and one probe after
// each cool-down finds out when the server is back. A refused connection
// is seen at once whatever the client's dial retries: NewLimiter adds a
// dial hook to the client that ends the decisions waiting for a
// connection when a dial is refused.
//
// # Deny cache and counters
//
// A refusal holds for its retry_after, so the limiter repeats it: after
// the server refuses a key and quantity, the same key and quantity are
// refused locally, without a round trip, until min(retry_after, 1 s) has
// passed (WithDenyCache sets the 1 s; 0 turns the cache off), with the
// cached reply's fields, their times reduced by the time passed. The
// cache never admits a request. Limiter.Stats counts decisions, local
// ones, round trips and errors; Limiter.Middleware builds the middleware
// over a Limiter the caller keeps, to read them.
package httplimit
