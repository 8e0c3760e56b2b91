package httplimit

import "errors"

// Errors returned by this package. Test for them with errors.Is: they are
// wrapped with the detail (which policy, which value).
var (
	// ErrInvalidPolicy is returned by NewLimiter and Middleware when a
	// policy, or the set of policies, cannot be sent to the server: an
	// unknown algorithm, a value out of its command's range, a bad or
	// repeated name, or several policies that are not all GCRA.
	ErrInvalidPolicy = errors.New("httplimit: invalid policy")
	// ErrInvalidOption is returned by NewLimiter and Middleware for an
	// option out of its range (a timeout that is not positive, a key
	// prefix with a brace).
	ErrInvalidOption = errors.New("httplimit: invalid option")
	// ErrInvalidQuantity is returned by AllowN, and handled as a limiter
	// failure by the middleware, for a quantity below 0 or above MaxQuantity.
	ErrInvalidQuantity = errors.New("httplimit: invalid quantity")
	// ErrBadReply is returned when the server's reply does not have the
	// shape of a limiter reply (wrong type, length or range). The request
	// is then treated as a limiter failure, never as a decision.
	ErrBadReply = errors.New("httplimit: unexpected reply from the server")
	// ErrCircuitOpen is returned, without a round trip, while the circuit
	// breaker is open: the server failed recently (WithCircuitBreaker).
	// The request is then failed open or closed like any other failure.
	ErrCircuitOpen = errors.New("httplimit: circuit breaker open: the server failed recently")
	// ErrRequestEnded is passed to WithErrorHandler when a request's
	// context ends while its acquire waits in line (ConcurrencyMiddleware
	// with WithWait): it gave its place up and was not served.
	ErrRequestEnded = errors.New("httplimit: the request ended while it waited for a unit")
)
