package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Waiting (Request.Wait) on the window limiters: FW.INCR, SW.INCR, SL.ADD.

// winWaitStep is one request of a window-wait scenario: at an offset from
// the scenario's window-aligned base, count units, waiting up to wait,
// and the reply expected. A limited step must leave the state unchanged.
type winWaitStep struct {
	at, count, wait int64
	limited         bool
	delay, retry    int64 // retry only when limited
	remaining       int64
}

// TestWaitWindowScenarios: hand-computed sequences with waiters on each
// window limiter. Each holds a request that today's code admits ahead of a
// waiter (over-admission): a reader before a state dated in a later window
// (fixed and sliding window), and a newcomer after a sliding-log
// reservation that dropped entries still in the window at now.
func TestWaitWindowScenarios(t *testing.T) {
	base := windowStart(t0, sec) + sec // aligned to the second
	for _, tc := range []struct {
		name          string
		kind          Kind
		limit, window int64
		steps         []winWaitStep
	}{
		{"fixed-window", KindFixedWindow, 10, sec, []winWaitStep{
			{at: 100 * ms, count: 8, remaining: 2},
			// Refused in this window, reserved at the next one's start.
			{at: 200 * ms, count: 5, wait: 2 * sec, delay: 800 * ms, remaining: 5},
			// The key is closed until then: 5+2 fit at the next start.
			{at: 300 * ms, count: 2, limited: true, retry: 700 * ms},
			// 5+6 do not: the window after.
			{at: 300 * ms, count: 6, limited: true, retry: 1700 * ms},
			{at: 400 * ms, count: 6, wait: sec, limited: true, retry: 1600 * ms},
			{at: 400 * ms, count: 5, wait: sec, delay: 600 * ms, remaining: 0},
			{at: 500 * ms, count: 0, remaining: 0}, // a peek: allowed, nothing left
			{at: sec, count: 1, limited: true, retry: sec},
			{at: 2 * sec, count: 10, remaining: 0},
		}},
		{"sliding-window", KindSlidingWindow, 10, sec, []winWaitStep{
			{at: 100 * ms, count: 10, remaining: 0},
			// Fits when 6 of the 10 still weigh: 1.4 s.
			{at: 200 * ms, count: 4, wait: 2 * sec, delay: 1200 * ms, remaining: 0},
			// Closed until then; 4+1 with 5 weighing: 1.5 s.
			{at: 300 * ms, count: 1, limited: true, retry: 1200 * ms},
			{at: 300 * ms, count: 1, wait: 1200 * ms, delay: 1200 * ms, remaining: 0},
			{at: 400 * ms, count: 1, wait: sec, limited: true, retry: 1200 * ms},
			// In the reserved window the state reads as usual.
			{at: 1450 * ms, count: 1, limited: true, retry: 150 * ms},
			{at: 1600 * ms, count: 1, remaining: 0},
		}},
		{"sliding-window-two-ahead", KindSlidingWindow, 10, sec, []winWaitStep{
			{at: 100 * ms, count: 10, remaining: 0},
			// The whole limit fits only when the 10 have slid out: 2 s.
			{at: 200 * ms, count: 10, wait: 3 * sec, delay: 1800 * ms, remaining: 0},
			// The window between is closed: after the waiter, when 9
			// of its 10 weigh: 3.1 s.
			{at: 1500 * ms, count: 1, limited: true, retry: 1600 * ms},
			{at: 1999 * ms, count: 0, remaining: 0},
		}},
		{"sliding-log", KindSlidingLog, 10, sec, []winWaitStep{
			{at: 0, count: 7, remaining: 3},
			{at: 100 * ms, count: 3, remaining: 0},
			// The 7 leave at 1 s.
			{at: 200 * ms, count: 3, wait: sec, delay: 800 * ms, remaining: 4},
			// 13 units live or waiting: the 7 must leave first.
			{at: 300 * ms, count: 4, limited: true, retry: 700 * ms},
			{at: 300 * ms, count: 1, wait: 600 * ms, limited: true, retry: 700 * ms},
			{at: 300 * ms, count: 4, wait: sec, delay: 700 * ms, remaining: 0},
			// 17: the 7 and the 3 must leave: 1.1 s.
			{at: 400 * ms, count: 1, wait: 2 * sec, delay: 700 * ms, remaining: 2},
			// A peek sees 18 booked: refused until the 3 leave too.
			{at: 500 * ms, count: 0, limited: true, retry: 600 * ms},
			{at: 1050 * ms, count: 1, limited: true, retry: 50 * ms},
			{at: 1100 * ms, count: 2, remaining: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st State
			for i, s := range tc.steps {
				now := base + s.at
				if st.ExpireAt <= now {
					st = State{}
				}
				req := Request{Kind: tc.kind, Burst: tc.limit, Period: tc.window, Quantity: s.count, Wait: s.wait}
				before := cloneState(st)
				next, res := Apply(st, &req, now)
				want := Result{Limited: s.limited, Limit: tc.limit, Remaining: s.remaining, RetryAfter: -1, Delay: s.delay}
				if s.limited {
					want.RetryAfter = s.retry
				}
				got := res
				got.ResetAfter = 0
				if got != want {
					t.Fatalf("step %d (+%v, count %d, wait %v): got %+v, want %+v", i, time.Duration(s.at), s.count, time.Duration(s.wait), res, want)
				}
				if (s.limited || s.count == 0) && !equalState(next, before) {
					t.Fatalf("step %d: a refused request or a peek changed the state: %+v -> %+v", i, before, next)
				}
				st = next
			}
		})
	}
}

// winWaitKinds are the window requests, each admitting one unit at a time,
// and the time between two admissions of a key kept busy: a fixed window
// and a sliding log of 100 ms admit one per 100 ms; a sliding window of
// 100 ms, where the unit of the window before weighs until the window's
// end, one per 200 ms.
var winWaitKinds = []struct {
	name string
	req  Request
	step int64
}{
	{"fixed-window", Request{Kind: KindFixedWindow, Burst: 1, Period: 100 * ms, Quantity: 1}, 100 * ms},
	{"sliding-window", Request{Kind: KindSlidingWindow, Burst: 1, Period: 100 * ms, Quantity: 1}, 200 * ms},
	{"sliding-log", Request{Kind: KindSlidingLog, Burst: 1, Period: 100 * ms, Quantity: 1}, 100 * ms},
}

// TestWaitWindowsInArrivalOrder: six requests at one instant, each waiting
// up to 2 s, are all admitted, one step apart in arrival order; a seventh
// waiting 50 ms is refused at once and consumes nothing; a request without
// WAIT is refused until the last waiter's turn.
func TestWaitWindowsInArrivalOrder(t *testing.T) {
	base := windowStart(t0, sec) + sec
	for _, tc := range winWaitKinds {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Wait = 2 * sec
			var st State
			for i := int64(0); i < 6; i++ {
				var res Result
				st, res = Apply(st, &req, base)
				if res.Limited || res.Delay != i*tc.step {
					t.Fatalf("request %d: limited %v delay %v, want allowed after %v", i, res.Limited, time.Duration(res.Delay), time.Duration(i*tc.step))
				}
				if res.Remaining != 0 || res.RetryAfter != -1 {
					t.Fatalf("request %d: remaining %d retry %d, want 0 and -1", i, res.Remaining, res.RetryAfter)
				}
			}
			before := cloneState(st)
			short := tc.req
			short.Wait = 50 * ms
			next, res := Apply(st, &short, base)
			if !res.Limited || res.Delay != 0 || res.RetryAfter != 6*tc.step {
				t.Fatalf("seventh with WAIT 50ms: %+v, want limited at once with retry_after %v", res, time.Duration(6*tc.step))
			}
			if !equalState(next, before) {
				t.Fatalf("refused waiter changed the state: %+v, want %+v", next, before)
			}
			plain := tc.req
			if _, r := Apply(cloneState(st), &plain, base+6*tc.step-50*ms); !r.Limited {
				t.Fatalf("a request 50 ms before the seventh turn was admitted ahead of the waiters")
			}
			if _, r := Apply(cloneState(st), &plain, base+6*tc.step); r.Limited {
				t.Fatalf("a request at the seventh turn refused: %+v", r)
			}
		})
	}
}

