package engine

import (
	"math/big"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"testing"
)

// Shared by the token and leaky bucket tests.
const (
	bkT0  = int64(1_700_000_000) * 1e9 // a realistic "now" (Unix ns)
	bkSec = int64(1e9)
	bkMs  = int64(1e6)
)

// bkStep is one call of a table test: at t0+at, take/add q.
type bkStep struct {
	at   int64
	q    int64
	want Result
}

// bkKeep is what the store does with a returned state: it keeps it while
// ExpireAt > now and deletes the key otherwise.
func bkKeep(st State, now int64) State {
	if st.ExpireAt <= now {
		return State{}
	}
	return st
}

// bkSame reports whether two states are identical (Log is nil for buckets).
func bkSame(a, b State) bool {
	return a.Kind == b.Kind && a.ExpireAt == b.ExpireAt && a.A == b.A && a.B == b.B && a.C == b.C && len(a.Log) == 0 && len(b.Log) == 0
}

// bkRun applies steps in order to one key and checks every reply and the
// stored state's consistency with it.
func bkRun(t *testing.T, req Request, steps []bkStep) {
	t.Helper()
	var st State
	for i, s := range steps {
		r := req
		r.Quantity = s.q
		now := bkT0 + s.at
		next, got := Apply(st, &r, now)
		if got != s.want {
			t.Fatalf("step %d (t0%+dns, q=%d): got %+v, want %+v", i, s.at, s.q, got, s.want)
		}
		if got.Limited && !bkSame(next, st) {
			t.Fatalf("step %d: limited request changed the state: %+v -> %+v", i, st, next)
		}
		if next.ExpireAt > now {
			if next.ExpireAt-now != got.ResetAfter {
				t.Fatalf("step %d: ExpireAt-now = %d, ResetAfter = %d", i, next.ExpireAt-now, got.ResetAfter)
			}
		} else if got.ResetAfter != 0 {
			t.Fatalf("step %d: nothing stored but ResetAfter = %d", i, got.ResetAfter)
		}
		st = bkKeep(next, now)
	}
}

