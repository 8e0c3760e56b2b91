package engine

import (
	"errors"
	"fmt"
	"math"
)

// ErrArity is returned by ParseRequest and ParseThrottleAll when the number
// of arguments does not fit the command. The wire layer answers it with
// Redis's "wrong number of arguments for '<command>' command".
var ErrArity = errors.New("wrong number of arguments")

// DefaultMaxLogLimit is the largest sliding-log limit accepted by default:
// a sliding log keeps one entry per admitted request, O(limit) memory per key.
const DefaultMaxLogLimit = 100000

// ParseOptions holds the server policy applied when parsing requests.
type ParseOptions struct {
	// MaxLogLimit is the largest limit SL.ADD accepts (ErrLogLimit above
	// it). 0 means DefaultMaxLogLimit.
	MaxLogLimit int64
}

// DefaultParseOptions returns the options of a server started without
// flags: MaxLogLimit = DefaultMaxLogLimit.
func DefaultParseOptions() ParseOptions {
	return ParseOptions{MaxLogLimit: DefaultMaxLogLimit}
}

// ParseInt parses a decimal integer as strictly as Redis's string2ll: an
// optional '-', then digits with no leading zero (except "0" itself), no
// spaces, no '+', at most 20 bytes, within int64. Anything else is
// ErrNotInteger. It does not allocate.
func ParseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, ErrNotInteger
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, nil
	}
	neg := false
	i := 0
	if b[0] == '-' {
		neg = true
		i = 1
		if len(b) == 1 {
			return 0, ErrNotInteger
		}
	}
	if b[i] < '1' || b[i] > '9' {
		return 0, ErrNotInteger
	}
	var v uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, ErrNotInteger
		}
		if v > math.MaxUint64/10 {
			return 0, ErrNotInteger
		}
		v *= 10
		if v > math.MaxUint64-uint64(c-'0') {
			return 0, ErrNotInteger
		}
		v += uint64(c - '0')
	}
	if neg {
		if v > 1<<63 {
			return 0, ErrNotInteger
		}
		return int64(-v), nil // -(1<<63) wraps to math.MinInt64, as intended
	}
	if v > math.MaxInt64 {
		return 0, ErrNotInteger
	}
	return int64(v), nil
}

// ParseDuration parses a duration argument and returns nanoseconds: an
// integer as ParseInt accepts it, optionally followed by a unit in any
// letter case: ms, s, m, h or d. No unit means seconds ("60" is a minute).
// A malformed argument or unknown unit is ErrInvalidDuration; a number that
// overflows int64 nanoseconds is ErrNotInteger (out of range). Negative
// values are returned as such; range checks belong to the caller.
func ParseDuration(b []byte) (int64, error) {
	i := len(b)
	for i > 0 && isLetter(b[i-1]) {
		i--
	}
	num, unitText := b[:i], b[i:]
	var unit int64
	switch {
	case len(unitText) == 0:
		unit = 1e9
	case len(unitText) == 1:
		switch unitText[0] | 0x20 {
		case 's':
			unit = 1e9
		case 'm':
			unit = 60e9
		case 'h':
			unit = 3600e9
		case 'd':
			unit = 86400e9
		}
	case len(unitText) == 2 && unitText[0]|0x20 == 'm' && unitText[1]|0x20 == 's':
		unit = 1e6
	}
	if unit == 0 {
		return 0, ErrInvalidDuration
	}
	n, err := ParseInt(num)
	if err != nil {
		if wellFormedInt(num) {
			return 0, ErrNotInteger // digits, but beyond int64
		}
		return 0, ErrInvalidDuration
	}
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		return 0, ErrNotInteger
	}
	return n * unit, nil
}

func isLetter(c byte) bool { c |= 0x20; return 'a' <= c && c <= 'z' }

// wellFormedInt reports whether b has ParseInt's syntax, ignoring range.
func wellFormedInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return len(b) == 1 && b[0] == '0'
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// paramNames names each Request field in the words of each command, for
// error messages: burst, rate, period, quantity.
var paramNames = [numKinds][4]string{
	KindNone:          {"burst", "rate", "period", "quantity"},
	KindGCRA:          {"max_burst", "count_per_period", "period", "quantity"},
	KindTokenBucket:   {"capacity", "refill_tokens", "refill_period", "tokens"},
	KindLeakyBucket:   {"capacity", "leak_count", "leak_period", "count"},
	KindFixedWindow:   {"limit", "rate", "window", "count"},
	KindSlidingWindow: {"limit", "rate", "window", "count"},
	KindSlidingLog:    {"limit", "rate", "window", "count"},
	KindConcurrency:   {"max", "rate", "ttl", "cost"},
}

