package serverstats

import "sync/atomic"

// WaitCounters count the requests that waited for their turn (WAIT) and
// how late their replies were written: the totals, a histogram of the
// waits (the metrics, WaitStats) and one of the lateness after the turn
// (INFO's wait_late_* fields). Safe for concurrent use; the server owns
// one, set up by Init.
type WaitCounters struct {
	waited   atomic.Int64 // requests that waited, since start
	waitedNs atomic.Int64 // the time they waited, ns (until sent)
	hist     histogram    // by waitBounds
	// late is how long after its turn each reply was written (the timer
	// heap's or goroutine's precision, and a busy loop's delay), and
	// lateMax the longest, ns.
	late    histogram // by lateBounds
	lateMax atomic.Int64
}

// waitBounds are the waits' histogram bounds (metrics), lateBounds those of
// how late replies were written after their turn (INFO), in ns.
var (
	waitBounds = [...]int64{1e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 500e6, 1e9, 2.5e9, 5e9, 10e9}
	lateBounds = [...]int64{100e3, 250e3, 500e3, 1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 1e9}
)

// Init readies the histograms; call it once before any other method.
func (w *WaitCounters) Init() {
	w.hist.init(waitBounds[:])
	w.late.init(lateBounds[:])
}

// Observe counts one request that waited waited ns and whose reply was
// written late ns after its turn.
func (w *WaitCounters) Observe(waited, late int64) {
	w.late.observe(late)
	for m := w.lateMax.Load(); late > m && !w.lateMax.CompareAndSwap(m, late); m = w.lateMax.Load() {
	}
	w.waited.Add(1)
	w.waitedNs.Add(waited)
	w.hist.observe(waited)
}

// AppendInfo appends the waiting requests' INFO stats fields.
func (w *WaitCounters) AppendInfo(b []byte) []byte {
	b = AppendInt(b, "waited_requests", w.waited.Load())
	b = AppendInt(b, "waited_usec", w.waitedNs.Load()/1e3)
	// The reply's lateness after its turn: p50 and p99 as their histogram
	// bucket's upper bound (-1: above a second), and the largest.
	usec := func(ns int64) int64 {
		if ns < 0 {
			return -1
		}
		return ns / 1e3
	}
	b = AppendInt(b, "wait_late_p50_usec", usec(w.late.quantile(0.5)))
	b = AppendInt(b, "wait_late_p99_usec", usec(w.late.quantile(0.99)))
	return AppendInt(b, "wait_late_max_usec", w.lateMax.Load()/1e3)
}

// Snapshot returns the counters and the histogram of the waits, with
// waiting the requests waiting now (Stats' Wait).
func (w *WaitCounters) Snapshot(waiting int64) WaitStats {
	st := WaitStats{Waiting: waiting, Waited: w.waited.Load(), WaitedSeconds: float64(w.waitedNs.Load()) / 1e9}
	for i := range w.hist.counts {
		if i < len(waitBounds) {
			st.Bounds = append(st.Bounds, float64(waitBounds[i])/1e9)
		}
		st.Counts = append(st.Counts, w.hist.counts[i].Load())
	}
	return st
}

// histogram counts durations into buckets: bucket i holds those of at
// most bounds[i] ns, the last one the longer ones. Safe for concurrent use.
// (Its few fixed bounds are the ones the metrics export; internal/latency's
// log-linear buckets are for quantiles to within 12.5%.)
type histogram struct {
	bounds []int64
	counts []atomic.Int64
}

func (h *histogram) init(bounds []int64) {
	h.bounds, h.counts = bounds, make([]atomic.Int64, len(bounds)+1)
}

func (h *histogram) observe(ns int64) {
	i := 0
	for i < len(h.bounds) && ns > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
}

// quantile returns the upper bound (ns) of the bucket holding the q-th
// quantile (q in (0, 1]), -1 past the last bound, 0 when nothing was
// counted.
func (h *histogram) quantile(q float64) int64 {
	n := make([]int64, len(h.counts))
	var total int64
	for i := range h.counts {
		n[i] = h.counts[i].Load()
		total += n[i]
	}
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.999999)
	var cum int64
	for i := range n {
		if cum += n[i]; cum >= rank {
			if i == len(h.bounds) {
				return -1
			}
			return h.bounds[i]
		}
	}
	return -1
}
