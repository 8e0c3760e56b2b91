package engine

import (
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// Code and tests shared by the token bucket and the leaky bucket, whose
// continuous variants share one state layout and one arithmetic (drainTake).

// bkStep is one call of a table test: at t0+at, take/add q.
type bkStep struct {
	at   int64
	q    int64
	want Result
}

// bkRun applies steps in order to one key and checks every reply and the
// stored state's consistency with it.
func bkRun(t *testing.T, req Request, steps []bkStep) {
	t.Helper()
	var st State
	for i, s := range steps {
		r := req
		r.Quantity = s.q
		now := t0 + s.at
		next, got := Apply(st, &r, now)
		if got != s.want {
			t.Fatalf("step %d (t0%+dns, q=%d): got %+v, want %+v", i, s.at, s.q, got, s.want)
		}
		if got.Limited && !equalState(next, st) {
			t.Fatalf("step %d: limited request changed the state: %+v -> %+v", i, st, next)
		}
		if next.ExpireAt > now {
			if next.ExpireAt-now != got.ResetAfter {
				t.Fatalf("step %d: ExpireAt-now = %d, ResetAfter = %d", i, next.ExpireAt-now, got.ResetAfter)
			}
		} else if got.ResetAfter != 0 {
			t.Fatalf("step %d: nothing stored but ResetAfter = %d", i, got.ResetAfter)
		}
		st = stored(next, now)
	}
}

// bkTable is one key's table test: its request and the calls made on it.
type bkTable struct {
	name  string
	req   Request
	steps []bkStep
}

// bkRunTables runs each table as a subtest.
func bkRunTables(t *testing.T, tables []bkTable) {
	t.Helper()
	for _, tc := range tables {
		t.Run(tc.name, func(t *testing.T) { bkRun(t, tc.req, tc.steps) })
	}
}

// TestBucketMissingKeyStoresNothing: on a missing key, a peek and a request
// larger than the capacity answer a full bucket and store nothing.
func TestBucketMissingKeyStoresNothing(t *testing.T) {
	for _, req := range []Request{
		{Kind: KindTokenBucket, Burst: 10, Rate: 1, Period: sec},
		{Kind: KindTokenBucket, Burst: 10, Rate: 1, Period: sec, Interval: true},
		{Kind: KindLeakyBucket, Burst: 10, Rate: 1, Period: sec},
	} {
		for _, q := range []int64{0, 11} {
			req.Quantity = q
			// A full bucket: all 10 remain, nothing to reset. 11 > 10 can
			// never pass: limited, retry -1 (and the leaky bucket's wait -1).
			want := Result{Limited: q > 10, Limit: 10, Remaining: 10, RetryAfter: -1}
			if req.Kind == KindLeakyBucket && q > 10 {
				want.Wait = -1
			}
			next, res := Apply(State{}, &req, t0)
			if live(next, t0) || res != want {
				t.Errorf("Apply(missing, %+v) = %+v, %+v; want nothing stored and %+v", req, next, res, want)
			}
		}
	}
}

// bkParams is a parameter set for the randomized tests.
type bkParams struct{ capacity, rate, period int64 }

var bkParamSets = []bkParams{
	{10, 1, sec},      // Stripe-like
	{40, 2, sec},      // Shopify-like
	{5, 3, 10},        // sub-ns token time
	{7, 3, 1_000_003}, // awkward ratio
	{1, 1, ms},        // a single slot
	{1000, 999, 3*sec + 7},
	{3, 1000, 7}, // many tokens per ns
	{MaxCount, MaxCount, MaxPeriod},
	{MaxCount, 3, 1 << 22},
	{1 << 20, MaxCount, MaxPeriod},
	{7, 3, MaxPeriod},
}

// bkRandQuantity picks a quantity: peeks, singles, chunks, the whole
// capacity and one more than it.
func bkRandQuantity(rng *rand.Rand, capacity int64) int64 {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return capacity
	case 2:
		return capacity + 1
	case 3, 4:
		return 1 + rng.Int64N(capacity)
	case 5:
		return 1 + rng.Int64N(capacity/4+1)
	}
	return 1
}

