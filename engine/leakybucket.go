package engine

// Leaky bucket as a queue (LB.ADD). Its level (the requests queued) is the
// mirror image of a continuous token bucket's missing tokens, so it shares
// that state and arithmetic (drainTake in tokenbucket.go): the state is the
// instant the bucket is empty again, kept exactly as
//
//	A  the whole nanosecond (Unix ns) at which the bucket is empty,
//	   ignoring the remainder
//	B  the remainder, in units of 1/C ns (0 <= B < C); the bucket is exactly
//	   empty at A + B/C
//	C  the leak_count (Rate) the remainder is expressed in, >= 1
//	ExpireAt = A when B == 0, A+1 otherwise
//
// At instant now the level is ((A-now)*Rate + B)/Period requests; admitting
// count requests adds count*Period/Rate ns. Under changed parameters the
// instant the bucket is empty is kept, re-expressed in the new leak_count (a
// remainder rounded up) and read at the new rate; when that is more than the
// new capacity, nothing fits until enough has drained.

// addLeaky is LB.ADD: a queue of at most req.Burst requests draining
// req.Rate requests per req.Period ns, continuously. It admits req.Quantity
// requests if they fit (0 peeks).
//
// Bound: over any closed interval [t, t+L] of length L ns, with the same
// parameters throughout, the admitted counts sum to at most
// capacity + floor(L*leak_count/leak_period) (the level is at least 0 before
// t, at most capacity after t+L, and L*rate/period drains in between). The
// instants at which admitted requests reach the head of the queue (now+Wait)
// never decrease, and follow one another by at least the time the earlier
// one needs to drain (count*period/rate, rounded down to whole ns).
//
// RetryAfter is exact: the same request at now+RetryAfter fits and at any
// earlier instant it does not. Wait is the time, rounded up to whole ns,
// until everything queued before this request has drained.
func addLeaky(st State, req *Request, now int64) (State, Result) {
	if req.Burst < 1 || req.Rate < 1 || req.Period < 1 {
		return st, Result{Limited: true, Limit: req.Burst, RetryAfter: -1, Wait: -1}
	}
	next, res, before := drainTake(st, KindLeakyBucket, req, now)
	res.Wait = before
	if res.Limited {
		res.Wait = -1
	}
	return next, res
}
