package shards

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		shards int
		ok     bool
	}{
		{0, true}, {1, true}, {2, true}, {64, true}, {MaxShards, true},
		{-1, false}, {3, false}, {96, false}, {2 * MaxShards, false},
	}
	for _, tc := range tests {
		err := Config{Shards: tc.shards}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Config{Shards: %d}.Validate() = %v, want ok=%v", tc.shards, err, tc.ok)
		}
		if _, err := New(Config{Shards: tc.shards}); (err == nil) != tc.ok {
			t.Errorf("New(Config{Shards: %d}) = %v, want ok=%v", tc.shards, err, tc.ok)
		}
	}
	d := DefaultConfig()
	if err := d.Validate(); err != nil || d.Shards < 16*runtime.NumCPU() && d.Shards < 1024 {
		t.Errorf("DefaultConfig() = %+v (%v), want a power of two >= 16×%d CPUs", d, err, runtime.NumCPU())
	}
	s := newStore(t, 0)
	if s.NumShards() != d.Shards {
		t.Errorf("New(Shards 0).NumShards() = %d, want %d", s.NumShards(), d.Shards)
	}
}

// TestGCRASequence runs redis-cell's example through the store: burst 4 (limit
// 5), 1 per second, at one instant: five allowed, the sixth limited, and the
// state (GET's TAT, PTTL) follows.
func TestGCRASequence(t *testing.T) {
	s := newStore(t, 4)
	req := gcra(4, 1, time.Second, 1)
	for i := range 5 {
		r := exec(t, s, limitOp("user:1", req), t0)[0]
		// Each allowed request moves the TAT one emission interval (1 s) on.
		if r.Limited || r.Remaining != int64(4-i) || r.ResetAfter != int64(i+1)*1e9 {
			t.Fatalf("request %d = %+v, want allowed, remaining %d, reset %ds", i+1, r, 4-i, i+1)
		}
	}
	r := exec(t, s, limitOp("user:1", req), t0)[0]
	if !r.Limited || r.RetryAfter != 1e9 {
		t.Fatalf("request 6 = %+v, want limited, retry 1s", r)
	}
	st, ok := s.Lookup([]byte("user:1"), t0)
	if want := gcraState(t0 + 5e9); !ok || !sameState(&st, &want) {
		t.Fatalf("Lookup = %+v, %v; want %+v (TAT = t0 + 5 × 1s)", st, ok, want)
	}
}

func TestWrongTypeChangesNothing(t *testing.T) {
	s := newStore(t, 4)
	exec(t, s, limitOp("fw", fw(10, time.Minute, 3)), t0)
	exec(t, s, limitOp("g", gcra(9, 10, time.Minute, 1)), t0)
	before, _ := s.Lookup([]byte("fw"), t0)
	beforeG, _ := s.Lookup([]byte("g"), t0)
	changes := s.Changes()

	ops := []*Op{
		limitOp("fw", gcra(9, 10, time.Minute, 1)),
		limitAllOp([]string{"g", "fw"}, gcra(9, 10, time.Minute, 1), gcra(9, 10, time.Minute, 1)),
		limitAllOp([]string{"new", "g"}, gcra(9, 10, time.Minute, 1), fw(10, time.Minute, 1)),
	}
	for _, op := range ops {
		res := Result{Results: make([]engine.Result, 0, 4)}
		s.Exec(op, t0+1, &res)
		if !errors.Is(res.Err, ErrWrongType) || len(res.Results) != 0 {
			t.Errorf("Exec(%q) = %v, %d results; want ErrWrongType and none", op.Keys, res.Err, len(res.Results))
		}
	}
	after, _ := s.Lookup([]byte("fw"), t0+1)
	afterG, _ := s.Lookup([]byte("g"), t0+1)
	if !sameState(&before, &after) || !sameState(&beforeG, &afterG) {
		t.Errorf("states changed by WRONGTYPE ops: fw %+v → %+v, g %+v → %+v", before, after, beforeG, afterG)
	}
	if s.Exists([][]byte{[]byte("new")}, t0+1) != 0 {
		t.Error("key \"new\" created by an op that failed WRONGTYPE")
	}
	if got := s.Changes(); got != changes {
		t.Errorf("Changes() = %d after failed ops, want %d", got, changes)
	}
}

