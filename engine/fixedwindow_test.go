package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ---- helpers shared by the fixed window, sliding window and sliding log tests ----

const (
	winMs   = int64(time.Millisecond)
	winSec  = int64(time.Second)
	winMin  = int64(time.Minute)
	winHour = int64(time.Hour)
)

func winReq(kind Kind, limit, window, count int64) *Request {
	return &Request{Kind: kind, Burst: limit, Period: window, Quantity: count}
}

// winClone deep-copies a state, since an admitted sliding-log request writes
// into its Log's backing array.
func winClone(st State) State {
	st.Log = slices.Clone(st.Log)
	return st
}

func winStateEqual(a, b State) bool {
	return a.Kind == b.Kind && a.ExpireAt == b.ExpireAt && a.A == b.A && a.B == b.B && a.C == b.C &&
		slices.Equal(a.Log, b.Log)
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
	if (res.Limited || req.Quantity == 0) && !winStateEqual(next, st) {
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
	c := winKey{st: winClone(k.st)}
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
		window = winSec
	case 2:
		window = 1 + r.Int64N(90*winSec)
	case 3: // ten years
		window = MaxPeriod - r.Int64N(1000)
	default:
		window = 7*winMs + r.Int64N(winMs)
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

// winCheckRetry checks that RetryAfter is exact: the same request is
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
		ms := CeilMillis(ra) * winMs // as the wire rounds it
		if got := k.probe(t, req, now+ms); got.Limited {
			t.Fatalf("at %d: retry_after %d ms: request then still limited", now, ms/winMs)
		}
		if got := k.probe(t, req, now+ms-winMs); !got.Limited {
			t.Fatalf("at %d: retry_after %d ms: request 1 ms earlier already allowed", now, ms/winMs)
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
	now := 1_763_771_000_123_456_789 + r.Int64N(winHour) // not aligned to anything
	if window > 1000*winHour {
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

// ---- fixed window ----

func TestFixedWindowGitHubHourly(t *testing.T) {
	// GitHub's REST API: 5000 requests per hour. base is an hour boundary;
	// the window of every step below is [base, base+1h) unless noted.
	base := int64(491_000) * winHour
	steps := []winStep{
		// 0 + 1 <= 5000: remaining 5000-1; window ends 50 min later.
		{10 * winMin, 1, Result{Limit: 5000, Remaining: 4999, RetryAfter: -1, ResetAfter: 50 * winMin}},
		// 1 + 4999 = 5000 <= 5000: remaining 0.
		{20 * winMin, 4999, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: 40 * winMin}},
		// 5000 + 1 > 5000: limited until the window ends, 30 min later.
		{30 * winMin, 1, Result{Limited: true, Limit: 5000, Remaining: 0, RetryAfter: 30 * winMin, ResetAfter: 30 * winMin}},
		// A peek fits (5000 + 0 <= 5000).
		{30 * winMin, 0, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: 30 * winMin}},
		// 5001 > 5000 can never fit: retry -1.
		{30 * winMin, 5001, Result{Limited: true, Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: 30 * winMin}},
		// 1 ns before the end: still the same window.
		{winHour - 1, 1, Result{Limited: true, Limit: 5000, Remaining: 0, RetryAfter: 1, ResetAfter: 1}},
		// At the end a new window [base+1h, base+2h) starts at 0: 0+1 <= 5000.
		{winHour, 1, Result{Limit: 5000, Remaining: 4999, RetryAfter: -1, ResetAfter: winHour}},
		// 1 + 4999 = 5000 at 1h59m59.999s: ends 1 ms later.
		{2*winHour - winMs, 4999, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: winMs}},
		// The next window: 5000 at once is fine, 2×limit inside 1 ms.
		{2 * winHour, 5000, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: winHour}},
	}
	winRunSteps(t, KindFixedWindow, 5000, winHour, base, steps)
}

