package region

import "github.com/cellserver/cellserver/engine"

// MaxWeight bounds region-weight, so that a count (at most engine.MaxCount,
// 2^40) times a weight fits in int64.
const MaxWeight = 1 << 20

// Scale returns req with its limit parameters scaled to the fraction
// num/den (a region's share; 0 < num <= den <= MaxWeight × regions),
// rounded down, so that the shares of all regions never add up to more than
// the whole: GCRA's limit (max_burst+1) and count_per_period, a bucket's
// capacity and rate, a window's or log's limit. Periods and the quantity are
// unchanged. ok is false when the share rounds down to nothing (a limit or
// rate of 0) or no longer passes engine's Validate: that region can admit
// nothing of the key.
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
		out.Rate = part(req.Rate)
		if limit < 1 {
			return out, false
		}
	case engine.KindTokenBucket, engine.KindLeakyBucket:
		out.Burst = part(req.Burst)
		out.Rate = part(req.Rate)
	default:
		out.Burst = part(req.Burst)
	}
	if out.Validate() != nil {
		return out, false
	}
	return out, true
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