// bkRandGap picks a clock advance scaled to the time the bucket takes to
// refill completely. It keeps the simulated clock below t0 + 2^60, far from
// the end of int64 time even with a MaxSpan deficit on top.
func bkRandGap(rng *rand.Rand, p bkParams) int64 {
	return min(bkRandGapUncapped(rng, p), 1<<60/256)
}

func bkRandGapUncapped(rng *rand.Rand, p bkParams) int64 {
	fill := max(1, new(big.Int).Div(new(big.Int).Mul(big.NewInt(p.capacity), big.NewInt(p.period)), big.NewInt(p.rate)).Int64())
	switch rng.IntN(6) {
	case 0, 1:
		return 0
	case 2:
		return rng.Int64N(3)
	case 3:
		return rng.Int64N(ms * 3)
	}
	return rng.Int64N(fill/int64(1+rng.IntN(40)) + 1)
}

// bkFloorMulDiv returns floor(a*b/c), saturating when it exceeds 2^63-1.
func bkFloorMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > 1<<62 {
		return 1 << 62
	}
	return int64(q)
}

// bkEvent is one admitted request.
type bkEvent struct{ at, q int64 }

// bkCheckBound checks that, over every window [t_i, t_j] between admitted
// events, the admitted sum stays within bound(L).
func bkCheckBound(t *testing.T, events []bkEvent, bound func(L int64) int64) {
	t.Helper()
	for i := range events {
		sum := int64(0)
		for j := i; j < len(events); j++ {
			sum += events[j].q
			L := events[j].at - events[i].at
			if b := bound(L); sum > b {
				t.Fatalf("admitted %d in [%d, %d] (L=%d ns), bound %d", sum, events[i].at, events[j].at, L, b)
			}
		}
	}
}

// bkCheckRetry checks that a refused request with a RetryAfter is allowed at
// exactly now+RetryAfter and not a nanosecond earlier, and likewise at the
// wire's rounding: allowed at now+CeilMillis and not 1 ms before that.
func bkCheckRetry(t *testing.T, st State, req Request, now int64, res Result) {
	t.Helper()
	if !res.Limited {
		return
	}
	if req.Quantity > req.Burst {
		if res.RetryAfter != -1 {
			t.Fatalf("q %d > capacity %d: RetryAfter = %d, want -1", req.Quantity, req.Burst, res.RetryAfter)
		}
		return
	}
	if res.RetryAfter < 1 {
		t.Fatalf("refused q=%d with RetryAfter %d", req.Quantity, res.RetryAfter)
	}
	allowedAt := func(at int64) bool {
		_, r := Apply(st, &req, at)
		return !r.Limited
	}
	r := res.RetryAfter
	if !allowedAt(now + r) {
		t.Fatalf("q=%d refused at now+RetryAfter (%d ns)", req.Quantity, r)
	}
	if allowedAt(now + r - 1) {
		t.Fatalf("q=%d allowed at now+RetryAfter-1ns (%d ns)", req.Quantity, r-1)
	}
	wire := CeilMillis(r) * ms // the wire's rounding
	if !allowedAt(now + wire) {
		t.Fatalf("q=%d refused at now+CeilMillis(RetryAfter) = %d ms", req.Quantity, wire/ms)
	}
	if allowedAt(now + wire - ms) {
		t.Fatalf("q=%d allowed 1 ms before now+CeilMillis(RetryAfter) = %d ms", req.Quantity, wire/ms)
	}
}

// bkRatModel is an exact real-number model of a continuous bucket: its
// deficit in ns (time to be full for a token bucket, to be empty for a leaky
// bucket).
type bkRatModel struct {
	p       bkParams
	deficit *big.Rat
	last    int64
}

