package engine

// Token bucket (TB.TAKE) and the drain arithmetic it shares with the leaky
// bucket.
//
// Continuous refill. A bucket's state is its deficit: how long it needs to be
// full again. One token takes Period/Rate ns to refill, which is rarely a
// whole number of nanoseconds, so the deficit is kept exactly, in units of
// 1/Rate ns, as an instant plus a sub-nanosecond remainder:
//
//	A  the whole nanosecond (Unix ns) at which the bucket is full again,
//	   ignoring the remainder
//	B  the remainder, in units of 1/C ns (0 <= B < C); the bucket is exactly
//	   full at A + B/C
//	C  the refill_tokens (Rate) the remainder is expressed in, >= 1
//	ExpireAt = A when B == 0, A+1 otherwise (the first whole ns at which the
//	   bucket is full)
//
// At instant now the deficit is d = (A-now)*Rate + B units and the bucket
// holds capacity - d/Period tokens. Taking q tokens adds q*Period units.
// Nothing is ever truncated, so any sequence of calls with the same
// parameters gives exactly the state of a real-number bucket.
//
// INTERVAL refill. refill_tokens arrive at once at the end of each period,
// counted from the bucket's first use:
//
//	A  the next refill instant (Unix ns)
//	B  the deficit in whole tokens (capacity minus tokens held), 1..capacity
//	C  -1, marking the INTERVAL variant (-2 when written by a reservation
//	   dated in the future, see wait.go and intervalDeficit)
//	ExpireAt = the refill instant at which the bucket is full again
//
// Parameters changing between calls. Parameters are sent with every call and
// the stored state is reused as it is, as redis-cell reuses a GCRA key's TAT.
// A continuous bucket keeps the instant it is full again: its time deficit is
// re-expressed in the new refill_tokens (a remainder rounded up, the only
// rounding there is, so a change never grants a fraction of a token) and read
// at the new rate; when that is more tokens than the new capacity, the bucket
// holds none until enough time has passed. An INTERVAL bucket keeps its token
// deficit, capped at the new capacity, and its next refill instant; the
// refills after it follow every new refill_period. Neither reading depends on
// when the new parameters are first seen, so a peek's figures hold until the
// next write. Switching a key between the variants converts the deficit at
// that call: tokens missing (rounded up) become time at the new rate, and the
// other way round with a new alignment starting then.

// tbIntervalMark in State.C marks a token bucket in the INTERVAL variant;
// tbIntervalReserved marks one written by a reservation (wait.go), whose
// next refill A may lie more than a period ahead: the refills before A
// are spoken for.
const (
	tbIntervalMark     = -1
	tbIntervalReserved = -2
)

// takeTokens is TB.TAKE: a token bucket of req.Burst tokens refilling
// req.Rate tokens per req.Period ns, continuously or (req.Interval) all at
// once at the end of each period. It takes req.Quantity tokens (0 peeks).
//
// Bound: over any closed interval [t, t+L] of length L ns, with the same
// parameters throughout, the tokens taken sum to at most
//
//	continuous: capacity + floor(L*refill_tokens/refill_period)
//	INTERVAL:   capacity + refill_tokens*ceil(L/refill_period)
//
// (the bucket holds at most capacity at t, and within (t, t+L] it receives
// exactly L*rate/period tokens, respectively at most ceil(L/period) refills:
// refill instants, also across realignments, are at least a period apart).
//
// RetryAfter is exact: the same request at now+RetryAfter is allowed and at
// any earlier instant it is not.
func takeTokens(st State, req *Request, now int64) (State, Result) {
	if req.Burst < 1 || req.Rate < 1 || req.Period < 1 {
		return st, Result{Limited: true, Limit: req.Burst, RetryAfter: -1}
	}
	if req.Interval {
		return takeTokensInterval(st, req, now)
	}
	next, res, _ := drainTake(st, KindTokenBucket, req, now)
	return next, res
}

// drainTake is the continuous core shared by the token bucket and the leaky
// bucket: a deficit (time to be full, respectively time to be empty) that
// shrinks at one unit per ns and grows by Quantity*Period/Rate ns per
// admitted request, never beyond Burst*Period/Rate ns. It returns the
// next state, the reply (without Wait) and the deficit before the request,
// rounded up to whole ns.
func drainTake(st State, kind Kind, req *Request, now int64) (State, Result, int64) {
	capacity, rate, period, q := req.Burst, req.Rate, req.Period, req.Quantity
	d := loadDeficit(st, kind, rate, period, capacity, now)
	before := satInt(d.ceilDiv(uint64(rate)))
	res := Result{Limit: capacity, RetryAfter: -1}
	if q == 0 || q < 0 || q > capacity {
		// A peek; or never possible: limited with RetryAfter -1.
		res.Limited = q != 0
		res.Remaining = bucketRemaining(d, capacity, period)
		res.ResetAfter = before
		return st, res, before
	}
	room := mul128(uint64(capacity-q), uint64(period))
	if d.cmp(room) > 0 {
		res.Limited = true
		res.Remaining = bucketRemaining(d, capacity, period)
		res.RetryAfter = satInt(d.sub(room).ceilDiv(uint64(rate)))
		res.ResetAfter = before
		return st, res, before
	}
	d = d.add(mul128(uint64(q), uint64(period)))
	res.Remaining = bucketRemaining(d, capacity, period)
	whole, frac := d.divMod(uint64(rate))
	at := satAdd(now, satInt(whole))
	next := State{Kind: kind, ExpireAt: at, A: at, B: int64(frac), C: rate}
	if frac != 0 {
		next.ExpireAt = satAdd(at, 1)
	}
	res.ResetAfter = next.ExpireAt - now
	return next, res, before
}

