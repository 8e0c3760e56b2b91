package engine

import (
	"fmt"
	"math/big"
	"testing"
)

func TestSlidingWindowCloudflare(t *testing.T) {
	// Cloudflare's example: 50 per minute, 42 in the previous window, 18 in
	// the current one, 15 s into it: estimate = 42×(60−15)/60 + 18 = 49.5.
	// base is a minute boundary; window P = [base, base+1m), window C =
	// [base+1m, base+2m).
	base := int64(29_396_183) * minute
	steps := []winStep{
		// 42 in P (nothing before): estimate 0 + 42 <= 50; remaining
		// floor(50 − 42) = 8; both counts gone at the end of C, 1m50s later.
		{10 * sec, 42, Result{Limit: 50, Remaining: 8, RetryAfter: -1, ResetAfter: 110 * sec}},
		// 15 s into C: 42×45/60 + 0 + 18 = 49.5 <= 50; remaining floor(0.5) = 0;
		// reset at the end of the window after C: 2m − 15s = 105 s.
		{minute + 15*sec, 18, Result{Limit: 50, Remaining: 0, RetryAfter: -1, ResetAfter: 105 * sec}},
		// One more: 49.5 + 1 = 50.5 > 50. It fits once 42×(60s−e)/60s + 19 <= 50,
		// i.e. 60 s − e <= 31×60/42 s = 44.285714285714… s; in ns
		// 60e9 − e <= floor(1860e9/42) = 44_285_714_285, e >= 15_714_285_715,
		// 714_285_715 ns after now (the wire says 715 ms).
		{minute + 15*sec, 1, Result{Limited: true, Limit: 50, Remaining: 0, RetryAfter: 714_285_715, ResetAfter: 105 * sec}},
		// 1 ns before that: 42×44_285_714_286/60e9 = 31.0000000002 > 31: still limited.
		{minute + 15*sec + 714_285_714, 1, Result{Limited: true, Limit: 50, Remaining: 0, RetryAfter: 1, ResetAfter: 105*sec - 714_285_714}},
		// At it: 42×44_285_714_285/60e9 = 30.9999999995 <= 31: allowed;
		// estimate 30.9999999995 + 19, remaining floor(0.0000000005) = 0.
		{minute + 15*sec + 714_285_715, 1, Result{Limit: 50, Remaining: 0, RetryAfter: -1, ResetAfter: 105*sec - 714_285_715}},
		// 45 s into C: 42×15/60 + 19 = 29.5: remaining floor(20.5) = 20 (a peek).
		{minute + 45*sec, 0, Result{Limit: 50, Remaining: 20, RetryAfter: -1, ResetAfter: 75 * sec}},
		// 30 s into the next window: C's 19 weigh 19×30/60 = 9.5: remaining
		// floor(40.5) = 40; C slides out at this window's end, 30 s later.
		{2*minute + 30*sec, 0, Result{Limit: 50, Remaining: 40, RetryAfter: -1, ResetAfter: 30 * sec}},
		// 51 > 50 can never fit.
		{2*minute + 30*sec, 51, Result{Limited: true, Limit: 50, Remaining: 40, RetryAfter: -1, ResetAfter: 30 * sec}},
		// 3 minutes after base both counts have slid out: a peek is fresh.
		{3 * minute, 0, Result{Limit: 50, Remaining: 50, RetryAfter: -1, ResetAfter: 0}},
	}
	winRunSteps(t, KindSlidingWindow, 50, minute, base, steps)
}

