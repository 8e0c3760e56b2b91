package shards

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

const (
	racers   = 50
	perRacer = 200
)

// race runs fn(g, i) for racers goroutines × perRacer calls and waits.
func race(fn func(g, i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range racers {
		wg.Go(func() {
			<-start
			for i := range perRacer {
				fn(g, i)
			}
		})
	}
	close(start)
	wg.Wait()
}

// TestConcurrentLimitExact: 50 × 200 = 10000 requests race on one key with
// burst 999 at one instant: exactly limit = 999 + 1 = 1000 are allowed, at any
// interleaving (no lost update).
func TestConcurrentLimitExact(t *testing.T) {
	s := newStore(t, 0)
	req := gcra(999, 1, time.Hour, 1)
	var allowed atomic.Int64
	race(func(g, i int) {
		var res Result
		s.Exec(limitOp("hot", req), t0, &res)
		if res.Err != nil {
			t.Error(res.Err)
			return
		}
		if !res.Results[0].Limited {
			allowed.Add(1)
		}
	})
	if got := allowed.Load(); got != 1000 {
		t.Fatalf("allowed = %d of %d, want 1000", got, racers*perRacer)
	}
	// The TAT moved 1000 emission intervals (1000 × 1h) from t0.
	if st, _ := s.Lookup([]byte("hot"), t0); st.A != t0+1000*int64(time.Hour) {
		t.Fatalf("TAT = t0%+d, want t0+1000h", st.A-t0)
	}
}

// TestConcurrentLimitAllExact: every call limits a shared key (burst 999)
// together with the caller's own key (burst 1000, never the one that refuses
// first). Exactly 1000 calls are allowed, and each goroutine's own key holds
// exactly what its allowed calls consumed: all or nothing.
func TestConcurrentLimitAllExact(t *testing.T) {
	s := newStore(t, 0)
	shared := gcra(999, 1, time.Hour, 1)
	own := gcra(1000, 1, time.Hour, 1)
	var allowed atomic.Int64
	var perG [racers]int64
	race(func(g, i int) {
		var res Result
		ownKey := fmt.Sprint("own:", g)
		if i%2 == 0 { // both orders
			s.Exec(limitAllOp([]string{"shared", ownKey}, shared, own), t0, &res)
		} else {
			s.Exec(limitAllOp([]string{ownKey, "shared"}, own, shared), t0, &res)
		}
		if res.Err != nil {
			t.Error(res.Err)
			return
		}
		if !res.Results[0].Limited && !res.Results[1].Limited {
			allowed.Add(1)
			perG[g]++
		}
	})
	if got := allowed.Load(); got != 1000 {
		t.Fatalf("allowed = %d, want 1000", got)
	}
	var sum int64
	for g := range racers {
		st, ok := s.Lookup([]byte(fmt.Sprint("own:", g)), t0)
		// perG[g] allowed calls moved the TAT perG[g] hours on (0: no key).
		want := t0 + perG[g]*int64(time.Hour)
		if perG[g] == 0 && ok || perG[g] > 0 && st.A != want {
			t.Errorf("own:%d TAT = t0%+d (present %v), want t0+%dh", g, st.A-t0, ok, perG[g])
		}
		sum += perG[g]
	}
	if sum != 1000 {
		t.Errorf("sum of per-goroutine allowed = %d, want 1000", sum)
	}
}

// TestLimitAllNoDeadlock: calls naming the same keys in opposite orders, on
// different shards, finish (with a deadline rather than a guessed sleep).
func TestLimitAllNoDeadlock(t *testing.T) {
	s := newStore(t, 4)
	a, b := "a", "b"
	for sa, _ := s.shardIndex([]byte(a)); ; b += "b" {
		if sb, _ := s.shardIndex([]byte(b)); sb != sa {
			break
		}
	}
	req := gcra(1<<30, 1, time.Millisecond, 1)
	done := make(chan struct{})
	go func() {
		race(func(g, i int) {
			var res Result
			keys := []string{a, b, "c"}
			if g%2 == 1 {
				keys = []string{"c", b, a}
			}
			s.Exec(limitAllOp(keys, req, req, req), t0+int64(i), &res)
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("OpLimitAll with opposite key orders did not finish in 30s: deadlock")
	}
}

// TestCaptureConsistent: a writer updates two keys of one shard atomically
// (OpLimitAll), so in any capture of that shard their TATs are equal.
func TestCaptureConsistent(t *testing.T) {
	s := newStore(t, 4)
	keys := keysInOneShard(s, 2)
	si, _ := s.shardIndex([]byte(keys[0]))
	req := gcra(1<<20, 1, time.Second, 1)
	exec(t, s, limitAllOp(keys, req, req), t0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			writes.Add(1)
			select {
			case <-stop:
				return
			default:
			}
			var res Result
			s.Exec(limitAllOp(keys, req, req), t0, &res)
			s.Put([]byte(fmt.Sprint("filler", i%500)), gcraState(t0+1e12)) // churn other keys of the store
		}
	})
	var dst []Entry
	deadline := time.Now().Add(20 * time.Second)
	for captures := 0; captures < 200 || writes.Load() < 2000; captures++ {
		if time.Now().After(deadline) {
			break
		}
		dst = s.Capture(si, t0, dst)
		var tats []int64
		for _, e := range dst {
			if string(e.Key) == keys[0] || string(e.Key) == keys[1] {
				tats = append(tats, e.State.A)
			}
		}
		if len(tats) != 2 || tats[0] != tats[1] {
			close(stop)
			wg.Wait()
			t.Fatalf("capture holds %v for the pair %v, want both with equal TATs", tats, keys)
		}
	}
	close(stop)
	wg.Wait()
	// The captured bytes are the caller's: changing them changes nothing stored.
	dst = s.Capture(si, t0, dst)
	if n := s.Exists([][]byte{[]byte(keys[0]), []byte(keys[1])}, t0); n != 2 {
		t.Fatalf("Exists(pair) = %d, want 2", n)
	}
	for i := range dst {
		for j := range dst[i].Key {
			dst[i].Key[j] = 'X'
		}
	}
	if n := s.Exists([][]byte{[]byte(keys[0]), []byte(keys[1])}, t0); n != 2 {
		t.Fatalf("Exists(pair) = %d after editing captured keys, want 2", n)
	}
}

// TestLimitAllSemantics: a refused call consumes nothing, the allowing keys
// report a peek, and a key named twice counts both quantities.
func TestLimitAllSemantics(t *testing.T) {
	s := newStore(t, 4)
	r5 := gcra(4, 1, time.Second, 1) // limit 5, T = 1s
	// Use 4 of "b"'s 5: TAT = t0+4s.
	exec(t, s, limitOp("b", gcra(4, 1, time.Second, 4)), t0)

	// a: fresh, asks 1 → allows; b: holds 4, asks 2 → refuses. Nothing is consumed.
	res := exec(t, s, limitAllOp([]string{"a", "b"}, r5, gcra(4, 1, time.Second, 2)), t0)
	peekA := engine.Result{Limit: 5, Remaining: 5, RetryAfter: -1} // a fresh key's peek
	if res[0] != peekA {
		t.Errorf("allowing key a = %+v, want its peek %+v", res[0], peekA)
	}
	// b refuses: TAT t0+4s, +2s = t0+6s, τ = 5s → retry 1s; reset 4s; remaining (5s−4s)/1s = 1.
	wantB := engine.Result{Limited: true, Limit: 5, Remaining: 1, RetryAfter: 1e9, ResetAfter: 4e9}
	if res[1] != wantB {
		t.Errorf("refusing key b = %+v, want %+v", res[1], wantB)
	}
	if n := s.Exists([][]byte{[]byte("a")}, t0); n != 0 {
		t.Errorf("refused call created key a")
	}
	if st, _ := s.Lookup([]byte("b"), t0); st.A != t0+4e9 {
		t.Errorf("refused call moved b's TAT to t0%+d, want t0+4s", st.A-t0)
	}

	// A key named twice: 3 + 2 = 5 fits the limit of 5; then 3 + 3 does not.
	res = exec(t, s, limitAllOp([]string{"d", "d"}, gcra(4, 1, time.Second, 3), gcra(4, 1, time.Second, 2)), t0)
	if res[0].Limited || res[1].Limited || res[1].Remaining != 0 {
		t.Errorf("d×(3+2) = %+v, want both allowed, remaining 0 after the second", res)
	}
	res = exec(t, s, limitAllOp([]string{"e", "e"}, gcra(4, 1, time.Second, 3), gcra(4, 1, time.Second, 3)), t0)
	if !res[1].Limited || res[0].Limited || res[0].Remaining != 5 {
		t.Errorf("e×(3+3) = %+v, want the first reporting a fresh peek (remaining 5), the second limited", res)
	}
	if s.Exists([][]byte{[]byte("e")}, t0) != 0 {
		t.Errorf("refused e×(3+3) consumed")
	}
	if st, _ := s.Lookup([]byte("d"), t0); st.A != t0+5e9 {
		t.Errorf("d TAT = t0%+d, want t0+5s (both quantities)", st.A-t0)
	}
}

// TestLimitAllManyKeys exercises the path for more keys than fit the
// on-stack scratch.
func TestLimitAllManyKeys(t *testing.T) {
	s := newStore(t, 4)
	var keys []string
	var reqs []engine.Request
	for i := range 3 * smallAll {
		keys = append(keys, fmt.Sprint("many", i%(2*smallAll)))
		reqs = append(reqs, gcra(9, 1, time.Second, 1))
	}
	res := exec(t, s, limitAllOp(keys, reqs...), t0)
	if len(res) != len(keys) {
		t.Fatalf("%d results, want %d", len(res), len(keys))
	}
	// Keys 0..7 are named twice (TAT t0+2s), 8..15 once (t0+1s).
	for i := range 2 * smallAll {
		want := t0 + 1e9
		if i < smallAll {
			want = t0 + 2e9
		}
		if st, _ := s.Lookup([]byte(fmt.Sprint("many", i)), t0); st.A != want {
			t.Errorf("many%d TAT = t0%+d, want t0%+d", i, st.A-t0, want-t0)
		}
	}
}