func TestFixedWindowEdges(t *testing.T) {
	const sec = int64(time.Second)
	tenYears := MaxPeriod
	tests := []struct {
		name                string
		limit, window, base int64
		steps               []winStep
	}{
		{
			name: "fresh key, count above the limit", limit: 5, window: 10 * sec, base: 1_000_000_000 * sec,
			steps: []winStep{
				// 6 > 5: never; nothing held: reset 0, remaining the whole 5.
				{3 * sec, 6, Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1, ResetAfter: 0}},
				// A peek of a missing key answers a fresh key and stores nothing.
				{3 * sec, 0, Result{Limit: 5, Remaining: 5, RetryAfter: -1, ResetAfter: 0}},
				// Still fresh: 0 + 5 <= 5; the window [base, base+10s) ends 7 s later.
				{3 * sec, 5, Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 7 * sec}},
			},
		},
		{
			name: "now not aligned", limit: 3, window: 7 * sec, base: 1_763_771_000_123_456_789,
			// base mod 7 s = 1_763_771_000_123_456_789 mod 7_000_000_000 = 5_123_456_789,
			// so the window holding base ends 7 s - 5.123456789 s = 1.876543211 s later.
			steps: []winStep{
				{0, 3, Result{Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 1_876_543_211}},
				{1, 1, Result{Limited: true, Limit: 3, Remaining: 0, RetryAfter: 1_876_543_210, ResetAfter: 1_876_543_210}},
				{1_876_543_211, 2, Result{Limit: 3, Remaining: 1, RetryAfter: -1, ResetAfter: 7 * sec}},
			},
		},
		{
			name: "2^40 units in a ten-year window", limit: MaxCount, window: tenYears, base: 0,
			steps: []winStep{
				// The window [0, MaxPeriod) ends MaxPeriod - 1 ns after 1 ns.
				{1, MaxCount - 1, Result{Limit: MaxCount, Remaining: 1, RetryAfter: -1, ResetAfter: tenYears - 1}},
				{2, 1, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: tenYears - 2}},
				{3, 1, Result{Limited: true, Limit: MaxCount, Remaining: 0, RetryAfter: tenYears - 3, ResetAfter: tenYears - 3}},
				{3, MaxCount, Result{Limited: true, Limit: MaxCount, Remaining: 0, RetryAfter: tenYears - 3, ResetAfter: tenYears - 3}},
				{tenYears, MaxCount, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: tenYears}},
			},
		},
		{
			name: "one nanosecond windows", limit: 2, window: 1, base: 12345,
			steps: []winStep{
				{0, 2, Result{Limit: 2, Remaining: 0, RetryAfter: -1, ResetAfter: 1}},
				{0, 1, Result{Limited: true, Limit: 2, Remaining: 0, RetryAfter: 1, ResetAfter: 1}},
				{1, 2, Result{Limit: 2, Remaining: 0, RetryAfter: -1, ResetAfter: 1}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			winRunSteps(t, KindFixedWindow, tt.limit, tt.window, tt.base, tt.steps)
		})
	}
}

func TestFixedWindowPeekOfMissingKeyStoresNothing(t *testing.T) {
	st, res := Apply(State{}, winReq(KindFixedWindow, 10, winMin, 0), 90*winSec)
	if st.Kind != KindNone || st.ExpireAt > 90*winSec {
		t.Errorf("peek of a missing key returned state %+v, want a fresh one", st)
	}
	if want := (Result{Limit: 10, Remaining: 10, RetryAfter: -1}); res != want {
		t.Errorf("peek of a missing key = %+v, want %+v", res, want)
	}
}

