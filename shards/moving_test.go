package shards

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// logState is a valid sliding-log state of two entries, expiring at exp.
func logState(exp int64) engine.State {
	return engine.State{Kind: engine.KindSlidingLog, ExpireAt: exp, A: 3,
		Log: []engine.LogEntry{{At: exp - 2e9, Count: 1}, {At: exp - 1e9, Count: 2}}}
}

// fwState is a valid fixed-window state of window 1 h holding n units,
// expiring at exp.
func fwState(exp, n int64) engine.State {
	return engine.State{Kind: engine.KindFixedWindow, ExpireAt: exp, A: exp - int64(time.Hour), B: n}
}

func restoreOp(key string, st engine.State, replace, noGrow bool) *Op {
	return &Op{Code: OpRestore, Keys: [][]byte{[]byte(key)}, State: st, Replace: replace, NoGrow: noGrow}
}

func keysOp(code OpCode, keys ...string) *Op {
	op := &Op{Code: code}
	for _, k := range keys {
		op.Keys = append(op.Keys, []byte(k))
	}
	return op
}

// run executes op at now and returns its result, errors included.
func run(s *Store, op *Op, now int64) Result {
	var res Result
	s.Exec(op, now, &res)
	return res
}

// wantState fails unless key is live at now with exactly st (or absent,
// for the zero State).
func wantState(t *testing.T, s *Store, key string, now int64, st engine.State) {
	t.Helper()
	got, ok := s.Lookup([]byte(key), now)
	if ok != st.Kind.Valid() || !reflect.DeepEqual(got, st) {
		t.Errorf("Lookup(%q) = %+v, %v; want %+v", key, got, ok, st)
	}
}

func TestRestore(t *testing.T) {
	live := gcraState(t0 + 10e9)
	for _, tc := range []struct {
		name   string
		before map[string]engine.State // Put before the op
		op     *Op
		err    error
		n      int64
		after  engine.State // key "k" after the op (zero: absent)
	}{
		{name: "missing key", op: restoreOp("k", logState(t0+5e9), false, false), n: 1, after: logState(t0 + 5e9)},
		{name: "live key refused", before: map[string]engine.State{"k": live},
			op: restoreOp("k", fwState(t0+5e9, 2), false, false), err: ErrBusyKey, after: live},
		{name: "live key of another kind replaced", before: map[string]engine.State{"k": live},
			op: restoreOp("k", fwState(t0+5e9, 2), true, false), n: 1, after: fwState(t0+5e9, 2)},
		{name: "expired key is missing", before: map[string]engine.State{"k": gcraState(t0)},
			op: restoreOp("k", fwState(t0+5e9, 2), false, false), n: 1, after: fwState(t0+5e9, 2)},
		{name: "NoGrow refuses a new key", op: restoreOp("k", live, false, true), err: ErrWouldGrow},
		{name: "NoGrow refuses a larger state", before: map[string]engine.State{"k": live},
			op: restoreOp("k", logState(t0+5e9), true, true), err: ErrWouldGrow, after: live},
		{name: "NoGrow keeps a same-size replace", before: map[string]engine.State{"k": live},
			op: restoreOp("k", gcraState(t0+20e9), true, true), n: 1, after: gcraState(t0 + 20e9)},
		{name: "state expired stores nothing", op: restoreOp("k", gcraState(t0), false, false)},
		{name: "state expired with replace deletes", before: map[string]engine.State{"k": live},
			op: restoreOp("k", gcraState(t0-1), true, false)},
		{name: "state expired without replace is busy", before: map[string]engine.State{"k": live},
			op: restoreOp("k", gcraState(t0-1), false, false), err: ErrBusyKey, after: live},
		{name: "two keys", op: &Op{Code: OpRestore, Keys: [][]byte{[]byte("k"), []byte("j")}, State: live}, err: ErrBadOp},
		{name: "requests", op: &Op{Code: OpRestore, Keys: [][]byte{[]byte("k")}, Reqs: []engine.Request{benchReq}, State: live}, err: ErrBadOp},
		{name: "no kind", op: restoreOp("k", engine.State{ExpireAt: t0 + 1}, false, false), err: ErrBadOp},
		{name: "key too large", op: &Op{Code: OpRestore, Keys: [][]byte{make([]byte, MaxKeyLen+1)}, State: live}, err: ErrKeyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 4)
			for k, st := range tc.before {
				s.Put([]byte(k), st)
			}
			changes := s.Changes()
			res := run(s, tc.op, t0)
			if !errors.Is(res.Err, tc.err) || res.N != tc.n {
				t.Fatalf("Exec(%s) = N %d, %v; want N %d, %v", tc.name, res.N, res.Err, tc.n, tc.err)
			}
			wantState(t, s, "k", t0, tc.after)
			if tc.err != nil && s.Changes() != changes {
				t.Errorf("a refused restore counted %d changes", s.Changes()-changes)
			}
		})
	}
}

