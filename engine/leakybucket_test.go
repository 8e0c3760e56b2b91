package engine

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestLeakyBucketTable(t *testing.T) {
	s := sec
	bkRunTables(t, []bkTable{
		{
			// Shopify: a bucket of 40 leaking 2 per second (0.5 s each).
			name: "capacity 40 leak 2/s",
			req:  Request{Kind: KindLeakyBucket, Burst: 40, Rate: 2, Period: s},
			steps: []bkStep{
				// Empty bucket: no wait; 1 queued = 0.5 s to drain.
				{0, 1, Result{Limit: 40, Remaining: 39, RetryAfter: -1, ResetAfter: 500 * ms, Wait: 0}},
				// Behind 1 (0.5 s); 40 queued = 20 s.
				{0, 39, Result{Limit: 40, Remaining: 0, RetryAfter: -1, ResetAfter: 20 * s, Wait: 500 * ms}},
				// Full: one place frees in 0.5 s.
				{0, 1, Result{Limited: true, Limit: 40, RetryAfter: 500 * ms, ResetAfter: 20 * s, Wait: -1}},
				// +0.25 s: level 39.5, 0.5 place to go = 0.25 s.
				{250 * ms, 1, Result{Limited: true, Limit: 40, RetryAfter: 250 * ms, ResetAfter: 19750 * ms, Wait: -1}},
				// +0.5 s: level 39, behind it 39 * 0.5 s = 19.5 s; 40 queued again.
				{500 * ms, 1, Result{Limit: 40, Remaining: 0, RetryAfter: -1, ResetAfter: 20 * s, Wait: 19500 * ms}},
				// +10.5 s: level 40 - 20 = 20: 20 free, 10 s to drain.
				{10500 * ms, 0, Result{Limit: 40, Remaining: 20, RetryAfter: -1, ResetAfter: 10 * s, Wait: 10 * s}},
				{10500 * ms, 41, Result{Limited: true, Limit: 40, Remaining: 20, RetryAfter: -1, ResetAfter: 10 * s, Wait: -1}}, // 41 > 40: never
				// 21 needs level <= 19: 1 more to drain = 0.5 s.
				{10500 * ms, 21, Result{Limited: true, Limit: 40, Remaining: 20, RetryAfter: 500 * ms, ResetAfter: 10 * s, Wait: -1}},
				// Empty at 20.5 s exactly: the key has expired.
				{20500 * ms, 0, Result{Limit: 40, Remaining: 40, RetryAfter: -1}},
				{20500 * ms, 40, Result{Limit: 40, Remaining: 0, RetryAfter: -1, ResetAfter: 20 * s}},
			},
		},
		{
			// 3 per 10 ns: each request drains in 10/3 ns, kept exactly.
			name: "sub-nanosecond leak 3 per 10ns",
			req:  Request{Kind: KindLeakyBucket, Burst: 5, Rate: 3, Period: 10},
			steps: []bkStep{
				{0, 1, Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 4}},          // ceil(10/3)
				{0, 1, Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 7, Wait: 4}}, // behind 10/3 -> 4; ceil(20/3) = 7
				{0, 1, Result{Limit: 5, Remaining: 2, RetryAfter: -1, ResetAfter: 10, Wait: 7}},
				// +1 ns: level (10-1)*3/10 = 2.7; 3 fit when level <= 2: 0.7 * 10/3 = 2.33 -> 3 ns.
				{1, 3, Result{Limited: true, Limit: 5, Remaining: 2, RetryAfter: 3, ResetAfter: 9, Wait: -1}},
				{4, 3, Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 16, Wait: 6}}, // level 1.8: 6 ns; 4.8 * 10/3 = 16
			},
		},
		{
			name: "count 2^40 period 10 years",
			req:  Request{Kind: KindLeakyBucket, Burst: MaxCount, Rate: MaxCount, Period: MaxPeriod},
			steps: []bkStep{
				{0, MaxCount, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: MaxPeriod}},
				// One place frees in MaxPeriod/2^40 = 287604.05 ns -> 287605.
				{0, 1, Result{Limited: true, Limit: MaxCount, RetryAfter: 287605, ResetAfter: MaxPeriod, Wait: -1}},
				// Behind MaxPeriod - 287605 ns of queue; adds 287604.05 back -> ceil MaxPeriod.
				{287605, 1, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: MaxPeriod, Wait: MaxPeriod - 287605}},
			},
		},
		{
			name: "span 2^62",
			req:  Request{Kind: KindLeakyBucket, Burst: MaxCount, Rate: 1, Period: 1 << 22},
			steps: []bkStep{
				{0, MaxCount, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: MaxSpan}}, // 2^40 * 2^22
				{0, MaxCount + 1, Result{Limited: true, Limit: MaxCount, RetryAfter: -1, ResetAfter: MaxSpan, Wait: -1}},
			},
		},
		{
			name: "count above capacity on a missing key",
			req:  Request{Kind: KindLeakyBucket, Burst: 5, Rate: 1, Period: sec},
			steps: []bkStep{
				{0, 6, Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1, Wait: -1}},
				{0, 0, Result{Limit: 5, Remaining: 5, RetryAfter: -1}},
			},
		},
	})
}

// TestLeakyBucketRandom drives random arrival sequences on a simulated clock
// and checks every reply against the exact model, the documented bound,
// RetryAfter's exactness and the queue order of the Wait values.
func TestLeakyBucketRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, p := range bkParamSets {
		for seq := range 4 {
			m := &bkRatModel{p: p, deficit: new(big.Rat), last: t0}
			var st State
			var events []bkEvent
			now := t0
			lastHead, lastQ := int64(0), int64(0)
			for i := range 250 {
				now += bkRandGap(rng, p)
				req := Request{Kind: KindLeakyBucket, Burst: p.capacity, Rate: p.rate, Period: p.period, Quantity: bkRandQuantity(rng, p.capacity)}
				next, got := Apply(st, &req, now)
				want := m.apply(now, req.Quantity)
				if want.Limited {
					want.Wait = -1
				}
				if got != want {
					t.Fatalf("%+v seq %d step %d (q=%d): got %+v, model %+v", p, seq, i, req.Quantity, got, want)
				}
				bkCheckRetry(t, st, req, now, got)
				if !got.Limited && req.Quantity > 0 {
					// Each admitted request reaches the head no earlier than
					// the previous one plus its drain time, floored to ns.
					head := now + got.Wait
					if lastQ > 0 {
						if gap := bkFloorMulDiv(lastQ, p.period, p.rate); head < lastHead+gap {
							t.Fatalf("%+v step %d: head at %d, previous head %d + drain %d", p, i, head, lastHead, gap)
						}
					}
					lastHead, lastQ = head, req.Quantity
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

// TestLeakyBucketParamChanges sends changing parameters on one key: nothing
// panics, remaining stays within [0, capacity], and Wait is -1 exactly when
// limited.
func TestLeakyBucketParamChanges(t *testing.T) {
	bkParamChanges(t, KindLeakyBucket)
}