// TestExpiryExact: a key is present 1 ns before its ExpireAt and gone at it,
// for every read path.
func TestExpiryExact(t *testing.T) {
	s := newStore(t, 2)
	exp := t0 + int64(time.Minute)
	s.Put([]byte("k"), gcraState(exp))
	keys := [][]byte{[]byte("k")}
	scanned := func(now int64) int {
		n := 0
		for c := uint64(0); ; {
			c = s.Scan(c, 100, now, func([]byte, engine.Kind) { n++ })
			if c == 0 {
				return n
			}
		}
	}
	tests := []struct {
		now  int64
		live bool
	}{{exp - 1, true}, {exp, false}, {exp + 1, false}}
	for _, tc := range tests {
		if _, ok := s.Lookup(keys[0], tc.now); ok != tc.live {
			t.Errorf("Lookup at ExpireAt%+d = %v, want %v", tc.now-exp, ok, tc.live)
		}
		want := 0
		if tc.live {
			want = 1
		}
		if got := s.Exists(keys, tc.now); got != int64(want) {
			t.Errorf("Exists at ExpireAt%+d = %d, want %d", tc.now-exp, got, want)
		}
		if got := scanned(tc.now); got != want {
			t.Errorf("Scan at ExpireAt%+d found %d, want %d", tc.now-exp, got, want)
		}
		if got := len(s.Capture(0, tc.now, nil)) + len(s.Capture(1, tc.now, nil)); got != want {
			t.Errorf("Capture at ExpireAt%+d = %d entries, want %d", tc.now-exp, got, want)
		}
		if got := s.Len(tc.now); got != want {
			t.Errorf("Len at ExpireAt%+d = %d, want %d", tc.now-exp, got, want)
		}
	}
	if st := s.Stats(exp); st.Keys != 0 || st.Expired != 1 {
		t.Errorf("Stats = %+v, want 0 keys and 1 expired", st)
	}
	// An expired key is a missing one to writers too: a GCRA request at the
	// expiry instant starts from a fresh TAT.
	s.Put([]byte("k"), gcraState(exp))
	r := exec(t, s, limitOp("k", gcra(0, 1, time.Minute, 1)), exp)[0]
	if r.Limited || r.ResetAfter != int64(time.Minute) {
		t.Errorf("limit on expired key = %+v, want allowed, reset 60s (fresh key)", r)
	}
}

func TestDelExistsFlush(t *testing.T) {
	s := newStore(t, 8)
	for i := range 100 {
		s.Put([]byte(userKey(i)), gcraState(t0+int64(i+1)*1e9))
	}
	// Keys 0..9 expire at t0+1s..t0+10s; at t0+5s keys 0..4 are expired.
	now := t0 + 5e9
	k := func(names ...string) [][]byte {
		var b [][]byte
		for _, n := range names {
			b = append(b, []byte(n))
		}
		return b
	}
	if got := s.Exists(k(userKey(7), userKey(7), userKey(3), "nope"), now); got != 2 {
		t.Errorf("Exists(7, 7, 3 expired, missing) = %d, want 2 (a key named twice counts twice)", got)
	}
	var res Result
	s.Exec(&Op{Code: OpDel, Keys: k(userKey(7), userKey(7), userKey(3), userKey(50), "nope")}, now, &res)
	if res.Err != nil || res.N != 2 {
		t.Errorf("DEL(7, 7, 3 expired, 50, missing) = %d, %v; want 2", res.N, res.Err)
	}
	// 100 keys − 5 expired − 2 deleted.
	if got := s.Len(now); got != 93 {
		t.Errorf("Len = %d, want 93", got)
	}
	c := s.Changes()
	s.Exec(&Op{Code: OpFlush}, now, &res)
	if got := s.Len(now); got != 0 {
		t.Errorf("Len after FLUSHALL = %d, want 0", got)
	}
	if s.Changes() <= c {
		t.Errorf("Changes() did not grow with FLUSHALL")
	}
	if st := s.Stats(now); st.Keys != 0 || st.Bytes > 8*1024 {
		t.Errorf("Stats after FLUSHALL = %+v, want no keys and little memory", st)
	}
}

func TestBadOps(t *testing.T) {
	s := newStore(t, 2)
	long := make([]byte, MaxKeyLen+1)
	tests := []struct {
		name string
		op   *Op
		want error
	}{
		{"unknown code", &Op{Code: 99}, ErrBadOp},
		{"limit without key", &Op{Code: OpLimit, Reqs: []engine.Request{gcra(1, 1, time.Second, 1)}}, ErrBadOp},
		{"limit without kind", limitOp("a", engine.Request{Burst: 1}), ErrBadOp},
		{"limitall mismatched", &Op{Code: OpLimitAll, Keys: [][]byte{[]byte("a")}}, ErrBadOp},
		{"key too large", &Op{Code: OpLimit, Keys: [][]byte{long}, Reqs: []engine.Request{gcra(1, 1, time.Second, 1)}}, ErrKeyTooLarge},
	}
	for _, tc := range tests {
		var res Result
		s.Exec(tc.op, t0, &res)
		if !errors.Is(res.Err, tc.want) {
			t.Errorf("%s: Exec = %v, want %v", tc.name, res.Err, tc.want)
		}
	}
	if s.Len(t0) != 0 || s.Changes() != 0 {
		t.Errorf("bad ops changed the store: Len %d, Changes %d", s.Len(t0), s.Changes())
	}
}

