package latency

import (
	"testing"
	"time"
)

// TestLatencyBuckets checks that every duration lands in a bucket whose
// bounds hold it and that buckets are at most 12.5% wide.
func TestLatencyBuckets(t *testing.T) {
	for _, ns := range []int64{0, 1, 7, 8, 9, 15, 16, 100, 999, 1000, 1023, 1024, 1e6, 123456789, 1 << 36, 1<<37 - 1} {
		i := latIndex(ns)
		lo, hi := latBounds(i)
		if ns < lo || ns > hi {
			t.Errorf("latIndex(%d) = %d with bounds [%d, %d]: outside", ns, i, lo, hi)
		}
	}
	for i := 0; i < latBuckets-1; i++ {
		lo, hi := latBounds(i)
		nlo, _ := latBounds(i + 1)
		if nlo != hi+1 {
			t.Fatalf("bucket %d ends at %d but %d starts at %d: not contiguous", i, hi, i+1, nlo)
		}
		if lo >= latSub && float64(hi-lo+1) > float64(lo)/8 {
			t.Errorf("bucket %d [%d, %d] is wider than 12.5%% of its low bound", i, lo, hi)
		}
	}
}

// TestLatencyQuantiles records known durations and reads quantiles back:
// each must be the upper edge of the bucket holding the exact quantile.
func TestLatencyQuantiles(t *testing.T) {
	l := New(1)
	// 1000 calls: 990 of 10 µs, 9 of 1 ms, 1 of 100 ms.
	for i := 0; i < 990; i++ {
		l.Observe(0, int64(i), 10_000)
	}
	for i := 0; i < 9; i++ {
		l.Observe(0, int64(i), 1_000_000)
	}
	l.Observe(0, 0, 100_000_000)
	h := l.Snapshot(0)
	if h.Count != 1000 {
		t.Fatalf("Count = %d, want 1000", h.Count)
	}
	wantSum := time.Duration(990*10_000 + 9*1_000_000 + 100_000_000)
	if h.Sum != wantSum {
		t.Errorf("Sum = %v, want %v", h.Sum, wantSum)
	}
	edge := func(ns int64) time.Duration { _, hi := latBounds(latIndex(ns)); return time.Duration(hi) }
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, edge(10_000)},         // rank 500: a 10 µs call
		{0.99, edge(10_000)},        // rank 990: the last 10 µs call
		{0.995, edge(1_000_000)},    // rank 995: a 1 ms call
		{0.999, edge(1_000_000)},    // rank 999: the last 1 ms call
		{1, edge(100_000_000)},      // rank 1000: the 100 ms call
		{0, edge(10_000)},           // rank clamped to 1
		{0.9999, edge(100_000_000)}, // rank ceil(999.9) = 1000
	}
	for _, tt := range tests {
		if got := h.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := h.CountAtMost(50 * time.Microsecond); got != 990 {
		t.Errorf("CountAtMost(50µs) = %d, want 990", got)
	}
	if got := h.CountAtMost(time.Second); got != 1000 {
		t.Errorf("CountAtMost(1s) = %d, want 1000", got)
	}
	l.Reset()
	if h := l.Snapshot(0); h.Count != 0 || h.Quantile(0.5) != 0 {
		t.Errorf("after reset: Count %d, p50 %v; want 0, 0", h.Count, h.Quantile(0.5))
	}
}
