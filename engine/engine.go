package engine

import "errors"

// Kind names the limiter algorithm a key holds. A key holds exactly one kind.
type Kind uint8

// The limiter kinds. KindNone marks a missing (or expired) key.
const (
	KindNone          Kind = iota
	KindGCRA               // CL.THROTTLE, CL.THROTTLEALL
	KindTokenBucket        // TB.TAKE
	KindLeakyBucket        // LB.ADD
	KindFixedWindow        // FW.INCR
	KindSlidingWindow      // SW.INCR
	KindSlidingLog         // SL.ADD
	KindConcurrency        // CC.ACQUIRE, CC.RELEASE, CC.RENEW
	numKinds
)

var kindNames = [numKinds]string{"none", "gcra", "token-bucket", "leaky-bucket", "fixed-window", "sliding-window", "sliding-log", "concurrency"}

// String returns the name TYPE replies with: "gcra", "token-bucket",
// "leaky-bucket", "fixed-window", "sliding-window", "sliding-log",
// "concurrency", or "none".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// ParseKind returns the kind named s (as String spells it, any letter case).
func ParseKind(s string) (Kind, bool) {
	for k := Kind(0); k < numKinds; k++ {
		if equalFold(s, kindNames[k]) {
			return k, true
		}
	}
	return KindNone, false
}

// Valid reports whether k is one of the limiter kinds (not KindNone).
func (k Kind) Valid() bool { return k > KindNone && k < numKinds }

// equalFold reports whether a spells lower, a lower-case ASCII word, in any
// letter case. It folds ASCII letters only, on purpose: Unicode folding
// (strings.EqualFold) would also accept, say, the Kelvin sign for "k".
func equalFold[T string | []byte](a T, lower string) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// LogEntry is one admitted request of a sliding-window log: the instant it
// was admitted (Unix ns) and how many units it counted.
type LogEntry struct {
	At    int64
	Count int64
}

// State is the stored state of one limiter key. The zero State (Kind ==
// KindNone) is a missing key. Apart from Log, a State holds no pointers, so a
// store of millions of them costs the garbage collector almost nothing.
//
// The meaning of A, B and C depends on Kind and is documented beside each
// algorithm. For KindGCRA, A is the theoretical arrival time (TAT) in Unix
// nanoseconds, and ExpireAt == A.
type State struct {
	Kind Kind
	// ExpireAt is the instant (Unix ns) at which the state is back to fresh;
	// the key is deleted then. A State returned with ExpireAt <= now is fresh
	// and must not be stored.
	ExpireAt int64
	A, B, C  int64
	// Log holds a sliding log's entries, oldest first; nil for other kinds.
	Log []LogEntry
	// Leases holds a concurrency key's leases (concurrency.go); nil for
	// other kinds. The engine never writes into a Leases array it was
	// given: a change returns a new one, so copies may share it.
	Leases []Lease
}

