package engine

// Waiting instead of refusing (the trailing WAIT of the limiter commands).
//
// A request that the limiter refuses at now but would admit at t_admit =
// now + RetryAfter <= now + Wait is admitted at once as of t_admit: it
// reserves its place. The state written is the one the algorithm writes
// when the same request arrives at t_admit (the sliding log keeps more:
// see below), and the reply is that request's allowed reply, fields as of
// t_admit, with Delay = t_admit − now (the server sends it then). Nothing
// else is new: a reservation is an ordinary admission dated in the
// future, so
//
//   - it is one state write, replicated and snapshotted like any other
//     (a failover keeps the place);
//   - requests arriving after it see it: it counts against them as an
//     admission at t_admit would (or more: a window limiter closes the
//     key until the waiter's turn), so places are taken first come, first
//     served per key, and a later request never overtakes an earlier
//     waiting one of the same quantity (its RetryAfter starts where the
//     earlier reservation ends);
//   - the limiter's bound is unchanged: the admissions, dated at their
//     t_admit, are a sequence the algorithm itself accepts, so in any
//     interval the units admitted never exceed what the algorithm allows;
//     a client that disconnects while waiting leaves its reservation
//     consumed, never freed for another.
//
// This needs an algorithm whose state, read at an instant before t_admit,
// still counts what was admitted at t_admit, and whose RetryAfter is exact.
// GCRA (the TAT moves ahead), the token bucket (the instant it is full
// again, or the token deficit and next refill of the INTERVAL variant) and
// the leaky bucket (the instant it is empty) are such as they are. The
// window limiters are such with three rules:
//
//   - Fixed window: a reservation in a later window W' is stored as the
//     state of W' (A = W', after now; B its count), which drops the count
//     of the current window. A state dated after now (A > now: only a
//     reservation writes one; a state written under another window length
//     starts at or before its write and reads as before) therefore means
//     the key is closed until A (fwClosed): every request before A is
//     refused (a peek answers Remaining 0); RetryAfter is A − now if
//     B + n fits the limit, else the window after A. Nobody overtakes a
//     waiter, and the closed windows admit nothing, so each epoch-aligned
//     window still admits at most limit units, dated at their admissions.
//   - Sliding window: a reservation later in the current window keeps
//     A = its start (an ordinary admission, counted early, which only
//     admits less). One in the next window stores A = start + window,
//     B = n, C = the current count; one two windows ahead stores C = 0 for
//     the window between, which is then closed. A state dated after now
//     (A > now) closes the key until its turn (swClosed), RetryAfter read from
//     the stored counts at A (swAdmitAt from A). A request that fits now
//     would have let every earlier waiter fit now too, so none overtakes
//     one, and the admissions dated at t_admit meet the estimate at each.
//   - Sliding log: a reservation keeps every entry still in the window at
//     now and appends its own dated t_admit (slAdd with at = t_admit); the
//     reservation at now + delay through apply would drop the entries that
//     leave by t_admit while they still count against the requests before
//     it (limit 10, log [t0:7, t1:3], a waiter of 3 at t0 + window would
//     leave [t1:3, t0+window:3], and 4 more units would be admitted at once:
//     14 in one window). The log's sum counts the entries dated after now,
//     so RetryAfter (the instant enough of the oldest entries leave) is
//     exact for the next waiter too; a log may then hold more than limit
//     units, at most limit in any one window of the time it spans.
//
// Every kind but concurrency (whose waiters wait for a release, not an
// instant) reserves this way.
//
// The INTERVAL token bucket needs one mark: its state is a token deficit
// and the next refill instant A, and a reservation dated at a refill
// instant t_admit stores the refill after t_admit, possibly many periods
// ahead of a later arrival. Its C is -2 instead of -1, so that a reading
// before t_admit counts the refills between now and A as spoken for
// (intervalDeficit); without the mark, a next refill far ahead is a
// shortened refill_period, read as before.
//
// Reading the state at an instant before t_admit: GCRA's d = TAT − now is
// then above the tolerance, so the next request's RetryAfter is larger;
// the buckets' deficit exceeds the capacity (a token bucket "below zero"),
// and remaining is 0. Both stay within the span rule: Validate counts Wait
// in the spans it bounds.

// WaitSupported reports whether requests of kind k reserve a place when
// they wait (Request.Wait): every limiter kind but concurrency.
func WaitSupported(k Kind) bool {
	return k.Valid() && k != KindConcurrency
}

// reserve admits req as of now + limited.RetryAfter (see above); limited is
// the refusal at now, returned with st unchanged should the request not be
// allowed then (RetryAfter is exact, so that does not happen).
func reserve(st State, req *Request, now int64, limited Result) (State, Result) {
	delay := limited.RetryAfter
	var next State
	var res Result
	if req.Kind == KindSlidingLog {
		next, res = slAdd(st, req, now, now+delay)
	} else {
		next, res = apply(st, req, now+delay)
	}
	if res.Limited {
		return st, limited
	}
	res.Delay = delay
	if next.Kind == KindTokenBucket && next.C == tbIntervalMark {
		next.C = tbIntervalReserved
	}
	return next, res
}
