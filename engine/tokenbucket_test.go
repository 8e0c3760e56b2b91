package engine

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestTokenBucketTable(t *testing.T) {
	s := sec
	bkRunTables(t, []bkTable{
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
	})
}

func TestTokenBucketEdges(t *testing.T) {
	maxC := MaxCount // 2^40
	bkRunTables(t, []bkTable{
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
			req:  Request{Kind: KindTokenBucket, Burst: 5, Rate: 1, Period: sec},
			steps: []bkStep{
				{0, 6, Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1}},
				{0, 0, Result{Limit: 5, Remaining: 5, RetryAfter: -1}}, // peek: nothing stored
			},
		},
	})
}

// Many small takes keep the sub-nanosecond remainder: 3000 takes of one
// token at 10/3 ns each sum to exactly 10000 ns.
func TestTokenBucketNoDrift(t *testing.T) {
	req := Request{Kind: KindTokenBucket, Burst: 3000, Rate: 3, Period: 10, Quantity: 1}
	var st State
	for i := range 3000 {
		var res Result
		st, res = Apply(st, &req, t0)
		if res.Limited {
			t.Fatalf("take %d limited", i)
		}
	}
	if st.A != t0+10000 || st.B != 0 || st.ExpireAt != t0+10000 {
		t.Fatalf("after 3000 takes: A = t0%+d, B = %d, ExpireAt = t0%+d; want t0+10000, 0, t0+10000", st.A-t0, st.B, st.ExpireAt-t0)
	}
}

// TestTokenBucketRandom drives random arrival sequences on a simulated clock
// and checks every reply against the exact model, the documented bound, and
// RetryAfter's exactness.
func TestTokenBucketRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range bkParamSets {
		for seq := range 4 {
			m := &bkRatModel{p: p, deficit: new(big.Rat), last: t0}
			var st State
			var events []bkEvent
			now := t0
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
				st = stored(next, now)
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
	sets := []bkParams{{4, 4, 4 * sec}, {10, 4, 4 * sec}, {10, 1, sec}, {7, 3, 1_000_003}, {1, 1, ms}, {50, 7, 13}}
	for _, p := range sets {
		for seq := range 6 {
			m := &bkIntervalModel{p: p}
			var st State
			var events []bkEvent
			now := t0
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
				st = stored(next, now)
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
		now := t0
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
			st = stored(next, now)
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
