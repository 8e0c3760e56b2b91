package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// allKinds is every limiter kind, in order.
var allKinds = []Kind{KindGCRA, KindTokenBucket, KindLeakyBucket, KindFixedWindow, KindSlidingWindow, KindSlidingLog}

// wantLimit is the Limit every reply of req must carry.
func wantLimit(req *Request) int64 {
	if req.Kind == KindGCRA {
		return req.Burst + 1
	}
	return req.Burst
}

// checkStep applies req to st at now and checks every invariant the
// contract states for all kinds:
//   - Apply does not panic; Limit is the request's limit; Remaining is in
//     [0, Limit]; RetryAfter is -1 when allowed and -1 or positive when
//     limited; Wait is the leaky bucket's only (-1 exactly when limited);
//   - a limited request returns the state unchanged, and so does a peek
//     (quantity 0), except that a missing or expired state may stay absent;
//   - a stored result (ExpireAt > now) has the request's Kind and expires
//     within MaxSpan; ResetAfter is the time to that expiry, 0 when nothing
//     is stored (for GCRA always, for other kinds while the parameters are
//     the ones the state was built with);
//   - Apply is deterministic, and an expired state answers as a missing key;
//   - the state is not fresh before its ExpireAt: one nanosecond earlier a
//     request for the whole limit, which a fresh key allows, is refused.
//
// sameParams says st was produced under req's parameters (so expiry can be
// checked against them). It returns the next state and the reply.
func checkStep(st State, req *Request, now int64, sameParams bool) (State, Result, error) {
	in := cloneState(st)
	var next State
	var res Result
	if err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		next, res = Apply(cloneState(in), req, now)
		return nil
	}(); err != nil {
		return next, res, err
	}
	fail := func(format string, a ...any) (State, Result, error) {
		return next, res, fmt.Errorf("Apply(%+v, %+v, %d) = %+v, %+v: %s", in, *req, now, next, res, fmt.Sprintf(format, a...))
	}
	if res.Limit != wantLimit(req) {
		return fail("limit %d, want %d", res.Limit, wantLimit(req))
	}
	if res.Remaining < 0 || res.Remaining > res.Limit {
		return fail("remaining outside [0, limit]")
	}
	if res.Limited {
		if res.RetryAfter != -1 && res.RetryAfter <= 0 {
			return fail("limited with retry_after %d", res.RetryAfter)
		}
		if !res.Queued && !sameState(next, in, now) {
			return fail("a limited request changed the state") // a queued acquire joined the line
		}
	} else if res.RetryAfter != -1 {
		return fail("allowed with retry_after %d, want -1", res.RetryAfter)
	}
	if req.Kind == KindLeakyBucket {
		if res.Limited && res.Wait != -1 || !res.Limited && res.Wait < 0 {
			return fail("wait %d", res.Wait)
		}
	} else if res.Wait != 0 {
		return fail("wait %d for a kind without one", res.Wait)
	}
	if req.Quantity == 0 && !sameState(next, in, now) {
		return fail("a peek changed the state")
	}
	wantReset := int64(0)
	if live(next, now) {
		if next.Kind != req.Kind {
			return fail("stored state of kind %v", next.Kind)
		}
		if next.ExpireAt-now > MaxSpan {
			return fail("expiry beyond MaxSpan")
		}
		wantReset = next.ExpireAt - now
	}
	// Under changed parameters a kept state's expiry belongs to the old
	// ones (GCRA's does not depend on them).
	if (sameParams || req.Kind == KindGCRA) && res.ResetAfter != wantReset {
		return fail("reset_after %d, want %d (time to the state's expiry)", res.ResetAfter, wantReset)
	}
	// Determinism: the same arguments give the same answer.
	next2, res2 := Apply(cloneState(in), req, now)
	if res2 != res || !sameState(next2, next, now) || next2.ExpireAt != next.ExpireAt {
		return fail("second run gave %+v, %+v", next2, res2)
	}
	// An expired (or missing) key answers exactly as a missing one.
	if !live(in, now) {
		next3, res3 := Apply(State{}, req, now)
		if res3 != res || !sameState(next3, next, now) {
			return fail("fresh key gave %+v, %+v", next3, res3)
		}
	}
	// The state is not fresh before its expiry: a request for the whole
	// limit, which a fresh key allows, is refused one nanosecond earlier.
	if sameParams && live(next, now) && next.ExpireAt-1 >= now && wantLimit(req) <= MaxCount {
		probe := *req
		probe.Quantity = wantLimit(req)
		if _, r := Apply(cloneState(next), &probe, next.ExpireAt-1); !r.Limited {
			return fail("already fresh at ExpireAt-1 (a request for the whole limit passes)")
		}
	}
	return next, res, nil
}

