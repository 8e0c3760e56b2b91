package shards

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/engine"
)

// Record layout. A record is five uint32 words (20 bytes, no padding, no
// pointer): the in-shard hash, the key's offset in the shard's arena, the key
// length packed with the kind and the "extended" flag, and the 64-bit word w.
// For a compact state (A == ExpireAt, B == C == 0, no log: every GCRA key)
// w is the whole state; otherwise w is ExpireAt and the other words live in
// the shard's ext side table.
const (
	lenBits  = 28
	lenMask  = 1<<lenBits - 1
	kindMask = 7 << lenBits
	extFlag  = 1 << 31

	// MaxKeyLen is the longest key the store holds, in bytes (256 MiB - 1).
	MaxKeyLen = lenMask

	// maxArena bounds a shard's key arena: offsets are 32-bit.
	maxArena = 1<<32 - 1

	// A table slot is 0 (empty) or a record's index+1 in its low
	// slotIdxBits bits, under the top bits of the record's hash: a probe
	// compares those bits before it reads the record, so a slot that holds
	// another key costs no cache miss on the record slab (in 255 cases of
	// 256). The index bits bound a shard's records (maxRecs).
	slotIdxBits = 24
	slotIdxMask = 1<<slotIdxBits - 1
	maxRecs     = slotIdxMask

	// minTable is the smallest (and initial) table size of a shard.
	minTable = 16
	// compactMin is the slab length (records) or arena length (bytes) below
	// which a shard never bothers to compact.
	compactMin = 1024
)

// The kind must fit in the 3 bits kept for it (compile-time check).
const _ = uint(7 - engine.KindConcurrency)

type rec struct {
	h   uint32 // in-shard hash: the top 32 bits of the key's xxhash
	off uint32 // key offset in the arena; for a free record, the next free index+1
	lk  uint32 // key length | kind<<28 | extFlag; 0 marks a free record
	wlo uint32 // low half of w
	whi uint32 // high half of w
}

func (r *rec) keyLen() int       { return int(r.lk & lenMask) }
func (r *rec) kind() engine.Kind { return engine.Kind((r.lk & kindMask) >> lenBits) }
func (r *rec) isExt() bool       { return r.lk&extFlag != 0 }
func (r *rec) live() bool        { return r.lk&kindMask != 0 }
func (r *rec) w() int64          { return int64(uint64(r.whi)<<32 | uint64(r.wlo)) }
func (r *rec) setW(v int64)      { r.wlo, r.whi = uint32(uint64(v)), uint32(uint64(v)>>32) }
func (r *rec) setKind(k engine.Kind, ext bool) {
	lk := r.lk&lenMask | uint32(k)<<lenBits
	if ext {
		lk |= extFlag
	}
	r.lk = lk
}

// extState holds the words of a state that does not fit the compact form.
type extState struct {
	A, B, C int64
	Log     []engine.LogEntry
	// Leases are a concurrency key's leases (never written in place: the
	// engine replaces the array on every change).
	Leases []engine.Lease
}

// extBytes is what e's log and leases cost, as logBytes counts them.
func extBytes(e *extState) int64 {
	return int64(cap(e.Log))*logEntryBytes + leasesBytes(e.Leases)
}

// compact reports whether st is stored in the record's single word.
func compact(st *engine.State) bool {
	return st.A == st.ExpireAt && st.B == 0 && st.C == 0 && st.Log == nil && st.Leases == nil
}

// shard is one lock's worth of keyspace. Every field is guarded by mu except
// changes and expired, which are also read without it.
type shard struct {
	mu sync.Mutex

	table   []uint32 // open addressing, linear probing: record index+1, 0 = empty
	recs    []rec    // slab of records; free ones are chained through off
	free    uint32   // head of the free list: index+1, 0 = none
	nfree   int      // records on the free list
	arena   []byte   // key bytes, append-only until compacted
	garbage int      // bytes of arena held by deleted keys
	count   int      // records in use (including expired ones not yet reclaimed)
	byKind  [8]int   // count by kind
	ext     map[uint32]extState
	// pidx, parallel to recs, holds each record's reference into params:
	// the parameters its key was last used with (0: unknown).
	pidx   []uint8
	params paramTable
	gen    uint64 // incremented whenever records move (rebuild)
	// logBytes is the capacity of the sliding logs in ext and the size of
	// the concurrency keys' leases, in bytes, kept up to date by set and
	// removeAt (UsedBytes reads it in O(1)).
	logBytes int64
	// leases is the number of leases the shard's concurrency keys hold
	// (expired ones included until reclaimed), kept by set and removeAt.
	leases int64

	sweepPos int // next slab index the sweeper examines

	changes atomic.Uint64 // writes applied that changed something
	expired atomic.Uint64 // expired keys reclaimed
	// expiredByKind is expired by limiter kind (see countExpired).
	expiredByKind [8]atomic.Uint64
	// leasesExpired counts the leases dropped because their ttl passed
	// without a release (CC.ACQUIRE's crashed holders).
	leasesExpired atomic.Uint64

	_ [64]byte // keep neighbouring shards' locks on separate cache lines
}