// The restored log is the store's own: changing the op's afterwards
// changes nothing stored.
func TestRestoreCopiesLog(t *testing.T) {
	s := newStore(t, 4)
	op := restoreOp("k", logState(t0+5e9), false, false)
	if res := run(s, op, t0); res.Err != nil {
		t.Fatal(res.Err)
	}
	op.State.Log[0].Count = 99
	wantState(t, s, "k", t0, logState(t0+5e9))
}

func TestMoveOut(t *testing.T) {
	s := newStore(t, 4)
	a, b := gcraState(t0+10e9), logState(t0+5e9)
	s.Put([]byte("a"), a)
	s.Put([]byte("b"), b)
	s.Put([]byte("old"), gcraState(t0)) // expired at t0: ignored
	for i, tc := range []struct {
		keys []string
		n    int64
	}{
		{[]string{"a", "b", "missing", "old"}, 2},
		{[]string{"a", "b"}, 2},     // idempotent
		{[]string{"a", "c"}, 1},     // a still moving, c absent
		{[]string{"a", "a"}, 2},     // a key named twice counts twice
		{[]string{"missing"}, 0},    // absent keys are ignored
		{[]string{}, 0},             // nothing named
		{[]string{"b", "old"}, 1},   // old was reclaimed
		{[]string{"old", "nil"}, 0}, // nothing moving among them
	} {
		if res := run(s, keysOp(OpMoveOut, tc.keys...), t0); res.Err != nil || res.N != tc.n {
			t.Errorf("step %d: MoveOut(%q) = N %d, %v; want %d", i, tc.keys, res.N, res.Err, tc.n)
		}
	}
	for key, want := range map[string]engine.State{"a": a, "b": b} {
		if got, ok := s.Moving([]byte(key)); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("Moving(%q) = %+v, %v; want %+v", key, got, ok, want)
		}
		wantState(t, s, key, t0, engine.State{})
	}
	if _, ok := s.Moving([]byte("old")); ok {
		t.Error("an expired key was moved")
	}
	if n := s.Exists([][]byte{[]byte("a"), []byte("b")}, t0); n != 0 {
		t.Errorf("Exists(moving keys) = %d, want 0", n)
	}
	if n := s.Len(t0); n != 0 {
		t.Errorf("Len = %d, want 0 (moving keys are absent)", n)
	}
	if n := len(s.Capture(0, t0, nil)) + len(s.Capture(1, t0, nil)) + len(s.Capture(2, t0, nil)) + len(s.Capture(3, t0, nil)); n != 0 {
		t.Errorf("Capture holds %d moving keys, want 0", n)
	}
}

// An Exclusive OpMoveOut takes its keys only when none of them is moving
// already; otherwise it is refused with ErrMoving and changes nothing (the
// live keys it names stay in the keyspace).
func TestMoveOutExclusive(t *testing.T) {
	s := newStore(t, 4)
	a, b, c := gcraState(t0+10e9), gcraState(t0+20e9), gcraState(t0+30e9)
	s.Put([]byte("a"), a)
	s.Put([]byte("b"), b)
	s.Put([]byte("c"), c)
	exclusive := func(keys ...string) *Op {
		op := keysOp(OpMoveOut, keys...)
		op.Exclusive = true
		return op
	}
	if res := run(s, exclusive("a", "missing"), t0); res.Err != nil || res.N != 1 {
		t.Fatalf("exclusive MoveOut(a, missing) = N %d, %v; want 1, nil", res.N, res.Err)
	}
	for _, keys := range [][]string{{"a"}, {"b", "a"}, {"a", "c"}} {
		if res := run(s, exclusive(keys...), t0); !errors.Is(res.Err, ErrMoving) || res.N != 0 {
			t.Errorf("exclusive MoveOut(%q) with a moving = N %d, %v; want 0, ErrMoving", keys, res.N, res.Err)
		}
	}
	wantState(t, s, "b", t0, b)
	wantState(t, s, "c", t0, c)
	if _, ok := s.Moving([]byte("b")); ok {
		t.Error("a refused exclusive MoveOut took b")
	}
	// Without Exclusive, a moving key stays moving and the others are taken.
	if res := run(s, keysOp(OpMoveOut, "a", "b"), t0); res.Err != nil || res.N != 2 {
		t.Errorf("MoveOut(a, b) = N %d, %v; want 2, nil", res.N, res.Err)
	}
}

