package engine

import "math/bits"

// GCRA: the Generic Cell Rate Algorithm of CL.THROTTLE, answering exactly as
// the redis-cell 0.5 module does.
//
// Parameters: emission interval T = period / count_per_period (nanoseconds;
// redis-cell divides in float64 and truncates, which this package reproduces
// in integers, see emissionInterval), delay tolerance τ = T × (max_burst+1),
// limit = max_burst+1. Request validation guarantees 1 <= T and τ <= MaxSpan.
//
// State: A is the theoretical arrival time (TAT) in Unix nanoseconds and
// ExpireAt == A: at the TAT the key is fresh again. A missing key, or one with
// ExpireAt <= now, has TAT = now.
//
// Step, for quantity q: new_tat = max(now, tat) + T×q; the request is allowed
// when new_tat − τ <= now and then stores new_tat. When limited, retry_after =
// new_tat − τ − now (−1 when T×q > τ: the request is larger than the limit and
// can never succeed) and reset_after = tat − now; when allowed reset_after =
// new_tat − now. remaining = (τ − reset_after) / T, truncated, computed as
// redis-cell does (in whole microseconds).
//
// Bound: with fixed parameters and non-negative quantities, the units admitted
// in any closed interval of length L never exceed limit + L/T: every admission
// in the interval raises the TAT by T per unit from at least the interval's
// start, and the last admission needs TAT <= its instant + τ.
//
// Differences from redis-cell, all for inputs it mishandles:
//   - a negative quantity (a refund) never moves the TAT below now, so it never
//     gives back more than a fresh key holds;
//   - remaining is kept within [0, limit] (redis-cell can answer −1, more than
//     the limit, or garbage when T is below 1 µs; below 1 µs the quotient is
//     taken in nanoseconds);
//   - parameters whose τ exceeds MaxSpan are refused when the request is
//     validated, instead of overflowing.
//
// Times (now, stored TATs) must lie in [0, 2^62), that is [0, 2^63 −
// MaxSpan): adding any span to them then fits in int64, and every
// intermediate is free of overflow.

// emissionInterval returns redis-cell's emission interval for a period in
// nanoseconds and a count: trunc(float64(period) / float64(count)), the same
// value IEEE-754 arithmetic gives, computed without floating point. It is 0
// for a non-positive period or count.
func emissionInterval(period, count int64) int64 {
	if period <= 0 || count <= 0 {
		return 0
	}
	return int64(floatDivTrunc(uint64(period), uint64(count)))
}

// roundFloat64 rounds a to the nearest integer representable as a float64
// (53 significant bits, ties to even), as converting it to float64 does.
// a must be below 2^63.
func roundFloat64(a uint64) uint64 {
	n := bits.Len64(a)
	if n <= 53 {
		return a
	}
	s := uint(n - 53)
	q := a >> s
	rem := a & (1<<s - 1)
	half := uint64(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q << s
}

// floatDivTrunc returns trunc(float64(a) / float64(b)) for a < 2^63 and
// 1 <= b < 2^63: both operands rounded to float64, the quotient rounded to
// nearest (ties to even) and truncated toward zero, as Rust's `as` casts and
// IEEE-754 division do.
func floatDivTrunc(a, b uint64) uint64 {
	a, b = roundFloat64(a), roundFloat64(b)
	q, r := a/b, a%b
	if r == 0 {
		// q divides a, so its significant bits fit in a's 53: exact.
		return q
	}
	n := bits.Len64(q)
	if n >= 53 {
		// The quotient's unit in the last place is 2^s >= 1: round the exact
		// quotient a/b to a multiple of 2^s. Here b <= a/2^52, so b<<s and
		// the remainder below fit easily in 64 bits.
		s := uint(n - 53)
		hiq := q >> s
		rem := (q&(1<<s-1))*b + r // a − hiq·2^s·b, in [0, b·2^s)
		whole := b << s
		if rem > whole-rem || (rem == whole-rem && hiq&1 == 1) {
			hiq++
		}
		return hiq << s
	}
	// The quotient lies in [q, q+1) with q < 2^52, whose unit in the last
	// place is 2^(n−53) (2^−53 when q == 0). It rounds up to q+1 when
	// q+1 − a/b = (b−r)/b is at most half that unit; a tie goes to q+1, whose
	// significand is even.
	if b-r <= b>>uint(54-n) {
		q++
	}
	return q
}

// gcraParams returns the emission interval, tolerance and limit of a GCRA
// request, and false when the request is out of range (never the case for a
// validated request).
func gcraParams(req *Request) (t, tol, limit int64, ok bool) {
	if req.Burst < 0 || req.Burst > MaxCount || req.Rate < 1 || req.Rate > MaxCount ||
		req.Period < 1 || req.Period > MaxPeriod {
		return 0, 0, 0, false
	}
	t = emissionInterval(req.Period, req.Rate)
	if t < 1 {
		return 0, 0, 0, false
	}
	limit = req.Burst + 1
	if tol, ok = spanProduct(t, limit); !ok {
		return 0, 0, 0, false
	}
	return t, tol, limit, true
}

// gcraRemaining is redis-cell's remaining: (τ − ttl) / T truncated, where
// both are first truncated to whole microseconds and divided as float64,
// kept within [0, limit].
func gcraRemaining(next, t, limit int64) int64 {
	if next <= 0 {
		// redis-cell answers 0 for next <= −T, and 0 or −1 in between.
		return 0
	}
	var r int64
	if tus := t / 1000; tus > 0 {
		r = int64(floatDivTrunc(uint64(next/1000), uint64(tus)))
	} else {
		r = next / t
	}
	if r > limit {
		r = limit
	}
	return r
}

// throttle applies one CL.THROTTLE request; see the description above.
func throttle(st State, req *Request, now int64) (State, Result) {
	t, tol, limit, ok := gcraParams(req)
	q := req.Quantity
	if !ok || q < -MaxCount || q > MaxCount {
		return st, Result{Limited: true, RetryAfter: -1}
	}
	// d is the time from now to the stored TAT: 0 for a missing or expired
	// key, whose TAT is now.
	var d int64
	if st.Kind == KindGCRA && st.ExpireAt > now && st.A > now {
		d = st.A - now
	}
	res := Result{Limit: limit, RetryAfter: -1}
	var nd int64 // the new TAT minus now
	limited := false
	switch {
	case q > limit:
		// T×q > τ: larger than the whole limit, it can never be allowed.
		limited = true
	case q >= 0:
		inc := t * q // <= τ <= MaxSpan
		if d > tol-inc {
			limited = true
			res.RetryAfter = (d - tol) + inc // d − τ >= −τ, and adding inc <= τ cannot overflow
		} else {
			nd = d + inc
		}
	default:
		// A refund moves the TAT back by T×|q|, but never before now.
		if back := mul128(uint64(t), uint64(-q)); back.hi == 0 && back.lo < uint64(d) {
			nd = d - int64(back.lo)
		}
		if nd > tol {
			// Only possible after the tolerance shrank: still over it.
			limited = true
			res.RetryAfter = nd - tol
		}
	}
	if limited {
		res.Limited = true
		res.ResetAfter = d
		res.Remaining = gcraRemaining(tol-d, t, limit)
		return st, res
	}
	res.ResetAfter = nd
	res.Remaining = gcraRemaining(tol-nd, t, limit)
	if nd == 0 {
		// Nothing is held (a peek or a refund of a fresh key): store nothing.
		return State{}, res
	}
	tat := now + nd
	return State{Kind: KindGCRA, ExpireAt: tat, A: tat}, res
}
