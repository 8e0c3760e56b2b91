package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func gcraReq(burst, count, periodSec, qty int64) Request {
	return Request{Kind: KindGCRA, Burst: burst, Rate: count, Period: periodSec * sec, Quantity: qty}
}

// TestGCRAGolden replays redis-cell's published test sequence: burst 4
// (limit 5), 1 per second, one key. Times are at full precision.
func TestGCRAGolden(t *testing.T) {
	cases := []struct {
		at        int64 // offset from t0
		qty       int64
		limited   bool
		remaining int64
		reset     int64
		retry     int64
	}{
		// 6 > limit 5: never possible; fresh key, so reset 0 and all 5 remain.
		{0, 6, true, 5, 0, -1},
		// Each unit moves the TAT 1 s ahead: reset = k s, remaining = (5 s − k s)/1 s.
		{0, 1, false, 4, 1 * sec, -1},
		{0, 1, false, 3, 2 * sec, -1},
		{0, 1, false, 2, 3 * sec, -1},
		{0, 1, false, 1, 4 * sec, -1},
		{0, 1, false, 0, 5 * sec, -1},
		// TAT = t0+5 s; new TAT t0+6 s − τ 5 s = t0+1 s > now: retry 1 s.
		{0, 1, true, 0, 5 * sec, 1 * sec},
		// TAT t0+5 s → t0+6 s; reset 3 s; remaining (5−3)/1 = 2.
		{3000 * ms, 1, false, 2, 3000 * ms, -1},
		// TAT t0+6 s → t0+7 s; reset 3.9 s; remaining (5−3.9)/1 = 1.
		{3100 * ms, 1, false, 1, 3900 * ms, -1},
		// TAT t0+7 s → t0+8 s; reset 4 s; remaining 1.
		{4000 * ms, 1, false, 1, 4000 * ms, -1},
		// TAT t0+8 s = now → t0+9 s; reset 1 s; remaining 4.
		{8000 * ms, 1, false, 4, 1000 * ms, -1},
		// TAT t0+9 s < now: fresh; → t0+10.5 s; reset 1 s; remaining 4.
		{9500 * ms, 1, false, 4, 1000 * ms, -1},
		// A peek: nothing moves.
		{9500 * ms, 0, false, 4, 1 * sec, -1},
		// Two units: TAT t0+10.5 s → t0+12.5 s; reset 3 s; remaining 2.
		{9500 * ms, 2, false, 2, 3 * sec, -1},
		// Five units: t0+17.5 s − 5 s − now = 3 s to wait; nothing consumed.
		{9500 * ms, 5, true, 2, 3 * sec, 3 * sec},
	}
	req := gcraReq(4, 1, 1, 1)
	var st State
	for i, c := range cases {
		req.Quantity = c.qty
		next, res := Apply(st, &req, t0+c.at)
		want := Result{Limited: c.limited, Limit: 5, Remaining: c.remaining, RetryAfter: c.retry, ResetAfter: c.reset}
		if res != want {
			t.Fatalf("case %d: Apply(t0+%dms, q%d) = %+v, want %+v", i, c.at/ms, c.qty, res, want)
		}
		if c.limited && !sameState(next, st, t0+c.at) {
			t.Fatalf("case %d: limited request changed the state: %+v -> %+v", i, st, next)
		}
		st = next
	}
}

// TestGCRAWireExample checks the README example through the wire rounding:
// CL.THROTTLE user123 15 30 60 on a fresh key → 0 16 15 -1 2.
func TestGCRAWireExample(t *testing.T) {
	req, err := ParseRequest(KindGCRA, args("15", "30", "60"), DefaultParseOptions())
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	_, res := Apply(State{}, &req, t0)
	// T = 60 s / 30 = 2 s; τ = 2 s × 16 = 32 s; TAT = now + 2 s;
	// remaining = (32 s − 2 s) / 2 s = 15; reset 2 s exactly → 2.
	limited := int64(0)
	if res.Limited {
		limited = 1
	}
	got := [5]int64{limited, res.Limit, res.Remaining, CellSeconds(res.RetryAfter), CellSeconds(res.ResetAfter)}
	if want := [5]int64{0, 16, 15, -1, 2}; got != want {
		t.Fatalf("CL.THROTTLE user123 15 30 60 = %v, want %v", got, want)
	}
}