func bkRatCeil(x *big.Rat) int64 {
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// apply runs one request on the model and returns the reply it predicts
// (Wait holding the deficit before the request).
func (m *bkRatModel) apply(now, q int64) Result {
	elapsed := new(big.Rat).SetInt64(now - m.last)
	m.last = now
	m.deficit.Sub(m.deficit, elapsed)
	if m.deficit.Sign() < 0 {
		m.deficit.SetInt64(0)
	}
	perUnit := big.NewRat(m.p.period, m.p.rate) // ns per token
	units := func(d *big.Rat) *big.Rat { return new(big.Rat).Quo(d, perUnit) }
	res := Result{Limit: m.p.capacity, RetryAfter: -1, Wait: bkRatCeil(m.deficit)}
	room := new(big.Rat).Mul(new(big.Rat).SetInt64(m.p.capacity-q), perUnit) // deficit allowed before q
	switch {
	case q > m.p.capacity:
		res.Limited = true
	case m.deficit.Cmp(room) > 0:
		res.Limited = true
		res.RetryAfter = bkRatCeil(new(big.Rat).Sub(m.deficit, room))
	default:
		m.deficit.Add(m.deficit, new(big.Rat).Mul(new(big.Rat).SetInt64(q), perUnit))
	}
	res.Remaining = m.p.capacity - bkRatCeil(units(m.deficit))
	res.ResetAfter = bkRatCeil(m.deficit)
	return res
}

func bkParamChanges(t *testing.T, kind Kind) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, uint64(kind)))
	var st State
	now := t0
	for i := range 20000 {
		p := bkParamSets[rng.IntN(len(bkParamSets))]
		now += min(bkRandGap(rng, p), 1<<44) // 20000 steps stay below t0 + 2^59

		req := Request{Kind: kind, Burst: p.capacity, Rate: p.rate, Period: p.period,
			Quantity: bkRandQuantity(rng, p.capacity), Interval: kind == KindTokenBucket && rng.IntN(2) == 0}
		next, got := Apply(st, &req, now)
		// A deficit written under other parameters is at most MaxSpan,
		// plus up to one (old) period to an INTERVAL bucket's next refill.
		limit := MaxSpan + MaxPeriod
		switch {
		case got.Remaining < 0 || got.Remaining > p.capacity:
			t.Fatalf("step %d %+v: remaining %d outside [0, %d]", i, req, got.Remaining, p.capacity)
		case got.ResetAfter < 0 || got.ResetAfter > limit:
			t.Fatalf("step %d %+v on %+v at %d: reset after %d outside [0, %d]", i, req, st, now, got.ResetAfter, limit)
		case got.RetryAfter > got.ResetAfter:
			t.Fatalf("step %d %+v: retry after %d beyond reset after %d", i, req, got.RetryAfter, got.ResetAfter)
		case got.Limited && !equalState(next, st):
			t.Fatalf("step %d: limited request changed the state", i)
		case got.Limited && got.RetryAfter == -1 && req.Quantity <= p.capacity:
			t.Fatalf("step %d %+v: refused a possible request with RetryAfter -1", i, req)
		case !got.Limited && got.RetryAfter != -1:
			t.Fatalf("step %d: allowed with RetryAfter %d", i, got.RetryAfter)
		case !got.Limited && req.Quantity > 0 && next.ExpireAt-now != got.ResetAfter:
			t.Fatalf("step %d %+v: ExpireAt-now = %d, ResetAfter = %d", i, req, next.ExpireAt-now, got.ResetAfter)
		}
		if kind == KindLeakyBucket && (got.Wait < -1 || got.Limited != (got.Wait == -1)) {
			t.Fatalf("step %d: wait %d with limited %v", i, got.Wait, got.Limited)
		}
		st = stored(next, now)
	}
}

// bkChange is one call of a parameter-change table: its own request.
type bkChange struct {
	at   int64
	req  Request
	want Result
}