// Moving returns a copy: changing it changes nothing in the set.
func TestMovingReturnsCopy(t *testing.T) {
	s := newStore(t, 4)
	s.Put([]byte("b"), logState(t0+5e9))
	run(s, keysOp(OpMoveOut, "b"), t0)
	st, _ := s.Moving([]byte("b"))
	st.Log[0].Count = 99
	if got, _ := s.Moving([]byte("b")); !reflect.DeepEqual(got, logState(t0+5e9)) {
		t.Errorf("Moving after modifying a copy = %+v", got)
	}
}

// TestMovingRefusesOps: every op but the moves and OpFlush that names a
// moving key fails as a whole with ErrMoving and changes nothing, not even
// its other keys.
func TestMovingRefusesOps(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   *Op
	}{
		{"limit", limitOp("m", fw(100, time.Hour, 1))},
		{"limit nogrow", &Op{Code: OpLimit, Keys: [][]byte{[]byte("m")}, Reqs: []engine.Request{fw(100, time.Hour, 1)}, NoGrow: true}},
		{"limit all", limitAllOp([]string{"other", "m"}, fw(100, time.Hour, 1), fw(100, time.Hour, 1))},
		{"limit all, moving key last of many", limitAllOp([]string{"other", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "m"},
			fw(100, time.Hour, 1), fw(100, time.Hour, 1), fw(100, time.Hour, 1), fw(100, time.Hour, 1), fw(100, time.Hour, 1),
			fw(100, time.Hour, 1), fw(100, time.Hour, 1), fw(100, time.Hour, 1), fw(100, time.Hour, 1), fw(100, time.Hour, 1))},
		{"del", keysOp(OpDel, "other", "m")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 16)
			other, moving := fwState(t0+int64(time.Hour), 5), fwState(t0+int64(time.Hour), 7)
			s.Put([]byte("other"), other)
			s.Put([]byte("m"), moving)
			if res := run(s, keysOp(OpMoveOut, "m"), t0); res.N != 1 {
				t.Fatalf("MoveOut = %+v", res)
			}
			changes := s.Changes()
			if res := run(s, tc.op, t0); !errors.Is(res.Err, ErrMoving) || len(res.Results) != 0 || res.N != 0 {
				t.Fatalf("Exec(%s) = %+v, want ErrMoving", tc.name, res)
			}
			if s.Changes() != changes {
				t.Error("a refused op counted a change")
			}
			wantState(t, s, "other", t0, other)
			wantState(t, s, "m", t0, engine.State{})
			if got, ok := s.Moving([]byte("m")); !ok || !reflect.DeepEqual(got, moving) {
				t.Errorf("Moving(m) = %+v, %v; want %+v", got, ok, moving)
			}
		})
	}
}

func TestMoveDone(t *testing.T) {
	s := newStore(t, 4)
	s.Put([]byte("a"), fwState(t0+int64(time.Hour), 5))
	s.Put([]byte("b"), fwState(t0+int64(time.Hour), 6))
	run(s, keysOp(OpMoveOut, "a", "b"), t0)
	if res := run(s, keysOp(OpMoveDone, "a", "zz"), t0); res.Err != nil || res.N != 1 {
		t.Errorf("MoveDone(a, zz) = N %d, %v; want 1", res.N, res.Err)
	}
	if res := run(s, keysOp(OpMoveDone, "a"), t0); res.N != 0 {
		t.Errorf("MoveDone(a) again = N %d, want 0", res.N)
	}
	if _, ok := s.Moving([]byte("a")); ok {
		t.Error("a still moving after MoveDone")
	}
	// The key is gone from this store: a write creates it afresh.
	if r := exec(t, s, limitOp("a", fw(100, time.Hour, 1)), t0); r[0].Remaining != 99 {
		t.Errorf("limit after MoveDone = %+v, want a fresh key (remaining 99)", r[0])
	}
	if res := run(s, limitOp("b", fw(100, time.Hour, 1)), t0); !errors.Is(res.Err, ErrMoving) {
		t.Errorf("b = %v, want still refused", res.Err)
	}
	if !s.moving.active() {
		t.Error("moving set empty while b moves")
	}
	run(s, keysOp(OpMoveDone, "b"), t0)
	if s.moving.active() {
		t.Error("counter says active with an empty set")
	}
}

