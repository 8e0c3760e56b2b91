package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Test code shared by the fixed window, sliding window and sliding log tests.

func winReq(kind Kind, limit, window, count int64) *Request {
	return &Request{Kind: kind, Burst: limit, Period: window, Quantity: count}
}

// winKey is one key as the store keeps it: expired lazily on access, and
// not stored when the returned state is already fresh.
type winKey struct{ st State }

// do applies req at now the way the store does and checks what must hold
// for every call: a limited request or a peek returns the state unchanged
// and writes nothing into st.Log, the remaining count stays
// in 0..limit, and the reply's RetryAfter is -1 exactly when it should be.
func (k *winKey) do(t *testing.T, req *Request, now int64) Result {
	t.Helper()
	st := k.st
	if st.ExpireAt <= now {
		st = State{}
	}
	before := slices.Clone(st.Log)
	next, res := Apply(st, req, now)
	if res.Limited || req.Quantity == 0 {
		if !slices.Equal(st.Log, before) {
			t.Fatalf("at %d: %+v (limited=%v) wrote into st.Log: %v, was %v", now, *req, res.Limited, st.Log, before)
		}
	}
	if (res.Limited || req.Quantity == 0) && !equalState(next, st) {
		t.Fatalf("at %d: %+v (limited=%v) changed the state: %+v -> %+v", now, *req, res.Limited, st, next)
	}
	if res.Remaining < 0 || res.Remaining > req.Burst {
		t.Fatalf("at %d: %+v: Remaining = %d, want 0..%d", now, *req, res.Remaining, req.Burst)
	}
	if res.Limit != req.Burst {
		t.Fatalf("at %d: Limit = %d, want %d", now, res.Limit, req.Burst)
	}
	switch {
	case !res.Limited && res.RetryAfter != -1:
		t.Fatalf("at %d: allowed with RetryAfter = %d, want -1", now, res.RetryAfter)
	case res.Limited && req.Quantity > req.Burst && res.RetryAfter != -1:
		t.Fatalf("at %d: count %d > limit %d: RetryAfter = %d, want -1", now, req.Quantity, req.Burst, res.RetryAfter)
	case res.Limited && req.Quantity <= req.Burst && res.RetryAfter <= 0:
		t.Fatalf("at %d: limited, count %d <= limit %d: RetryAfter = %d, want > 0", now, req.Quantity, req.Burst, res.RetryAfter)
	}
	if next.ExpireAt > now {
		if next.Kind != req.Kind {
			t.Fatalf("at %d: stored state of kind %v, want %v", now, next.Kind, req.Kind)
		}
		if res.ResetAfter != next.ExpireAt-now {
			t.Fatalf("at %d: ResetAfter = %d, want ExpireAt-now = %d", now, res.ResetAfter, next.ExpireAt-now)
		}
	} else {
		if res.ResetAfter != 0 {
			t.Fatalf("at %d: nothing stored but ResetAfter = %d, want 0", now, res.ResetAfter)
		}
		next = State{}
	}
	k.st = next
	return res
}

// probe applies req at instant at to a copy of the key, leaving it as it is.
func (k *winKey) probe(t *testing.T, req *Request, at int64) Result {
	t.Helper()
	c := winKey{st: cloneState(k.st)}
	return c.do(t, req, at)
}

type winStep struct {
	at    int64 // offset from the table's base instant, ns
	count int64
	want  Result
}

// winRunSteps runs the steps on one fresh key and compares every reply.
func winRunSteps(t *testing.T, kind Kind, limit, window, base int64, steps []winStep) {
	t.Helper()
	var k winKey
	for i, s := range steps {
		got := k.do(t, winReq(kind, limit, window, s.count), base+s.at)
		if got != s.want {
			t.Fatalf("step %d (at +%v, count %d): got %+v, want %+v", i, time.Duration(s.at), s.count, got, s.want)
		}
	}
}

// winTable is one key's table test: its limit and window, the base instant
// the steps' offsets count from, and the calls.
type winTable struct {
	name                string
	limit, window, base int64
	steps               []winStep
}

// winRunTables runs each table of kind as a subtest.
func winRunTables(t *testing.T, kind Kind, tables []winTable) {
	t.Helper()
	for _, tt := range tables {
		t.Run(tt.name, func(t *testing.T) {
			winRunSteps(t, kind, tt.limit, tt.window, tt.base, tt.steps)
		})
	}
}

// winArrival is one admitted request of a simulated run.
type winArrival struct{ at, count int64 }

// winMaxInSpan returns the most units admitted inside any interval
// [s, s+span) (the maximum is reached with s at an arrival).
func winMaxInSpan(arr []winArrival, span int64) int64 {
	var best, sum int64
	j := 0
	for i := range arr {
		sum += arr[i].count
		for arr[j].at <= arr[i].at-span {
			sum -= arr[j].count
			j++
		}
		best = max(best, sum)
	}
	return best
}

