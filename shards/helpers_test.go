package shards

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// t0 is an arbitrary instant (2026-01-01T00:00:00Z in Unix ns) the tests start from.
const t0 = int64(1767225600) * 1e9

// fakeClock is a clock passed in as a value: tests move it explicitly.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(at int64) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(at)
	return c
}

func (c *fakeClock) Now() int64              { return c.ns.Load() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func newStore(t testing.TB, shards int) *Store {
	t.Helper()
	s, err := New(Config{Shards: shards})
	if err != nil {
		t.Fatalf("New(%d) = %v", shards, err)
	}
	return s
}

// gcra builds a CL.THROTTLE request: max_burst, count_per_period, period, quantity.
func gcra(burst, rate int64, period time.Duration, qty int64) engine.Request {
	return engine.Request{Kind: engine.KindGCRA, Burst: burst, Rate: rate, Period: int64(period), Quantity: qty}
}

// fw builds an FW.INCR request: limit, window, count.
func fw(limit int64, window time.Duration, count int64) engine.Request {
	return engine.Request{Kind: engine.KindFixedWindow, Burst: limit, Period: int64(window), Quantity: count}
}

func limitOp(key string, req engine.Request) *Op {
	return &Op{Code: OpLimit, Keys: [][]byte{[]byte(key)}, Reqs: []engine.Request{req}}
}

func limitAllOp(keys []string, reqs ...engine.Request) *Op {
	op := &Op{Code: OpLimitAll, Reqs: reqs}
	for _, k := range keys {
		op.Keys = append(op.Keys, []byte(k))
	}
	return op
}

// exec runs op at now and fails the test on an error.
func exec(t testing.TB, s *Store, op *Op, now int64) []engine.Result {
	t.Helper()
	var res Result
	s.Exec(op, now, &res)
	if res.Err != nil {
		t.Fatalf("Exec(%v %q) = %v", op.Code, op.Keys, res.Err)
	}
	return res.Results
}

// gcraState is a stored GCRA state with its TAT at tat.
func gcraState(tat int64) engine.State {
	return engine.State{Kind: engine.KindGCRA, ExpireAt: tat, A: tat}
}

// userKey returns the 11-byte key "user:NNNNNN" for i < 10^6, and a longer
// one beyond.
func userKey(i int) string { return fmt.Sprintf("user:%06d", i) }

// keysInOneShard returns n distinct keys that route to the same shard.
func keysInOneShard(s *Store, n int) []string {
	var keys []string
	want := -1
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("k%d", i)
		si, _ := s.shardIndex([]byte(k))
		if want < 0 {
			want = si
		}
		if si == want {
			keys = append(keys, k)
		}
	}
	return keys
}
