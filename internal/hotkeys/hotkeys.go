package hotkeys

import (
	"bytes"
	"hash/maphash"
	"sort"
	"sync"
)

// stripes is the number of independently locked parts of a Sketch: enough
// that event loops on many CPUs rarely wait for one another.
const stripes = 16

// keyBuf is the capacity each entry's key buffer starts with: keys up to
// this long are copied without allocating once the summary is full.
const keyBuf = 48

// EntryBytes is the approximate memory of one tracked key whose bytes fit
// keyBuf: the entry (56 bytes: hash, count, error, heap position, family,
// key header), its heap slot (4), its map slot (about 24 with the map's
// overhead) and its key buffer.
const EntryBytes = 56 + 4 + 24 + keyBuf

// Entry is one tracked key.
type Entry struct {
	Family uint8  // the caller's class of the key (a command family)
	Key    []byte // a copy
	// Count is the estimated count; the true count is between Count-Err
	// and Count.
	Count uint64
	Err   uint64 // the error bound
}

// Sketch is a Space-Saving summary of at most Capacity keys, rounded up
// to a multiple of the stripe count. Its methods are safe for concurrent
// use; Record allocates nothing once a stripe is full and its keys fit
// their buffers.
type Sketch struct {
	seed    maphash.Seed
	stripes [stripes]stripe
	cap     int
}

// stripe is one part of the summary. Entries stay in their slot; the
// heap orders slot numbers by count, so that a count's change moves small
// integers and never touches the map.
type stripe struct {
	mu    sync.Mutex
	ents  []entry          // slots
	heap  []int32          // slot numbers; heap[0]'s entry has the least count
	index map[uint64]int32 // hash → slot
	cap   int
	total uint64 // records into this stripe
	_     [40]byte
}

type entry struct {
	hash   uint64
	count  uint64
	err    uint64
	pos    int32 // in heap
	family uint8
	key    []byte
}

// New returns a Sketch tracking at most capacity keys (at least one per
// stripe).
func New(capacity int) *Sketch {
	per := max((capacity+stripes-1)/stripes, 1)
	s := &Sketch{seed: maphash.MakeSeed(), cap: per * stripes}
	for i := range s.stripes {
		s.stripes[i].cap = per
		s.stripes[i].index = make(map[uint64]int32, per)
		s.stripes[i].ents = make([]entry, 0, per)
		s.stripes[i].heap = make([]int32, 0, per)
	}
	return s
}

// Capacity is the most keys the sketch tracks.
func (s *Sketch) Capacity() int { return s.cap }

// hash mixes family into the key's hash: a key is tracked per family.
func (s *Sketch) hash(family uint8, key []byte) uint64 {
	return maphash.Bytes(s.seed, key) ^ uint64(family)*0x9e3779b97f4a7c15
}

// Record counts one occurrence of key in family. Keys are told apart by a
// 64-bit hash (two keys colliding, about one chance in 2^64 per pair,
// would share a count).
func (s *Sketch) Record(family uint8, key []byte) {
	h := s.hash(family, key)
	st := &s.stripes[h>>60] // top bits: the map uses the low ones
	st.mu.Lock()
	st.total++
	if i, ok := st.index[h]; ok {
		e := &st.ents[i]
		e.count++
		st.down(int(e.pos))
		st.mu.Unlock()
		return
	}
	if len(st.ents) < st.cap {
		i := int32(len(st.ents))
		st.ents = append(st.ents, entry{hash: h, count: 1, family: family, pos: i, key: append(make([]byte, 0, max(keyBuf, len(key))), key...)})
		st.heap = append(st.heap, i)
		st.index[h] = i
		st.up(int(i))
		st.mu.Unlock()
		return
	}
	// Replace the least counted key: the newcomer inherits its count as
	// its error bound (Space-Saving).
	slot := st.heap[0]
	e := &st.ents[slot]
	delete(st.index, e.hash)
	e.hash, e.err, e.family = h, e.count, family
	e.count++
	e.key = append(e.key[:0], key...)
	st.index[h] = slot
	st.down(0)
	st.mu.Unlock()
}

// Estimate returns key's estimated count and error bound in family; a key
// not tracked has a count of 0 and an error bound of the least tracked
// count (its true count is at most that).
func (s *Sketch) Estimate(family uint8, key []byte) (count, errBound uint64) {
	h := s.hash(family, key)
	st := &s.stripes[h>>60]
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, ok := st.index[h]; ok && bytes.Equal(st.ents[i].key, key) {
		return st.ents[i].count, st.ents[i].err
	}
	if len(st.ents) == st.cap {
		return 0, st.ents[st.heap[0]].count
	}
	return 0, 0
}

// Top returns up to n tracked keys, most counted first.
func (s *Sketch) Top(n int) []Entry {
	var all []Entry
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		for _, e := range st.ents {
			all = append(all, Entry{Family: e.family, Key: bytes.Clone(e.key), Count: e.count, Err: e.err})
		}
		st.mu.Unlock()
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Count != all[j].Count {
			return all[i].Count > all[j].Count
		}
		return bytes.Compare(all[i].Key, all[j].Key) < 0
	})
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// Len is the number of keys tracked now.
func (s *Sketch) Len() int {
	n := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		n += len(st.ents)
		st.mu.Unlock()
	}
	return n
}

// Total is the number of records.
func (s *Sketch) Total() uint64 {
	var n uint64
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		n += st.total
		st.mu.Unlock()
	}
	return n
}

// less compares the counts of the entries at heap positions i and j.
func (st *stripe) less(i, j int) bool {
	return st.ents[st.heap[i]].count < st.ents[st.heap[j]].count
}

func (st *stripe) swap(i, j int) {
	st.heap[i], st.heap[j] = st.heap[j], st.heap[i]
	st.ents[st.heap[i]].pos = int32(i)
	st.ents[st.heap[j]].pos = int32(j)
}

func (st *stripe) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !st.less(i, p) {
			return
		}
		st.swap(i, p)
		i = p
	}
}

func (st *stripe) down(i int) {
	n := len(st.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && st.less(r, l) {
			m = r
		}
		if !st.less(m, i) {
			return
		}
		st.swap(i, m)
		i = m
	}
}