// winMaxInAligned returns the most units admitted inside one epoch-aligned
// window of length w.
func winMaxInAligned(arr []winArrival, w int64) int64 {
	var best, sum int64
	cur := int64(-1 << 63)
	for _, a := range arr {
		if s := windowStart(a.at, w); s != cur {
			cur, sum = s, 0
		}
		sum += a.count
		best = max(best, sum)
	}
	return best
}

// winParams draws a limit, a window and a time step scale for one run.
func winParams(r *rand.Rand) (limit, window, step int64) {
	switch r.IntN(5) {
	case 0: // tiny windows: nanosecond arithmetic, windows shorter than the 1 ms wire unit
		window = 1 + r.Int64N(20)
	case 1:
		window = sec
	case 2:
		window = 1 + r.Int64N(90*sec)
	case 3: // ten years
		window = MaxPeriod - r.Int64N(1000)
	default:
		window = 7*ms + r.Int64N(ms)
	}
	switch r.IntN(4) {
	case 0:
		limit = MaxCount - r.Int64N(3)
	case 1:
		limit = 1
	default:
		limit = 1 + r.Int64N(20)
	}
	step = max(window/16, 1)
	return limit, window, step
}

// winDraw draws the next arrival: a gap (often 0, so requests share an
// instant) and a count (mostly small, sometimes the whole limit, sometimes
// more than it, sometimes a peek).
func winDraw(r *rand.Rand, limit, step int64) (gap, count int64) {
	switch r.IntN(6) {
	case 0:
		gap = 0
	case 1:
		gap = r.Int64N(3)
	case 2:
		gap = r.Int64N(4 * step)
	default:
		gap = r.Int64N(step + 1)
	}
	switch r.IntN(10) {
	case 0:
		count = 0
	case 1:
		count = limit
	case 2:
		count = limit + 1 + r.Int64N(3)
	case 3:
		count = 1 + r.Int64N(limit)
	default:
		count = 1 + r.Int64N(min(limit, 3))
	}
	return gap, min(count, MaxCount)
}

// winCheckRetryReset checks that RetryAfter is exact: the same request is
// allowed at now+RetryAfter and not 1 ns earlier, and, rounded up to whole
// milliseconds as the wire rounds it, allowed then and not 1 ms earlier.
// It also checks ResetAfter: the key holds something 1 ns before it and is
// fresh at it.
func winCheckRetryReset(t *testing.T, k *winKey, req *Request, now int64, res Result) {
	t.Helper()
	if res.Limited && res.RetryAfter > 0 {
		ra := res.RetryAfter
		if got := k.probe(t, req, now+ra); got.Limited {
			t.Fatalf("at %d: retry_after %d ns: request at now+%d still limited: %+v", now, ra, ra, got)
		}
		if got := k.probe(t, req, now+ra-1); !got.Limited {
			t.Fatalf("at %d: retry_after %d ns: request 1 ns earlier already allowed: %+v", now, ra, got)
		}
		wire := CeilMillis(ra) * ms // as the wire rounds it
		if got := k.probe(t, req, now+wire); got.Limited {
			t.Fatalf("at %d: retry_after %d ms: request then still limited", now, wire/ms)
		}
		if got := k.probe(t, req, now+wire-ms); !got.Limited {
			t.Fatalf("at %d: retry_after %d ms: request 1 ms earlier already allowed", now, wire/ms)
		}
	}
	peek := winReq(req.Kind, req.Burst, req.Period, 0)
	if res.ResetAfter > 0 {
		if got := k.probe(t, peek, now+res.ResetAfter-1); got.Remaining == req.Burst || got.ResetAfter == 0 {
			t.Fatalf("at %d: reset_after %d: 1 ns before it the key is already fresh: %+v", now, res.ResetAfter, got)
		}
		if got := k.probe(t, peek, now+res.ResetAfter); got.Remaining != req.Burst || got.ResetAfter != 0 {
			t.Fatalf("at %d: reset_after %d: the key is not fresh then: %+v", now, res.ResetAfter, got)
		}
	}
}

// winSimulate runs random arrival sequences for kind, checks every reply
// (winKey.do, winCheckRetryReset, and check for kind-specific invariants),
// and returns what was admitted for the bound checks.
func winSimulate(t *testing.T, kind Kind, seed uint64, steps int, check func(t *testing.T, k *winKey, req *Request, now int64, res Result)) (limit, window int64, admitted []winArrival) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	limit, window, step := winParams(r)
	now := 1_763_771_000_123_456_789 + r.Int64N(hour) // not aligned to anything
	if window > 1000*hour {
		now = 1 + r.Int64N(window) // keep now + a few ten-year windows inside int64
	}
	var k winKey
	for range steps {
		gap, count := winDraw(r, limit, step)
		now += gap
		if now > MaxSpan {
			break // the engine's times are defined up to 2^62 ns (year 2116)
		}
		req := winReq(kind, limit, window, count)
		res := k.do(t, req, now)
		if !res.Limited && count > 0 {
			admitted = append(admitted, winArrival{now, count})
		}
		// A limited request left the key as it was, so probing the key
		// after it checks retry_after against the state it was computed on.
		winCheckRetryReset(t, &k, req, now, res)
		if check != nil {
			check(t, &k, req, now, res)
		}
	}
	return limit, window, admitted
}

