package engine

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// waitKinds are the requests of each kind that can wait, each admitting one
// request per 100 ms once its single unit is taken.
var waitKinds = []struct {
	name string
	req  Request
}{
	{"gcra", Request{Kind: KindGCRA, Burst: 0, Rate: 10, Period: sec, Quantity: 1}},
	{"token-bucket", Request{Kind: KindTokenBucket, Burst: 1, Rate: 1, Period: 100 * ms, Quantity: 1}},
	{"token-bucket-interval", Request{Kind: KindTokenBucket, Burst: 1, Rate: 1, Period: 100 * ms, Quantity: 1, Interval: true}},
	{"leaky-bucket", Request{Kind: KindLeakyBucket, Burst: 1, Rate: 1, Period: 100 * ms, Quantity: 1}},
}

// TestWaitReservesInArrivalOrder: six requests at one instant, each
// waiting up to 2 s on a key admitting one per 100 ms, are all admitted,
// 100 ms apart in arrival order; a seventh waiting 50 ms is refused at
// once and consumes nothing.
func TestWaitReservesInArrivalOrder(t *testing.T) {
	for _, tc := range waitKinds {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Wait = 2 * sec
			var st State
			for i := int64(0); i < 6; i++ {
				var res Result
				st, res = Apply(st, &req, t0)
				if res.Limited || res.Delay != i*100*ms {
					t.Fatalf("request %d: limited %v delay %d ms, want allowed after %d ms", i, res.Limited, res.Delay/ms, i*100)
				}
				if res.Remaining != 0 || res.RetryAfter != -1 {
					t.Fatalf("request %d: remaining %d retry %d, want 0 and -1 (fields as of its admission)", i, res.Remaining, res.RetryAfter)
				}
			}
			before := st
			short := tc.req
			short.Wait = 50 * ms
			next, res := Apply(st, &short, t0)
			if !res.Limited || res.Delay != 0 || res.RetryAfter != 600*ms {
				t.Fatalf("seventh with WAIT 50ms: %+v, want limited at once with retry_after 600 ms", res)
			}
			if !equalState(next, before) {
				t.Fatalf("refused waiter changed the state: %+v, want %+v", next, before)
			}
			// Without WAIT a request sees the line: refused until the last
			// waiter's turn has passed.
			plain := tc.req
			if _, r := Apply(st, &plain, t0+550*ms); !r.Limited {
				t.Fatalf("a request at +550 ms was admitted ahead of the waiters")
			}
			if _, r := Apply(st, &plain, t0+600*ms); r.Limited {
				t.Fatalf("a request at +600 ms refused: %+v", r)
			}
		})
	}
}

// TestWaitNever: requests that must not reserve: a shadow request, one
// larger than the limit, and one whose wait falls short by 1 ns.
func TestWaitNever(t *testing.T) {
	for _, tc := range waitKinds {
		t.Run(tc.name, func(t *testing.T) {
			full, _ := Apply(State{}, &tc.req, t0)
			for _, c := range []struct {
				name string
				mod  func(*Request)
			}{
				{"shadow", func(r *Request) { r.Shadow = true; r.Wait = sec }},
				{"over limit", func(r *Request) { r.Quantity = 3; r.Wait = 10 * sec }},
				{"1ns short", func(r *Request) { r.Wait = 100*ms - 1 }},
			} {
				req := tc.req
				c.mod(&req)
				next, res := Apply(full, &req, t0)
				if !res.Limited || res.Delay != 0 || !equalState(next, full) {
					t.Errorf("%s: %+v (state changed: %v), want limited at once, nothing consumed", c.name, res, !equalState(next, full))
				}
			}
			req := tc.req
			req.Wait = 100 * ms // exactly enough
			if _, res := Apply(full, &req, t0); res.Limited || res.Delay != 100*ms {
				t.Errorf("wait exactly retry_after: %+v, want admitted after 100 ms", res)
			}
		})
	}
}

