package engine

import "testing"

func TestFixedWindowGitHubHourly(t *testing.T) {
	// GitHub's REST API: 5000 requests per hour. base is an hour boundary;
	// the window of every step below is [base, base+1h) unless noted.
	base := int64(491_000) * hour
	steps := []winStep{
		// 0 + 1 <= 5000: remaining 5000-1; window ends 50 min later.
		{10 * minute, 1, Result{Limit: 5000, Remaining: 4999, RetryAfter: -1, ResetAfter: 50 * minute}},
		// 1 + 4999 = 5000 <= 5000: remaining 0.
		{20 * minute, 4999, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: 40 * minute}},
		// 5000 + 1 > 5000: limited until the window ends, 30 min later.
		{30 * minute, 1, Result{Limited: true, Limit: 5000, Remaining: 0, RetryAfter: 30 * minute, ResetAfter: 30 * minute}},
		// A peek fits (5000 + 0 <= 5000).
		{30 * minute, 0, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: 30 * minute}},
		// 5001 > 5000 can never fit: retry -1.
		{30 * minute, 5001, Result{Limited: true, Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: 30 * minute}},
		// 1 ns before the end: still the same window.
		{hour - 1, 1, Result{Limited: true, Limit: 5000, Remaining: 0, RetryAfter: 1, ResetAfter: 1}},
		// At the end a new window [base+1h, base+2h) starts at 0: 0+1 <= 5000.
		{hour, 1, Result{Limit: 5000, Remaining: 4999, RetryAfter: -1, ResetAfter: hour}},
		// 1 + 4999 = 5000 at 1h59m59.999s: ends 1 ms later.
		{2*hour - ms, 4999, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: ms}},
		// The next window: 5000 at once is fine, 2×limit inside 1 ms.
		{2 * hour, 5000, Result{Limit: 5000, Remaining: 0, RetryAfter: -1, ResetAfter: hour}},
	}
	winRunSteps(t, KindFixedWindow, 5000, hour, base, steps)
}

func TestFixedWindowEdges(t *testing.T) {
	tenYears := MaxPeriod
	winRunTables(t, KindFixedWindow, []winTable{
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
	})
}

func TestFixedWindowPeekOfMissingKeyStoresNothing(t *testing.T) {
	st, res := Apply(State{}, winReq(KindFixedWindow, 10, minute, 0), 90*sec)
	if st.Kind != KindNone || st.ExpireAt > 90*sec {
		t.Errorf("peek of a missing key returned state %+v, want a fresh one", st)
	}
	if want := (Result{Limit: 10, Remaining: 10, RetryAfter: -1}); res != want {
		t.Errorf("peek of a missing key = %+v, want %+v", res, want)
	}
}

func TestFixedWindowParametersChange(t *testing.T) {
	var k winKey
	now := 100*minute + 5*sec
	// 8 of 10 in [100 min, 101 min): 2 remain; the window ends 55 s later.
	got := k.do(t, winReq(KindFixedWindow, 10, minute, 8), now)
	if want := (Result{Limit: 10, Remaining: 2, RetryAfter: -1, ResetAfter: 55 * sec}); got != want {
		t.Errorf("first call: %+v, want %+v", got, want)
	}
	// 1 s later the limit drops to 5: 8 held > 5, so even a peek is over;
	// remaining clamps at 0, retry at the window's end 54 s later.
	got = k.do(t, winReq(KindFixedWindow, 5, minute, 0), now+sec)
	if want := (Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 54 * sec, ResetAfter: 54 * sec}); got != want {
		t.Errorf("after lowering the limit: %+v, want %+v", got, want)
	}
	// The window grows to 20 min: its window [100 min, 120 min) starts where
	// the stored one does, so the 8 carry over: 8 + 2 <= 10; ends 19m54s later.
	got = k.do(t, winReq(KindFixedWindow, 10, 20*minute, 2), now+sec)
	if want := (Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 20*minute - 6*sec}); got != want {
		t.Errorf("after growing the window: %+v, want %+v", got, want)
	}
	// The window shrinks to 7 s: 6006 s = 858 × 7 s, so now's window is
	// [6006 s, 6013 s), not the stored one starting at 6000 s: the count
	// starts at 0 again, 9 remain, and the window ends 7 s later.
	got = k.do(t, winReq(KindFixedWindow, 10, 7*sec, 1), now+sec)
	if want := (Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 7 * sec}); got != want {
		t.Errorf("after shrinking the window: %+v, want %+v", got, want)
	}
}

func TestFixedWindowBoundIsReached(t *testing.T) {
	// limit at the last instant of a window and limit at the first of the
	// next: 2×limit inside 1 ns, the documented bound.
	var k winKey
	const limit, w = 100, 60 * sec
	end := 1000 * w
	if r := k.do(t, winReq(KindFixedWindow, limit, w, limit), end-1); r.Limited {
		t.Fatalf("first burst limited: %+v", r)
	}
	if r := k.do(t, winReq(KindFixedWindow, limit, w, limit), end); r.Limited {
		t.Fatalf("second burst limited: %+v", r)
	}
}

// An Exact request admits only when it brings the count to exactly the
// limit: a request below (a gap) is refused with the distance in
// Remaining, one above (already counted) is refused with Remaining 0, and
// neither changes the state.
func TestFixedWindowExact(t *testing.T) {
	const w = 3 * 24 * hour
	base := int64(20_000) * w
	at := func(count int64) State {
		if count == 0 {
			return State{}
		}
		return State{Kind: KindFixedWindow, A: base, B: count, ExpireAt: base + w}
	}
	cases := []struct {
		name         string
		count, limit int64
		limited      bool
		remaining    int64
	}{
		{"first of a fresh record", 0, 1, false, 0},
		{"next", 4, 5, false, 0},
		{"gap of one", 3, 5, true, 2},
		{"gap from a fresh record", 0, 2000, true, 2000},
		{"already counted", 5, 5, true, 0},
		{"long counted", 9, 5, true, 0},
	}
	for _, c := range cases {
		st := at(c.count)
		req := Request{Kind: KindFixedWindow, Burst: c.limit, Period: w, Quantity: 1, Exact: true}
		next, res := Apply(st, &req, base+hour)
		if res.Limited != c.limited || res.Remaining != c.remaining {
			t.Errorf("%s: count %d, limit %d: limited %v remaining %d, want %v %d", c.name, c.count, c.limit, res.Limited, res.Remaining, c.limited, c.remaining)
		}
		switch {
		case c.limited && (next.Kind != st.Kind || next.A != st.A || next.B != st.B || next.ExpireAt != st.ExpireAt):
			t.Errorf("%s: a refused request changed the state to %+v", c.name, next)
		case !c.limited && next.B != c.limit:
			t.Errorf("%s: admitted, count %d, want %d", c.name, next.B, c.limit)
		}
	}
}