// TestWaitWindowsBound: random sequences of requests with and without WAIT
// at increasing instants on each window limiter. Every refusal leaves the
// state as it was and its retry_after is exact (the same request without
// WAIT is admitted then and not 1 ns earlier); admissions come in arrival
// order; replayed at their admission instants (now + Delay) they keep the
// algorithm's bound: at most limit units in one epoch-aligned window (fixed
// and sliding window), the sliding window's estimate within limit at each
// admission, and at most limit units in any interval of one window (sliding
// log).
func TestWaitWindowsBound(t *testing.T) {
	for seq := range uint64(600) {
		t.Run(fmt.Sprintf("%v/%d", winWaitKind(seq), seq), func(t *testing.T) { checkWaitWindows(t, seq) })
	}
}

// FuzzWaitWindows runs TestWaitWindowsBound's check on the sequence a seed
// draws (go test -fuzz FuzzWaitWindows ./engine).
func FuzzWaitWindows(f *testing.F) {
	for seq := range uint64(6) {
		f.Add(seq)
	}
	f.Fuzz(checkWaitWindows)
}

// winWaitKind is the window kind seed seq runs.
func winWaitKind(seq uint64) Kind {
	return [3]Kind{KindFixedWindow, KindSlidingWindow, KindSlidingLog}[seq%3]
}

