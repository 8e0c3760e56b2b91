package main

import (
	"math"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in nanoseconds, from 1 ns to one
// minute, with 3 significant digits (0.1% error at any magnitude).
const (
	histMin     = 1
	histMax     = int64(time.Minute)
	histSigFigs = 3
)

// newHistogram returns an empty latency histogram. Each worker owns one, so
// recording takes no lock; they are merged after the round.
func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histSigFigs)
}

// mergeHistograms returns a new histogram holding every value of hs.
func mergeHistograms(hs ...*hdrhistogram.Histogram) *hdrhistogram.Histogram {
	out := newHistogram()
	for _, h := range hs {
		out.Merge(h)
	}
	return out
}

// Figures are the measured figures of one round (or their medians or ratios).
// Latencies are in microseconds.
type Figures struct {
	Requests   float64 `json:"requests"`
	Errors     float64 `json:"errors"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_rps"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
	P999       float64 `json:"p999_us"`
	Max        float64 `json:"max_us"`
}

// figuresOf computes a round's figures from its merged histogram.
func figuresOf(h *hdrhistogram.Histogram, requests, errors int64, elapsed time.Duration) Figures {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	f := Figures{
		Requests: float64(requests),
		Errors:   float64(errors),
		Seconds:  elapsed.Seconds(),
		P50:      us(h.ValueAtQuantile(50)),
		P99:      us(h.ValueAtQuantile(99)),
		P999:     us(h.ValueAtQuantile(99.9)),
		Max:      us(h.Max()),
	}
	if elapsed > 0 {
		f.Throughput = float64(requests) / elapsed.Seconds()
	}
	return f
}

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// ratio returns a/b, or NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// medianFigures takes the median of each figure independently over rounds.
func medianFigures(rounds []Figures) Figures {
	col := func(get func(Figures) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, r := range rounds {
			xs[i] = get(r)
		}
		return median(xs)
	}
	return Figures{
		Requests:   col(func(f Figures) float64 { return f.Requests }),
		Errors:     col(func(f Figures) float64 { return f.Errors }),
		Seconds:    col(func(f Figures) float64 { return f.Seconds }),
		Throughput: col(func(f Figures) float64 { return f.Throughput }),
		P50:        col(func(f Figures) float64 { return f.P50 }),
		P99:        col(func(f Figures) float64 { return f.P99 }),
		P999:       col(func(f Figures) float64 { return f.P999 }),
		Max:        col(func(f Figures) float64 { return f.Max }),
	}
}

// ratioFigures divides each figure of a by the same figure of b.
func ratioFigures(a, b Figures) Figures {
	return Figures{
		Requests:   ratio(a.Requests, b.Requests),
		Errors:     ratio(a.Errors, b.Errors),
		Seconds:    ratio(a.Seconds, b.Seconds),
		Throughput: ratio(a.Throughput, b.Throughput),
		P50:        ratio(a.P50, b.P50),
		P99:        ratio(a.P99, b.P99),
		P999:       ratio(a.P999, b.P999),
		Max:        ratio(a.Max, b.Max),
	}
}
