package shards

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/poll"
)

// TestSweepBounded: each Sweep reclaims at most its budget and examines at
// most budget × sweepExamineFactor records; repeated calls reclaim every
// expired key and no live one.
func TestSweepBounded(t *testing.T) {
	s := newStore(t, 4)
	const n = 10000
	for i := range n {
		// Even keys expire at t0+1s, odd ones live until t0+1h.
		exp := t0 + 1e9
		if i%2 == 1 {
			exp = t0 + int64(time.Hour)
		}
		s.Put([]byte(userKey(i)), gcraState(exp))
	}
	now := t0 + 2e9
	total := 0
	for calls := 0; ; calls++ {
		got, examined := s.sweep(now, 100)
		if got > 100 || examined > 100*sweepExamineFactor {
			t.Fatalf("sweep(budget 100) reclaimed %d, examined %d; want <= 100 and <= %d", got, examined, 100*sweepExamineFactor)
		}
		if got == 0 {
			break
		}
		if calls > n {
			t.Fatal("sweep never finished")
		}
		total += got
	}
	if total != n/2 {
		t.Errorf("sweeps reclaimed %d, want %d (the even keys)", total, n/2)
	}
	if st := s.Stats(now); st.Keys != n/2 || st.Expired != n/2 {
		t.Errorf("Stats = %d keys, %d expired; want %d and %d", st.Keys, st.Expired, n/2, n/2)
	}
	if got := s.Sweep(now, 0); got != 0 {
		t.Errorf("Sweep(budget 0) = %d, want 0", got)
	}
}

// TestRunSweeper: the background sweeper reclaims expired keys without any
// access, and returns when its context ends.
func TestRunSweeper(t *testing.T) {
	s := newStore(t, 4)
	clock := newFakeClock(t0)
	for i := range 20000 {
		s.Put([]byte(userKey(i)), gcraState(t0+int64(i%10+1)*1e9))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.RunSweeper(ctx, clock.Now, time.Millisecond)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	clock.Advance(11 * time.Second) // past every expiry
	poll.Until(t, 20*time.Second, func() error {
		if n := s.Stats(clock.Now()).Keys; n != 0 {
			return fmt.Errorf("sweeper left %d keys", n)
		}
		return nil
	})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunSweeper did not return after its context ended")
	}
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestChurnBoundedMemory: many distinct short-lived GCRA keys pass through
// the store (CELLSERVER_CHURN_KEYS, default 1,000,000; 200,000 under the race
// detector, 100,000 with -short), each living 1 ms on a clock that advances 1 µs per key
// (about 1000 live at any time). The sweeper's steps reclaim the rest, and
// the memory held ends bounded by the live keys, not by the keys that passed.
func TestChurnBoundedMemory(t *testing.T) {
	n := 1_000_000
	if raceEnabled {
		n = 200_000
	}
	if v := os.Getenv("CELLSERVER_CHURN_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("CELLSERVER_CHURN_KEYS=%q: %v", v, err)
		}
	}
	if testing.Short() {
		n = 100_000
	}
	s := newStore(t, 0)
	before := heapInuse()
	clock := newFakeClock(t0)
	req := gcra(0, 1000, time.Second, 1) // T = 1 ms: TAT = now + 1 ms
	op := &Op{Code: OpLimit, Keys: [][]byte{nil}, Reqs: []engine.Request{req}}
	var res Result
	key := make([]byte, 0, 32)
	peak := int64(0)
	for i := range n {
		key = strconv.AppendInt(append(key[:0], "churn:"...), int64(i), 10)
		op.Keys[0] = key
		s.Exec(op, clock.Now(), &res)
		if res.Err != nil || res.Results[0].Limited {
			t.Fatalf("key %d: %+v %v, want allowed", i, res.Results, res.Err)
		}
		clock.Advance(time.Microsecond)
		if i%1000 == 999 {
			s.Sweep(clock.Now(), 4096)
			if i%100_000 == 99_999 {
				peak = max(peak, s.Stats(clock.Now()).Bytes)
			}
		}
	}
	st := s.Stats(clock.Now())
	after := heapInuse()
	t.Logf("%d keys passed through; live %d, reclaimed %d; store bytes %d (peak sampled %d); heap in use before %d KiB, after %d KiB",
		n, st.Keys, st.Expired, st.Bytes, peak, before>>10, after>>10)
	// About 1000 keys live (1 ms at 1 key/µs), plus what the sweeper has not
	// reached yet; bounded by a few thousand whatever n is.
	if st.Keys > 20000 {
		t.Errorf("live keys = %d after churn, want about 1000", st.Keys)
	}
	if limit := int64(8 << 20); st.Bytes > limit {
		t.Errorf("store holds %d bytes after churn, want < %d", st.Bytes, limit)
	}
	if after > before+64<<20 {
		t.Errorf("heap in use grew from %d to %d MiB", before>>20, after>>20)
	}
	clock.Advance(time.Second)
	for s.Sweep(clock.Now(), 1<<20) > 0 {
	}
	if st := s.Stats(clock.Now()); st.Keys != 0 || st.Expired != uint64(n) {
		t.Errorf("after all expired: %d keys, %d reclaimed; want 0 and %d", st.Keys, st.Expired, n)
	}
}
