package engine

// Waiting instead of refusing (the trailing WAIT of the limiter commands).
//
// A request that the limiter refuses at now but would admit at t_admit =
// now + RetryAfter <= now + Wait is admitted at once as of t_admit: it
// reserves its place. The state written is the one the algorithm writes
// when the same request arrives at t_admit, and the reply is that
// request's allowed reply, fields as of t_admit, with Delay = t_admit − now
// (the server sends it then). Nothing else is new: a reservation is an
// ordinary admission dated in the future, so
//
//   - it is one state write, replicated and snapshotted like any other
//     (a failover keeps the place);
//   - requests arriving after it see it: it counts against them exactly
//     as an admission at t_admit would, so places are taken first come,
//     first served per key, and a later request never overtakes an earlier
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
// the leaky bucket (the instant it is empty) are such. The window limiters
// are not: a fixed window keeps the count of one window only, so a count
// reserved in the next window would be lost by a request in the current
// one (and the sliding window and log likewise keep only the current
// past); ParseRequest refuses WAIT for them (ErrWaitUnsupported).
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

// WaitSupported reports whether requests of kind k may wait (Request.Wait).
func WaitSupported(k Kind) bool {
	return k == KindGCRA || k == KindTokenBucket || k == KindLeakyBucket
}

// reserve admits req as of now + limited.RetryAfter (see above); limited is
// the refusal at now, returned with st unchanged should the request not be
// allowed then (RetryAfter is exact, so that does not happen).
func reserve(st State, req *Request, now int64, limited Result) (State, Result) {
	delay := limited.RetryAfter
	next, res := apply(st, req, now+delay)
	if res.Limited {
		return st, limited
	}
	res.Delay = delay
	if next.Kind == KindTokenBucket && next.C == tbIntervalMark {
		next.C = tbIntervalReserved
	}
	return next, res
}