// TestGCRASpecialCases covers the deliberate rules around redis-cell's
// algorithm: peeks and refunds of a missing key store nothing, a refund never
// goes beyond a fresh key, an expired state counts as missing.
func TestGCRASpecialCases(t *testing.T) {
	req := gcraReq(4, 1, 1, 0)
	// Peek of a missing key: allowed, full remaining, reset 0, nothing stored.
	st, res := Apply(State{}, &req, t0)
	if want := (Result{Limit: 5, Remaining: 5, RetryAfter: -1}); res != want || st.ExpireAt > t0 {
		t.Fatalf("peek of missing key = %+v, %+v; want %+v and nothing stored", st, res, want)
	}
	// Refund of a missing key: the same.
	req.Quantity = -3
	st, res = Apply(State{}, &req, t0)
	if want := (Result{Limit: 5, Remaining: 5, RetryAfter: -1}); res != want || st.ExpireAt > t0 {
		t.Fatalf("refund of missing key = %+v, %+v; want %+v and nothing stored", st, res, want)
	}
	// Take 3 (TAT now+3 s), refund 1 (TAT now+2 s), refund 5 (clamped at now: deleted).
	req.Quantity = 3
	st, _ = Apply(State{}, &req, t0)
	req.Quantity = -1
	st, res = Apply(st, &req, t0)
	if want := (Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 2 * sec}); res != want || st.A != t0+2*sec {
		t.Fatalf("refund 1 = %+v, %+v; want %+v, TAT t0+2s", st, res, want)
	}
	req.Quantity = -5
	st, res = Apply(st, &req, t0)
	if want := (Result{Limit: 5, Remaining: 5, RetryAfter: -1}); res != want || st.ExpireAt > t0 {
		t.Fatalf("refund 5 = %+v, %+v; want %+v and the key deleted", st, res, want)
	}
	// An expired state is a missing key: q6 > limit answers reset 0.
	old := State{Kind: KindGCRA, A: t0 - 1, ExpireAt: t0 - 1}
	req.Quantity = 6
	_, res = Apply(old, &req, t0)
	if want := (Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1}); res != want {
		t.Fatalf("q6 on expired key = %+v, want %+v", res, want)
	}
	// A peek of a key exhausted under other (larger) parameters: limited,
	// retry = TAT − τ − now. TAT now+10 s, τ 5 s → retry 5 s, remaining 0.
	big := State{Kind: KindGCRA, A: t0 + 10*sec, ExpireAt: t0 + 10*sec}
	req.Quantity = 0
	st, res = Apply(big, &req, t0)
	if want := (Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 5 * sec, ResetAfter: 10 * sec}); res != want || !sameState(st, big, t0) {
		t.Fatalf("peek over tolerance = %+v, %+v; want %+v, unchanged", st, res, want)
	}
}

