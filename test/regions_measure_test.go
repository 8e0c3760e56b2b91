package test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRegionsMeasure measures the region modes: decision latency of async
// and local keys in the same run, bytes between regions per 1000 async
// decisions per second, a global key's latency from a remote region, and
// over-admission against the stated bound at several delays and sync
// intervals. It prints the tables of docs/regions.md and, when
// CELLSERVER_MEASURE_REGIONS_CSV names a file, writes the over-admission
// runs there for the plot (bench/regionplot). CELLSERVER_MEASURE_REGIONS=1
// runs it; about two minutes with the default three rounds
// (CELLSERVER_MEASURE_ROUNDS to change).
func TestRegionsMeasure(t *testing.T) {
	if os.Getenv("CELLSERVER_MEASURE_REGIONS") == "" {
		t.Skip("set CELLSERVER_MEASURE_REGIONS=1 to measure")
	}
	names := []string{"r1", "r2", "r3"}

	// Latency of async vs local, and of a global key from r2.
	rs := startRegionSet(t, names, 20*time.Millisecond, "a:* async g:* global r1")
	c := redis.NewClient(&redis.Options{Addr: rs.srv["r2"].Addr, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	lat := map[string][]time.Duration{}
	for i := range 3000 {
		for _, k := range []string{"l:k", "a:k"} {
			start := time.Now()
			if err := c.Do(ctxT(t), "CL.THROTTLE", k, 1<<30, 1<<20, 1).Err(); err != nil {
				t.Fatal(err)
			}
			lat[k] = append(lat[k], time.Since(start))
		}
		if i%10 == 0 {
			start := time.Now()
			if err := c.Do(ctxT(t), "CL.THROTTLE", "g:k", 1<<30, 1<<20, 1).Err(); err != nil {
				t.Fatal(err)
			}
			lat["g:k"] = append(lat["g:k"], time.Since(start))
		}
	}
	pct := func(d []time.Duration, p int) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)*p/100]
	}
	t.Logf("| key | p50 | p99 |")
	for _, k := range []string{"l:k", "a:k", "g:k"} {
		t.Logf("| %s | %v | %v |", k, pct(lat[k], 50), pct(lat[k], 99))
	}

	// Bytes between regions per 1000 async decisions/s: about 1000
	// decisions per second in r2, on 100 keys, for 3 s.
	var before int64
	for _, p := range rs.link {
		before += p.bytes.Load()
	}
	start := time.Now()
	n := 0
	for time.Since(start) < 3*time.Second {
		for range 10 {
			if err := c.Do(ctxT(t), "CL.THROTTLE", "a:"+strconv.Itoa(n%100), 1<<30, 1<<20, 1).Err(); err != nil {
				t.Fatal(err)
			}
			n++
		}
		time.Sleep(10 * time.Millisecond) // pacing towards 1000/s
	}
	time.Sleep(300 * time.Millisecond) // the last sync rounds
	el := time.Since(start).Seconds()
	var after int64
	for _, p := range rs.link {
		after += p.bytes.Load()
	}
	rate := float64(n) / el
	t.Logf("async, 100 keys: %.0f decisions/s in one region, %.0f bytes/s on all links, %.0f bytes/s per 1000 decisions/s",
		rate, float64(after-before)/el, float64(after-before)/el/rate*1000)

	// Over-admission against the bound, in interleaved rounds (every
	// pair of d and s once per round), written as CSV for the plot
	// (bench/regionplot) when CELLSERVER_MEASURE_REGIONS_CSV names a file.
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("CELLSERVER_MEASURE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var csv strings.Builder
	csv.WriteString("d_ms,s_ms,round,admitted,exact,bound,alone\n")
	t.Logf("| round | d | s | admitted | exact L+rT | bound | alone |")
	for round := 1; round <= rounds; round++ {
		for _, d := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond} {
			for _, s := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
				admitted, el := overAdmission(t, names, d, s)
				const L, r, R = 10, 10.0, 3
				exact := L + r*el
				bound := exact + (R-1)*(L+r*(s+d).Seconds())
				t.Logf("| %d | %v | %v | %d | %.1f | %.1f | %.0f |", round, d, s, admitted, exact, bound, R*exact)
				fmt.Fprintf(&csv, "%d,%d,%d,%d,%.2f,%.2f,%.2f\n", d.Milliseconds(), s.Milliseconds(), round, admitted, exact, bound, R*exact)
			}
		}
	}
	if path := os.Getenv("CELLSERVER_MEASURE_REGIONS_CSV"); path != "" {
		if err := os.WriteFile(path, []byte(csv.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// overAdmission runs three regions with links of one-way delay d and sync
// interval s, three clients per region on one async GCRA key (limit 10,
// 10/s) for 3 s, and returns what was admitted and the seconds it ran.
func overAdmission(t *testing.T, names []string, d, s time.Duration) (int64, float64) {
	rs := startRegionSet(t, names, d, "a:* async", "--region-sync-interval", s.String())
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(3 * time.Second)
	for _, n := range names {
		c := redis.NewClient(&redis.Options{Addr: rs.srv[n].Addr, Protocol: 2})
		t.Cleanup(func() { c.Close() })
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					v, err := c.Do(ctxT(t), "CL.THROTTLE", "a:k", 9, 10, 1).Result()
					if err != nil {
						t.Error(err)
						return
					}
					if v.([]any)[0].(int64) == 0 {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	for _, n := range names {
		rs.srv[n].kill()
	}
	return admitted.Load(), el
}
