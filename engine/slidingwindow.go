package engine

import "math"

// Sliding window counter (SW.INCR), as Cloudflare describes it: the counts
// of the current and the previous epoch-aligned window, with the previous
// one weighted by the part of it that still overlaps the sliding window:
//
//	estimate = previous × (window − elapsed)/window + current
//
// where elapsed = now − start of the current window. A request of count
// units is allowed while estimate + count ≤ limit. Every comparison is done
// on the exact rational, multiplied through by window with 128-bit products,
// so an estimate is never truncated in the admitting direction.
//
// State layout (KindSlidingWindow):
//
//	A         start of the current window (Unix ns), a multiple of the window;
//	          after now when a waiting request reserved a later window
//	          (swClosed)
//	B         units admitted in the current window [A, A+window), 0..MaxCount
//	C         units admitted in the window before it [A−window, A), 0..MaxCount
//	ExpireAt  A + 2×window when B > 0 (both counts have slid out), else
//	          A + window (C alone has slid out)
//
// Bound: at most limit units are admitted inside any one epoch-aligned
// window (estimate ≥ current), and at most 2×limit − 1 inside any interval
// of one window's length: if a > 0 units of an interval fall in one window
// and b in the next, the last of the b was admitted while the a still
// weighed more than 0 in the estimate, so b < limit. The bound is reached by limit units
// admitted 1 ns before a window's end followed by limit − 1 more near the
// next window's end. It holds while the parameters stay the same.
//
// Only an admitted request with count ≥ 1 changes the state; a limited
// request or a peek (count 0) returns st as it is.
func incrSlidingWindow(st State, req *Request, now int64) (State, Result) {
	limit, w, n := req.Burst, req.Period, req.Quantity
	if !windowRequestValid(req) {
		return st, invalidWindowResult(req)
	}
	start := windowStart(now, w)
	elapsed := now - start // 0 <= elapsed < w

	// prev and cur are the counts of [start-w, start) and [start, start+w) as
	// far as the stored state knows them; expire caps every instant derived
	// from them, because the stored key is deleted (fresh) at its ExpireAt.
	var prev, cur int64
	expire := int64(math.MaxInt64)
	if st.Kind == KindSlidingWindow && st.ExpireAt > now {
		switch {
		case st.A == start:
			prev, cur = clampCount(st.C), clampCount(st.B)
		case st.A == start-w:
			prev = clampCount(st.B)
		case st.A > now:
			// Only a reservation dates a state after now (a state
			// written under another window length starts at or before
			// the instant it was written, and reads as fresh).
			return st, swClosed(st, req, now)
		}
		if prev > 0 || cur > 0 {
			expire = st.ExpireAt
		}
	}

	res := Result{Limit: limit, RetryAfter: -1}
	if reset := swResetAt(prev, cur, start, w); reset > now {
		res.ResetAfter = min(reset, expire) - now
	}
	if !swFits(prev, cur+n, limit, w, elapsed) {
		res.Limited = true
		res.Remaining = swRemaining(prev, cur, limit, w, elapsed)
		if n <= limit {
			res.RetryAfter = min(swAdmitAt(prev, cur, n, limit, start, w), expire) - now
		}
		return st, res
	}
	res.Remaining = swRemaining(prev, cur+n, limit, w, elapsed)
	if n == 0 {
		// A peek returns the state as it is (for a missing key, the zero
		// State, which the caller does not store).
		return st, res
	}
	cur += n
	reset := swResetAt(prev, cur, start, w) // start + 2w, as cur > 0
	res.ResetAfter = reset - now
	return State{Kind: KindSlidingWindow, ExpireAt: reset, A: start, B: cur, C: prev}, res
}

// swClosed is the reply at now to a request on a key whose state is dated
// in a later window (st.A > now): a waiting request reserved its place
// there (wait.go). The counts of now's window are not
// kept, so the key is closed until its turn: every request before it is
// refused (a peek answers Remaining 0), and none overtakes the waiter. A
// request is admitted at the first instant the stored counts allow, read
// as those of st.A's window and the one before it (swAdmitAt from st.A);
// a reservation two windows ahead stored 0 for the window between, which
// admits nothing.
func swClosed(st State, req *Request, now int64) Result {
	limit, w, n := req.Burst, req.Period, req.Quantity
	res := Result{Limit: limit, RetryAfter: -1, ResetAfter: st.ExpireAt - now}
	if n == 0 {
		return res
	}
	res.Limited = true
	if n <= limit {
		at := swAdmitAt(clampCount(st.C), clampCount(st.B), n, limit, st.A, w)
		res.RetryAfter = min(at, st.ExpireAt) - now
	}
	return res
}

// swFits reports whether prev×(w−elapsed)/w + cur ≤ limit, exactly:
// prev×(w−elapsed) ≤ (limit−cur)×w. All arguments are non-negative, counts
// at most 2×MaxCount, w ≤ MaxPeriod, elapsed < w.
func swFits(prev, cur, limit, w, elapsed int64) bool {
	room := limit - cur
	if room < 0 {
		return false
	}
	return mulLessEq(uint64(prev), uint64(w-elapsed), uint64(room), uint64(w))
}

// swRemaining returns floor(limit − estimate) = limit − cur −
// ceil(prev×(w−elapsed)/w), or 0 when that is negative.
func swRemaining(prev, cur, limit, w, elapsed int64) int64 {
	// prev×(w−elapsed) <= prev×w < 2^64×w: the quotient, at most prev,
	// fits in 64 bits.
	weighted := mul128(uint64(prev), uint64(w-elapsed)).ceilDiv(uint64(w))
	return max(limit-cur-int64(weighted), 0)
}

// swResetAt returns the instant both counts have slid out: the end of the
// next window when cur > 0, the end of this one when only prev > 0, and
// start (in the past) when both are 0.
func swResetAt(prev, cur, start, w int64) int64 {
	switch {
	case cur > 0:
		return start + 2*w
	case prev > 0:
		return start + w
	}
	return start
}

// swAdmitAt returns the earliest instant at which a request of n ≤ limit
// units fits, given the counts prev and cur of the windows before and at
// [start, start+w), with no request admitted in between. The estimate never
// grows while nothing is admitted, so every later instant fits too.
func swAdmitAt(prev, cur, n, limit, start, w int64) int64 {
	// Later in this window, where prev weighs less and less.
	if t, ok := swFirstFit(prev, limit-cur-n, start, w); ok {
		return t
	}
	// In the next window, where cur becomes the previous count.
	if t, ok := swFirstFit(cur, limit-n, start+w, w); ok {
		return t
	}
	// The window after that holds nothing, and n <= limit fits.
	return start + 2*w
}

// swFirstFit returns the first instant t in [s, s+w) at which
// p×(s+w−t) ≤ room×w, that is p×(w−elapsed)/w ≤ room, and false when there
// is none. With k = floor(room×w/p) the condition reads s+w−t ≤ k.
func swFirstFit(p, room, s, w int64) (int64, bool) {
	switch {
	case room < 0:
		return 0, false
	case p == 0 || room >= p:
		// p×w ≤ room×w already at t = s.
		return s, true
	}
	// room < p, so room×w < p×2^64 and the quotient fits in 64 bits.
	k, _ := mul128(uint64(room), uint64(w)).divMod(uint64(p))
	if k == 0 {
		// Only elapsed = w would do, which is the next window.
		return 0, false
	}
	return s + w - int64(k), true
}