// TestBucketParamChangeTable shows how a stored state reads under new
// parameters: a continuous bucket keeps the instant it is full (empty)
// again, an INTERVAL bucket its token deficit (capped at the new capacity)
// and its next refill instant.
func TestBucketParamChangeTable(t *testing.T) {
	s := sec
	tb := func(capacity, rate, period, q int64, interval bool) Request {
		return Request{Kind: KindTokenBucket, Burst: capacity, Rate: rate, Period: period, Quantity: q, Interval: interval}
	}
	lb := func(capacity, rate, period, q int64) Request {
		return Request{Kind: KindLeakyBucket, Burst: capacity, Rate: rate, Period: period, Quantity: q}
	}
	tests := []struct {
		name  string
		steps []bkChange
	}{
		{"continuous capacity and rate change", []bkChange{
			{0, tb(10, 1, s, 10, false), Result{Limit: 10, RetryAfter: -1, ResetAfter: 10 * s}}, // full at 10 s
			// Still full at 10 s: 10 missing of 5, none there; 1 fits when 4 are missing: 10 s - 4 s.
			{0, tb(5, 1, s, 0, false), Result{Limit: 5, RetryAfter: -1, ResetAfter: 10 * s}},
			{0, tb(5, 1, s, 1, false), Result{Limited: true, Limit: 5, RetryAfter: 6 * s, ResetAfter: 10 * s}},
			{6 * s, tb(5, 1, s, 1, false), Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 5 * s}}, // 4 + 1 missing
			// 5 s left at 2/s = 10 missing of 20: 10 there.
			{6 * s, tb(20, 2, s, 0, false), Result{Limit: 20, Remaining: 10, RetryAfter: -1, ResetAfter: 5 * s}},
			{6 * s, tb(20, 4, s, 0, false), Result{Limit: 20, Remaining: 0, RetryAfter: -1, ResetAfter: 5 * s}}, // 5 s * 4/s = 20 missing
		}},
		{"remainder re-expressed in the new rate", []bkChange{
			{0, tb(5, 3, 10, 1, false), Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 4}}, // 10/3 = 3 + 1/3 ns
			// 1/3 ns -> ceil(2/3) = 1 half-ns: 3.5 ns = 0.7 token missing -> 4 whole; ceil(3.5) = 4.
			{0, tb(5, 2, 10, 0, false), Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 4}},
			// 1/3 ns -> ceil(7/3) = 3 sevenths: 3 + 3/7 ns at 7 per 10 ns = 2.4 tokens missing -> 2 whole left.
			{0, tb(5, 7, 10, 0, false), Result{Limit: 5, Remaining: 2, RetryAfter: -1, ResetAfter: 4}},
		}},
		{"continuous to interval and back", []bkChange{
			{0, tb(10, 1, s, 3, false), Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 3 * s}},
			// 2.5 s to full at 2/s = 5 missing; refills of 2 every 1 s from now: 3 refills.
			{500 * ms, tb(10, 2, s, 0, true), Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 3 * s}},
			{500 * ms, tb(10, 2, s, 1, true), Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 3 * s}},
			// 6 missing, now refilled continuously at 1/s: 6 s.
			{500 * ms, tb(10, 1, s, 0, false), Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 6 * s}},
		}},
		{"interval period shortened", []bkChange{
			{0, tb(10, 4, 60*s, 10, true), Result{Limit: 10, RetryAfter: -1, ResetAfter: 180 * s}}, // refills at 60, 120, 180 s
			// The next refill stays at 60 s; then every 4 s: 60 s (6 missing), 64 s (2), 68 s (0).
			{1 * s, tb(10, 4, 4*s, 0, true), Result{Limit: 10, RetryAfter: -1, ResetAfter: 67 * s}},
			{59 * s, tb(10, 4, 4*s, 0, true), Result{Limit: 10, RetryAfter: -1, ResetAfter: 9 * s}},
			{64 * s, tb(10, 4, 4*s, 0, true), Result{Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 4 * s}},
			// Capacity 5: the stored 10 missing is capped at 5 before the
			// refills: 60 s (1 missing), 64 s (full).
			{61 * s, tb(5, 4, 4*s, 0, true), Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 3 * s}},
			{64 * s, tb(5, 4, 4*s, 0, true), Result{Limit: 5, Remaining: 5, RetryAfter: -1}},
		}},
		{"leaky capacity shrinks", []bkChange{
			{0, lb(40, 2, s, 40), Result{Limit: 40, RetryAfter: -1, ResetAfter: 20 * s}},
			// Still 40 queued (20 s): no place of 20; 1 fits at level 19: 21 leave = 10.5 s.
			{0, lb(20, 2, s, 0), Result{Limit: 20, RetryAfter: -1, ResetAfter: 20 * s, Wait: 20 * s}},
			{0, lb(20, 2, s, 1), Result{Limited: true, Limit: 20, RetryAfter: 10500 * ms, ResetAfter: 20 * s, Wait: -1}},
			{10500 * ms, lb(20, 2, s, 1), Result{Limit: 20, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * s, Wait: 9500 * ms}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st State
			for i, c := range tc.steps {
				now := t0 + c.at
				next, got := Apply(st, &c.req, now)
				if got != c.want {
					t.Fatalf("step %d %+v: got %+v, want %+v", i, c.req, got, c.want)
				}
				st = stored(next, now)
			}
		})
	}
}