func paramErr(k Kind, field int, err error) error {
	name := "argument"
	if field == fWait {
		name = "WAIT"
	} else if k < numKinds {
		name = paramNames[k][field]
	}
	return fmt.Errorf("%s: %w", name, err)
}

const (
	fBurst = iota
	fRate
	fPeriod
	fQuantity
	fWait // the trailing WAIT duration
)

// ParseRequest parses the arguments after the key of one limiter command:
//
//	KindGCRA          CL.THROTTLE  max_burst count_per_period period [quantity]
//	KindTokenBucket   TB.TAKE      capacity refill_tokens refill_period [tokens] [INTERVAL]
//	KindLeakyBucket   LB.ADD       capacity leak_count leak_period [count]
//	KindFixedWindow   FW.INCR      limit window [count]
//	KindSlidingWindow SW.INCR      limit window [count]
//	KindSlidingLog    SL.ADD       limit window [count]
//
// Every command may end with WAIT duration (any letter case; a duration
// as ParseDuration reads it, 0 up to MaxWait), setting Request.Wait.
//
// Counts are integers (ParseInt); the quantity defaults to 1. CL.THROTTLE's
// period is whole seconds, as in redis-cell; other periods and windows are
// durations (ParseDuration). INTERVAL is matched in any letter case. The
// result is checked with Validate, and a sliding log's limit against
// opt.MaxLogLimit.
//
// Errors: ErrArity (argument count); ErrSyntax (an unknown option);
// ErrNotInteger, with the parameter's name, for a number that is not an
// integer; an *ArgError, naming the argument, its text and its range, for
// a value out of range (wrapping ErrNegative, ErrZero, ErrNotInteger for a
// value beyond its bound, ErrOverflow or ErrLogLimit) or a duration that
// does not parse (wrapping ErrInvalidDuration). ParseRequest does not
// allocate unless it fails.
func ParseRequest(kind Kind, args [][]byte, opt ParseOptions) (Request, error) {
	// Every command reads burst [rate] period [quantity]; only the window
	// limiters have no rate, and only TB.TAKE may end with INTERVAL.
	minArgs, maxArgs := 3, 4
	switch kind {
	case KindGCRA, KindLeakyBucket:
	case KindTokenBucket:
		maxArgs = 5
	case KindFixedWindow, KindSlidingWindow, KindSlidingLog:
		minArgs, maxArgs = 2, 3
	default:
		return Request{}, fmt.Errorf("kind %d: %w", kind, ErrSyntax)
	}
	r := Request{Kind: kind, Quantity: 1}
	var text [5][]byte // each field's argument, for ArgError.Value
	var err error
	if n := len(args); n > minArgs && equalFold(args[n-2], "wait") {
		text[fWait] = args[n-1]
		if r.Wait, err = parseWait(kind, args[n-1]); err != nil {
			return Request{}, err
		}
		args = args[:n-2]
	}
	if len(args) < minArgs || len(args) > maxArgs {
		return Request{}, ErrArity
	}
	text[fBurst] = args[0]
	if r.Burst, err = ParseInt(args[0]); err != nil {
		return Request{}, intErr(kind, fBurst, args[0], err)
	}
	rest := args[1:]
	if minArgs == 3 {
		text[fRate] = rest[0]
		if r.Rate, err = ParseInt(rest[0]); err != nil {
			return Request{}, intErr(kind, fRate, rest[0], err)
		}
		rest = rest[1:]
	}
	text[fPeriod] = rest[0]
	if r.Period, err = parsePeriod(kind, rest[0]); err != nil {
		return Request{}, err
	}
	rest = rest[1:]
	if kind == KindTokenBucket && len(rest) > 0 && equalFold(rest[len(rest)-1], "interval") {
		r.Interval = true
		rest = rest[:len(rest)-1]
	}
	switch len(rest) {
	case 0:
	case 1:
		text[fQuantity] = rest[0]
		if r.Quantity, err = ParseInt(rest[0]); err != nil {
			return Request{}, intErr(kind, fQuantity, rest[0], err)
		}
	default:
		return Request{}, ErrSyntax // two trailing arguments and the last is not INTERVAL
	}
	if err := r.Validate(); err != nil {
		if ae, ok := err.(*ArgError); ok && text[ae.field] != nil {
			ae.Value = string(text[ae.field]) // as the client wrote it
		}
		return Request{}, err
	}
	if kind == KindSlidingLog {
		maxLimit := opt.MaxLogLimit
		if maxLimit <= 0 {
			maxLimit = DefaultMaxLogLimit
		}
		if r.Burst > maxLimit {
			ae := argErr(kind, fBurst, r.Burst, ErrLogLimit).bounded(BoundLogLimit, maxLimit)
			ae.Value = string(args[0])
			return Request{}, ae
		}
	}
	return r, nil
}