func TestTokenBucketTable(t *testing.T) {
	s, ms := bkSec, bkMs
	tests := []struct {
		name  string
		req   Request
		steps []bkStep
	}{
		{
			// Stripe-like: 10 tokens, 1 token per second.
			name: "capacity 10 refill 1/s",
			req:  Request{Kind: KindTokenBucket, Burst: 10, Rate: 1, Period: s},
			steps: []bkStep{
				{0, 1, Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 1 * s}},  // 10-1 = 9; 1 token = 1 s to full
				{0, 9, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * s}}, // 9-9 = 0; 10 tokens missing = 10 s
				{0, 1, Result{Limited: true, Limit: 10, RetryAfter: 1 * s, ResetAfter: 10 * s}},
				// 0.5 s later 0.5 tokens are back: need 0.5 more = 0.5 s.
				{500 * ms, 1, Result{Limited: true, Limit: 10, RetryAfter: 500 * ms, ResetAfter: 9500 * ms}},
				// 1 s: exactly 1 token back, taken: 10 missing again.
				{1 * s, 1, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * s}},
				// 3.5 s: 2.5 tokens back: 2 whole; 7.5 missing = 7.5 s.
				{3500 * ms, 0, Result{Limit: 10, Remaining: 2, RetryAfter: -1, ResetAfter: 7500 * ms}},
				{3500 * ms, 11, Result{Limited: true, Limit: 10, Remaining: 2, RetryAfter: -1, ResetAfter: 7500 * ms}},      // 11 > 10: never
				{3500 * ms, 3, Result{Limited: true, Limit: 10, Remaining: 2, RetryAfter: 500 * ms, ResetAfter: 7500 * ms}}, // 3 - 2.5 = 0.5 token
				// Full at 1 s + 10 s = 11 s exactly: the key has expired, fresh.
				{11 * s, 0, Result{Limit: 10, Remaining: 10, RetryAfter: -1}},
				{11 * s, 10, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * s}},
			},
		},
		{
			// 3 tokens per 10 ns: a token takes 10/3 ns, kept exactly.
			name: "sub-nanosecond refill 3 per 10ns",
			req:  Request{Kind: KindTokenBucket, Burst: 5, Rate: 3, Period: 10},
			steps: []bkStep{
				{0, 1, Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 4}},                // ceil(10/3) = 4
				{0, 1, Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 7}},                // ceil(20/3) = 7
				{0, 1, Result{Limit: 5, Remaining: 2, RetryAfter: -1, ResetAfter: 10}},               // 30/3 = 10, no drift
				{0, 3, Result{Limited: true, Limit: 5, Remaining: 2, RetryAfter: 4, ResetAfter: 10}}, // 1 token short: ceil(10/3) = 4
				// +4 ns: 2 + 4*3/10 = 3.2 tokens; take 3 leaves 0.2; missing 4.8 tokens * 10/3 = 16 ns.
				{4, 3, Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 16}},
				// +5 ns: 0.2 + 0.3 = 0.5 tokens: 1 needs 0.5 * 10/3 = 5/3 ns -> 2.
				{5, 1, Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 2, ResetAfter: 15}},
				// +7 ns: 13 ns missing (3.9 tokens), 1.1 there; take 1: 13 + 10/3 = 16.33 ns -> 17.
				{7, 1, Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 17}},
			},
		},
		{
			// INTERVAL: 4 tokens arrive at once every 4 s, aligned to first use.
			name: "refill 4 every 4s interval",
			req:  Request{Kind: KindTokenBucket, Burst: 4, Rate: 4, Period: 4 * s, Interval: true},
			steps: []bkStep{
				{0, 1, Result{Limit: 4, Remaining: 3, RetryAfter: -1, ResetAfter: 4 * s}},               // refill at t0+4s
				{1 * s, 3, Result{Limit: 4, Remaining: 0, RetryAfter: -1, ResetAfter: 3 * s}},           // 4s - 1s
				{2 * s, 1, Result{Limited: true, Limit: 4, RetryAfter: 2 * s, ResetAfter: 2 * s}},       // nothing until t0+4s
				{3999 * ms, 1, Result{Limited: true, Limit: 4, RetryAfter: 1 * ms, ResetAfter: 1 * ms}}, // 4s - 3.999s
				{4 * s, 0, Result{Limit: 4, Remaining: 4, RetryAfter: -1}},                              // full at t0+4s: expired
				{5 * s, 2, Result{Limit: 4, Remaining: 2, RetryAfter: -1, ResetAfter: 4 * s}},           // new alignment: refill t0+9s
				{8 * s, 0, Result{Limit: 4, Remaining: 2, RetryAfter: -1, ResetAfter: 1 * s}},           // 9s - 8s
				{8 * s, 3, Result{Limited: true, Limit: 4, Remaining: 2, RetryAfter: 1 * s, ResetAfter: 1 * s}},
			},
		},
		{
			// INTERVAL with several refills to full: capacity 10, 4 every 4 s.
			name: "capacity 10 refill 4 every 4s interval",
			req:  Request{Kind: KindTokenBucket, Burst: 10, Rate: 4, Period: 4 * s, Interval: true},
			steps: []bkStep{
				// missing 10: refills at 4s (6), 8s (2), 12s (0): full at 12 s.
				{0, 10, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 12 * s}},
				// 5 needs missing <= 5: ceil((10-5)/4) = 2 refills -> t0+8s, 7 s from t0+1s.
				{1 * s, 5, Result{Limited: true, Limit: 10, RetryAfter: 7 * s, ResetAfter: 11 * s}},
				{4 * s, 0, Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 8 * s}},
				// 8s: 8 tokens, take 5 -> 3 left, missing 7: refills at 12s (3), 16s (0).
				{8 * s, 5, Result{Limit: 10, Remaining: 3, RetryAfter: -1, ResetAfter: 8 * s}},
				{16 * s, 0, Result{Limit: 10, Remaining: 10, RetryAfter: -1}}, // expired exactly now
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { bkRun(t, tc.req, tc.steps) })
	}
}