// Request is one parsed limiter request: the kind and its parameters. It is
// built by ParseRequest and is valid (in range) when built that way.
type Request struct {
	Kind Kind
	// Burst is max_burst for GCRA, capacity for the token and leaky buckets,
	// and limit for the window limiters. Range 0..MaxCount (>= 1 except GCRA).
	Burst int64
	// Rate is count_per_period for GCRA, refill_tokens for the token bucket
	// and leak_count for the leaky bucket; unused (0) by the window limiters.
	// Range 1..MaxCount.
	Rate int64
	// Period is GCRA's period, the refill or leak period, or the window,
	// in nanoseconds. Range 1ns..MaxPeriod.
	Period int64
	// Quantity is quantity/tokens/count: the units this request takes.
	// 0 peeks. Negative only for GCRA (a refund). |Quantity| <= MaxCount.
	Quantity int64
	// Interval selects the token bucket's refill-all-at-once variant.
	Interval bool
	// Shadow marks a request whose refusal is not enforced: Apply ignores
	// it, and the keyspace (shards) answers such a request allowed while
	// counting it (limit-shadow). It travels with the request so that
	// every replica decides alike.
	Shadow bool
	// Exact makes a fixed-window request admit only when it brings the
	// window's count to exactly the limit (count + quantity == limit): a
	// request that would fit with room to spare is refused as well, its
	// Remaining (limit - count, above quantity) telling by how much. The
	// region layer records batches applied in sequence with it (a gap is
	// refused, not recorded). Other kinds ignore it. It travels with the
	// request so that every replica decides alike.
	Exact bool
	// Wait is how long (ns) the client accepts to wait for an admission
	// (the command's trailing WAIT): a request that would be refused now
	// but admitted within Wait reserves its place at once (see Apply and
	// wait.go). 0 waits for nothing. Range 0..MaxWait; the kinds
	// WaitSupported reports reserve with it, and a concurrency acquire, which
	// joins its key's line instead (concurrency.go). It travels with the
	// request so that every replica reserves alike.
	Wait int64

	// Op is what a concurrency request (KindConcurrency) does: LeaseAcquire,
	// LeaseRelease or LeaseRenew; 0 for every other kind. For a concurrency
	// request Burst is max, Period the lease's ttl (0 for a release) and
	// Quantity the units an acquire holds (0 for a release or renew).
	Op LeaseOp
	// Lease is the lease a concurrency request names (CC.ACQUIRE's ID, the
	// lease of CC.RELEASE and CC.RENEW), at most MaxLeaseID bytes; empty
	// for an acquire without ID (the engine then makes one) and for every
	// other kind.
	Lease string
}

// Result is the reply of one limiter request. All durations are nanoseconds
// at full precision; the wire layer rounds them (CL.THROTTLE to whole seconds
// by redis-cell's rule, the others up to whole milliseconds).
type Result struct {
	// Limited is true when the request was refused (and consumed nothing).
	// For CC.RELEASE and CC.RENEW it is true when the lease was not held
	// (the reply 0).
	Limited bool
	// Limit is the key's total limit (X-RateLimit-Limit).
	Limit int64
	// Remaining is what is left after this request, never below 0.
	Remaining int64
	// RetryAfter is the time until this same request would be allowed;
	// -1 when allowed, and -1 when it can never be allowed.
	RetryAfter int64
	// ResetAfter is the time until the key is back to fresh; 0 when it holds
	// nothing.
	ResetAfter int64
	// Wait is the leaky bucket's time until this request reaches the head
	// of the queue; -1 when limited. Unused (0) by other kinds.
	Wait int64
	// Delay is the time (ns) from now until a waiting request
	// (Request.Wait) is admitted: its reply is due then, and every other
	// field is as of that instant. 0 for a request answered at once.
	Delay int64
	// Shadowed is true for a shadow request (Request.Shadow) that was
	// refused and is answered allowed (Limited false): like any refusal it
	// consumed nothing. Apply never sets it; the keyspace does.
	Shadowed bool
	// Lease is the lease a CC.ACQUIRE holds (the ID given, or the one the
	// engine made); when limited, the id it would have held (the wire
	// answers nil for a refusal; a shadowed refusal answers it, not held).
	// Empty for other kinds.
	Lease string
	// ExpiredLeases counts the leases this request found expired without
	// a release and dropped (a crashed holder's); 0 for other kinds.
	ExpiredLeases int64
	// Queued is true for a CC.ACQUIRE with WAIT that was limited and now
	// waits in the key's line (Limited is true too; Lease names it): its
	// allowed reply is due when a later op on the key grants it (see
	// Granted).
	Queued bool
}

// Limits on request parameters. Any combination inside them either works
// exactly or is refused with ErrOverflow; nothing overflows silently.
const (
	// MaxCount bounds every count parameter (bursts, limits, rates,
	// quantities): 2^40.
	MaxCount = int64(1) << 40
	// MaxPeriod bounds every period and window: 3660 days, a little over
	// ten years.
	MaxPeriod = int64(3660) * 24 * 3600 * 1e9
	// MaxSpan bounds any derived duration the state must represent (a GCRA
	// tolerance, a bucket's time to refill or drain completely): 2^62 ns,
	// about 146 years, so that now + span never overflows int64.
	MaxSpan = int64(1) << 62
	// MaxWait bounds Request.Wait: one day. Servers cap it much lower
	// (the max-wait setting).
	MaxWait = int64(24) * 3600 * 1e9
)

