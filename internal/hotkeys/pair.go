package hotkeys

import "math"

// Sample is the summaries' sampling: one decision in Sample is recorded,
// picked at random, and counts are scaled back up (Scale). It keeps the
// hot path's cost (a hash, a striped lock, a heap step: about 100 ns) to a
// few nanoseconds a decision on average; a heavy hitter, by definition
// frequent, is sampled many times.
const Sample = 32

// Pair is the two summaries a server keeps, each of about capacity keys
// (hotkeys-capacity): every sampled decision (Requested) and the limited
// ones (Limited).
type Pair struct {
	capacity           int
	Requested, Limited *Sketch
}

// NewPair returns two empty summaries of capacity keys each.
func NewPair(capacity int) *Pair {
	return &Pair{capacity: capacity, Requested: New(capacity), Limited: New(capacity)}
}

// Capacity is the capacity the pair was made with (hotkeys-capacity; each
// Sketch rounds it up to its stripes).
func (p *Pair) Capacity() int { return p.capacity }

// MemoryBytes is what the two summaries hold, in bytes.
func (p *Pair) MemoryBytes() int { return 2 * p.Requested.Capacity() * EntryBytes }

// Record records a sampled decision on key of family.
func (p *Pair) Record(family uint8, key []byte, limited bool) {
	p.Requested.Record(family, key)
	if limited {
		p.Limited.Record(family, key)
	}
}

// Sampler picks one decision in Sample with a xorshift generator: no
// lock, no allocation. The zero Sampler seeds itself from seed's first
// call. One writer only.
type Sampler uint64

// Pick advances the generator and reports whether this decision is
// sampled; seed supplies a random start for a zero Sampler.
func (x *Sampler) Pick(seed func() uint64) bool {
	v := uint64(*x)
	if v == 0 {
		v = seed() | 1
	}
	v ^= v << 13
	v ^= v >> 7
	v ^= v << 17
	*x = Sampler(v)
	return v%Sample == 0
}

// Scale turns a summary's sampled count and error bound into an estimate
// of the true count and a bound on its error: the Space-Saving error
// scaled, plus four standard deviations of the sampling (so the true
// count lies within count ± error with about 99.99% confidence).
func Scale(count, errBound uint64) (uint64, uint64) {
	return count * Sample, errBound*Sample + uint64(4*Sample*math.Sqrt(float64(count))+0.5)
}