// TestGCRAExtremes runs the largest parameters the limits allow: nothing
// overflows, and remaining stays within [0, limit].
func TestGCRAExtremes(t *testing.T) {
	maxSec := MaxPeriod / sec
	cases := []Request{
		{Kind: KindGCRA, Burst: 0, Rate: 1, Period: MaxPeriod, Quantity: MaxCount},
		{Kind: KindGCRA, Burst: 0, Rate: 1, Period: MaxPeriod, Quantity: -MaxCount},
		{Kind: KindGCRA, Burst: 13, Rate: 1, Period: MaxPeriod, Quantity: 1}, // τ = 14 × 3.16e17 ≈ 4.4e18 <= 2^62
		{Kind: KindGCRA, Burst: MaxCount, Rate: MaxCount, Period: maxSec * sec, Quantity: MaxCount},
		{Kind: KindGCRA, Burst: MaxCount - 1, Rate: 1_100_000, Period: 1 * sec, Quantity: 7}, // T = 909 ns < 1 µs
	}
	for _, now := range []int64{0, t0, math.MaxInt64 - MaxSpan - 1} {
		for i, req := range cases {
			if err := req.Validate(); err != nil {
				t.Fatalf("case %d: Validate = %v", i, err)
			}
			st := State{}
			for step := 0; step < 4; step++ {
				next, res := Apply(st, &req, now)
				if res.Remaining < 0 || res.Remaining > res.Limit || res.ResetAfter < 0 {
					t.Fatalf("case %d step %d at %d: %+v", i, step, now, res)
				}
				if next.ExpireAt > now && next.ExpireAt-now > MaxSpan {
					t.Fatalf("case %d: state beyond MaxSpan: %+v", i, next)
				}
				st = next
			}
		}
	}
	over := Request{Kind: KindGCRA, Burst: 14, Rate: 1, Period: MaxPeriod, Quantity: 1}
	if err := over.Validate(); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Validate(τ > MaxSpan) = %v, want ErrOverflow", err)
	}
}

// refGCRA is a straightforward transcription of redis-cell 0.5's
// rate_limit, with its float64 arithmetic, plus cellserver's refund clamp
// and remaining clamp. It is valid while nothing overflows (the test keeps
// parameters moderate) and T >= 1 µs.
type refGCRA struct{ tat int64 } // 0: missing

func (r *refGCRA) apply(burst, count, period, qty, now int64) Result {
	t := int64(float64(period) / float64(count))
	tol := t * (burst + 1)
	tat := now
	if r.tat > now {
		tat = r.tat
	}
	inc := t * qty
	newTat := max(now, tat) + inc
	if newTat < now {
		newTat = now // refund clamp
	}
	res := Result{Limit: burst + 1, RetryAfter: -1}
	var ttl int64
	if diff := now - (newTat - tol); diff < 0 {
		if inc <= tol {
			res.RetryAfter = -diff
		}
		res.Limited = true
		ttl = tat - now
	} else {
		ttl = newTat - now
		r.tat = newTat
	}
	next := tol - ttl
	if next > -t {
		res.Remaining = int64(float64(next/1000) / float64(t/1000))
	}
	res.Remaining = min(max(res.Remaining, 0), res.Limit)
	res.ResetAfter = ttl
	return res
}

// TestGCRAMatchesReference compares throttle with the float64 reference on
// random sequences and parameters.
func TestGCRAMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for seq := 0; seq < 3000; seq++ {
		burst := rng.Int64N(50)
		count := 1 + rng.Int64N(200)
		periodSec := 1 + rng.Int64N(3600)
		if seq%10 == 0 {
			periodSec = 1 + rng.Int64N(MaxPeriod/sec/(burst+1)) // long periods, where float64 T rounds
		}
		period := periodSec * sec
		if period/count < 1000 {
			continue
		}
		req := Request{Kind: KindGCRA, Burst: burst, Rate: count, Period: period}
		if req.Validate() != nil {
			continue
		}
		T := period / count
		var ref refGCRA
		var st State
		now := t0 + rng.Int64N(sec)
		for step := 0; step < 60; step++ {
			now += rng.Int64N(2*T + 1)
			if now >= maxNow {
				break
			}
			req.Quantity = rng.Int64N(burst+4) - 1 // −1 (a refund) … limit+1 (never possible)
			want := ref.apply(burst, count, period, req.Quantity, now)
			next, got := Apply(st, &req, now)
			if got != want {
				t.Fatalf("seq %d step %d: burst %d count %d period %ds q %d: got %+v, want %+v",
					seq, step, burst, count, periodSec, req.Quantity, got, want)
			}
			wantTat := ref.tat
			if wantTat <= now {
				wantTat = 0
			}
			gotTat := int64(0)
			if next.ExpireAt > now {
				gotTat = next.A
			}
			if gotTat != wantTat {
				t.Fatalf("seq %d step %d: TAT %d, want %d", seq, step, gotTat, wantTat)
			}
			st = next
		}
	}
}

