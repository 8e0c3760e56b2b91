package shards

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// sl builds an SL.ADD request: limit, window, count.
func sl(limit int64, window time.Duration, count int64) engine.Request {
	return engine.Request{Kind: engine.KindSlidingLog, Burst: limit, Period: int64(window), Quantity: count}
}

// fillLog adds one entry a millisecond to key, n times, from t0 on, without
// NoGrow, and returns the instant after the last one.
func fillLog(t *testing.T, s *Store, key string, n int) int64 {
	t.Helper()
	now := t0
	for i := 0; i < n; i++ {
		if r := exec(t, s, limitOp(key, sl(1000, time.Hour, 1)), now); r[0].Limited {
			t.Fatalf("fill %s entry %d limited", key, i)
		}
		now += int64(time.Millisecond)
	}
	return now
}

// fullLog fills key until its log's array is full: the next entry at a new
// instant must enlarge it.
func fullLog(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	now := fillLog(t, s, key, 5)
	for {
		st, _ := s.Lookup([]byte(key), now)
		sh, h := s.route([]byte(key))
		sh.mu.Lock()
		_, idx := sh.find(h, []byte(key))
		c := cap(sh.state(idx).Log)
		sh.mu.Unlock()
		if len(st.Log) == c {
			return now
		}
		exec(t, s, limitOp(key, sl(1000, time.Hour, 1)), now)
		now += int64(time.Millisecond)
	}
}

// TestNoGrow checks that an op with NoGrow is refused exactly when it would
// create a key or enlarge one, and that a refusal changes nothing.
func TestNoGrow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Store) int64 // returns the instant to run op at
		op    *Op
		want  error
		limit bool // the op answers a denial (no error)
	}{
		{"new GCRA key", func(*testing.T, *Store) int64 { return t0 }, limitOp("k", gcra(5, 1, time.Second, 1)), ErrWouldGrow, false},
		{"new key peek", func(*testing.T, *Store) int64 { return t0 }, limitOp("k", gcra(5, 1, time.Second, 0)), nil, false},
		{"new key denied", func(*testing.T, *Store) int64 { return t0 }, limitOp("k", sl(1, time.Second, 2)), nil, true},
		{"existing GCRA key", func(t *testing.T, s *Store) int64 {
			exec(t, s, limitOp("k", gcra(5, 1, time.Second, 1)), t0)
			return t0 + 1
		}, limitOp("k", gcra(5, 1, time.Second, 1)), nil, false},
		{"existing fixed window", func(t *testing.T, s *Store) int64 {
			exec(t, s, limitOp("k", fw(5, time.Second, 1)), t0)
			return t0 + 1
		}, limitOp("k", fw(5, time.Second, 1)), nil, false},
		{"expired key", func(t *testing.T, s *Store) int64 {
			exec(t, s, limitOp("k", gcra(0, 1, time.Second, 1)), t0)
			return t0 + int64(time.Hour)
		}, limitOp("k", gcra(0, 1, time.Second, 1)), ErrWouldGrow, false},
		{"full log, new entry", func(t *testing.T, s *Store) int64 { return fullLog(t, s, "k") }, limitOp("k", sl(1000, time.Hour, 1)), ErrWouldGrow, false},
		// A new entry is refused even where the array has spare room: the
		// room is not the same on every replica (see grownBytes).
		{"log with room, new entry", func(t *testing.T, s *Store) int64 { return fillLog(t, s, "k", 5) }, limitOp("k", sl(1000, time.Hour, 1)), ErrWouldGrow, false},
		{"full log, merged entry", func(t *testing.T, s *Store) int64 { return fullLog(t, s, "k") - int64(time.Millisecond) }, limitOp("k", sl(1000, time.Hour, 1)), nil, false},
		{"full log, denied", func(t *testing.T, s *Store) int64 { return fullLog(t, s, "k") }, limitOp("k", sl(3, time.Hour, 1)), nil, true},
		{"full log, peek", func(t *testing.T, s *Store) int64 { return fullLog(t, s, "k") }, limitOp("k", sl(1000, time.Hour, 0)), nil, false},
		// All entries but the newest have left the window: the engine
		// compacts them in place and the array has room again.
		{"full log, head left the window", func(t *testing.T, s *Store) int64 {
			return fullLog(t, s, "k") - 2*int64(time.Millisecond) + int64(time.Hour)
		}, limitOp("k", sl(1000, time.Hour, 1)), nil, false},
		{"all keys exist", func(t *testing.T, s *Store) int64 {
			exec(t, s, limitOp("a", gcra(5, 1, time.Second, 1)), t0)
			exec(t, s, limitOp("b", gcra(5, 1, time.Second, 1)), t0)
			return t0 + 1
		}, limitAllOp([]string{"a", "b"}, gcra(5, 1, time.Second, 1), gcra(5, 1, time.Second, 1)), nil, false},
		{"all, one new key", func(t *testing.T, s *Store) int64 {
			exec(t, s, limitOp("a", gcra(5, 1, time.Second, 1)), t0)
			return t0 + 1
		}, limitAllOp([]string{"a", "b"}, gcra(5, 1, time.Second, 1), gcra(5, 1, time.Second, 1)), ErrWouldGrow, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 4)
			now := tc.setup(t, s)
			op := tc.op
			op.NoGrow = true
			before := snapshotKeys(s, op.Keys, now)
			_, usedBefore := s.Usage()
			var res Result
			s.Exec(op, now, &res)
			if !errors.Is(res.Err, tc.want) || (tc.want == nil && res.Err != nil) {
				t.Fatalf("Exec = %v, want %v", res.Err, tc.want)
			}
			if res.Err == nil {
				if got := res.Results[0].Limited; got != tc.limit {
					t.Errorf("limited = %v, want %v", got, tc.limit)
				}
				if _, used := s.Usage(); used > usedBefore {
					t.Errorf("UsedBytes grew from %d to %d on an accepted NoGrow op", usedBefore, used)
				}
				return
			}
			if len(res.Results) != 0 {
				t.Errorf("refused op returned results %+v", res.Results)
			}
			if after := snapshotKeys(s, op.Keys, now); !reflect.DeepEqual(after, before) {
				t.Errorf("refused op changed the keys: before %+v, after %+v", before, after)
			}
			if _, used := s.Usage(); used > usedBefore {
				t.Errorf("UsedBytes grew from %d to %d on a refused op", usedBefore, used)
			}
		})
	}
}