func TestMoveAbort(t *testing.T) {
	hour := int64(time.Hour)
	for _, tc := range []struct {
		name    string
		moving  engine.State
		between func(s *Store) // after the move out, before the abort
		now     int64          // of the abort
		after   engine.State
	}{
		{name: "back in place", moving: logState(t0 + 5e9), now: t0, after: logState(t0 + 5e9)},
		{name: "overwrites a key created meanwhile", moving: fwState(t0+hour, 3),
			between: func(s *Store) { s.Put([]byte("k"), gcraState(t0+1e9)) }, now: t0, after: fwState(t0+hour, 3)},
		{name: "expired meanwhile", moving: gcraState(t0 + 1e9), now: t0 + 1e9},
		{name: "expired meanwhile, key created meanwhile", moving: gcraState(t0 + 1e9),
			between: func(s *Store) { s.Put([]byte("k"), gcraState(t0+5e9)) }, now: t0 + 1e9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 4)
			s.Put([]byte("k"), tc.moving)
			run(s, keysOp(OpMoveOut, "k"), t0)
			if tc.between != nil {
				tc.between(s)
			}
			if res := run(s, keysOp(OpMoveAbort, "k", "absent"), tc.now); res.Err != nil || res.N != 1 {
				t.Fatalf("MoveAbort = N %d, %v; want 1", res.N, res.Err)
			}
			wantState(t, s, "k", tc.now, tc.after)
			if _, ok := s.Moving([]byte("k")); ok || s.moving.active() {
				t.Error("still moving after the abort")
			}
			if res := run(s, keysOp(OpMoveAbort, "k"), tc.now); res.N != 0 {
				t.Errorf("MoveAbort again = N %d, want 0", res.N)
			}
		})
	}
}

func TestFlushClearsMoving(t *testing.T) {
	s := newStore(t, 4)
	s.Put([]byte("a"), gcraState(t0+1e9))
	run(s, keysOp(OpMoveOut, "a"), t0)
	run(s, &Op{Code: OpFlush}, t0)
	if _, ok := s.Moving([]byte("a")); ok || s.moving.active() {
		t.Error("moving set survived OpFlush")
	}
	exec(t, s, limitOp("a", gcra(10, 1, time.Second, 1)), t0)
}

func TestMovingKeysAndSetMoving(t *testing.T) {
	s := newStore(t, 4)
	want := map[string]engine.State{"c": logState(t0 + 5e9), "a": gcraState(t0 + 1e9), "b": fwState(t0+1e9, 4)}
	s.Put([]byte("b"), gcraState(t0+7e9)) // SetMoving takes it out of the keyspace
	for k, st := range want {
		s.SetMoving([]byte(k), st)
	}
	s.SetMoving([]byte("bad"), engine.State{}) // ignored
	wantState(t, s, "b", t0, engine.State{})
	var order []string
	s.MovingKeys(func(key []byte, st engine.State) bool {
		order = append(order, string(key))
		if !reflect.DeepEqual(st, want[string(key)]) {
			t.Errorf("MovingKeys: %q = %+v, want %+v", key, st, want[string(key)])
		}
		// fn may call into the store.
		if _, ok := s.Moving(key); !ok {
			t.Errorf("Moving(%q) inside MovingKeys = false", key)
		}
		return true
	})
	if !reflect.DeepEqual(order, []string{"a", "b", "c"}) {
		t.Errorf("MovingKeys order = %q, want [a b c]", order)
	}
	n := 0
	s.MovingKeys(func([]byte, engine.State) bool { n++; return false })
	if n != 1 {
		t.Errorf("MovingKeys after fn returned false: %d calls, want 1", n)
	}
	// SetMoving copied the log.
	want["c"].Log[0].Count = 99
	if got, _ := s.Moving([]byte("c")); got.Log[0].Count != 1 {
		t.Error("SetMoving kept the caller's log")
	}
	if res := run(s, keysOp(OpMoveAbort, "a", "b", "c"), t0); res.N != 3 {
		t.Errorf("MoveAbort of installed keys = N %d, want 3", res.N)
	}
	wantState(t, s, "b", t0, fwState(t0+1e9, 4))
}