// TestFloatDivTrunc checks the integer emulation of float64 division against
// the hardware, on random and adversarial operands.
func TestFloatDivTrunc(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(a, b uint64) {
		t.Helper()
		want := uint64(float64(a) / float64(b))
		if got := floatDivTrunc(a, b); got != want {
			t.Fatalf("floatDivTrunc(%d, %d) = %d, want %d", a, b, got, want)
		}
	}
	for i := 0; i < 2_000_000; i++ {
		var a, b uint64
		switch i % 4 {
		case 0:
			a, b = rng.Uint64N(1<<63), 1+rng.Uint64N(1<<40)
		case 1: // quotient just below an integer
			b = 1 + rng.Uint64N(1<<40)
			k := 1 + rng.Uint64N((1<<63-1)/b)
			a = k*b - 1 - rng.Uint64N(min(b, 4))
		case 2: // whole-second periods up to MaxPeriod, any count
			a, b = uint64(1+rng.Int64N(MaxPeriod/sec))*uint64(sec), 1+rng.Uint64N(uint64(MaxCount))
		case 3: // small operands
			a, b = rng.Uint64N(1<<20), 1+rng.Uint64N(1<<10)
		}
		if a >= 1<<63 {
			continue
		}
		check(a, b)
	}
	for _, c := range [][2]uint64{{0, 1}, {1, 1}, {1<<63 - 1, 1}, {1<<63 - 1, 3}, {1<<53 + 1, 1}, {1<<53 - 1, 1<<53 - 2}} {
		check(c[0], c[1])
	}
}

// TestGCRAIntervalBound checks the documented bound on random arrival
// sequences: in any closed interval of length L, admitted units <= limit + L/T.
func TestGCRAIntervalBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for seq := 0; seq < 400; seq++ {
		burst := rng.Int64N(20)
		count := 1 + rng.Int64N(100)
		req := Request{Kind: KindGCRA, Burst: burst, Rate: count, Period: (1 + rng.Int64N(120)) * sec}
		T := emissionInterval(req.Period, req.Rate)
		type adm struct{ at, n int64 }
		var admitted []adm
		var st State
		now := t0
		for step := 0; step < 300; step++ {
			now += rng.Int64N(T*int64(1+rng.IntN(3))) / int64(1+rng.IntN(4))
			req.Quantity = rng.Int64N(min(burst+2, 4))
			var res Result
			st, res = Apply(st, &req, now)
			if !res.Limited && req.Quantity > 0 {
				admitted = append(admitted, adm{now, req.Quantity})
			}
		}
		for i := range admitted {
			sum := int64(0)
			for j := i; j < len(admitted); j++ {
				sum += admitted[j].n
				L := admitted[j].at - admitted[i].at
				if bound := burst + 1 + L/T; sum > bound {
					t.Fatalf("seq %d: %d units admitted in %d ns, bound limit %d + L/T %d = %d",
						seq, sum, L, burst+1, L/T, bound)
				}
			}
		}
	}
}

