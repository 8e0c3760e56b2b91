package shards

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// How many bytes does one live GCRA key with an 11-byte name cost, and what
// does a garbage collection cost with millions of keys held? The target is
// 48 bytes per key including the key (Redis with redis-cell: about 145). The
// baseline is a plain map[string]engine.State holding the same keys.

// elevenByteKey writes the 11-byte key "usr:NNNNNNN" (i < 10^7) into dst.
func elevenByteKey(dst []byte, i int) []byte {
	dst = append(dst[:0], "usr:0000000"...)
	for p := len(dst) - 1; i > 0 && p >= 4; p-- {
		dst[p] = byte('0' + i%10)
		i /= 10
	}
	return dst
}

// fillStore makes n live GCRA keys through Exec (CL.THROTTLE key 0 1 3600 1:
// each key's TAT is an hour ahead).
func fillStore(tb testing.TB, s *Store, n int) {
	op := &Op{Code: OpLimit, Keys: [][]byte{nil}, Reqs: []engine.Request{gcra(0, 1, time.Hour, 1)}}
	res := &Result{Results: make([]engine.Result, 0, 1)}
	key := make([]byte, 0, 16)
	for i := range n {
		key = elevenByteKey(key, i)
		op.Keys[0] = key
		s.Exec(op, t0, res)
		if res.Err != nil || res.Results[0].Limited {
			tb.Fatalf("fill key %d: %v %+v", i, res.Err, res.Results)
		}
	}
}

// memSample is the process's memory after two garbage collections.
type memSample struct {
	heapInuse, rss uint64
	gcPause        time.Duration // the stop-the-world pauses of one forced GC
	gcWall         time.Duration // wall time of one forced GC (mark included)
	gcCPU          time.Duration // CPU time of one forced GC, all threads
}

func sampleMem() memSample {
	runtime.GC()
	debug.FreeOSMemory() // return freed spans so RSS reflects what is held
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.PauseTotalNs
	cpu := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(cpu)
	cpuBefore := cpu[0].Value.Float64()
	start := time.Now()
	runtime.GC()
	wall := time.Since(start)
	metrics.Read(cpu)
	runtime.ReadMemStats(&m)
	return memSample{heapInuse: m.HeapInuse, rss: rssBytes(), gcPause: time.Duration(m.PauseTotalNs - before), gcWall: wall,
		gcCPU: time.Duration((cpu[0].Value.Float64() - cpuBefore) * 1e9)}
}

// rssBytes reads VmRSS from /proc/self/status (0 where unavailable).
func rssBytes() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func memSizes(b *testing.B) []int {
	sizes := []int{1_000_000}
	if os.Getenv("CELLSERVER_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	return sizes
}

// BenchmarkBytesPerKey fills a store with 1M (and, with CELLSERVER_10M=1,
// 10M) GCRA keys and reports heap and RSS bytes per key and the cost of one
// forced GC with them held; "map" is the same for map[string]engine.State.
// Run with -benchtime=1x.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, n := range memSizes(b) {
		name := strconv.Itoa(n/1_000_000) + "M"
		b.Run(name+"/shards", func(b *testing.B) {
			for range b.N {
				before := sampleMem()
				s := newStore(b, 0)
				fillStore(b, s, n)
				after := sampleMem()
				reportMem(b, n, before, after)
				b.ReportMetric(float64(s.Stats(t0).Bytes)/float64(n), "est-B/key")
				runtime.KeepAlive(s)
			}
		})
		b.Run(name+"/map", func(b *testing.B) {
			for range b.N {
				before := sampleMem()
				m := make(map[string]engine.State)
				key := make([]byte, 0, 16)
				req := gcra(0, 1, time.Hour, 1)
				for i := range n {
					key = elevenByteKey(key, i)
					st, _ := engine.Apply(m[string(key)], &req, t0)
					m[string(key)] = st
				}
				after := sampleMem()
				reportMem(b, n, before, after)
				runtime.KeepAlive(m)
			}
		})
	}
}

func reportMem(b *testing.B, n int, before, after memSample) {
	b.ReportMetric(float64(after.heapInuse-before.heapInuse)/float64(n), "heap-B/key")
	b.ReportMetric(float64(int64(after.rss)-int64(before.rss))/float64(n), "rss-B/key")
	b.ReportMetric(float64(after.gcPause.Microseconds()), "gc-pause-µs")
	b.ReportMetric(float64(after.gcWall.Microseconds()), "gc-wall-µs")
	b.ReportMetric(float64(after.gcCPU.Microseconds()), "gc-cpu-µs")
	b.Logf("%d keys: heap in use %d → %d MiB, RSS %d → %d MiB; one forced GC: pauses %v, wall %v, CPU %v",
		n, before.heapInuse>>20, after.heapInuse>>20, before.rss>>20, after.rss>>20, after.gcPause, after.gcWall, after.gcCPU)
}

// TestBytesPerKey: 1M live GCRA keys with 11-byte names cost at most 48
// bytes each by the store's own accounting (table + records + key bytes,
// capacity included), and the heap grows by no more than that plus 10%.
func TestBytesPerKey(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("fills 1M keys; memory is measured without -short and -race")
	}
	const n = 1_000_000
	before := sampleMem()
	s := newStore(t, 0)
	fillStore(t, s, n)
	after := sampleMem()
	est := float64(s.Stats(t0).Bytes) / n
	heap := float64(after.heapInuse-before.heapInuse) / n
	t.Logf("%d keys: %.1f B/key by Stats.Bytes, %.1f B/key heap in use; forced GC pauses %v, wall %v", n, est, heap, after.gcPause, after.gcWall)
	if est > 48 {
		t.Errorf("Stats.Bytes/key = %.1f, want <= 48", est)
	}
	if heap > 48*1.1 {
		t.Errorf("heap in use per key = %.1f, want <= %.1f", heap, 48*1.1)
	}
	if got := s.Len(t0); got != n {
		t.Errorf("Len = %d, want %d", got, n)
	}
	runtime.KeepAlive(s)
}