// checkWaitWindows runs the random sequence of seed seq on one key of
// winWaitKind(seq) and checks it (see TestWaitWindowsBound).
func checkWaitWindows(t *testing.T, seq uint64) {
	kind := winWaitKind(seq)
	rng := rand.New(rand.NewPCG(seq, 0x3a17))
	var w int64
	switch rng.IntN(4) {
	case 0:
		w = 1 + rng.Int64N(20) // nanoseconds
	case 1:
		w = sec
	case 2:
		w = 7*ms + rng.Int64N(ms)
	default:
		w = 100 * ms
	}
	limit := 1 + rng.Int64N(6)
	req := Request{Kind: kind, Burst: limit, Period: w}
	var st State
	var admitted []winArrival
	now, last := t0+rng.Int64N(w), int64(0)
	for step := 0; step < 300; step++ {
		switch rng.IntN(4) {
		case 0:
			// same instant
		case 1:
			now += rng.Int64N(w/8 + 1)
		default:
			now += rng.Int64N(w/2 + 1)
		}
		if st.ExpireAt <= now {
			st = State{}
		}
		req.Quantity = rng.Int64N(limit + 2)
		req.Wait = 0
		if rng.IntN(3) > 0 {
			req.Wait = rng.Int64N(3*w + 1)
		}
		before := cloneState(st)
		next, res := Apply(st, &req, now)
		if res.Limited {
			if !equalState(next, before) || res.Delay != 0 {
				t.Fatalf("step %d: refused %+v changed the state or has a delay: %+v -> %+v, %+v", step, req, before, next, res)
			}
			if ra := res.RetryAfter; ra > 0 {
				plain := req
				plain.Wait = 0
				if _, r := Apply(cloneState(next), &plain, now+ra); r.Limited {
					t.Fatalf("step %d: %+v at %d: retry_after %d, still limited then: %+v (state %+v)", step, req, now, ra, r, next)
				}
				if _, r := Apply(cloneState(next), &plain, now+ra-1); !r.Limited {
					t.Fatalf("step %d: %+v at %d: retry_after %d, already allowed 1 ns earlier (state %+v)", step, req, now, ra, next)
				}
				if req.Wait >= ra {
					t.Fatalf("step %d: refused with retry_after %d within its wait %d", step, ra, req.Wait)
				}
			} else if req.Quantity <= limit {
				t.Fatalf("step %d: %+v refused for good: %+v", step, req, res)
			}
		} else {
			if res.Delay < 0 || res.Delay > req.Wait || res.RetryAfter != -1 || res.Remaining < 0 || res.Remaining > limit {
				t.Fatalf("step %d: %+v admitted with %+v", step, req, res)
			}
			if req.Quantity > 0 {
				at := now + res.Delay
				if at < last {
					t.Fatalf("step %d: admitted at +%d, before an earlier arrival's +%d", step, at-t0, last-t0)
				}
				last = at
				admitted = append(admitted, winArrival{at, req.Quantity})
			}
		}
		st = next
	}
	if got := winMaxInAligned(admitted, w); kind != KindSlidingLog && got > limit {
		t.Fatalf("admitted %d in one aligned window, limit %d: %v", got, limit, admitted)
	}
	if kind == KindSlidingWindow {
		swCheckReplay(t, admitted, limit, w)
	}
	if got := winMaxInSpan(admitted, w); kind == KindSlidingLog && got > limit {
		t.Fatalf("admitted %d in an interval of one window, limit %d: %v", got, limit, admitted)
	}
}

// swCheckReplay checks the sliding window's estimate at each admission
// instant t, with the admissions dated at t: previous window's units ×
// (w − elapsed)/w + the units of t's window admitted up to t ≤ limit.
func swCheckReplay(t *testing.T, admitted []winArrival, limit, w int64) {
	t.Helper()
	for _, a := range admitted {
		start := windowStart(a.at, w)
		var prev, cur int64
		for _, b := range admitted {
			switch {
			case b.at >= start-w && b.at < start:
				prev += b.count
			case b.at >= start && b.at <= a.at:
				cur += b.count
			}
		}
		if !swFits(prev, cur, limit, w, a.at-start) {
			t.Fatalf("at %d: previous window %d, this one %d up to it: over the limit %d (window %d): %v", a.at, prev, cur, limit, w, admitted)
		}
	}
}
