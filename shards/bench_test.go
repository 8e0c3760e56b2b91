package shards

import (
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// How fast is one CL.THROTTLE on an existing key in the sharded store, under
// parallel load, compared with the two obvious Go designs: one map behind
// one mutex, and sync.Map with a mutex per key? All three apply the same
// engine.Apply to the same keys; the baselines get their keys as
// ready-made strings (no conversion cost), which favours them.

const benchKeys = 100_000

// benchReq never limits during a benchmark: T = 1 µs, burst 10^9.
var benchReq = gcra(1e9, 1e6, time.Second, 1)

type mutexMap struct {
	mu sync.Mutex
	m  map[string]engine.State
}

func (l *mutexMap) limit(_ []byte, key string, now int64) engine.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.m[key]
	if st.ExpireAt <= now {
		st = engine.State{}
	}
	next, r := engine.Apply(st, &benchReq, now)
	if next.ExpireAt > now {
		l.m[key] = next
	} else {
		delete(l.m, key)
	}
	return r
}

type syncMap struct{ m sync.Map }

type lockedState struct {
	mu sync.Mutex
	st engine.State
}

func (l *syncMap) limit(_ []byte, key string, now int64) engine.Result {
	v, ok := l.m.Load(key)
	if !ok {
		v, _ = l.m.LoadOrStore(key, &lockedState{})
	}
	c := v.(*lockedState)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	if st.ExpireAt <= now {
		st = engine.State{}
	}
	next, r := engine.Apply(st, &benchReq, now)
	c.st = next // an expired cell stays allocated: sync.Map cannot delete it safely here
	return r
}

func benchKeySet() ([][]byte, []string) {
	b := make([][]byte, benchKeys)
	s := make([]string, benchKeys)
	for i := range b {
		s[i] = userKey(i)
		b[i] = []byte(s[i])
	}
	return b, s
}

type limitFunc func(key []byte, skey string, now int64) engine.Result

// runLimitBench runs b.N limits in parallel over random existing keys (or
// one hot key), through a function made once per goroutine (as a server
// keeps its buffers per connection).
func runLimitBench(b *testing.B, hot bool, newFn func() limitFunc) {
	keys, skeys := benchKeySet()
	fill := newFn()
	for i := range keys { // every key exists before timing starts
		fill(keys[i], skeys[i], t0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		fn := newFn()
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			i := 0
			if !hot {
				i = rng.IntN(benchKeys)
			}
			if fn(keys[i], skeys[i], t0).Limited {
				b.Error("limited")
				return
			}
		}
	})
}

// reportCPU starts measuring the process's CPU time (user + system, all
// threads, GC included) and returns a func that reports it per op as
// cpu-ns/op. On a shared, loaded machine wall-clock ns/op mostly measures the
// other tenants; CPU time per op measures this code.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkExecGCRA(b *testing.B) {
	for _, hot := range []bool{false, true} {
		name := "random100k"
		if hot {
			name = "hotkey"
		}
		b.Run(name+"/shards", func(b *testing.B) {
			s := newStore(b, 0)
			runLimitBench(b, hot, func() limitFunc {
				op := &Op{Code: OpLimit, Keys: [][]byte{nil}, Reqs: []engine.Request{benchReq}}
				res := &Result{Results: make([]engine.Result, 0, 1)}
				return func(key []byte, _ string, now int64) engine.Result {
					op.Keys[0] = key
					s.Exec(op, now, res)
					return res.Results[0]
				}
			})
		})
		b.Run(name+"/mutexmap", func(b *testing.B) {
			l := &mutexMap{m: map[string]engine.State{}}
			runLimitBench(b, hot, func() limitFunc { return l.limit })
		})
		b.Run(name+"/syncmap", func(b *testing.B) {
			var l syncMap
			runLimitBench(b, hot, func() limitFunc { return l.limit })
		})
	}
}

// BenchmarkExecLimitAll: a CL.THROTTLEALL of three keys (a global key, a
// per-user key and a per-endpoint key).
func BenchmarkExecLimitAll(b *testing.B) {
	s := newStore(b, 0)
	keys, _ := benchKeySet()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		var buf [3]engine.Result
		res := Result{Results: buf[:0]}
		op := Op{Code: OpLimitAll, Keys: make([][]byte, 3), Reqs: []engine.Request{benchReq, benchReq, benchReq}}
		for pb.Next() {
			op.Keys[0] = keys[0]
			op.Keys[1] = keys[rng.IntN(benchKeys)]
			op.Keys[2] = keys[rng.IntN(100)]
			s.Exec(&op, t0, &res)
		}
	})
}

// BenchmarkLookup: a read (TTL, GET, TYPE) of an existing key.
func BenchmarkLookup(b *testing.B) {
	s := newStore(b, 0)
	keys, _ := benchKeySet()
	for _, k := range keys {
		s.Put(k, gcraState(t0+1e12))
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
		for pb.Next() {
			if _, ok := s.Lookup(keys[rng.IntN(benchKeys)], t0); !ok {
				b.Error("missing")
				return
			}
		}
	})
}

// TestExecZeroAllocs: Exec(OpLimit) on an existing GCRA key allocates nothing.
func TestExecZeroAllocs(t *testing.T) {
	s := newStore(t, 0)
	op := limitOp("user:000001", benchReq)
	res := Result{Results: make([]engine.Result, 0, 1)}
	s.Exec(op, t0, &res)
	if got := testing.AllocsPerRun(1000, func() { s.Exec(op, t0, &res) }); got != 0 {
		t.Errorf("Exec(OpLimit) on an existing key: %v allocs/op, want 0", got)
	}
	all := limitAllOp([]string{"a", "b", "c"}, benchReq, benchReq, benchReq)
	res.Results = make([]engine.Result, 0, 3)
	s.Exec(all, t0, &res)
	if got := testing.AllocsPerRun(1000, func() { s.Exec(all, t0, &res) }); got != 0 {
		t.Errorf("Exec(OpLimitAll, 3 keys) on existing keys: %v allocs/op, want 0", got)
	}
	if got := testing.AllocsPerRun(1000, func() { s.Lookup(op.Keys[0], t0) }); got != 0 {
		t.Errorf("Lookup: %v allocs/op, want 0", got)
	}
}
