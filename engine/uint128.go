package engine

import "math/bits"

// Integer arithmetic shared by the limiters. A count (up to MaxCount = 2^40)
// times a duration (up to MaxSpan = 2^62 ns) reaches about 2^102, beyond
// int64, so such products are held exactly in a uint128 instead of being
// rounded or left to overflow: every limiter then answers exactly, and two
// replicas compute bit-identical states.

// maxInt64 is the largest int64, where the saturating functions stop.
const maxInt64 = int64(^uint64(0) >> 1)

// uint128 is an unsigned 128-bit integer: hi×2^64 + lo.
type uint128 struct{ hi, lo uint64 }

// mul128 returns the exact product a×b.
func mul128(a, b uint64) uint128 {
	hi, lo := bits.Mul64(a, b)
	return uint128{hi, lo}
}

// add returns x+y, modulo 2^128 (no caller comes near it: its operands are
// products of a count and a duration).
func (x uint128) add(y uint128) uint128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, carry)
	return uint128{hi, lo}
}

// sub returns x−y for x >= y.
func (x uint128) sub(y uint128) uint128 {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, borrow)
	return uint128{hi, lo}
}

// cmp returns −1, 0 or +1 as x is less than, equal to or greater than y.
func (x uint128) cmp(y uint128) int {
	switch {
	case x.hi < y.hi:
		return -1
	case x.hi > y.hi:
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

// divMod returns x/d and x%d for d >= 1. A quotient that does not fit in 64
// bits (never with valid parameters) saturates at 2^64−1, remainder 0,
// instead of panicking as bits.Div64 would.
func (x uint128) divMod(d uint64) (q, r uint64) {
	if x.hi >= d {
		return ^uint64(0), 0
	}
	return bits.Div64(x.hi, x.lo, d)
}

// ceilDiv returns ⌈x/d⌉ for d >= 1, saturating as divMod does.
func (x uint128) ceilDiv(d uint64) uint64 {
	q, r := x.divMod(d)
	if r != 0 && q != ^uint64(0) {
		q++
	}
	return q
}

// mulLessEq reports whether a×b <= c×d, comparing the exact products.
func mulLessEq(a, b, c, d uint64) bool {
	return mul128(a, b).cmp(mul128(c, d)) <= 0
}

// spanProduct returns a×b for a, b >= 0 and whether it is at most MaxSpan:
// the check behind every derived duration of Validate's span rule.
func spanProduct(a, b int64) (int64, bool) {
	p := mul128(uint64(a), uint64(b))
	if p.hi != 0 || p.lo > uint64(MaxSpan) {
		return 0, false
	}
	return int64(p.lo), true
}

// satAdd returns a+b for b >= 0, saturating at the largest int64.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return maxInt64
}

// satInt converts an unsigned duration in ns to int64, saturating (valid
// parameters keep every duration within MaxSpan).
func satInt(ns uint64) int64 {
	if ns > uint64(maxInt64) {
		return maxInt64
	}
	return int64(ns)
}