// snapshotKeys returns copies of the live states of keys at now.
func snapshotKeys(s *Store, keys [][]byte, now int64) []engine.State {
	var out []engine.State
	for _, k := range keys {
		st, _ := s.Lookup(k, now)
		out = append(out, st)
	}
	return out
}

// TestKeyBytesSlidingLog checks that a sliding log's entries are counted in
// KeyBytes and UsedBytes, and that KeyBytes agrees with UsedBytes.
func TestKeyBytesSlidingLog(t *testing.T) {
	s := newStore(t, 1)
	now := fillLog(t, s, "log", 1)
	one, ok := s.KeyBytes([]byte("log"), now)
	if !ok {
		t.Fatal("KeyBytes(log) missing")
	}
	if _, used := s.Usage(); used != one {
		t.Errorf("UsedBytes = %d, KeyBytes = %d for a store of one key", used, one)
	}
	for i := 0; i < 999; i++ {
		exec(t, s, limitOp("log", sl(1000, time.Hour, 1)), now)
		now += int64(time.Millisecond)
	}
	many, _ := s.KeyBytes([]byte("log"), now)
	if min := one + 900*logEntryBytes; many < min {
		t.Errorf("KeyBytes after ~1000 entries = %d, want at least %d (one entry: %d)", many, min, one)
	}
	if _, used := s.Usage(); used != many {
		t.Errorf("UsedBytes = %d, KeyBytes = %d", used, many)
	}
	if n, ok := s.KeyBytes([]byte("missing"), now); ok || n != 0 {
		t.Errorf("KeyBytes(missing) = %d, %v; want 0, false", n, ok)
	}
}

// A replica that restored a log from a snapshot (no spare capacity) decides
// a NoGrow op exactly as the node that built the log by appending: the
// decision must not depend on what is not replicated.
func TestNoGrowSameOnRestoredReplica(t *testing.T) {
	for n := 1; n <= 12; n++ {
		built := newStore(t, 4)
		now := fillLog(t, built, "k", n)
		st, ok := built.Lookup([]byte("k"), now)
		if !ok {
			t.Fatal("log missing")
		}
		restored := newStore(t, 4)
		restored.Put([]byte("k"), engine.State{Kind: st.Kind, ExpireAt: st.ExpireAt, A: st.A, B: st.B, C: st.C, Log: append([]engine.LogEntry(nil), st.Log...)})
		for _, at := range []int64{now, now - int64(time.Millisecond)} { // a new entry, a merged one
			var a, b Result
			opA, opB := limitOp("k", sl(1000, time.Hour, 1)), limitOp("k", sl(1000, time.Hour, 1))
			opA.NoGrow, opB.NoGrow = true, true
			built.Exec(opA, at, &a)
			restored.Exec(opB, at, &b)
			if !errors.Is(a.Err, b.Err) || !errors.Is(b.Err, a.Err) {
				t.Errorf("log of %d entries at %d: built %v, restored %v", n, at, a.Err, b.Err)
			}
		}
	}
}
