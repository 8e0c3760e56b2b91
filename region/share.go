package region

import (
	"math/bits"

	"github.com/cellserver/cellserver/engine"
)

// MaxWeight bounds region-weight, so that a count (at most engine.MaxCount,
// 2^40) times a weight fits in int64.
const MaxWeight = 1 << 20

// Scale returns req with its limit parameters scaled to the fraction
// num/den (a region's share; 0 < num <= den <= MaxWeight × regions), so
// that the shares of all regions never add up to more than the whole:
//   - the amounts (GCRA's limit max_burst+1, a bucket's capacity, a
//     window's or log's limit) are scaled and rounded down;
//   - a rate (GCRA's count_per_period, a bucket's refill or leak count)
//     keeps its count and has its period stretched by den/num, rounded up,
//     so that a rate of 1 per hour still splits (1 per 3 hours for a third);
//     when the stretched period would pass engine.MaxPeriod, the count is
//     scaled down instead.
//
// The quantity is unchanged. ok is false when the share rounds down to
// nothing (a limit or rate of 0) or no longer passes engine's Validate:
// that region can admit nothing of the key.
func Scale(req engine.Request, num, den int64) (out engine.Request, ok bool) {
	if num <= 0 || den <= 0 || num > den {
		return req, false
	}
	out = req
	part := func(v int64) int64 { return v * num / den }
	switch req.Kind {
	case engine.KindGCRA:
		limit := part(req.Burst + 1)
		out.Burst = limit - 1
		out.Rate, out.Period = scaleRate(req.Rate, req.Period, num, den)
		if limit < 1 {
			return out, false
		}
	case engine.KindTokenBucket, engine.KindLeakyBucket:
		out.Burst = part(req.Burst)
		out.Rate, out.Period = scaleRate(req.Rate, req.Period, num, den)
	default:
		out.Burst = part(req.Burst)
	}
	if out.Validate() != nil {
		return out, false
	}
	return out, true
}

// scaleRate returns the rate count per period scaled by num/den: the period
// stretched by den/num (rounded up), or, when that passes MaxPeriod, the
// count scaled down (rounded down; possibly to 0).
func scaleRate(count, period, num, den int64) (int64, int64) {
	hi, lo := bits.Mul64(uint64(period), uint64(den))
	if hi < uint64(num) { // the quotient fits in 64 bits
		q, r := bits.Div64(hi, lo, uint64(num))
		if r != 0 {
			q++
		}
		if q <= uint64(engine.MaxPeriod) {
			return count, int64(q)
		}
	}
	return count * num / den, period
}

// limitOf is the limit a reply reports for req: GCRA's max_burst+1, every
// other kind's capacity or limit.
func limitOf(req *engine.Request) int64 {
	if req.Kind == engine.KindGCRA {
		return req.Burst + 1
	}
	return req.Burst
}

// refusal is the reply to a request that is refused without reaching the
// keyspace (a share of nothing, or a home region that is unreachable under
// region-unreachable deny): limited, nothing remaining. retryAfter is
// nanoseconds, -1 when the request can never be allowed here; limit is
// what the reply reports as the key's limit.
func refusal(req *engine.Request, limit, retryAfter int64) engine.Result {
	r := engine.Result{Limited: true, Limit: limit, RetryAfter: retryAfter}
	if req.Kind == engine.KindLeakyBucket {
		r.Wait = -1 // the leaky bucket's "limited" wait
	}
	return r
}
