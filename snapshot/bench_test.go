package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// benchEntries returns n records shaped like a busy server's: mostly GCRA
// keys, the other kinds a tenth each, keys like "user:12345678".
func benchEntries(n int) []shards.Entry {
	base := sampleEntries()
	kinds := []int{0, 0, 0, 0, 3, 4, 5, 6, 7, 8} // indexes into sampleEntries
	es := make([]shards.Entry, n)
	for i := range es {
		es[i] = base[kinds[i%len(kinds)]]
		es[i].Key = fmt.Appendf(nil, "user:%08d", i)
	}
	return es
}

// benchSnapshot returns n benchEntries records and their encoding.
func benchSnapshot(b *testing.B, n int) ([]shards.Entry, []byte) {
	b.Helper()
	es := benchEntries(n)
	return es, encodeSnapshot(b, Header{Created: t0}, es)
}

// benchCRCReference is the reference both codec benchmarks quote against:
// CRC-32C alone over the snapshot's bytes, the least any checksummed format
// must do.
func benchCRCReference(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		_ = crc32.Checksum(data, castagnoli)
	}
}

// BenchmarkEncode answers: how fast does the encoder turn records into
// snapshot bytes? The ratio to the CRC-32C reference is what the encoding
// costs beyond checksumming.
func BenchmarkEncode(b *testing.B) {
	es, data := benchSnapshot(b, 100_000)
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			enc, err := NewEncoder(io.Discard, Header{Created: t0})
			if err != nil {
				b.Fatal(err)
			}
			for i := range es {
				if err := enc.Encode(es[i].Key, &es[i].State); err != nil {
					b.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/key")
	})
	b.Run("reference-crc32c", func(b *testing.B) { benchCRCReference(b, data) })
}

// BenchmarkDecode answers: how fast does the decoder verify and return
// records, against the same CRC-32C reference?
func BenchmarkDecode(b *testing.B) {
	es, data := benchSnapshot(b, 100_000)
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			d, err := NewDecoder(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, _, err = d.Next(); err != nil {
					break
				}
			}
			if !errors.Is(err, io.EOF) {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/key")
	})
	b.Run("reference-crc32c", func(b *testing.B) { benchCRCReference(b, data) })
}

// fillBig fills s with n keys through the real write path: 70% GCRA, the
// rest token bucket, fixed window and sliding log, all alive for an hour.
func fillBig(b *testing.B, s *shards.Store, n int, now int64) {
	b.Helper()
	gcra := engine.Request{Kind: engine.KindGCRA, Burst: 15, Rate: 30, Period: 3600 * sec, Quantity: 1}
	reqs := []engine.Request{
		gcra, gcra, gcra, gcra, gcra, gcra, gcra,
		{Kind: engine.KindTokenBucket, Burst: 100, Rate: 3, Period: 3600 * sec, Quantity: 1},
		{Kind: engine.KindFixedWindow, Burst: 100, Period: 3600 * sec, Quantity: 1},
		{Kind: engine.KindSlidingLog, Burst: 100, Period: 3600 * sec, Quantity: 1},
	}
	var res shards.Result
	op := shards.Op{Code: shards.OpLimit, Keys: make([][]byte, 1), Reqs: make([]engine.Request, 1)}
	key := make([]byte, 0, 32)
	for i := 0; i < n; i++ {
		key = fmt.Appendf(key[:0], "user:%08d", i)
		op.Keys[0], op.Reqs[0] = key, reqs[i%len(reqs)]
		s.Exec(&op, now, &res)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// BenchmarkSaveLoad answers: how long do saving and loading a snapshot of
// 1M keys take, how large is the file, and what happens to the p99 latency
// of writes while a save runs? The references, measured in the same run:
// the time to create the same keys through Exec (fill-s; load/fill is the
// ratio), and write latency with no save running (p99-idle). 10M keys run
// with SNAPSHOT_BENCH_10M=1.
// Each size runs once (the figures are per save and per load):
//
//	go test ./snapshot -run '^$' -bench BenchmarkSaveLoad -benchtime 1x
func BenchmarkSaveLoad(b *testing.B) {
	sizes := []int{1_000_000}
	if os.Getenv("SNAPSHOT_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			benchSaveLoad(b, n)
		})
	}
}

