package shards

import "github.com/cellserver/cellserver/engine"

// Params are the parameters a key was last used with: those of the last
// limiter request applied to it (its kind is the key's). Quantity is not
// kept: it belongs to one request, not to the key.
type Params struct {
	// Burst, Rate and Period are engine.Request's (Period in nanoseconds).
	Burst, Rate, Period int64
	// Interval is the token bucket's refill-all-at-once variant.
	Interval bool
}

// ParamsOf returns the parameters of req.
func ParamsOf(req *engine.Request) Params {
	return Params{Burst: req.Burst, Rate: req.Rate, Period: req.Period, Interval: req.Interval}
}

// Request returns the request of kind k with these parameters and quantity q.
func (p Params) Request(k engine.Kind, q int64) engine.Request {
	return engine.Request{Kind: k, Burst: p.Burst, Rate: p.Rate, Period: p.Period, Interval: p.Interval, Quantity: q}
}

// maxParamSets bounds the distinct parameter sets one shard remembers at a
// time: a key's reference is one byte beside its record (0: unknown). A
// deployment uses a handful of limits, not one per key; past the bound a
// newly used set is not remembered (its keys' parameters read as unknown)
// until keys of other sets expire or change and free a slot.
const maxParamSets = 255

// paramTable interns a shard's parameter sets: each key holds a one-byte
// reference (shard.pidx, parallel to recs) instead of 24 bytes of
// parameters, which keeps a GCRA key within 48 bytes. Sets are counted by
// reference and freed when no key uses them, so the table holds only the
// sets of live keys. Guarded by the shard's lock.
type paramTable struct {
	sets  []Params // sets[i-1] is reference i
	refs  []uint32 // keys holding reference i (refs[i-1]); 0: a free slot
	index map[Params]uint8
	free  []uint8 // references of free slots
	// The last set interned: the hot path of a server whose callers use
	// one limit compares three words and skips the map.
	last    Params
	lastRef uint8
}

// ref returns the reference of p, adding it when there is room (its count
// is still 0: acquire takes it), or 0 when the table is full.
func (t *paramTable) ref(p Params) uint8 {
	if t.lastRef != 0 && t.last == p {
		return t.lastRef
	}
	r, ok := t.index[p]
	if !ok {
		switch {
		case len(t.free) > 0:
			r = t.free[len(t.free)-1]
			t.free = t.free[:len(t.free)-1]
			t.sets[r-1] = p
		case len(t.sets) < maxParamSets:
			t.sets = append(t.sets, p)
			t.refs = append(t.refs, 0)
			r = uint8(len(t.sets))
		default:
			return 0
		}
		if t.index == nil {
			t.index = make(map[Params]uint8)
		}
		t.index[p] = r
	}
	t.last, t.lastRef = p, r
	return r
}

// acquire counts one more key holding r (0: none).
func (t *paramTable) acquire(r uint8) {
	if r != 0 {
		t.refs[r-1]++
	}
}

// release counts one key fewer holding r, and frees the set when none holds
// it.
func (t *paramTable) release(r uint8) {
	if r == 0 {
		return
	}
	t.refs[r-1]--
	if t.refs[r-1] > 0 {
		return
	}
	delete(t.index, t.sets[r-1])
	t.sets[r-1] = Params{}
	t.free = append(t.free, r)
	if t.lastRef == r {
		t.lastRef = 0
	}
}

// bytes estimates the table's memory: each slot's set, count and map entry.
func (t *paramTable) bytes() int64 {
	return int64(cap(t.sets))*(32+4) + int64(len(t.index))*48 + int64(cap(t.free))
}

// setParams records that record idx was last used with req (nil: unknown).
func (sh *shard) setParams(idx int, req *engine.Request) {
	var r uint8
	if req != nil {
		r = sh.params.ref(ParamsOf(req))
		if r != 0 && r == sh.pidx[idx] {
			return
		}
		sh.params.acquire(r)
	}
	sh.params.release(sh.pidx[idx])
	sh.pidx[idx] = r
}

// paramsOf returns the parameters record idx was last used with.
func (sh *shard) paramsOf(idx int) (Params, bool) {
	r := sh.pidx[idx]
	if r == 0 {
		return Params{}, false
	}
	return sh.params.sets[r-1], true
}

// growPidx grows pidx, parallel to recs, to hold n references (by 1/8 once
// large, as the slab).
func growPidx(p []uint8, n int) []uint8 {
	if n <= cap(p) {
		return p[:n]
	}
	c := max(nextSlabCap(cap(p)), n)
	q := make([]uint8, n, c)
	copy(q, p)
	return q
}