func TestSlidingWindowEdges(t *testing.T) {
	winRunTables(t, KindSlidingWindow, []winTable{
		{
			name: "retry in the next window", limit: 10, window: 10 * sec, base: 100 * sec,
			steps: []winStep{
				{2 * sec, 10, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 18 * sec}},
				// 0 + 10 + 1 > 10, and in this window nothing slides out.
				// Next window: 10×(10s−e)/10s + 1 <= 10 once e >= 1 s: 8 s + 1 s.
				{2 * sec, 1, Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 9 * sec, ResetAfter: 18 * sec}},
				{11*sec - 1, 1, Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 1, ResetAfter: 9*sec + 1}},
				// estimate 10×9/10 + 0 + 1 = 10: remaining 0; reset at 120 s.
				{11 * sec, 1, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 19 * sec}},
			},
		},
		{
			name: "the whole limit waits two windows", limit: 10, window: 10 * sec, base: 100 * sec,
			steps: []winStep{
				{2 * sec, 3, Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 18 * sec}},
				// 3 + 10 > 10 now; in the next window 3×(10s−e)/10s + 10 <= 10
				// needs e = 10 s, so only from base+20s, 18 s later.
				{2 * sec, 10, Result{Limited: true, Limit: 10, Remaining: 7, RetryAfter: 18 * sec, ResetAfter: 18 * sec}},
				// 1 ns before: 3×1/10e9 + 10 > 10.
				{20*sec - 1, 10, Result{Limited: true, Limit: 10, Remaining: 9, RetryAfter: 1, ResetAfter: 1}},
				{20 * sec, 10, Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 20 * sec}},
			},
		},
		{
			name: "fresh key, count above the limit", limit: 5, window: sec, base: 7 * sec,
			steps: []winStep{
				{0, 6, Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1, ResetAfter: 0}},
				{0, 0, Result{Limit: 5, Remaining: 5, RetryAfter: -1, ResetAfter: 0}},
			},
		},
		{
			name: "remaining is floored, never rounded up", limit: 3, window: 3 * sec, base: 30 * sec,
			steps: []winStep{
				{0, 2, Result{Limit: 3, Remaining: 1, RetryAfter: -1, ResetAfter: 6 * sec}},
				// 1 s into the next window: 2×2/3 = 1.333…; floor(3 − 1.333…) = 1.
				{4 * sec, 0, Result{Limit: 3, Remaining: 1, RetryAfter: -1, ResetAfter: 2 * sec}},
				// 1.333… + 2 = 3.333… > 3: needs 2×(3s−e)/3s <= 1, e >= 1.5 s.
				{4 * sec, 2, Result{Limited: true, Limit: 3, Remaining: 1, RetryAfter: sec / 2, ResetAfter: 2 * sec}},
				// 2 s in: 2×1/3 = 0.666…; floor(2.333…) = 2.
				{5 * sec, 0, Result{Limit: 3, Remaining: 2, RetryAfter: -1, ResetAfter: sec}},
			},
		},
	})
}

// swOracleRetry computes, with math/big rationals, the first instant at or
// after now at which count fits, scanning the candidate instants of the
// current window and the next (the estimate is linear in each), given the
// counts prev and cur of the current window [start, start+w).
func swOracleRetry(prev, cur, count, limit, start, w, now int64) int64 {
	fits := func(p, c, e int64) bool {
		// p×(w−e)/w + c + count <= limit
		lhs := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(p), big.NewInt(w-e)), big.NewInt(w))
		lhs.Add(lhs, new(big.Rat).SetInt64(c+count))
		return lhs.Cmp(new(big.Rat).SetInt64(limit)) <= 0
	}
	first := func(p, c, s, from int64) (int64, bool) {
		// binary search for the first e in [from−s, w) that fits
		lo, hi := from-s, w
		for lo < hi {
			mid := lo + (hi-lo)/2
			if fits(p, c, mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return s + lo, lo < w
	}
	if t, ok := first(prev, cur, start, now); ok {
		return t
	}
	if t, ok := first(cur, 0, start+w, start+w); ok {
		return t
	}
	return start + 2*w
}

func TestSlidingWindowHugeExactRetry(t *testing.T) {
	// Counts up to 2^40 and ten-year windows: products up to ~2^98, checked
	// against big rationals.
	w := MaxPeriod
	cases := []struct{ limit, prevN, curN, count, at int64 }{
		{MaxCount, MaxCount, 0, 1, 1},
		{MaxCount, MaxCount, 0, MaxCount / 2, w / 3},
		{MaxCount, MaxCount - 7, 5, MaxCount / 2, w/2 + 12345},
		{MaxCount, 1, MaxCount - 1, 1, w - 1},
		{MaxCount, MaxCount / 3, MaxCount / 3, MaxCount, 17},
		{3, 2, 1, 1, 999_999_999_999},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			req := winReq(KindSlidingWindow, c.limit, w, 0)
			var k winKey
			// prevN in the window [0, w), curN in [w, 2w), then count at w + c.at.
			if c.prevN > 0 {
				req.Quantity = c.prevN
				if r := k.do(t, req, 5); r.Limited {
					t.Fatalf("setting up prev: %+v", r)
				}
			}
			if c.curN > 0 {
				req.Quantity = c.curN
				if r := k.do(t, req, 2*w-1); r.Limited {
					t.Fatalf("setting up cur: %+v", r)
				}
			}
			now := w + c.at
			req.Quantity = c.count
			res := k.do(t, req, now)
			if !res.Limited {
				t.Fatalf("%+v: allowed, want limited", res)
			}
			want := swOracleRetry(c.prevN, c.curN, c.count, c.limit, w, w, now) - now
			if res.RetryAfter != want {
				t.Errorf("RetryAfter = %d, want %d (big.Rat)", res.RetryAfter, want)
			}
			winCheckRetryReset(t, &k, req, now, res)
		})
	}
}