func (sh *shard) init() {
	sh.table = make([]uint32, minTable)
	sh.recs = nil
	sh.free, sh.nfree = 0, 0
	sh.arena = nil
	sh.garbage = 0
	sh.count = 0
	sh.byKind = [8]int{}
	sh.ext = nil
	sh.pidx = nil
	sh.params = paramTable{}
	sh.logBytes = 0
	sh.leases = 0
	sh.gen++
	sh.sweepPos = 0
}

func (sh *shard) key(r *rec) []byte {
	return sh.arena[r.off : r.off+uint32(r.keyLen())]
}

// find returns the table position and record index of key, or (-1, -1).
func (sh *shard) find(h uint32, key []byte) (int, int) {
	mask := uint32(len(sh.table) - 1)
	tag := h &^ slotIdxMask
	for pos := h & mask; ; pos = (pos + 1) & mask {
		v := sh.table[pos]
		if v == 0 {
			return -1, -1
		}
		if v&^slotIdxMask != tag {
			continue
		}
		idx := slotRec(v)
		r := &sh.recs[idx]
		if r.h == h && r.keyLen() == len(key) && bytes.Equal(sh.arena[r.off:r.off+uint32(len(key))], key) {
			return int(pos), idx
		}
	}
}

// slot is the table slot of record idx, whose hash is h.
func slot(h uint32, idx int) uint32 { return h&^slotIdxMask | uint32(idx+1) }

// slotRec is the record index a non-empty slot holds.
func slotRec(v uint32) int { return int(v&slotIdxMask) - 1 }

// posOf returns the table position holding record idx.
func (sh *shard) posOf(idx int) int {
	mask := uint32(len(sh.table) - 1)
	want := slot(sh.recs[idx].h, idx)
	for pos := sh.recs[idx].h & mask; ; pos = (pos + 1) & mask {
		switch sh.table[pos] {
		case want:
			return int(pos)
		case 0:
			panic("shards: record missing from its table") // internal invariant
		}
	}
}

// state returns the state of the live record idx. The Log aliases the
// stored one.
func (sh *shard) state(idx int) engine.State {
	r := &sh.recs[idx]
	w := r.w()
	if !r.isExt() {
		return engine.State{Kind: r.kind(), ExpireAt: w, A: w}
	}
	e := sh.ext[uint32(idx)]
	return engine.State{Kind: r.kind(), ExpireAt: w, A: e.A, B: e.B, C: e.C, Log: e.Log, Leases: e.Leases}
}

// set stores st (a valid kind) into the live record idx.
func (sh *shard) set(idx int, st *engine.State) {
	r := &sh.recs[idx]
	if old := r.kind(); old != st.Kind {
		sh.byKind[old]--
		sh.byKind[st.Kind]++
	}
	if r.isExt() {
		e := sh.ext[uint32(idx)]
		sh.logBytes -= extBytes(&e)
		sh.leases -= heldLeases(e.Leases, e.C)
	}
	if compact(st) {
		if r.isExt() {
			delete(sh.ext, uint32(idx))
		}
		r.setKind(st.Kind, false)
	} else {
		if sh.ext == nil {
			sh.ext = make(map[uint32]extState)
		}
		e := extState{A: st.A, B: st.B, C: st.C, Log: st.Log, Leases: st.Leases}
		sh.ext[uint32(idx)] = e
		sh.logBytes += extBytes(&e)
		sh.leases += heldLeases(st.Leases, st.C)
		r.setKind(st.Kind, true)
	}
	r.setW(st.ExpireAt)
}

// insert adds key (absent from the shard) with state st. It fails only when
// the shard's arena would exceed 4 GiB of live keys, or its records maxRecs.
func (sh *shard) insert(h uint32, key []byte, st *engine.State) error {
	_, err := sh.insertIdx(h, key, st)
	return err
}