// parseWait parses WAIT's duration (0 up to MaxWait).
func parseWait(kind Kind, b []byte) (int64, error) {
	ns, err := ParseDuration(b)
	switch {
	case errors.Is(err, ErrInvalidDuration):
		err = ErrInvalidDuration
	case err == nil && ns < 0:
		err = ErrNegative
	case err != nil || ns > MaxWait:
		err = ErrNotInteger
	default:
		return ns, nil
	}
	ae := argErr(kind, fWait, 0, err)
	ae.Value = string(b)
	return 0, ae
}

// intErr is the error of field's integer argument b that ParseInt
// refused with err: an ArgError naming its range when b is an integer
// beyond int64, else err with the argument's name (not a number).
func intErr(kind Kind, field int, b []byte, err error) error {
	if wellFormedInt(b) {
		ae := argErr(kind, field, 0, ErrNotInteger)
		ae.Value = string(b)
		return ae
	}
	return paramErr(kind, field, err)
}

// parsePeriod parses a period or window argument into nanoseconds:
// CL.THROTTLE's in whole seconds (as redis-cell reads it, so "60s" is not an
// integer there), every other command's as a duration (ParseDuration).
func parsePeriod(kind Kind, b []byte) (int64, error) {
	if kind != KindGCRA {
		ns, err := ParseDuration(b)
		switch {
		case errors.Is(err, ErrInvalidDuration):
			ae := argErr(kind, fPeriod, 0, ErrInvalidDuration)
			ae.Value = string(b)
			return 0, ae
		case err != nil: // digits, but beyond int64 nanoseconds
			ae := argErr(kind, fPeriod, 0, ErrNotInteger)
			ae.Value = string(b)
			return 0, ae
		}
		return ns, nil
	}
	sec, err := ParseInt(b)
	if err != nil {
		return 0, intErr(kind, fPeriod, b, err)
	}
	if sec < 0 || sec > MaxPeriod/1e9 {
		sentinel := ErrNotInteger
		if sec < 0 {
			sentinel = ErrNegative
		}
		ae := argErr(kind, fPeriod, 0, sentinel)
		ae.Value = string(b)
		return 0, ae
	}
	return sec * 1e9, nil
}

// ParseThrottleAll parses CL.THROTTLEALL's arguments (everything after the
// command name): groups of five, key max_burst count_per_period period
// quantity, then optionally WAIT duration (any letter case; as
// ParseRequest's), which sets every request's Wait: the keys wait
// together (shards' OpLimitAll). The quantity is required and must not be
// negative. It returns the keys (sub-slices of args, not copies) and the
// requests, in order. Errors are those of ParseRequest, prefixed by the
// group's position, except a WAIT that does not parse (unprefixed).
func ParseThrottleAll(args [][]byte, opt ParseOptions) ([][]byte, []Request, error) {
	var wait [][]byte // WAIT duration, appended to each group's arguments
	if n := len(args); n%5 == 2 && n > 2 && equalFold(args[n-2], "wait") {
		if _, err := parseWait(KindGCRA, args[n-1]); err != nil {
			return nil, nil, err
		}
		wait, args = args[n-2:], args[:n-2]
	}
	if len(args) == 0 || len(args)%5 != 0 {
		return nil, nil, ErrArity
	}
	n := len(args) / 5
	keys := make([][]byte, 0, n)
	reqs := make([]Request, 0, n)
	var group [6][]byte // a group's arguments and WAIT's two, not aliasing args
	for g := 0; g < n; g++ {
		a := args[5*g : 5*g+5]
		ga := append(append(group[:0], a[1:]...), wait...)
		r, err := ParseRequest(KindGCRA, ga, opt)
		if err == nil && r.Quantity < 0 {
			ae := argErr(KindGCRA, fQuantity, r.Quantity, ErrNegative)
			ae.Value, ae.Min = string(a[4]), 0 // no refunds here
			err = ae
		}
		if err != nil {
			return nil, nil, fmt.Errorf("limit %d: %w", g+1, err)
		}
		keys = append(keys, a[0])
		reqs = append(reqs, r)
	}
	return keys, reqs, nil
}

