package engine

// Fixed window counter (FW.INCR), as GitHub's hourly API limit: time is cut
// into windows of the request's length aligned to the Unix epoch, and each
// window admits at most limit units.
//
// State layout (KindFixedWindow):
//
//	A         start of the window the count belongs to (Unix ns), a multiple
//	          of the window length in force when it was written; after now
//	          when a waiting request reserved a later window (fwClosed)
//	B         units admitted in that window, 0..MaxCount
//	C         unused, 0
//	ExpireAt  A + window: the window's end, when the count is back to 0
//
// Bound: at most limit units are admitted inside any one epoch-aligned
// window, and at most 2×limit inside any interval of one window's length
// (limit at the very end of one window and limit at the very start of the
// next). The bound holds while the parameters stay the same.
//
// Only an admitted request with count ≥ 1 changes the state; a limited
// request or a peek (count 0) returns st as it is. An Exact request is
// admitted only when it brings the count to exactly the limit.
func incrFixedWindow(st State, req *Request, now int64) (State, Result) {
	limit, w, n := req.Burst, req.Period, req.Quantity
	if !windowRequestValid(req) {
		return st, invalidWindowResult(req)
	}
	start := windowStart(now, w)
	end := start + w

	// cur is the count of the current window; until is the instant it
	// drops back to 0 (the window's end, or the stored expiry if an earlier
	// window length makes the key expire sooner).
	var cur int64
	until := end
	if st.Kind == KindFixedWindow && st.ExpireAt > now {
		switch {
		case st.A == start:
			cur = clampCount(st.B)
			until = min(end, st.ExpireAt)
		case st.A > now:
			// Only a reservation dates a state after now (a state
			// written under another window length starts at or before
			// the instant it was written, and reads as fresh).
			return st, fwClosed(st, req, now)
		}
	}

	res := Result{Limit: limit, RetryAfter: -1}
	if cur > 0 {
		res.ResetAfter = until - now
	}
	if n > limit-cur {
		res.Limited = true
		res.Remaining = max(limit-cur, 0)
		if n <= limit {
			// From until on the count is 0 and n <= limit fits; before it
			// the count is cur and n does not.
			res.RetryAfter = until - now
		}
		return st, res
	}
	if req.Exact && n < limit-cur {
		// Short of the limit: refused, and never allowed until other
		// requests bring the count to limit - n.
		res.Limited = true
		res.Remaining = limit - cur
		return st, res
	}
	res.Remaining = limit - cur - n
	if n == 0 {
		// A peek returns the state as it is (for a missing key, the zero
		// State, which the caller does not store).
		return st, res
	}
	res.ResetAfter = end - now
	return State{Kind: KindFixedWindow, ExpireAt: end, A: start, B: cur + n}, res
}

// fwClosed is the reply at now to a request on a key whose state is dated
// in a later window (st.A > now): a waiting request reserved its place
// there (wait.go). The count of now's window is not
// kept, so the key is closed until st.A: every request before it is
// refused (a peek answers Remaining 0), and none overtakes the waiter. A
// request of n units is admitted at st.A if st.B + n fits the limit (the
// state read then counts st.B), otherwise at the start of the window after
// it, when the count is back to 0.
func fwClosed(st State, req *Request, now int64) Result {
	limit, w, n := req.Burst, req.Period, req.Quantity
	res := Result{Limit: limit, RetryAfter: -1, ResetAfter: st.ExpireAt - now}
	if n == 0 {
		return res
	}
	res.Limited = true
	switch b := clampCount(st.B); {
	case n <= limit-b:
		res.RetryAfter = st.A - now
	case n <= limit:
		res.RetryAfter = min(st.A+w, st.ExpireAt) - now
	}
	return res
}

// windowStart returns floor(now/w)*w, the start of the epoch-aligned window
// of length w (> 0) holding now; it rounds toward minus infinity for a
// negative now as well.
func windowStart(now, w int64) int64 {
	r := now % w
	if r < 0 {
		r += w
	}
	return now - r
}

// windowRequestValid reports whether req's window parameters are in the
// ranges ParseRequest guarantees: limit 0..MaxCount, window 1..MaxPeriod,
// count 0..MaxCount. The window limiters refuse anything else rather than
// compute with it, so that a malformed request can never panic or overflow.
func windowRequestValid(req *Request) bool {
	return req.Burst >= 0 && req.Burst <= MaxCount &&
		req.Period >= 1 && req.Period <= MaxPeriod &&
		req.Quantity >= 0 && req.Quantity <= MaxCount
}

// invalidWindowResult is the reply to a request windowRequestValid refuses:
// limited, and never allowed.
func invalidWindowResult(req *Request) Result {
	return Result{Limited: true, Limit: min(max(req.Burst, 0), MaxCount), RetryAfter: -1}
}

// clampCount bounds a stored count to 0..MaxCount. Counts written by this
// package are always inside; the clamp keeps a damaged state from
// overflowing the arithmetic.
func clampCount(x int64) int64 {
	return min(max(x, 0), MaxCount)
}
