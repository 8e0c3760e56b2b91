package test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkLeaseWaitPairs answers: how many CC.ACQUIRE … WAIT +
// CC.RELEASE pairs a second does the real binary sustain standalone when
// most acquires wait in line, and how long do they wait? 100 clients (one
// connection each, one pair at a time) share 10 keys of max 2: 20 hold a
// unit while the other 80 wait in the keys' lines. Each acquire carries
// WAIT 5s under its own ID, and its client releases right after the
// allowed reply, which admits the next waiter of that key. Reported: pairs
// a second, and the acquire's latency (send to allowed reply: the wait in
// line plus one round trip) at p50 and p99. Run with a fixed count, since
// each run starts its server:
//
//	go test -run '^$' -bench BenchmarkLeaseWaitPairs -benchtime 20000x ./test/
func BenchmarkLeaseWaitPairs(b *testing.B) {
	const clients, keys, max = 100, 10, 2
	s := startServer(b, "--save", "")
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: clients, MinIdleConns: clients,
		MaxRetries: -1, ReadTimeout: 10 * time.Second})
	b.Cleanup(func() { c.Close() })
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		waits []time.Duration
	)
	b.ReportAllocs()
	b.ResetTimer()
	for w := range clients {
		wg.Go(func() {
			ctx := context.Background()
			key := "ccw:bench:" + strconv.Itoa(w%keys)
			mine := make([]time.Duration, 0, b.N/clients+1)
			defer func() {
				mu.Lock()
				waits = append(waits, mine...)
				mu.Unlock()
			}()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				id := strconv.FormatInt(n, 36)
				start := time.Now()
				v, err := c.Do(ctx, "CC.ACQUIRE", key, max, "30s", "ID", id, "WAIT", "5s").Slice()
				if err != nil || len(v) != 6 || v[0] != int64(0) {
					b.Errorf("CC.ACQUIRE %s ... ID %s WAIT 5s = %v, %v; want allowed", key, id, v, err)
					return
				}
				mine = append(mine, time.Since(start))
				if r, err := c.Do(ctx, "CC.RELEASE", key, id).Int64(); err != nil || r != 1 {
					b.Errorf("CC.RELEASE %s %s = %d, %v; want 1", key, id, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	if len(waits) > 0 {
		slices.Sort(waits)
		ms := func(q float64) float64 {
			return float64(waits[min(int(q*float64(len(waits))), len(waits)-1)]) / float64(time.Millisecond)
		}
		b.ReportMetric(ms(0.50), "wait-p50-ms")
		b.ReportMetric(ms(0.99), "wait-p99-ms")
	}
	b.ReportMetric(0, "ns/op") // pairs/s says it; ns/op over 100 clients misleads
}