// Validate checks that r is a well-formed request of its kind, whether it was
// parsed from a command or decoded from a replicated log or a snapshot. Every
// check that does not depend on server configuration is here (the sliding
// log's MaxLogLimit is applied by ParseRequest only, so that replicas apply
// whatever the leader accepted).
//
// Ranges: Burst in 0..MaxCount (1..MaxCount except for GCRA); Rate in
// 1..MaxCount for GCRA and the buckets, 0 for the windows; Period in
// 1..MaxPeriod ns; |Quantity| <= MaxCount and Quantity >= 0 except for GCRA;
// Interval only for the token bucket. A value out of its range is an
// *ArgError (with the range) wrapping ErrNegative for a negative value,
// ErrZero for a zero rate, period or limit, ErrNotInteger for a value
// beyond its bound and ErrOverflow for the span rule below.
//
// Span rule — every derived duration fits in MaxSpan, so algorithms may add
// any of them to a time without overflow checks (ErrOverflow otherwise):
//   - GCRA: T = period/count_per_period (redis-cell's float division,
//     truncated) is at least 1 ns (else ErrZero), and the tolerance
//     T × (max_burst+1) <= MaxSpan;
//   - token bucket and leaky bucket: the time to refill or drain completely,
//     rounded up to whole periods, ⌈capacity/rate⌉ × period <= MaxSpan; this
//     also bounds capacity × period / rate and, since a request above the
//     capacity is refused, quantity × period / rate;
//   - windows: 2 × window + Wait <= 2 × MaxPeriod + MaxWait < MaxSpan
//     always holds;
//   - a waiting request (Wait > 0) of the other kinds: the span above plus
//     Wait <= MaxSpan, so that a reservation dated up to Wait ahead keeps
//     every sum in int64. Wait is in 0..MaxWait.
func (r *Request) Validate() error {
	k := r.Kind
	if !k.Valid() {
		return fmt.Errorf("kind %d: %w", k, ErrSyntax)
	}
	if k == KindConcurrency {
		return r.validateLease()
	}
	if r.Op != 0 || r.Lease != "" {
		return ErrSyntax // lease fields belong to concurrency requests
	}
	switch {
	case r.Burst < 0:
		return argErr(k, fBurst, r.Burst, ErrNegative)
	case r.Burst == 0 && k != KindGCRA:
		return argErr(k, fBurst, r.Burst, ErrZero)
	case r.Burst > MaxCount:
		return argErr(k, fBurst, r.Burst, ErrNotInteger)
	}
	switch k {
	case KindGCRA, KindTokenBucket, KindLeakyBucket:
		if err := inRange(k, fRate, r.Rate, MaxCount); err != nil {
			return err
		}
	default:
		if r.Rate != 0 {
			return paramErr(k, fRate, ErrSyntax)
		}
	}
	if err := inRange(k, fPeriod, r.Period, MaxPeriod); err != nil {
		return err
	}
	switch {
	case r.Quantity < 0 && k != KindGCRA:
		return argErr(k, fQuantity, r.Quantity, ErrNegative)
	case r.Quantity > MaxCount || r.Quantity < -MaxCount:
		return argErr(k, fQuantity, r.Quantity, ErrNotInteger)
	}
	if r.Interval && k != KindTokenBucket {
		return fmt.Errorf("INTERVAL: %w", ErrSyntax)
	}
	switch {
	case r.Wait < 0:
		return argErr(k, fWait, r.Wait, ErrNegative)
	case r.Wait > MaxWait:
		return argErr(k, fWait, r.Wait, ErrNotInteger)
	}
	switch k {
	case KindGCRA:
		t := emissionInterval(r.Period, r.Rate)
		if t == 0 {
			// period / count_per_period below 1 ns: at most one per
			// nanosecond of period (count_per_period <= MaxCount, exact
			// as a float64, so the float division agrees).
			return argErr(k, fRate, r.Rate, ErrZero).bounded(BoundPerNanosecond, r.Period)
		}
		if _, ok := spanProduct(t, r.Burst+1); !ok {
			// T × (max_burst+1) <= MaxSpan.
			return argErr(k, fBurst, r.Burst, ErrOverflow).bounded(BoundSpan, MaxSpan/t-1)
		}
		if tol, _ := spanProduct(t, r.Burst+1); r.Wait > MaxSpan-tol {
			return argErr(k, fWait, r.Wait, ErrOverflow).bounded(BoundSpan, MaxSpan-tol)
		}
	case KindTokenBucket, KindLeakyBucket:
		periods := (r.Burst + r.Rate - 1) / r.Rate
		if _, ok := spanProduct(periods, r.Period); !ok {
			// ⌈capacity/rate⌉ <= MaxSpan/period: capacity <= that × rate.
			p := MaxSpan / r.Period
			hi := MaxCount
			if p <= MaxCount/r.Rate {
				hi = p * r.Rate
			}
			return argErr(k, fBurst, r.Burst, ErrOverflow).bounded(BoundSpan, hi)
		}
		if span, _ := spanProduct(periods, r.Period); r.Wait > MaxSpan-span {
			return argErr(k, fWait, r.Wait, ErrOverflow).bounded(BoundSpan, MaxSpan-span)
		}
	}
	return nil
}