// TestWaitBound: requests arriving at random instants with random waits and
// quantities, dated at their admission (now + Delay), never exceed the
// limiter's bound over any interval, and admissions come in arrival order.
func TestWaitBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for seq := 0; seq < 300; seq++ {
		kind := waitKinds[rng.IntN(len(waitKinds))]
		req := kind.req
		req.Burst = 1 + rng.Int64N(5)
		req.Rate = 1 + rng.Int64N(4)
		req.Period = (1 + rng.Int64N(10)) * 100 * ms
		if req.Kind == KindGCRA {
			req.Burst--
		}
		limit, perUnit := req.Burst, req.Period/req.Rate
		if req.Kind == KindGCRA {
			limit = req.Burst + 1
			perUnit = emissionInterval(req.Period, req.Rate)
		}
		type adm struct{ at, n int64 }
		var admitted []adm
		var st State
		now, last := t0, int64(0)
		for step := 0; step < 200; step++ {
			now += rng.Int64N(perUnit)
			req.Quantity = 1 + rng.Int64N(limit)
			req.Wait = rng.Int64N(3 * perUnit * limit)
			var res Result
			st, res = Apply(st, &req, now)
			if res.Limited {
				continue
			}
			at := now + res.Delay
			if at < last {
				t.Fatalf("seq %d %s: admitted at %d, before an earlier arrival's %d", seq, kind.name, at, last)
			}
			last = at
			admitted = append(admitted, adm{at, req.Quantity})
		}
		for i := range admitted {
			sum := int64(0)
			for j := i; j < len(admitted); j++ {
				sum += admitted[j].n
				L := admitted[j].at - admitted[i].at
				bound := limit + L/perUnit
				if req.Interval {
					bound = limit + req.Rate*((L+req.Period-1)/req.Period)
				}
				if sum > bound {
					t.Fatalf("seq %d %s: %d units admitted in %d ns, bound %d", seq, kind.name, sum, L, bound)
				}
			}
		}
	}
}

func TestParseWait(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		args []string
		wait int64
		err  error
	}{
		{KindGCRA, []string{"0", "10", "1", "WAIT", "2"}, 2 * sec, nil},
		{KindGCRA, []string{"0", "10", "1", "3", "wait", "250ms"}, 250 * ms, nil},
		{KindTokenBucket, []string{"1", "1", "100ms", "1", "INTERVAL", "WAIT", "1s"}, sec, nil},
		{KindTokenBucket, []string{"1", "1", "100ms", "WAIT", "0"}, 0, nil},
		{KindLeakyBucket, []string{"1", "1", "100ms", "WAIT", "1m"}, minute, nil},
		{KindGCRA, []string{"0", "10", "1", "WAIT", "-1"}, 0, ErrNegative},
		{KindGCRA, []string{"0", "10", "1", "WAIT", "2x"}, 0, ErrInvalidDuration},
		{KindGCRA, []string{"0", "10", "1", "WAIT", "2d"}, 0, ErrNotInteger},
		{KindGCRA, []string{"0", "10", "1", "WAIT"}, 0, ErrNotInteger}, // "WAIT" read as the quantity
		{KindFixedWindow, []string{"5", "1s", "WAIT", "1s"}, sec, nil},
		{KindSlidingWindow, []string{"5", "1s", "2", "wait", "300ms"}, 300 * ms, nil},
		{KindSlidingLog, []string{"5", "1s", "1", "WAIT", "1s"}, sec, nil},
		{KindSlidingLog, []string{"5", "1s", "WAIT"}, 0, ErrNotInteger}, // "WAIT" read as the count
	} {
		r, err := ParseRequest(c.kind, args(c.args...), DefaultParseOptions())
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ParseRequest(%v, %q) = %v, want %v", c.kind, c.args, err, c.err)
			}
			continue
		}
		if err != nil || r.Wait != c.wait {
			t.Errorf("ParseRequest(%v, %q) = wait %d, %v; want %d", c.kind, c.args, r.Wait, err, c.wait)
		}
	}
	var ae *ArgError
	_, err := ParseRequest(KindGCRA, args("0", "10", "1", "WAIT", "-5s"), DefaultParseOptions())
	if !errors.As(err, &ae) || ae.Arg != "WAIT" || ae.Value != "-5s" || ae.Unit != UnitDuration || ae.Max != MaxWait {
		t.Errorf("WAIT -5s: %#v, want an ArgError naming WAIT -5s with range 0..MaxWait", err)
	}
}