func TestTokenBucketEdges(t *testing.T) {
	maxC := MaxCount // 2^40
	tests := []struct {
		name  string
		req   Request
		steps []bkStep
	}{
		{
			// 2^40 tokens per ten years: one token takes MaxPeriod/2^40 =
			// 316224000000000000/1099511627776 = 287604.05... ns -> 287605.
			name: "count 2^40 period 10 years",
			req:  Request{Kind: KindTokenBucket, Burst: maxC, Rate: maxC, Period: MaxPeriod},
			steps: []bkStep{
				{0, maxC, Result{Limit: maxC, Remaining: 0, RetryAfter: -1, ResetAfter: MaxPeriod}},
				{0, 1, Result{Limited: true, Limit: maxC, RetryAfter: 287605, ResetAfter: MaxPeriod}},
				{287604, 1, Result{Limited: true, Limit: maxC, RetryAfter: 1, ResetAfter: MaxPeriod - 287604}},
				// 1.0000033 tokens back; take 1: MaxPeriod - 287605 + 287604.05 -> ceil = MaxPeriod.
				{287605, 1, Result{Limit: maxC, Remaining: 0, RetryAfter: -1, ResetAfter: MaxPeriod}},
			},
		},
		{
			// capacity*period/rate = 2^40 * 2^22 / 1 = 2^62 = MaxSpan exactly.
			name: "span 2^62",
			req:  Request{Kind: KindTokenBucket, Burst: maxC, Rate: 1, Period: 1 << 22},
			steps: []bkStep{
				{0, maxC, Result{Limit: maxC, Remaining: 0, RetryAfter: -1, ResetAfter: MaxSpan}},
				{0, 2, Result{Limited: true, Limit: maxC, RetryAfter: 2 << 22, ResetAfter: MaxSpan}},
			},
		},
		{
			name: "span 2^62 interval",
			req:  Request{Kind: KindTokenBucket, Burst: maxC, Rate: 1, Period: 1 << 22, Interval: true},
			steps: []bkStep{
				// 2^40 refills of 1, the first at t0+2^22: full at 2^40 * 2^22 = 2^62.
				{0, maxC, Result{Limit: maxC, Remaining: 0, RetryAfter: -1, ResetAfter: MaxSpan}},
				{0, 2, Result{Limited: true, Limit: maxC, RetryAfter: 2 << 22, ResetAfter: MaxSpan}},
			},
		},
		{
			name: "capacity 1 period 10 years",
			req:  Request{Kind: KindTokenBucket, Burst: 1, Rate: 1, Period: MaxPeriod},
			steps: []bkStep{
				{0, 1, Result{Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: MaxPeriod}},
				{MaxPeriod - 1, 1, Result{Limited: true, Limit: 1, RetryAfter: 1, ResetAfter: 1}},
				{MaxPeriod, 1, Result{Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: MaxPeriod}},
			},
		},
		{
			name: "quantity above capacity on a missing key",
			req:  Request{Kind: KindTokenBucket, Burst: 5, Rate: 1, Period: bkSec},
			steps: []bkStep{
				{0, 6, Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1}},
				{0, 0, Result{Limit: 5, Remaining: 5, RetryAfter: -1}}, // peek: nothing stored
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { bkRun(t, tc.req, tc.steps) })
	}
}

// A peek or a refused request on a missing key stores nothing.
func TestTokenBucketMissingKeyStoresNothing(t *testing.T) {
	for _, interval := range []bool{false, true} {
		for _, q := range []int64{0, 11} {
			req := Request{Kind: KindTokenBucket, Burst: 10, Rate: 1, Period: bkSec, Quantity: q, Interval: interval}
			next, res := Apply(State{}, &req, bkT0)
			if next.ExpireAt > bkT0 || res.ResetAfter != 0 || res.Remaining != 10 {
				t.Errorf("interval=%v q=%d on a missing key: state %+v, result %+v; want nothing stored, remaining 10", interval, q, next, res)
			}
		}
	}
}

// Many small takes keep the sub-nanosecond remainder: 3000 takes of one
// token at 10/3 ns each sum to exactly 10000 ns.
func TestTokenBucketNoDrift(t *testing.T) {
	req := Request{Kind: KindTokenBucket, Burst: 3000, Rate: 3, Period: 10, Quantity: 1}
	var st State
	for i := range 3000 {
		var res Result
		st, res = Apply(st, &req, bkT0)
		if res.Limited {
			t.Fatalf("take %d limited", i)
		}
	}
	if st.A != bkT0+10000 || st.B != 0 || st.ExpireAt != bkT0+10000 {
		t.Fatalf("after 3000 takes: A = t0%+d, B = %d, ExpireAt = t0%+d; want t0+10000, 0, t0+10000", st.A-bkT0, st.B, st.ExpireAt-bkT0)
	}
}

// bkParams is a parameter set for the randomized tests.
type bkParams struct{ capacity, rate, period int64 }