func TestFixedWindowParametersChange(t *testing.T) {
	var k winKey
	now := 100*winMin + 5*winSec
	// 8 of 10 in [100 min, 101 min).
	k.do(t, winReq(KindFixedWindow, 10, winMin, 8), now)
	// The limit drops to 5: 8 held > 5, so even a peek is over; remaining
	// clamps at 0, retry at the window's end 55 s later.
	got := k.do(t, winReq(KindFixedWindow, 5, winMin, 0), now+winSec)
	if want := (Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 54 * winSec, ResetAfter: 54 * winSec}); got != want {
		t.Errorf("after lowering the limit: %+v, want %+v", got, want)
	}
	// The window grows to 20 min: its window [100 min, 120 min) starts where
	// the stored one does, so the 8 carry over: 8 + 2 <= 10; ends 19m54s later.
	got = k.do(t, winReq(KindFixedWindow, 10, 20*winMin, 2), now+winSec)
	if want := (Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 20*winMin - 6*winSec}); got != want {
		t.Errorf("after growing the window: %+v, want %+v", got, want)
	}
	// The window shrinks to 7 s: now's window [100m0s+... ) differs, so the
	// count starts at 0 again.
	got = k.do(t, winReq(KindFixedWindow, 10, 7*winSec, 1), now+winSec)
	if got.Limited || got.Remaining != 9 {
		t.Errorf("after shrinking the window: %+v, want allowed with 9 remaining", got)
	}
}

func TestFixedWindowRandomArrivals(t *testing.T) {
	for seed := range uint64(150) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			limit, window, admitted := winSimulate(t, KindFixedWindow, seed, 250, nil)
			// Documented bound: <= limit per aligned window, <= 2×limit in
			// any interval of one window's length.
			if got := winMaxInAligned(admitted, window); got > limit {
				t.Errorf("admitted %d in one aligned window, limit %d", got, limit)
			}
			if got := winMaxInSpan(admitted, window); got > 2*limit {
				t.Errorf("admitted %d in an interval of %d ns, bound 2×%d", got, window, limit)
			}
		})
	}
}

func TestFixedWindowBoundIsReached(t *testing.T) {
	// limit at the last instant of a window and limit at the first of the
	// next: 2×limit inside 1 ns, the documented bound.
	var k winKey
	const limit, w = 100, 60 * winSec
	end := 1000 * w
	if r := k.do(t, winReq(KindFixedWindow, limit, w, limit), end-1); r.Limited {
		t.Fatalf("first burst limited: %+v", r)
	}
	if r := k.do(t, winReq(KindFixedWindow, limit, w, limit), end); r.Limited {
		t.Fatalf("second burst limited: %+v", r)
	}
}

func TestFixedWindowInvalidRequestNeverPanics(t *testing.T) {
	st := State{Kind: KindFixedWindow, ExpireAt: 100, A: 0, B: 3}
	for _, req := range []*Request{
		winReq(KindFixedWindow, 10, 0, 1),
		winReq(KindFixedWindow, 10, -5, 1),
		winReq(KindFixedWindow, -1, winSec, 1),
		winReq(KindFixedWindow, 10, winSec, -1),
		winReq(KindFixedWindow, MaxCount+1, winSec, 1),
		winReq(KindFixedWindow, 10, MaxPeriod+1, 1),
	} {
		got, res := Apply(st, req, 50)
		if !res.Limited || res.RetryAfter != -1 || res.Remaining < 0 || !winStateEqual(got, st) {
			t.Errorf("Apply(%+v) = %+v, %+v; want limited, retry -1, state unchanged", *req, got, res)
		}
	}
}

func TestFixedWindowAllocs(t *testing.T) {
	req := winReq(KindFixedWindow, 1000, winSec, 1)
	st := State{}
	now := int64(1_763_771_000_000_000_000)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1_000_003
		st, _ = Apply(st, req, now)
	})
	if allocs != 0 {
		t.Errorf("FW.INCR allocates %v times per call, want 0", allocs)
	}
}

// BenchmarkFixedWindow answers: what does one FW.INCR cost in the engine,
// on one hot key that is sometimes over its limit?
func BenchmarkFixedWindow(b *testing.B) {
	req := winReq(KindFixedWindow, 1000, winSec, 1)
	var st State
	now := int64(1_763_771_000_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		now += 700_001 // ~1430 calls per 1 s window: 1000 allowed, then limited
		st, _ = Apply(st, req, now)
	}
}
