package engine

import "testing"

func TestSlidingLogSteps(t *testing.T) {
	// limit 3 per 10 s; base is not aligned to anything (the log has no
	// windows of its own). An entry at t counts while now is in [t, t+10s).
	base := int64(1_763_771_000_123_456_789)
	steps := []winStep{
		// log [] → [(0,1)]: 1 <= 3, remaining 2; it leaves at 10 s.
		{0, 1, Result{Limit: 3, Remaining: 2, RetryAfter: -1, ResetAfter: 10 * sec}},
		// Same instant: merged into [(0,2)], remaining 1.
		{0, 1, Result{Limit: 3, Remaining: 1, RetryAfter: -1, ResetAfter: 10 * sec}},
		// [(0,2),(4s,1)]: 3 <= 3, remaining 0; the newest leaves at 14 s.
		{4 * sec, 1, Result{Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * sec}},
		// 3 + 1 > 3: 1 unit must leave; (0,2) leaves at 10 s, 5 s from now.
		{5 * sec, 1, Result{Limited: true, Limit: 3, Remaining: 0, RetryAfter: 5 * sec, ResetAfter: 9 * sec}},
		// 3 + 2 > 3: 2 units must leave; (0,2) frees both, at 10 s.
		{5 * sec, 2, Result{Limited: true, Limit: 3, Remaining: 0, RetryAfter: 5 * sec, ResetAfter: 9 * sec}},
		// 3 + 3 > 3: 3 units; (0,2) then (4s,1), which leaves at 14 s.
		{5 * sec, 3, Result{Limited: true, Limit: 3, Remaining: 0, RetryAfter: 9 * sec, ResetAfter: 9 * sec}},
		// 4 > 3: never.
		{5 * sec, 4, Result{Limited: true, Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 9 * sec}},
		// 1 ns before (0,2) leaves.
		{10*sec - 1, 1, Result{Limited: true, Limit: 3, Remaining: 0, RetryAfter: 1, ResetAfter: 4*sec + 1}},
		// At 10 s (0,2) is out (0 <= 10s − 10s): [(4s,1),(10s,1)], remaining 1.
		{10 * sec, 1, Result{Limit: 3, Remaining: 1, RetryAfter: -1, ResetAfter: 10 * sec}},
		// At 14 s (4s,1) is out: a peek sees [(10s,1)], remaining 2, reset 6 s.
		{14 * sec, 0, Result{Limit: 3, Remaining: 2, RetryAfter: -1, ResetAfter: 6 * sec}},
		// At 20 s the log is empty: fresh.
		{20 * sec, 0, Result{Limit: 3, Remaining: 3, RetryAfter: -1, ResetAfter: 0}},
		// A fresh key and a count above the limit.
		{30 * sec, 4, Result{Limited: true, Limit: 3, Remaining: 3, RetryAfter: -1, ResetAfter: 0}},
	}
	winRunSteps(t, KindSlidingLog, 3, 10*sec, base, steps)
}

func TestSlidingLogHuge(t *testing.T) {
	// 2^40 units in a ten-year window: one entry holds them all.
	w := MaxPeriod
	steps := []winStep{
		{1, MaxCount - 1, Result{Limit: MaxCount, Remaining: 1, RetryAfter: -1, ResetAfter: w}},
		{w / 2, 1, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: w}},
		// MaxCount + 1 > MaxCount: the first entry (MaxCount − 1 units) frees
		// enough; it leaves at 1 + w.
		{w / 2, 1, Result{Limited: true, Limit: MaxCount, Remaining: 0, RetryAfter: 1 + w - w/2, ResetAfter: w}},
		// The whole limit needs both entries gone: the second leaves at w/2 + w.
		{w / 2, MaxCount, Result{Limited: true, Limit: MaxCount, Remaining: 0, RetryAfter: w, ResetAfter: w}},
		{w + 1, MaxCount - 1, Result{Limit: MaxCount, Remaining: 0, RetryAfter: -1, ResetAfter: w}},
	}
	winRunSteps(t, KindSlidingLog, MaxCount, w, 0, steps)
}