var bkParamSets = []bkParams{
	{10, 1, bkSec},    // Stripe-like
	{40, 2, bkSec},    // Shopify-like
	{5, 3, 10},        // sub-ns token time
	{7, 3, 1_000_003}, // awkward ratio
	{1, 1, bkMs},      // a single slot
	{1000, 999, 3*bkSec + 7},
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
		return rng.Int64N(bkMs * 3)
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
	wire := CeilMillis(r) * bkMs // the wire's rounding
	if !allowedAt(now + wire) {
		t.Fatalf("q=%d refused at now+CeilMillis(RetryAfter) = %d ms", req.Quantity, wire/bkMs)
	}
	if allowedAt(now + wire - bkMs) {
		t.Fatalf("q=%d allowed 1 ms before now+CeilMillis(RetryAfter) = %d ms", req.Quantity, wire/bkMs)
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

// TestTokenBucketRandom drives random arrival sequences on a simulated clock
// and checks every reply against the exact model, the documented bound, and
// RetryAfter's exactness.
func TestTokenBucketRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range bkParamSets {
		for seq := range 4 {
			m := &bkRatModel{p: p, deficit: new(big.Rat), last: bkT0}
			var st State
			var events []bkEvent
			now := bkT0
			for i := range 250 {
				now += bkRandGap(rng, p)
				req := Request{Kind: KindTokenBucket, Burst: p.capacity, Rate: p.rate, Period: p.period, Quantity: bkRandQuantity(rng, p.capacity)}
				next, got := Apply(st, &req, now)
				want := m.apply(now, req.Quantity)
				want.Wait = 0
				if got != want {
					t.Fatalf("%+v seq %d step %d (q=%d): got %+v, model %+v", p, seq, i, req.Quantity, got, want)
				}
				if got.Remaining < 0 {
					t.Fatalf("negative remaining %d", got.Remaining)
				}
				bkCheckRetry(t, st, req, now, got)
				if !got.Limited && req.Quantity > 0 {
					events = append(events, bkEvent{now, req.Quantity})
				}
				st = bkKeep(next, now)
			}
			bkCheckBound(t, events, func(L int64) int64 {
				return p.capacity + bkFloorMulDiv(L, p.rate, p.period)
			})
		}
	}
}

// bkIntervalModel is a direct simulation of the INTERVAL variant: a bucket
// of tokens, refilled by rate at anchor+k*period while not full.
type bkIntervalModel struct {
	p              bkParams
	active         bool
	anchor, tokens int64
	seen           int64 // refills applied since anchor
}

func (m *bkIntervalModel) apply(now, q int64) Result {
	if m.active {
		k := (now - m.anchor) / m.p.period
		m.tokens = min(m.p.capacity, m.tokens+m.p.rate*(k-m.seen))
		m.seen = k
		if m.tokens == m.p.capacity {
			m.active = false
		}
	}
	if !m.active {
		m.tokens, m.anchor, m.seen = m.p.capacity, now, 0
	}
	res := Result{Limit: m.p.capacity, RetryAfter: -1}
	switch {
	case q > m.p.capacity:
		res.Limited = true
	case q > m.tokens:
		res.Limited = true
		k := m.seen + 1
		for m.tokens+m.p.rate*(k-m.seen) < q {
			k++
		}
		res.RetryAfter = m.anchor + k*m.p.period - now
	case q > 0:
		m.tokens -= q
		m.active = true
	}
	res.Remaining = m.tokens
	if m.tokens < m.p.capacity {
		k := m.seen + 1
		for m.tokens+m.p.rate*(k-m.seen) < m.p.capacity {
			k++
		}
		res.ResetAfter = m.anchor + k*m.p.period - now
	}
	return res
}

func TestTokenBucketIntervalRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sets := []bkParams{{4, 4, 4 * bkSec}, {10, 4, 4 * bkSec}, {10, 1, bkSec}, {7, 3, 1_000_003}, {1, 1, bkMs}, {50, 7, 13}}
	for _, p := range sets {
		for seq := range 6 {
			m := &bkIntervalModel{p: p}
			var st State
			var events []bkEvent
			now := bkT0
			for i := range 250 {
				now += bkRandGap(rng, p)
				req := Request{Kind: KindTokenBucket, Burst: p.capacity, Rate: p.rate, Period: p.period, Quantity: bkRandQuantity(rng, p.capacity), Interval: true}
				next, got := Apply(st, &req, now)
				if want := m.apply(now, req.Quantity); got != want {
					t.Fatalf("%+v seq %d step %d (q=%d): got %+v, model %+v", p, seq, i, req.Quantity, got, want)
				}
				bkCheckRetry(t, st, req, now, got)
				if !got.Limited && req.Quantity > 0 {
					events = append(events, bkEvent{now, req.Quantity})
				}
				st = bkKeep(next, now)
			}
			bkCheckBound(t, events, func(L int64) int64 {
				return p.capacity + p.rate*((L+p.period-1)/p.period)
			})
		}
	}
	// Large parameters: no model, but the bound and RetryAfter still hold.
	for _, p := range bkParamSets {
		var st State
		var events []bkEvent
		now := bkT0
		for range 250 {
			now += bkRandGap(rng, p)
			req := Request{Kind: KindTokenBucket, Burst: p.capacity, Rate: p.rate, Period: p.period, Quantity: bkRandQuantity(rng, p.capacity), Interval: true}
			next, got := Apply(st, &req, now)
			if got.Remaining < 0 || got.Remaining > p.capacity {
				t.Fatalf("%+v: remaining %d", p, got.Remaining)
			}
			bkCheckRetry(t, st, req, now, got)
			if !got.Limited && req.Quantity > 0 {
				events = append(events, bkEvent{now, req.Quantity})
			}
			st = bkKeep(next, now)
		}
		bkCheckBound(t, events, func(L int64) int64 {
			refills := (L + p.period - 1) / p.period
			if refills > 0 && p.rate > (1<<62)/refills {
				return 1<<63 - 1
			}
			return p.capacity + p.rate*refills
		})
	}
}