// TestHashCollisions forces keys with the same in-shard hash into one shard:
// each is found by its own bytes, and deleting one leaves the others.
func TestHashCollisions(t *testing.T) {
	var sh shard
	sh.init()
	const h = 0xdeadbeef
	for i := range 50 {
		st := gcraState(t0 + int64(i+1))
		if err := sh.insert(h, []byte(fmt.Sprint("c", i)), &st); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i += 2 {
		pos, idx := sh.find(h, []byte(fmt.Sprint("c", i)))
		sh.removeAt(pos, idx)
	}
	for i := range 50 {
		_, idx := sh.find(h, []byte(fmt.Sprint("c", i)))
		if (idx >= 0) != (i%2 == 1) {
			t.Fatalf("find(c%d) = %d, want present=%v", i, idx, i%2 == 1)
		}
		if idx >= 0 {
			if got := sh.state(idx).A; got != t0+int64(i+1) {
				t.Errorf("state(c%d).A = %d, want %d", i, got, t0+int64(i+1))
			}
		}
	}
}

// TestModel checks the store against a plain map through a random sequence
// of puts, limits, deletes and lookups with a moving clock, on few shards so
// that tables grow, shrink and compact many times.
func TestModel(t *testing.T) {
	s := newStore(t, 2)
	model := map[string]engine.State{}
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	kinds := []engine.State{
		gcraState(0),
		{Kind: engine.KindFixedWindow, A: 5, B: 7},
		{Kind: engine.KindSlidingLog, A: 1, Log: []engine.LogEntry{{At: 1, Count: 2}, {At: 3, Count: 4}}},
	}
	for step := range 200000 {
		key := fmt.Sprint("m", rng.IntN(3000))
		switch op := rng.IntN(10); {
		case op < 5:
			st := kinds[rng.IntN(len(kinds))]
			st.ExpireAt = now + rng.Int64N(int64(time.Second))
			if st.Kind == engine.KindGCRA {
				st.A = st.ExpireAt
			}
			s.Put([]byte(key), st)
			model[key] = st
		case op < 7:
			var res Result
			s.Exec(&Op{Code: OpDel, Keys: [][]byte{[]byte(key)}}, now, &res)
			want := int64(0)
			if m, ok := model[key]; ok && m.ExpireAt > now {
				want = 1
			}
			delete(model, key)
			if res.N != want {
				t.Fatalf("step %d: DEL %s = %d, want %d", step, key, res.N, want)
			}
		case op < 8:
			now += rng.Int64N(int64(50 * time.Millisecond))
			if rng.IntN(4) == 0 {
				s.Sweep(now, 100)
			}
		default:
			got, ok := s.Lookup([]byte(key), now)
			m, mok := model[key]
			mok = mok && m.ExpireAt > now
			if ok != mok || ok && !equalStates(got, m) {
				t.Fatalf("step %d: Lookup(%s) = %+v, %v; want %+v, %v", step, key, got, ok, m, mok)
			}
		}
	}
	live := 0
	for _, m := range model {
		if m.ExpireAt > now {
			live++
		}
	}
	if got := s.Len(now); got != live {
		t.Errorf("Len = %d, want %d", got, live)
	}
}

func equalStates(a, b engine.State) bool {
	if a.Kind != b.Kind || a.ExpireAt != b.ExpireAt || a.A != b.A || a.B != b.B || a.C != b.C || len(a.Log) != len(b.Log) {
		return false
	}
	for i := range a.Log {
		if a.Log[i] != b.Log[i] {
			return false
		}
	}
	return true
}

func TestPutLookupCopies(t *testing.T) {
	s := newStore(t, 1)
	log := []engine.LogEntry{{At: t0, Count: 1}}
	s.Put([]byte("sl"), engine.State{Kind: engine.KindSlidingLog, ExpireAt: t0 + 10, Log: log})
	log[0].Count = 99
	st, _ := s.Lookup([]byte("sl"), t0)
	if st.Log[0].Count != 1 {
		t.Fatalf("Put kept the caller's log: count = %d, want 1", st.Log[0].Count)
	}
	st.Log[0].Count = 42
	st2, _ := s.Lookup([]byte("sl"), t0)
	if st2.Log[0].Count != 1 {
		t.Fatalf("Lookup returned the stored log: count = %d, want 1", st2.Log[0].Count)
	}
	s.Put([]byte("sl"), engine.State{})
	if _, ok := s.Lookup([]byte("sl"), t0); ok {
		t.Fatal("Put of the zero State did not delete the key")
	}
}