// slCheckLayout checks the stored log against its documented layout.
// A refused request or a peek leaves the state as it was, entries that have
// since left the window included; the window check applies after an
// admitted request.
func slCheckLayout(t *testing.T, k *winKey, req *Request, now int64, res Result) {
	t.Helper()
	st := k.st
	if st.Kind == KindNone {
		if st.Log != nil || st.A != 0 {
			t.Fatalf("at %d: fresh state holds %+v", now, st)
		}
		return
	}
	if len(st.Log) == 0 {
		t.Fatalf("at %d: stored an empty log: %+v", now, st)
	}
	var sum int64
	for i, e := range st.Log {
		if e.Count < 1 || e.At > now || (!res.Limited && req.Quantity > 0 && e.At <= now-req.Period) || (i > 0 && e.At <= st.Log[i-1].At) {
			t.Fatalf("at %d: log %v breaks its layout at %d (window %d)", now, st.Log, i, req.Period)
		}
		sum += e.Count
	}
	if sum != st.A || sum > req.Burst {
		t.Fatalf("at %d: A = %d, entries sum to %d, limit %d", now, st.A, sum, req.Burst)
	}
	if last := st.Log[len(st.Log)-1]; st.ExpireAt != last.At+req.Period {
		t.Fatalf("at %d: ExpireAt = %d, want newest entry + window = %d", now, st.ExpireAt, last.At+req.Period)
	}
	// O(limit) memory: at most limit entries, and a backing array no more
	// than about twice as long as the log ever was.
	if int64(len(st.Log)) > req.Burst || int64(cap(st.Log)) > 3*req.Burst+4 {
		t.Fatalf("at %d: len %d cap %d for limit %d", now, len(st.Log), cap(st.Log), req.Burst)
	}
}

func TestSlidingLogReusesItsArray(t *testing.T) {
	req := winReq(KindSlidingLog, 100, sec, 1)
	var st State
	now := int64(1_000) * sec
	for i := range 50 {
		st, _ = Apply(st, req, now+int64(i)*ms)
	}
	if len(st.Log) != 50 {
		t.Fatalf("log holds %d entries, want 50", len(st.Log))
	}
	arr := &st.Log[:cap(st.Log)][cap(st.Log)-1]

	// Same instant: merged in place, no new entry.
	st2, _ := Apply(st, req, now+49*ms)
	if len(st2.Log) != 50 || st2.Log[49].Count != 2 {
		t.Fatalf("merge: log %v", st2.Log[45:])
	}
	// 1.025 s later 26 entries (0..25 ms) have left, 24 remain: the head is
	// consumed faster than survivors must move, so they move to the front
	// of the same array.
	st3, _ := Apply(st2, req, now+sec+25*ms)
	if len(st3.Log) != 25 || &st3.Log[:cap(st3.Log)][cap(st3.Log)-1] != arr || cap(st3.Log) != cap(st.Log) {
		t.Fatalf("compaction: len %d cap %d (was %d), same array %v", len(st3.Log), cap(st3.Log), cap(st.Log),
			&st3.Log[:cap(st3.Log)][cap(st3.Log)-1] == arr)
	}
	// Once everything has left, the next request starts at the front again.
	st4, _ := Apply(st3, req, now+10*sec)
	if len(st4.Log) != 1 || &st4.Log[:cap(st4.Log)][cap(st4.Log)-1] != arr {
		t.Fatalf("after expiry: len %d cap %d, same array %v", len(st4.Log), cap(st4.Log), &st4.Log[:cap(st4.Log)][cap(st4.Log)-1] == arr)
	}
}