// TestGCRARetryExact: a limited request (not larger than the limit) is
// allowed again exactly at now + retry_after, and not one nanosecond earlier;
// with the wire's whole seconds, when the remainder is 0 or at least 1 ms, at
// now + CellSeconds(retry) it is allowed and one second earlier it is not.
func TestGCRARetryExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	checked := 0
	for seq := 0; seq < 2000; seq++ {
		burst := rng.Int64N(10)
		req := Request{Kind: KindGCRA, Burst: burst, Rate: 1 + rng.Int64N(30), Period: (1 + rng.Int64N(60)) * sec}
		var st State
		now := t0 + rng.Int64N(sec)
		for step := 0; step < 30; step++ {
			now += rng.Int64N(sec)
			req.Quantity = 1 + rng.Int64N(burst+1)
			next, res := Apply(st, &req, now)
			if res.Limited {
				if res.RetryAfter <= 0 {
					t.Fatalf("limited q%d <= limit with retry %d", req.Quantity, res.RetryAfter)
				}
				if _, r := Apply(st, &req, now+res.RetryAfter); r.Limited {
					t.Fatalf("seq %d: limited again at now+retry_after (%d ns): %+v", seq, res.RetryAfter, r)
				}
				if _, r := Apply(st, &req, now+res.RetryAfter-1); !r.Limited {
					t.Fatalf("seq %d: allowed 1 ns before now+retry_after", seq)
				}
				if rem := res.RetryAfter % sec; rem == 0 || rem >= ms {
					w := CellSeconds(res.RetryAfter) * sec
					if _, r := Apply(st, &req, now+w); r.Limited {
						t.Fatalf("seq %d: limited at the rounded retry %d s", seq, w/sec)
					}
					if _, r := Apply(st, &req, now+w-sec); !r.Limited {
						t.Fatalf("seq %d: allowed one second before the rounded retry %d s", seq, w/sec)
					}
				}
				checked++
			}
			st = next
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d limited requests checked", checked)
	}
}

func TestRounding(t *testing.T) {
	cases := []struct{ ns, cell, millis int64 }{
		{-1, -1, -1},
		{0, 0, 0},
		{1, 0, 1},            // 1 ns: below 1 ms, CL drops it; ms rounds up
		{999_999, 0, 1},      // just under 1 ms
		{1 * ms, 1, 1},       // a 1 ms remainder bumps CL to the next second
		{1*sec - 1, 1, 1000}, // 999.999999 ms
		{1 * sec, 1, 1000},   // exact
		{2*sec + 999_999, 2, 2001},
		{2*sec + ms, 3, 2001},
		{3900 * ms, 4, 3900},
		{MaxSpan, MaxSpan/sec + 1, MaxSpan/ms + 1}, // 2^62 ns = 4611686018.427387904 s
	}
	for _, c := range cases {
		if got := CellSeconds(c.ns); got != c.cell {
			t.Errorf("CellSeconds(%d) = %d, want %d", c.ns, got, c.cell)
		}
		if got := CeilMillis(c.ns); got != c.millis {
			t.Errorf("CeilMillis(%d) = %d, want %d", c.ns, got, c.millis)
		}
	}
}

// TestCellSecondsMatchesFloat compares CellSeconds with redis-cell's
// float64 computation: trunc(secs + nanos/1e9), plus one if the whole
// milliseconds of the sub-second part are positive.
func TestCellSecondsMatchesFloat(t *testing.T) {
	ref := func(ns int64) int64 {
		s, sub := ns/1e9, ns%1e9
		v := int64(float64(s) + float64(sub)/1e9)
		if sub/1e6 > 0 {
			v++
		}
		return v
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 3_000_000; i++ {
		var ns int64
		switch i % 3 {
		case 0:
			ns = rng.Int64N(math.MaxInt64)
		case 1: // just below a whole second, at every magnitude
			ns = (1+rng.Int64N(math.MaxInt64/sec-1))*sec - 1 - rng.Int64N(600)
		case 2:
			ns = rng.Int64N(1 << uint(rng.IntN(63)))
		}
		if got, want := CellSeconds(ns), ref(ns); got != want {
			t.Fatalf("CellSeconds(%d) = %d, float64 reference %d", ns, got, want)
		}
	}
	// Every binade's edges, around the rounding threshold.
	for b := 1; b <= 33; b++ {
		for _, s := range []int64{1 << (b - 1), 1<<b - 1} {
			for k := int64(1); k <= 2000; k++ {
				ns := s*sec + sec - k
				if got, want := CellSeconds(ns), ref(ns); got != want {
					t.Fatalf("CellSeconds(%d) = %d, float64 reference %d", ns, got, want)
				}
			}
		}
	}
}
