package hotkeys

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

func TestExactWhileRoomLeft(t *testing.T) {
	s := New(64)
	counts := map[string]int{"a": 5, "b": 3, "c": 1}
	for k, n := range counts {
		for range n {
			s.Record(1, []byte(k))
		}
	}
	s.Record(2, []byte("a")) // another family: another entry
	top := s.Top(10)
	want := []string{"1/a=5±0", "1/b=3±0", "1/c=1±0", "2/a=1±0"}
	if len(top) != len(want) {
		t.Fatalf("Top = %v, want %v", top, want)
	}
	for i, e := range top {
		if got := fmt.Sprintf("%d/%s=%d±%d", e.Family, e.Key, e.Count, e.Err); got != want[i] && !(i >= 2 && e.Count == 1) {
			t.Errorf("Top[%d] = %s, want %s", i, got, want[i])
		}
	}
	if c, e := s.Estimate(1, []byte("a")); c != 5 || e != 0 {
		t.Errorf("Estimate(a) = %d±%d, want 5±0", c, e)
	}
	if c, _ := s.Estimate(1, []byte("zz")); c != 0 {
		t.Errorf("Estimate(untracked) = %d, want 0", c)
	}
	if s.Total() != 10 || s.Len() != 4 {
		t.Errorf("Total, Len = %d, %d; want 10, 4", s.Total(), s.Len())
	}
}

// TestHeavyHitters: 10 keys take 90% of a stream over 100,000 keys; all
// ten lead the summary, each true count within its stated error, and the
// summary never holds more than its capacity.
func TestHeavyHitters(t *testing.T) {
	s := New(256)
	r := rand.New(rand.NewPCG(1, 2))
	truth := map[string]uint64{}
	const n = 400000
	for range n {
		var k string
		if r.IntN(10) < 9 {
			k = "hot:" + strconv.Itoa(r.IntN(10))
		} else {
			k = "cold:" + strconv.Itoa(r.IntN(100000))
		}
		truth[k]++
		s.Record(0, []byte(k))
	}
	if s.Len() > s.Capacity() {
		t.Fatalf("Len %d > Capacity %d", s.Len(), s.Capacity())
	}
	top := s.Top(10)
	for _, e := range top {
		k := string(e.Key)
		if k[:4] != "hot:" {
			t.Errorf("Top has %s (%d±%d), want only hot keys", k, e.Count, e.Err)
		}
		if tc := truth[k]; tc > e.Count || tc < e.Count-e.Err {
			t.Errorf("%s: true count %d outside [%d, %d]", k, tc, e.Count-e.Err, e.Count)
		}
		// Space-Saving's bound: error at most N/capacity.
		if e.Err > n/uint64(s.Capacity()) {
			t.Errorf("%s: error %d above N/capacity %d", k, e.Err, n/s.Capacity())
		}
	}
}

// TestBoundedMemory: ten million distinct keys leave the summary at its
// capacity, and the heap it holds does not grow with them (measured after
// the first million, compared at the end: within 1 MiB).
func TestBoundedMemory(t *testing.T) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	s := New(1024)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	key := make([]byte, 0, 32)
	var after1M uint64
	for i := range n {
		key = strconv.AppendInt(append(key[:0], "k:"...), int64(i), 10)
		s.Record(0, key)
		if i == 1_000_000 {
			after1M = heap()
		}
	}
	if s.Len() != s.Capacity() || s.Total() != uint64(n) {
		t.Errorf("Len, Total = %d, %d; want %d, %d", s.Len(), s.Total(), s.Capacity(), n)
	}
	if end := heap(); after1M > 0 && end > after1M+1<<20 {
		t.Errorf("heap grew from %d to %d bytes between the first million keys and %d", after1M, end, n)
	}
	runtime.KeepAlive(s)
}

func TestConcurrent(t *testing.T) {
	s := New(64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10000 {
				s.Record(uint8(g%2), []byte("k"+strconv.Itoa(i%100)))
			}
		})
		wg.Go(func() { _ = s.Top(5) })
	}
	wg.Wait()
	if s.Total() != 80000 {
		t.Errorf("Total = %d, want 80000", s.Total())
	}
}

// BenchmarkRecord: what does one Record cost on the hot path, with many
// goroutines recording at once over mostly distinct keys (the worst case:
// every record evicts) and over a few hot ones?
func BenchmarkRecord(b *testing.B) {
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(i*7919))
	}
	for _, spread := range []int{16, len(keys)} {
		b.Run("keys="+strconv.Itoa(spread), func(b *testing.B) {
			s := New(1024)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(spread)
				for pb.Next() {
					s.Record(0, keys[i%spread])
					i++
				}
			})
		})
	}
}
