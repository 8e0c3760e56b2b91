package shards

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"github.com/cellserver/cellserver/engine"
)

// Memory accounting and eviction support for maxmemory. The store never
// evicts by itself: the server picks candidates here and deletes them
// through its write path (an OpDel), so that in a cluster every replica
// deletes the same keys at the same point of the log.

// Bytes a live key costs besides its key bytes: its 20-byte record, its
// share of the table (4 bytes a slot at a load of at most 3/4) and its
// one-byte reference to the parameters it was last used with, rounded up.
const perKeyBytes = 27

// extEntryBytes is a side-table entry's cost (map entry and its share of
// buckets), as shard.bytes counts it.
const extEntryBytes = 64

// logEntryBytes is one sliding-log entry's cost (engine.LogEntry: an
// instant and a count, two int64s). A log is counted by its array's
// capacity, which append grows by about 1.25× once large (2× while small).
const logEntryBytes = 16

// leaseBytes is one lease's or waiter's cost besides its id's bytes
// (engine.Lease: a string header, units, expiry, and a waiter's max and
// ttl).
const leaseBytes = 48

// leasesBytes is what a concurrency key's leases cost.
func leasesBytes(ls []engine.Lease) int64 {
	b := int64(len(ls)) * leaseBytes
	for i := range ls {
		b += int64(len(ls[i].ID))
	}
	return b
}

// stateBytes is what a stored state costs besides its record and key: a
// compact state nothing, any other a side-table entry and its log's array.
func stateBytes(st *engine.State) int64 {
	if compact(st) {
		return 0
	}
	return extEntryBytes + int64(cap(st.Log))*logEntryBytes + leasesBytes(st.Leases)
}

// grownBytes is the size NoGrow compares (see Op.NoGrow): as stateBytes,
// but a log counted by its length, never its capacity. Every replica holds
// the same entries, but not the same spare capacity (a log restored from a
// snapshot has none), so only the length decides alike everywhere.
func grownBytes(st *engine.State) int64 {
	if compact(st) {
		return 0
	}
	return extEntryBytes + int64(len(st.Log))*logEntryBytes + leasesBytes(st.Leases)
}

// grows reports whether storing next in place of old creates a key (old is
// empty) or enlarges it, as NoGrow counts (grownBytes).
func grows(old, next *engine.State) bool {
	return old.Kind == engine.KindNone || grownBytes(next) > grownBytes(old)
}

// KeyBytes returns the bytes key accounts for in UsedBytes (its record and
// table slot, its name, its side-table entry and sliding log), or 0 and
// false when the key is missing or expired at now (MEMORY USAGE). It takes
// the key's shard lock briefly; O(1).
func (s *Store) KeyBytes(key []byte, now int64) (int64, bool) {
	sh, h := s.route(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, idx := sh.find(h, key)
	if idx < 0 || sh.recs[idx].w() <= now {
		return 0, false
	}
	st := sh.state(idx)
	return perKeyBytes + int64(len(key)) + stateBytes(&st), true
}

// UsedBytes estimates the memory the live keys need (records, table slots,
// key bytes, side-table entries and sliding logs), without the spare
// capacity Stats.Bytes includes, so that it falls as soon as keys are
// deleted. It takes each shard's lock briefly and costs O(shards).
func (s *Store) UsedBytes() int64 {
	_, b := s.Usage()
	return b
}

// Usage returns the number of keys held (expired ones not yet reclaimed
// included) and UsedBytes, read together. It costs O(shards).
func (s *Store) Usage() (keys, bytes int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		keys += int64(sh.count)
		bytes += int64(sh.count)*perKeyBytes + int64(len(sh.arena)-sh.garbage) + int64(len(sh.ext))*extEntryBytes + sh.logBytes
		sh.mu.Unlock()
	}
	return keys, bytes
}

// EvictionCandidates returns copies of up to n keys chosen for eviction by
// soonest expiry, approximately as Redis's volatile-ttl does: it samples
// about samples × n records from random shards and returns the n that
// expire first (keys already expired come first of all), each once. It
// returns fewer keys when the store holds fewer.
func (s *Store) EvictionCandidates(n, samples int) [][]byte {
	if n <= 0 {
		return nil
	}
	type cand struct {
		w   int64
		key []byte
	}
	want := n * max(samples, 1)
	pool := make([]cand, 0, want)
	seen := make(map[string]struct{}, want)
	// Visit random shards, sampling a few records in each, until enough
	// samples are taken or the attempts run out (an almost empty store).
	for tries := 0; len(pool) < want && tries < 2*want+len(s.shards); tries++ {
		sh := &s.shards[rand.IntN(len(s.shards))]
		sh.mu.Lock()
		if sh.count > 0 {
			for k := 0; k < 4; k++ {
				r := &sh.recs[rand.IntN(len(sh.recs))]
				if !r.live() {
					continue
				}
				key := sh.key(r)
				if _, dup := seen[string(key)]; dup {
					continue
				}
				seen[string(key)] = struct{}{}
				pool = append(pool, cand{r.w(), append([]byte(nil), key...)})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(pool, func(a, b cand) int { return cmp.Compare(a.w, b.w) })
	out := make([][]byte, 0, min(n, len(pool)))
	for i := 0; i < len(pool) && i < n; i++ {
		out = append(out, pool[i].key)
	}
	return out
}