// insertIdx is insert that also returns the new record's index.
func (sh *shard) insertIdx(h uint32, key []byte, st *engine.State) (int, error) {
	if sh.free == 0 && len(sh.recs) >= maxRecs {
		return -1, ErrShardFull
	}
	if (sh.count+1)*4 > len(sh.table)*3 {
		sh.rehash(len(sh.table) * 2)
	}
	if len(sh.arena)+len(key) > maxArena {
		sh.compactArena()
		if len(sh.arena)+len(key) > maxArena {
			return -1, ErrShardFull
		}
	}
	var idx int
	if sh.free != 0 {
		idx = int(sh.free - 1)
		sh.free = sh.recs[idx].off
		sh.nfree--
	} else {
		if len(sh.recs) == cap(sh.recs) {
			sh.recs = growRecs(sh.recs)
		}
		idx = len(sh.recs)
		sh.recs = sh.recs[:idx+1]
		sh.pidx = growPidx(sh.pidx, idx+1)
	}
	if len(sh.arena)+len(key) > cap(sh.arena) {
		sh.arena = growBytes(sh.arena, len(key))
	}
	off := len(sh.arena)
	sh.arena = append(sh.arena, key...)
	sh.recs[idx] = rec{h: h, off: uint32(off), lk: uint32(len(key))}
	sh.count++
	sh.byKind[engine.KindNone]++ // set moves it to st.Kind
	sh.set(idx, st)

	mask := uint32(len(sh.table) - 1)
	pos := h & mask
	for sh.table[pos] != 0 {
		pos = (pos + 1) & mask
	}
	sh.table[pos] = slot(h, idx)
	return idx, nil
}

// removeAt deletes record idx found at table position pos (backward-shift
// deletion: no tombstones, so probe runs stay short and SCAN can rely on the
// linear-probing invariant).
func (sh *shard) removeAt(pos, idx int) {
	mask := len(sh.table) - 1
	i := pos
shift:
	for {
		sh.table[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			v := sh.table[j]
			if v == 0 {
				break shift
			}
			home := int(sh.recs[slotRec(v)].h) & mask
			// The entry at j may move back to i unless its home lies
			// cyclically in (i, j].
			if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
				sh.table[i] = v
				i = j
				break
			}
		}
	}
	r := &sh.recs[idx]
	if r.isExt() {
		e := sh.ext[uint32(idx)]
		sh.logBytes -= extBytes(&e)
		sh.leases -= heldLeases(e.Leases, e.C)
		delete(sh.ext, uint32(idx))
	}
	sh.byKind[r.kind()]--
	sh.params.release(sh.pidx[idx])
	sh.pidx[idx] = 0
	sh.count--
	sh.garbage += r.keyLen()
	*r = rec{off: sh.free}
	sh.free = uint32(idx + 1)
	sh.nfree++
}

// maybeShrink returns memory after deletions: it compacts the slab and
// table when most records are free or the table is mostly empty, and the
// arena when most of it is garbage. Each rebuild costs O(live keys) and
// follows at least as many deletions, so the cost is amortised O(1).
func (sh *shard) maybeShrink() {
	switch {
	case len(sh.recs) >= compactMin && sh.nfree*2 > len(sh.recs),
		len(sh.table) > minTable && sh.count*8 < len(sh.table):
		sh.rebuild()
	case len(sh.arena) >= compactMin && sh.garbage*2 > len(sh.arena):
		sh.compactArena()
	}
}

// tableSize returns the power-of-two table size for n keys at load <= 3/4.
func tableSize(n int) int {
	size := minTable
	for n*4 > size*3 {
		size *= 2
	}
	return size
}

// rehash rebuilds the table at the given size from the records' hashes.
func (sh *shard) rehash(size int) {
	t := make([]uint32, size)
	mask := uint32(size - 1)
	for i := range sh.recs {
		r := &sh.recs[i]
		if !r.live() {
			continue
		}
		pos := r.h & mask
		for t[pos] != 0 {
			pos = (pos + 1) & mask
		}
		t[pos] = slot(r.h, i)
	}
	sh.table = t
}