// randRequest draws valid parameters of kind k, at small, medium and extreme
// scales.
func randRequest(rng *rand.Rand, k Kind) Request {
	for {
		r := Request{Kind: k}
		count := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return rng.Int64N(5)
			case 1:
				return rng.Int64N(100)
			case 2:
				return rng.Int64N(100000)
			default:
				return rng.Int64N(MaxCount + 1)
			}
		}
		period := func() int64 {
			switch rng.IntN(5) {
			case 0:
				return 1 + rng.Int64N(1000) // nanoseconds
			case 1:
				return (1 + rng.Int64N(1000)) * ms
			case 2:
				return (1 + rng.Int64N(3600)) * sec
			case 3:
				return 1 + rng.Int64N(MaxPeriod)
			default:
				return sec
			}
		}
		r.Burst, r.Period = count(), period()
		switch k {
		case KindGCRA:
			r.Rate = 1 + count()
			r.Period = r.Period/sec*sec + sec // CL.THROTTLE periods are whole seconds
		case KindTokenBucket:
			r.Rate = 1 + count()
			r.Interval = rng.IntN(2) == 0
		case KindLeakyBucket:
			r.Rate = 1 + count()
		case KindSlidingLog:
			r.Burst %= 2000 // keep logs small enough to test quickly
		}
		if r.Validate() == nil {
			return r
		}
	}
}

// randQuantity draws a quantity for req: mostly small, sometimes the whole
// limit, above it, zero (a peek) or, for GCRA, a refund.
func randQuantity(rng *rand.Rand, req *Request) int64 {
	lim := wantLimit(req)
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return min(lim, MaxCount)
	case 2:
		return min(lim+1+rng.Int64N(3), MaxCount)
	case 3:
		if req.Kind == KindGCRA {
			return -1 - rng.Int64N(min(lim, 5))
		}
		return 1
	case 4:
		return 1 + rng.Int64N(lim)
	default:
		return 1 + rng.Int64N(min(lim, 3))
	}
}

// randGap draws the time to the next request, relative to the request's
// period: same instant, a fraction, about one period, or far beyond.
func randGap(rng *rand.Rand, req *Request) int64 {
	p := req.Period
	if req.Kind == KindGCRA {
		p = max(emissionInterval(req.Period, req.Rate), 1)
	}
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return rng.Int64N(p/8 + 1)
	case 2, 3:
		return rng.Int64N(2*p + 1)
	case 4:
		return 1 + rng.Int64N(1000)
	default:
		return rng.Int64N(min(p, (1<<60)/100)*100 + 1)
	}
}

// TestConformance runs every kind through random arrival sequences on a
// simulated clock and checks the invariants of checkStep at every step.
func TestConformance(t *testing.T) {
	for _, k := range allKinds {
		t.Run(k.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(k), 42))
			seqs, steps := 400, 80
			if testing.Short() {
				seqs = 50
			}
			for seq := 0; seq < seqs; seq++ {
				req := randRequest(rng, k)
				now := t0 + rng.Int64N(sec)
				switch seq % 10 {
				case 1:
					now = rng.Int64N(1000)
				case 2:
					now = (1 << 62) - MaxSpan/2 - rng.Int64N(sec) // far future, still in range
				}
				changing := seq%7 == 3 // parameters change on the fly
				var st State
				same := true
				for step := 0; step < steps; step++ {
					if changing && rng.IntN(4) == 0 {
						req = randRequest(rng, k)
						same = false
					}
					req.Quantity = randQuantity(rng, &req)
					var err error
					st, _, err = checkStep(st, &req, now, same)
					if err != nil {
						t.Fatalf("seq %d step %d: %v", seq, step, err)
					}
					if !live(st, now) {
						st = State{} // the store deletes it
						same = true
					}
					now += randGap(rng, &req)
					if now >= maxNow {
						break
					}
				}
			}
		})
	}
}