// The hot path reads one counter: it is zero exactly when the set is empty,
// and OpLimit stays allocation-free while other keys are moving.
func TestMovingCounter(t *testing.T) {
	s := newStore(t, 4)
	for i, k := range []string{"a", "b", "c"} {
		s.Put([]byte(k), gcraState(t0+1e9))
		run(s, keysOp(OpMoveOut, k), t0)
		if got := s.moving.n.Load(); got != int64(i+1) {
			t.Errorf("after %d moves the counter is %d", i+1, got)
		}
	}
	op := limitOp("other", benchReq)
	res := Result{Results: make([]engine.Result, 0, 1)}
	s.Exec(op, t0, &res)
	if got := testing.AllocsPerRun(100, func() { s.Exec(op, t0, &res) }); got != 0 {
		t.Errorf("OpLimit while keys move: %v allocs/op, want 0", got)
	}
	run(s, keysOp(OpMoveDone, "a"), t0)
	run(s, keysOp(OpMoveAbort, "b"), t0)
	if got := s.moving.n.Load(); got != 1 {
		t.Errorf("counter = %d, want 1", got)
	}
	run(s, keysOp(OpMoveDone, "c"), t0)
	if s.moving.active() {
		t.Error("counter non-zero with an empty set")
	}
}

// TestMoveConcurrentNoLostUpdate moves a key out and back while writers
// hammer it: every write either applies or fails with ErrMoving, and the
// key ends up counting exactly the writes that applied.
func TestMoveConcurrentNoLostUpdate(t *testing.T) {
	s := newStore(t, 4)
	const writers, perWriter = 4, 500
	var applied [writers]int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := limitOp("k", fw(1e9, time.Hour, 1))
			var res Result
			for range perWriter {
				s.Exec(op, t0, &res)
				switch {
				case res.Err == nil:
					applied[w]++
				case !errors.Is(res.Err, ErrMoving):
					t.Errorf("write failed: %v", res.Err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			res := run(s, keysOp(OpMoveOut, "k"), t0)
			if _, ok := s.Lookup([]byte("k"), t0); ok && res.N == 1 {
				t.Error("key live and moving at once")
			}
			run(s, keysOp(OpMoveAbort, "k"), t0)
		}
	}()
	wg.Wait()
	<-done
	var total int64
	for _, n := range applied {
		total += n
	}
	st, ok := s.Lookup([]byte("k"), t0)
	if !ok || st.B != total {
		t.Errorf("key counts %d (live %v), want the %d writes applied", st.B, ok, total)
	}
}

// A RESTORE of a key in flight takes it back: the restored state is the
// key's (its move landed elsewhere and was sent back), with or without
// REPLACE, and the key leaves the moving set; a refused RESTORE leaves it
// in flight.
func TestRestoreTakesBackMovingKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		op      *Op
		stored  bool
		refused error
	}{
		{"restore", restoreOp("m", fwState(t0+int64(time.Hour), 9), false, false), true, nil},
		{"restore replace", restoreOp("m", fwState(t0+int64(time.Hour), 9), true, false), true, nil},
		{"expired state", restoreOp("m", fwState(t0-1, 9), false, false), false, nil},
		{"nogrow refused", restoreOp("m", fwState(t0+int64(time.Hour), 9), false, true), false, ErrWouldGrow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 16)
			s.Put([]byte("m"), fwState(t0+int64(time.Hour), 7))
			run(s, keysOp(OpMoveOut, "m"), t0)
			res := run(s, tc.op, t0)
			if !errors.Is(res.Err, tc.refused) || (tc.refused == nil && res.Err != nil) {
				t.Fatalf("Exec(%s) = %+v, want %v", tc.name, res, tc.refused)
			}
			_, moving := s.Moving([]byte("m"))
			if moving != (tc.refused != nil) {
				t.Errorf("moving after %s = %v, want %v", tc.name, moving, tc.refused != nil)
			}
			if tc.stored {
				wantState(t, s, "m", t0, tc.op.State)
			} else if tc.refused == nil {
				wantState(t, s, "m", t0, engine.State{})
			}
		})
	}
}