// rebuild packs the live records densely, compacts the arena and sizes the
// table for the live keys.
func (sh *shard) rebuild() {
	n := sh.count
	recs := make([]rec, 0, n+n/8+8)
	pidx := make([]uint8, 0, cap(recs))
	arena := make([]byte, 0, len(sh.arena)-sh.garbage)
	var ext map[uint32]extState
	if len(sh.ext) > 0 {
		ext = make(map[uint32]extState, len(sh.ext))
	}
	for i := range sh.recs {
		r := sh.recs[i]
		if !r.live() {
			continue
		}
		k := sh.key(&r)
		r.off = uint32(len(arena))
		arena = append(arena, k...)
		if r.isExt() {
			ext[uint32(len(recs))] = sh.ext[uint32(i)]
		}
		recs = append(recs, r)
		pidx = append(pidx, sh.pidx[i])
	}
	sh.recs, sh.arena, sh.ext, sh.pidx = recs, arena, ext, pidx
	sh.free, sh.nfree, sh.garbage = 0, 0, 0
	sh.gen++
	sh.sweepPos = 0
	sh.rehash(tableSize(n))
}

// compactArena copies the live keys into a fresh arena.
func (sh *shard) compactArena() {
	live := len(sh.arena) - sh.garbage
	arena := make([]byte, 0, live+live/8)
	for i := range sh.recs {
		r := &sh.recs[i]
		if !r.live() {
			continue
		}
		k := sh.key(r)
		r.off = uint32(len(arena))
		arena = append(arena, k...)
	}
	sh.arena, sh.garbage = arena, 0
}

// nextSlabCap is the capacity a slab of capacity c grows to: 16 at first,
// doubling while small, then by 1/8, so that spare capacity stays a small
// fraction of the memory per key. The slab and its parallel arrays
// (params.go) grow alike.
func nextSlabCap(c int) int {
	switch {
	case c < 16:
		return 16
	case c < compactMin:
		return c * 2
	default:
		return c + c/8
	}
}

// growRecs grows the slab (nextSlabCap).
func growRecs(s []rec) []rec {
	n := make([]rec, len(s), nextSlabCap(cap(s)))
	copy(n, s)
	return n
}

// growBytes grows the arena (by 1/8 once large) to hold at least extra more bytes.
func growBytes(b []byte, extra int) []byte {
	c := cap(b)
	switch {
	case c < 256:
		c = 256
	case c < 64*compactMin:
		c *= 2
	default:
		c += c / 8
	}
	if c < len(b)+extra {
		c = len(b) + extra
	}
	if c > maxArena {
		c = maxArena
	}
	n := make([]byte, len(b), c)
	copy(n, b)
	return n
}

// reclaim deletes expired records of the slab from index from onwards,
// examining at most n records and deleting at most limit. It returns the
// index to continue from (len(recs) when the end was reached), and how many
// it examined and deleted.
func (sh *shard) reclaim(from, n, limit int, now int64) (next, examined, deleted int) {
	i := from
	for ; i < len(sh.recs) && examined < n && deleted < limit; i++ {
		examined++
		r := &sh.recs[i]
		if !r.live() || r.w() > now {
			continue
		}
		sh.countExpired(i)
		sh.removeAt(sh.posOf(i), i)
		deleted++
	}
	return i, examined, deleted
}

// countExpired counts the expired key of the live record idx as
// reclaimed (a concurrency key's leases as expired unreleased). The caller
// holds sh.mu and removes or replaces the record next.
func (sh *shard) countExpired(idx int) {
	r := &sh.recs[idx]
	k := r.kind()
	sh.expired.Add(1)
	sh.expiredByKind[k&7].Add(1)
	if k == engine.KindConcurrency && r.isExt() {
		e := sh.ext[uint32(idx)]
		sh.leasesExpired.Add(uint64(heldLeases(e.Leases, e.C)))
	}
}

// bytes estimates the memory the shard holds.
func (sh *shard) bytes() int64 {
	b := int64(cap(sh.table))*4 + int64(cap(sh.recs))*20 + int64(cap(sh.arena)) + int64(cap(sh.pidx)) + sh.params.bytes()
	for _, e := range sh.ext {
		b += 64 + extBytes(&e) // map entry and its share of buckets, plus the log or leases
	}
	return b
}

// heldLeases is the number of held leases of a concurrency key's Leases:
// all but its waiters in line (C of them; engine/concurrency.go).
func heldLeases(leases []engine.Lease, c int64) int64 {
	if len(leases) == 0 {
		return 0
	}
	return int64(len(leases)) - c
}
