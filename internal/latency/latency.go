package latency

import (
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
)

// A histogram has log-linear buckets over nanoseconds: eight per power of two, so that every bucket is at most
// 12.5% wide, from 1 ns up to 2^36 ns (about 69 s); slower calls land in the
// last bucket. Recording a call is an index computation and two atomic adds.
//
// The server keeps one histogram per command and stripe; a connection
// writes to the stripe of its id, so that connections on different CPUs
// rarely share a cache line. A command's stripes are allocated when it is
// first called: the memory is bounded by commands × stripes × 2.3 KiB,
// whatever the number of connections.
const (
	latSubBits = 3
	latSub     = 1 << latSubBits
	latMaxExp  = 36
	latBuckets = (latMaxExp-latSubBits+1)*latSub + latSub
)

// latIndex returns the bucket of a duration in nanoseconds.
func latIndex(ns int64) int {
	if ns < latSub {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 1
	if e > latMaxExp {
		return latBuckets - 1
	}
	m := int(ns>>(e-latSubBits)) & (latSub - 1)
	return (e-latSubBits+1)*latSub + m
}

// latBounds returns the smallest and largest durations (ns, inclusive) that
// fall into bucket i (the last bucket also holds everything slower).
func latBounds(i int) (lo, hi int64) {
	if i < latSub {
		return int64(i), int64(i)
	}
	e := i/latSub + latSubBits - 1
	m := int64(i % latSub)
	lo = (latSub + m) << (e - latSubBits)
	hi = (latSub+m+1)<<(e-latSubBits) - 1
	if i == latBuckets-1 {
		hi = math.MaxInt64
	}
	return lo, hi
}

// hist is one stripe of one command's histogram.
type hist struct {
	counts [latBuckets]atomic.Uint64
	sum    atomic.Int64 // ns
}

// Striped holds every command's striped histograms.
type Striped struct {
	stripes int                    // a power of two
	hists   []atomic.Pointer[hist] // command index × stripes + stripe
}

// New returns histograms for commands commands, striped by GOMAXPROCS (at
// most 16 stripes).
func New(commands int) *Striped {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < 16 {
		n <<= 1
	}
	return &Striped{stripes: n, hists: make([]atomic.Pointer[hist], commands*n)}
}

// Observe records one call of command cmd taking ns nanoseconds, in the
// stripe chosen by the connection id.
func (l *Striped) Observe(cmd int, id int64, ns int64) { l.ObserveN(cmd, id, ns, 1) }

// ObserveN records n calls of command cmd taking ns nanoseconds each.
func (l *Striped) ObserveN(cmd int, id int64, ns int64, n int) {
	p := &l.hists[cmd*l.stripes+int(id)&(l.stripes-1)]
	h := p.Load()
	if h == nil {
		h = new(hist)
		if !p.CompareAndSwap(nil, h) {
			h = p.Load()
		}
	}
	h.counts[latIndex(ns)].Add(uint64(n))
	h.sum.Add(ns * int64(n))
}

// Snapshot sums the stripes of command cmd.
func (l *Striped) Snapshot(cmd int) Latency {
	var out Latency
	for s := 0; s < l.stripes; s++ {
		h := l.hists[cmd*l.stripes+s].Load()
		if h == nil {
			continue
		}
		if out.counts == nil {
			out.counts = make([]uint64, latBuckets)
		}
		for i := range h.counts {
			n := h.counts[i].Load()
			out.counts[i] += n
			out.Count += n
		}
		out.Sum += time.Duration(h.sum.Load())
	}
	return out
}

// Reset zeroes every histogram (CONFIG RESETSTAT).
func (l *Striped) Reset() {
	for i := range l.hists {
		if h := l.hists[i].Load(); h != nil {
			for j := range h.counts {
				h.counts[j].Store(0)
			}
			h.sum.Store(0)
		}
	}
}

// Latency is a histogram of one command's execution times, as the server
// measured them (a pipelined run of writes shares its time evenly among
// its commands). Counts are exact; durations are known to within 12.5%.
type Latency struct {
	counts []uint64 // per bucket; nil when empty
	// Count is the number of calls recorded.
	Count uint64
	// Sum is their total duration.
	Sum time.Duration
}

// Quantile returns the duration at or below which a fraction q (0..1) of
// the calls completed: the upper edge of the bucket holding the call of
// rank ⌈q × Count⌉ (HdrHistogram's "highest equivalent value"). It returns
// 0 for an empty histogram.
func (l *Latency) Quantile(q float64) time.Duration {
	if l.Count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(l.Count)))
	rank = min(max(rank, 1), l.Count)
	var seen uint64
	for i, n := range l.counts {
		seen += n
		if seen >= rank {
			_, hi := latBounds(i)
			if i == latBuckets-1 {
				lo, _ := latBounds(i)
				return time.Duration(lo)
			}
			return time.Duration(hi)
		}
	}
	return 0
}

// CountAtMost returns how many calls took at most d. A bucket that straddles
// d is not counted (the figure errs towards "slower"), so it can be below
// the exact count by the calls within 12.5% under d.
func (l *Latency) CountAtMost(d time.Duration) uint64 {
	var n uint64
	for i, c := range l.counts {
		_, hi := latBounds(i)
		if hi > int64(d) {
			break
		}
		n += c
	}
	return n
}