// Sentinel errors. The wire layer maps each to Redis's wording.
var (
	// ErrNotInteger is returned when a number argument is not a decimal
	// integer or is outside its range.
	ErrNotInteger = errors.New("value is not an integer or out of range")
	// ErrSyntax is returned for an unknown option or a malformed argument list.
	ErrSyntax = errors.New("syntax error")
	// ErrNegative is returned for a negative burst, limit, rate or cost.
	ErrNegative = errors.New("negative value")
	// ErrZero is returned for a zero rate, period, window, limit or capacity.
	ErrZero = errors.New("zero rate or period")
	// ErrInvalidDuration is returned for a duration that does not parse.
	ErrInvalidDuration = errors.New("invalid duration")
	// ErrOverflow is returned when parameters are in range one by one but a
	// derived quantity (e.g. a tolerance) does not fit in 64-bit nanoseconds.
	ErrOverflow = errors.New("parameters overflow")
	// ErrLogLimit is returned when a sliding log's limit exceeds the
	// server's configured maximum.
	ErrLogLimit = errors.New("limit exceeds the sliding log maximum")
)

// Apply runs req against st at now and returns the next state and the reply.
// st is the key's current state: the zero State for a missing key, otherwise a
// State of req.Kind (the caller answers WRONGTYPE for any other kind before
// calling). The returned State is to be stored when its ExpireAt > now, and
// the key deleted otherwise. A limited request returns st unchanged, but
// for a concurrency acquire that waits (Result.Queued: it joined the line).
//
// Time domain: now and every time stored in st are Unix nanoseconds in
// [0, 2^62), that is [0, 2^63 − MaxSpan). req must pass Validate
// (ParseRequest guarantees it), whose span rule bounds every derived
// duration by MaxSpan (2^62 ns): GCRA's tolerance T × (max_burst+1), with
// T = period/count_per_period >= 1 ns; a bucket's time to refill or drain
// completely, ⌈capacity/rate⌉ × period; two windows, 2 × window. So now plus
// any such span fits in int64 and no intermediate overflows. Outside that
// domain, or for a request that fails Validate, the answer is not specified.
//
// Apply is pure and deterministic: the same arguments always give the same
// results, so replicas applying one log agree bit for bit. It keeps no state
// of its own and may be called concurrently; the caller serialises the calls
// for one key (reading st and storing the result under the key's lock). For
// a sliding log the returned State may share st.Log's backing array and
// write into it: st counts as replaced, and a copy kept elsewhere (a
// snapshot capture) must deep-copy Log.
//
// A request with Wait > 0 that is refused at now but would be allowed at
// now+RetryAfter <= now+Wait is admitted as of that instant instead (a
// reservation, wait.go): the returned State holds it, and the Result is
// the allowed reply at now+Delay. A shadow request never reserves.
func Apply(st State, req *Request, now int64) (State, Result) {
	next, res := apply(st, req, now)
	if res.Limited && req.Wait > 0 && !req.Shadow && res.RetryAfter >= 0 && res.RetryAfter <= req.Wait && WaitSupported(req.Kind) {
		return reserve(st, req, now, res)
	}
	return next, res
}

// apply runs req against st at now, without waiting.
func apply(st State, req *Request, now int64) (State, Result) {
	switch req.Kind {
	case KindGCRA:
		return throttle(st, req, now)
	case KindTokenBucket:
		return takeTokens(st, req, now)
	case KindLeakyBucket:
		return addLeaky(st, req, now)
	case KindFixedWindow:
		return incrFixedWindow(st, req, now)
	case KindSlidingWindow:
		return incrSlidingWindow(st, req, now)
	case KindSlidingLog:
		return addSlidingLog(st, req, now)
	case KindConcurrency:
		return applyLease(st, req, now)
	}
	return st, Result{Limited: true, RetryAfter: -1}
}