// TestWindowRandomArrivals runs random arrival sequences through each window
// limiter (winSimulate checks every reply, retry_after and reset_after), checks
// the stored state against its documented layout after every call, and the
// admitted units against each limiter's documented bound: at most limit in
// one epoch-aligned window (all three), and in any interval of one window's
// length at most 2×limit (fixed window), 2×limit − 1 (sliding window) or
// limit (sliding log).
func TestWindowRandomArrivals(t *testing.T) {
	tests := []struct {
		kind   Kind
		layout func(t *testing.T, k *winKey, req *Request, now int64, res Result)
		span   func(limit int64) int64
	}{
		{KindFixedWindow, fwCheckLayout, func(limit int64) int64 { return 2 * limit }},
		{KindSlidingWindow, swCheckLayout, func(limit int64) int64 { return 2*limit - 1 }},
		{KindSlidingLog, slCheckLayout, func(limit int64) int64 { return limit }},
	}
	for _, tt := range tests {
		for seed := range uint64(150) {
			t.Run(fmt.Sprintf("%v/%d", tt.kind, seed), func(t *testing.T) {
				limit, window, admitted := winSimulate(t, tt.kind, seed, 250, tt.layout)
				if got := winMaxInAligned(admitted, window); got > limit {
					t.Errorf("admitted %d in one aligned window, limit %d", got, limit)
				}
				if got, bound := winMaxInSpan(admitted, window), tt.span(limit); got > bound {
					t.Errorf("admitted %d in an interval of %d ns, bound %d (limit %d)", got, window, bound, limit)
				}
			})
		}
	}
}

// fwCheckLayout checks a stored fixed window against its layout: the count
// of now's own window (an earlier window's state has expired by now), 1..limit
// units, C unused, expiring at the window's end.
func fwCheckLayout(t *testing.T, k *winKey, req *Request, now int64, _ Result) {
	t.Helper()
	st := k.st
	if st.Kind == KindNone {
		return
	}
	if st.A != windowStart(now, req.Period) || st.B < 1 || st.B > req.Burst || st.C != 0 || st.ExpireAt != st.A+req.Period {
		t.Fatalf("at %d: stored state %+v breaks its layout (window %d)", now, st, req.Period)
	}
}

// swCheckLayout checks a stored sliding window against its layout. A limited
// request leaves a state written in the window before, so A is this window's
// start or the one before.
func swCheckLayout(t *testing.T, k *winKey, req *Request, now int64, _ Result) {
	t.Helper()
	st := k.st
	if st.Kind == KindNone {
		return
	}
	start := windowStart(now, req.Period)
	if (st.A != start && st.A != start-req.Period) || st.B < 0 || st.C < 0 || st.B > req.Burst || st.C > req.Burst ||
		(st.B > 0 && st.ExpireAt != st.A+2*req.Period) || (st.B == 0 && st.ExpireAt != st.A+req.Period) {
		t.Fatalf("at %d: stored state %+v breaks its layout (window %d)", now, st, req.Period)
	}
}

// TestWindowInvalidRequest: a request outside Validate's ranges (which only
// a bug upstream could pass) is refused rather than computed with: limited,
// never allowed later (retry -1), the limit clamped to 0..MaxCount, nothing
// remaining, and the stored state unchanged.
func TestWindowInvalidRequest(t *testing.T) {
	states := map[Kind]State{
		KindFixedWindow:   {Kind: KindFixedWindow, ExpireAt: 100, A: 0, B: 3},
		KindSlidingWindow: {Kind: KindSlidingWindow, ExpireAt: 100, A: 0, B: 3, C: 2},
		KindSlidingLog:    {Kind: KindSlidingLog, ExpireAt: 100, A: 1, Log: []LogEntry{{At: 50, Count: 1}}},
	}
	for kind, st := range states {
		for _, c := range []struct{ limit, window, count, wantLimit int64 }{
			{10, 0, 1, 10},
			{10, -5, 1, 10},
			{-1, sec, 1, 0},
			{10, sec, -1, 10},
			{MaxCount + 1, sec, 1, MaxCount},
			{10, MaxPeriod + 1, 1, 10},
		} {
			req := winReq(kind, c.limit, c.window, c.count)
			got, res := Apply(cloneState(st), req, 60)
			if want := (Result{Limited: true, Limit: c.wantLimit, RetryAfter: -1}); res != want || !equalState(got, st) {
				t.Errorf("Apply(%+v, %+v) = %+v, %+v; want %+v and the state unchanged", st, *req, got, res, want)
			}
		}
	}
}