func TestSlidingWindowBoundIsReached(t *testing.T) {
	// limit units 1 ns before a window's end, then limit − 1 more 2 ns before
	// the next window's end: 2×limit − 1 inside one window length.
	// At that instant the first burst weighs 100×2/60e9 (ceil 1), so the
	// estimate is 0.0000000033 + 99 <= 100.
	var k winKey
	const limit, w = 100, 60 * sec
	end := 1000 * w
	if r := k.do(t, winReq(KindSlidingWindow, limit, w, limit), end-1); r.Limited {
		t.Fatalf("first burst limited: %+v", r)
	}
	if r := k.do(t, winReq(KindSlidingWindow, limit, w, limit-1), end+w-2); r.Limited {
		t.Fatalf("second burst limited: %+v", r)
	}
	// And the bound is tight: not one unit more.
	if r := k.do(t, winReq(KindSlidingWindow, limit, w, 1), end+w-2); !r.Limited {
		t.Fatalf("a 2×limit-th unit was allowed: %+v", r)
	}
}

func TestSlidingWindowParametersChange(t *testing.T) {
	var k winKey
	// 6 of 10 in [60 s, 120 s), 30 s in: 4 remain; they slide out at 180 s.
	got := k.do(t, winReq(KindSlidingWindow, 10, minute, 6), 90*sec)
	if want := (Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 90 * sec}); got != want {
		t.Errorf("first call: %+v, want %+v", got, want)
	}
	// Limit down to 4 at 100 s: 6 held > 4: even a peek is over; remaining
	// 0. It fits once the 6 weigh <= 4 in the next window: 6×(60s−e)/60s <= 4,
	// e >= 20 s: at 140 s, 40 s later. Reset when they slide out at 180 s.
	got = k.do(t, winReq(KindSlidingWindow, 4, minute, 0), 100*sec)
	if want := (Result{Limited: true, Limit: 4, Remaining: 0, RetryAfter: 40 * sec, ResetAfter: 80 * sec}); got != want {
		t.Errorf("after lowering the limit: %+v, want %+v", got, want)
	}
	// A 7 s window at 100 s: its window [98 s, 105 s) is neither the stored
	// one (60 s) nor the one after it, so it starts from nothing: 9 remain,
	// reset when the unit slides out at 98 s + 2 × 7 s = 112 s, 12 s later.
	got = k.do(t, winReq(KindSlidingWindow, 10, 7*sec, 1), 100*sec)
	if want := (Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 12 * sec}); got != want {
		t.Errorf("after changing the window: %+v, want %+v", got, want)
	}
}

func TestSlidingWindowDamagedState(t *testing.T) {
	// A damaged state (negative or huge counts) is clamped, not trusted:
	// at 10 ns into the window [0, 1 s), B = −5 reads as a current count of
	// 0 and C = 2^62 as a previous count of MaxCount, which weighs
	// 2^40 × (1 s − 10 ns)/1 s, far over 10: limited, 0 remaining. Even
	// 1 ns before the window's end it weighs 2^40/10^9 ≈ 1099 > 9, so the
	// unit fits only at 1 s, when the previous count slides out: retry and
	// reset both 1 s − 10 ns.
	bad := State{Kind: KindSlidingWindow, ExpireAt: 1 << 62, A: 0, B: -5, C: 1 << 62}
	_, res := Apply(bad, winReq(KindSlidingWindow, 10, sec, 1), 10)
	if want := (Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: sec - 10, ResetAfter: sec - 10}); res != want {
		t.Errorf("damaged state: %+v, want %+v", res, want)
	}
}
