package region

import "github.com/cellserver/cellserver/engine"

// forced returns req changed so that it consumes its quantity whatever the
// key's state: its limit raised to the largest value engine's Validate
// accepts for its period and rate. It is how a peer's consumption is
// applied ("forced consumption"), through the ordinary limiter maths,
// because no algorithm stores its limit in the key's state:
//
//   - GCRA: the TAT moves by T × quantity from max(TAT, now); a tolerance of
//     up to MaxSpan (146 years) lets it run that far ahead of now, after
//     which further forced consumption is refused (and counted as dropped);
//   - token bucket, leaky bucket: the instant the bucket is full (empty)
//     again moves by quantity × period / rate; an INTERVAL bucket's
//     deficit in whole tokens grows, and a later request at the real
//     capacity reads it capped at that capacity;
//   - fixed and sliding windows: the count of the window current at
//     receipt grows by the quantity, up to MaxCount;
//   - sliding log: an entry is logged at receipt, up to maxLogLimit units in
//     the window (the receiver's sl-max-limit).
//
// Quantities are never changed: refunds (negative GCRA quantities) stay
// refunds.
func forced(req engine.Request, maxLogLimit int64) engine.Request {
	out := req
	switch req.Kind {
	case engine.KindGCRA:
		t := req.Period/req.Rate + 1 // at least the emission interval
		out.Burst = min(engine.MaxCount, engine.MaxSpan/t-1)
	case engine.KindTokenBucket, engine.KindLeakyBucket:
		periods := engine.MaxSpan / req.Period // whole periods that fit in MaxSpan
		out.Burst = engine.MaxCount
		if periods < engine.MaxCount/req.Rate {
			out.Burst = max(periods*req.Rate, req.Burst)
		}
	case engine.KindSlidingLog:
		out.Burst = max(maxLogLimit, req.Burst)
	default:
		out.Burst = engine.MaxCount
	}
	for out.Burst > req.Burst && out.Validate() != nil {
		out.Burst /= 2 // never reached for valid inputs; kept as a guard
	}
	if out.Burst < req.Burst {
		out.Burst = req.Burst
	}
	return out
}
