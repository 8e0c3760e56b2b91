package main

import (
	"math"
	"testing"
	"time"
)

func TestHistogramMergePercentiles(t *testing.T) {
	// Two workers: one records 1..1000 µs, the other 1001..2000 µs. Merged,
	// the 2000 values are 1..2000 µs: p50 = 1000 µs, p99 = 1980 µs,
	// p99.9 = 1998 µs, max = 2000 µs, each within the histogram's 0.1%.
	a, b := newHistogram(), newHistogram()
	for i := int64(1); i <= 1000; i++ {
		if err := a.RecordValue(i * 1000); err != nil {
			t.Fatal(err)
		}
		if err := b.RecordValue((i + 1000) * 1000); err != nil {
			t.Fatal(err)
		}
	}
	m := mergeHistograms(a, b)
	if m.TotalCount() != 2000 {
		t.Fatalf("merged count = %d, want 2000", m.TotalCount())
	}
	f := figuresOf(m, 2000, 3, 2*time.Second)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"p50", f.P50, 1000},
		{"p99", f.P99, 1980},
		{"p99.9", f.P999, 1998},
		{"max", f.Max, 2000},
		{"throughput", f.Throughput, 1000}, // 2000 requests / 2 s
		{"errors", f.Errors, 3},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > c.want*0.001+1e-9 {
			t.Errorf("%s = %g, want %g ± 0.1%%", c.name, c.got, c.want)
		}
	}
	// The inputs are unchanged by the merge.
	if a.TotalCount() != 1000 || b.TotalCount() != 1000 {
		t.Errorf("inputs changed: counts %d, %d; want 1000 each", a.TotalCount(), b.TotalCount())
	}
}

func TestHistogramRange(t *testing.T) {
	h := newHistogram()
	for _, v := range []int64{1, int64(time.Microsecond), int64(time.Second), int64(time.Minute)} {
		if err := h.RecordValue(v); err != nil {
			t.Errorf("RecordValue(%d ns): %v, want it inside the histogram's range", v, err)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},       // sorted 1 3 5
		{[]float64{4, 1, 3, 2}, 2.5},  // (2+3)/2
		{[]float64{10, 10, 1000}, 10}, // an outlier round does not move it
		{[]float64{-1, -3, -2}, -2},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.xs...)
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %g, want %g", tt.xs, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.xs[i] {
				t.Errorf("median reordered its input: %v, was %v", tt.xs, in)
				break
			}
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %g, want NaN", got)
	}
}

func TestRatioFigures(t *testing.T) {
	rounds := []Figures{
		{Throughput: 100000, P50: 80, P99: 300, Errors: 0},
		{Throughput: 120000, P50: 70, P99: 250, Errors: 0},
		{Throughput: 90000, P50: 90, P99: 900, Errors: 0},
	}
	a := medianFigures(rounds)
	if a.Throughput != 100000 || a.P50 != 80 || a.P99 != 300 {
		t.Fatalf("medianFigures = %+v, want throughput 100000, p50 80, p99 300 (each column independently)", a)
	}
	b := Figures{Throughput: 80000, P50: 100, P99: 200, Errors: 0}
	r := ratioFigures(a, b)
	if r.Throughput != 1.25 { // 100000 / 80000
		t.Errorf("throughput ratio = %g, want 1.25", r.Throughput)
	}
	if r.P50 != 0.8 { // 80 / 100
		t.Errorf("p50 ratio = %g, want 0.8", r.P50)
	}
	if r.P99 != 1.5 { // 300 / 200
		t.Errorf("p99 ratio = %g, want 1.5", r.P99)
	}
	if !math.IsNaN(r.Errors) {
		t.Errorf("errors ratio 0/0 = %g, want NaN", r.Errors)
	}
}