func benchSaveLoad(b *testing.B, n int) {
	now := t0
	clock := func() int64 { return now }
	s, _ := shards.New(shards.DefaultConfig())
	start := time.Now()
	fillBig(b, s, n, now)
	fillDur := time.Since(start) // the reference: creating the same keys through Exec
	dir := b.TempDir()
	cfg := cfgIn(dir)
	cfg.SaveSeconds = 0
	p, err := Open(cfg, s, clock, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	var saveDur, busySaveDur, loadDur time.Duration
	var quiet, during latencies
	for b.Loop() {
		start = time.Now()
		if err := p.Save(); err != nil {
			b.Fatal(err)
		}
		saveDur = time.Since(start)
		// Latency of single-key writes with no save running (the
		// reference), then during a save.
		quiet = measureLatency(s, n, now, func() {}, time.Second)
		start = time.Now()
		during = measureLatency(s, n, now, func() {
			if err := p.Save(); err != nil {
				b.Error(err)
			}
		}, 0)
		busySaveDur = time.Since(start)

		fresh, _ := shards.New(shards.DefaultConfig())
		start = time.Now()
		p2, err := Open(cfg, fresh, clock, quietLogger())
		if err != nil {
			b.Fatal(err)
		}
		loadDur = time.Since(start)
		if got := info(p2)["rdb_last_load_keys_loaded"]; got != fmt.Sprint(n) {
			b.Fatalf("loaded %s keys, want %d", got, n)
		}
	}
	fi, err := os.Stat(p.Path())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(saveDur.Seconds(), "save-s")
	b.ReportMetric(loadDur.Seconds(), "load-s")
	b.ReportMetric(fillDur.Seconds(), "fill-s")
	b.ReportMetric(loadDur.Seconds()/fillDur.Seconds(), "load/fill")
	b.ReportMetric(float64(fi.Size())/1e6, "file-MB")
	b.ReportMetric(float64(fi.Size())/float64(n), "bytes/key")
	b.ReportMetric(float64(quiet.p(0.99).Microseconds()), "p99-idle-µs")
	b.ReportMetric(float64(during.p(0.99).Microseconds()), "p99-saving-µs")
	b.ReportMetric(float64(during.p(0.999).Microseconds()), "p999-saving-µs")
	b.ReportMetric(busySaveDur.Seconds(), "save-under-writes-s")
	b.ReportMetric(float64(len(during))/busySaveDur.Seconds(), "writes/s-saving")
}

type latencies []time.Duration

func (l latencies) p(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// measureLatency runs one writer doing CL.THROTTLE on random existing keys
// while work runs (and at least for minDur), and returns each write's
// latency.
func measureLatency(s *shards.Store, n int, now int64, work func(), minDur time.Duration) latencies {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var lat latencies
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		var res shards.Result
		op := shards.Op{Code: shards.OpLimit, Keys: make([][]byte, 1),
			Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: 15, Rate: 30, Period: 3600 * sec, Quantity: 0}}}
		key := make([]byte, 0, 32)
		for ctx.Err() == nil {
			key = fmt.Appendf(key[:0], "user:%08d", rng.IntN(n)/10*10) // a GCRA key
			op.Keys[0] = key
			t := time.Now()
			s.Exec(&op, now, &res)
			lat = append(lat, time.Since(t))
		}
	}()
	start := time.Now()
	work()
	if rest := minDur - time.Since(start); rest > 0 {
		time.Sleep(rest) // a measuring window, not a synchronisation
	}
	cancel()
	wg.Wait()
	return lat
}

// BenchmarkLoad answers: how long does Load take for 1M keys (verify,
// then install into a fresh store), and what does installing with one
// goroutine per core gain over one goroutine?
func BenchmarkLoad(b *testing.B) {
	const n = 1_000_000
	s, _ := shards.New(shards.DefaultConfig())
	fillBig(b, s, n, t0)
	var buf bytes.Buffer
	if _, err := WriteStore(&buf, s, t0, nil); err != nil {
		b.Fatal(err)
	}
	s = nil
	for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(int64(buf.Len()))
			for b.Loop() {
				fresh, _ := shards.New(shards.DefaultConfig())
				if _, err := load(bytes.NewReader(buf.Bytes()), fresh, t0, w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}