func TestSlidingLogLimitedWritesNothing(t *testing.T) {
	// The store may hand Apply a Log that shares its array with what it
	// keeps; a refused request or a peek must leave it as it was, also when
	// entries have left the window.
	req := winReq(KindSlidingLog, 3, 10*sec, 1)
	st := State{Kind: KindSlidingLog, A: 3, ExpireAt: 15 * sec,
		Log: []LogEntry{{At: 2 * sec, Count: 1}, {At: 4 * sec, Count: 1}, {At: 5 * sec, Count: 1}}}
	want := cloneState(st)
	for _, c := range []struct {
		at, count int64
		limited   bool
	}{
		{5 * sec, 1, true},      // 3 + 1 > 3
		{5 * sec, 0, false},     // peek
		{12*sec + ms, 2, true},  // (2s,1) has left: 2 + 2 > 3
		{12*sec + ms, 0, false}, // peek after an entry left: resliced only
		{14*sec + ms, 3, true},  // (4s,1) has left too: 1 + 3 > 3
	} {
		req.Quantity = c.count
		_, res := Apply(st, req, c.at)
		if res.Limited != c.limited {
			t.Fatalf("at %d count %d: %+v, want limited %v", c.at, c.count, res, c.limited)
		}
		if !equalState(st, want) {
			t.Fatalf("at %d count %d (%+v): st became %+v, want %+v", c.at, c.count, res, st, want)
		}
	}
}

func TestSlidingLogParametersChange(t *testing.T) {
	var k winKey
	// 5 of 10 at 1 s, 3 at 2 s, window 10 s: 5 then 2 remain; the newest
	// entry leaves 10 s after each call.
	if got, want := k.do(t, winReq(KindSlidingLog, 10, 10*sec, 5), sec), (Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 10 * sec}); got != want {
		t.Errorf("first call: %+v, want %+v", got, want)
	}
	if got, want := k.do(t, winReq(KindSlidingLog, 10, 10*sec, 3), 2*sec), (Result{Limit: 10, Remaining: 2, RetryAfter: -1, ResetAfter: 10 * sec}); got != want {
		t.Errorf("second call: %+v, want %+v", got, want)
	}
	// Limit down to 4: 8 > 4 even for a peek; 4 must leave: (1s,5) at 11 s.
	got := k.do(t, winReq(KindSlidingLog, 4, 10*sec, 0), 3*sec)
	if want := (Result{Limited: true, Limit: 4, Remaining: 0, RetryAfter: 8 * sec, ResetAfter: 9 * sec}); got != want {
		t.Errorf("after lowering the limit: %+v, want %+v", got, want)
	}
	// Window down to 1.5 s at 3 s: only (2s,3) is inside (1s <= 3s − 1.5s):
	// 3 + 1 <= 10, remaining 6; newest at 3 s leaves at 4.5 s.
	got = k.do(t, winReq(KindSlidingLog, 10, 1500*ms, 1), 3*sec)
	if want := (Result{Limit: 10, Remaining: 6, RetryAfter: -1, ResetAfter: 1500 * ms}); got != want {
		t.Errorf("after shrinking the window: %+v, want %+v", got, want)
	}
}

func TestSlidingLogClockStepsBack(t *testing.T) {
	// The server's clock never runs backwards, but the engine must stay
	// sane if it did: the request is merged into the newest entry, so the
	// instants stay increasing.
	var k winKey
	req := winReq(KindSlidingLog, 5, sec, 1)
	k.do(t, req, 10*sec)
	got := k.do(t, req, 9*sec)
	if got.Limited || len(k.st.Log) != 1 || k.st.Log[0] != (LogEntry{At: 10 * sec, Count: 2}) {
		t.Errorf("step back: %+v, log %v; want allowed, [(10s,2)]", got, k.st.Log)
	}
}

func TestSlidingLogDamagedState(t *testing.T) {
	// A damaged running sum is recounted, not trusted.
	bad := State{Kind: KindSlidingLog, ExpireAt: 1 << 40, A: -7, Log: []LogEntry{{At: 50, Count: 2}, {At: 60, Count: 1}}}
	_, res := Apply(bad, winReq(KindSlidingLog, 10, sec, 0), 70)
	if res.Remaining != 7 {
		t.Errorf("damaged sum: Remaining = %d, want 10 − 3 = 7", res.Remaining)
	}
}