// TestTokenBucketParamChanges sends changing parameters (and switches
// between the variants) on one key: nothing panics, remaining stays within
// [0, capacity], and the reply agrees with what is stored.
func TestTokenBucketParamChanges(t *testing.T) {
	bkParamChanges(t, KindTokenBucket)
}

func bkParamChanges(t *testing.T, kind Kind) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, uint64(kind)))
	var st State
	now := bkT0
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
		case got.Limited && !bkSame(next, st):
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
		st = bkKeep(next, now)
	}
}

func TestTokenBucketAllocs(t *testing.T) {
	for _, interval := range []bool{false, true} {
		req := Request{Kind: KindTokenBucket, Burst: 100, Rate: 7, Period: bkSec, Quantity: 1, Interval: interval}
		var st State
		now := bkT0
		allocs := testing.AllocsPerRun(1000, func() {
			now += 10 * bkMs
			st, _ = Apply(st, &req, now)
		})
		if allocs != 0 {
			t.Errorf("interval=%v: %v allocs per call, want 0", interval, allocs)
		}
	}
}

// BenchmarkBuckets answers: what does one TB.TAKE or LB.ADD cost in the
// engine, against a reference of the irreducible work (a State copy and one
// 128-bit multiply and divide), and does it allocate? Quote the ratios: the
// machine is shared and noisy.
func BenchmarkBuckets(b *testing.B) {
	b.Run("reference", func(b *testing.B) {
		var st State
		now := bkT0
		b.ReportAllocs()
		for b.Loop() {
			now += 10 * bkMs
			hi, lo := bits.Mul64(uint64(now), 7)
			q, r := bits.Div64(hi%uint64(bkSec), lo, uint64(bkSec))
			st = State{Kind: KindTokenBucket, ExpireAt: now + int64(q&1), A: int64(q), B: int64(r), C: st.C + 1}
		}
		runtime.KeepAlive(st)
	})
	for _, tc := range []struct {
		name     string
		kind     Kind
		interval bool
	}{
		{"token-continuous", KindTokenBucket, false},
		{"token-interval", KindTokenBucket, true},
		{"leaky", KindLeakyBucket, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// 100 units, 7 per second, one request every 10 ms: a mix of
			// admitted and limited calls once the bucket is drained.
			req := Request{Kind: tc.kind, Burst: 100, Rate: 7, Period: bkSec, Quantity: 1, Interval: tc.interval}
			var st State
			now := bkT0
			b.ReportAllocs()
			for b.Loop() {
				now += 10 * bkMs
				st, _ = Apply(st, &req, now)
			}
		})
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
	s := bkSec
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
			{500 * bkMs, tb(10, 2, s, 0, true), Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 3 * s}},
			{500 * bkMs, tb(10, 2, s, 1, true), Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 3 * s}},
			// 6 missing, now refilled continuously at 1/s: 6 s.
			{500 * bkMs, tb(10, 1, s, 0, false), Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 6 * s}},
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
			{0, lb(20, 2, s, 1), Result{Limited: true, Limit: 20, RetryAfter: 10500 * bkMs, ResetAfter: 20 * s, Wait: -1}},
			{10500 * bkMs, lb(20, 2, s, 1), Result{Limit: 20, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * s, Wait: 9500 * bkMs}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st State
			for i, c := range tc.steps {
				now := bkT0 + c.at
				next, got := Apply(st, &c.req, now)
				if got != c.want {
					t.Fatalf("step %d %+v: got %+v, want %+v", i, c.req, got, c.want)
				}
				st = bkKeep(next, now)
			}
		})
	}
}