// bucketRemaining returns the whole units left of capacity when the deficit is
// d (in units of 1/rate ns): capacity - ceil(d/period), at least 0. The
// deficit exceeds capacity*period only after the parameters changed.
func bucketRemaining(d uint128, capacity, period int64) int64 {
	return capacity - int64(min(d.ceilDiv(uint64(period)), uint64(capacity)))
}

// loadDeficit returns st's deficit at now in units of 1/rate ns. A missing
// or expired state has none. With the parameters st was written with, it is
// at most capacity*period; after a change it is at most MaxSpan*rate.
func loadDeficit(st State, kind Kind, rate, period, capacity int64, now int64) uint128 {
	if st.Kind != kind || st.ExpireAt <= now {
		return uint128{}
	}
	if st.C < 0 {
		// A token bucket last used with INTERVAL: its whole-token deficit,
		// after the refills due by now, becomes time at the new rate.
		tokens, _ := intervalDeficit(st, rate, period, capacity, now)
		return mul128(uint64(tokens), uint64(period))
	}
	if st.A < now {
		return uint128{} // not written by drainTake (ExpireAt <= A+1)
	}
	whole := uint64(st.A) - uint64(now)
	if whole > uint64(MaxSpan) {
		// Only a clock that went backwards gets here (a state is written
		// at most MaxSpan ahead). Capping keeps the product in 128 bits.
		whole = uint64(MaxSpan)
	}
	d := mul128(whole, uint64(rate))
	if frac, unit := st.B, st.C; frac > 0 && unit > 0 {
		if frac >= unit {
			frac = unit - 1
		}
		if unit == rate {
			d = d.add(uint128{lo: uint64(frac)})
		} else {
			// Re-express frac/unit ns in units of 1/rate ns, rounded up.
			d = d.add(uint128{lo: mul128(uint64(frac), uint64(rate)).ceilDiv(uint64(unit))})
		}
	}
	return d
}

// takeTokensInterval is takeTokens for the INTERVAL variant.
func takeTokensInterval(st State, req *Request, now int64) (State, Result) {
	capacity, rate, period, q := req.Burst, req.Rate, req.Period, req.Quantity
	deficit, refill := intervalDeficit(st, rate, period, capacity, now)
	res := Result{Limit: capacity, RetryAfter: -1, Remaining: max(capacity-deficit, 0)}
	res.ResetAfter = intervalFullAt(deficit, refill, rate, period, now) - now
	if q < 0 || q > capacity {
		res.Limited = true
		return st, res
	}
	if over := deficit - (capacity - q); over > 0 {
		// ceil(over/rate) refills are needed; the first is at refill.
		res.Limited = true
		res.RetryAfter = satAdd(refill, ((over-1)/rate)*period) - now
		return st, res
	}
	if q == 0 {
		return st, res
	}
	deficit += q
	res.Remaining = capacity - deficit
	expire := intervalFullAt(deficit, refill, rate, period, now)
	res.ResetAfter = expire - now
	return State{Kind: KindTokenBucket, ExpireAt: expire, A: refill, B: deficit, C: tbIntervalMark}, res
}

// intervalDeficit returns the whole tokens an INTERVAL bucket lacks at now
// (0..capacity, more while reservations are held), after the refills due
// by now, and its next refill instant (> now). A full bucket starts a new alignment: its next refill is one
// period from now.
func intervalDeficit(st State, rate, period, capacity int64, now int64) (deficit, refill int64) {
	refill = satAdd(now, period)
	if st.Kind != KindTokenBucket || st.ExpireAt <= now {
		return 0, refill
	}
	if st.C >= 0 {
		// Last used continuously: the missing tokens, rounded up, with a new
		// alignment starting now.
		d := loadDeficit(st, KindTokenBucket, rate, period, capacity, now)
		return capacity - bucketRemaining(d, capacity, period), refill
	}
	deficit, refill = min(max(st.B, 0), capacity), st.A
	if ahead := refill - now; st.C == tbIntervalReserved && ahead > period {
		// A reservation (wait.go) dated at a refill instant before A
		// took the refills between now and it: the k refills at
		// A−period, …, A−k·period still ahead of now are spoken for, so
		// the bucket lacks their tokens as well (more than capacity).
		k := min((ahead-1)/period, MaxCount/rate)
		return deficit + k*rate, refill - k*period
	}
	if now >= refill {
		due := 1 + (uint64(now)-uint64(refill))/uint64(period) // refills at or before now
		need := uint64(deficit+rate-1) / uint64(rate)          // refills to be full
		if due >= need {
			return 0, satAdd(now, period)
		}
		deficit -= int64(due) * rate
		refill += int64(due) * period
	}
	if deficit == 0 {
		return 0, satAdd(now, period)
	}
	return deficit, refill
}

// intervalFullAt returns the refill instant at which a bucket lacking
// deficit tokens, next refilled at refill, is full again; now when it is
// full already.
func intervalFullAt(deficit, refill, rate, period, now int64) int64 {
	if deficit <= 0 {
		return now
	}
	return satAdd(refill, ((deficit-1)/rate)*period)
}
