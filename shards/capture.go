package shards

import "github.com/cellserver/cellserver/engine"

// Entry is one key and its state, as captured for a snapshot.
type Entry struct {
	Key   []byte
	State engine.State
}

// Capture appends to dst[:0] a copy of every key of shard (0..NumShards-1)
// live at now, taken under the shard's lock so that the copy is one
// consistent state of the shard, and returns it. Key bytes and logs are
// copied: the entries share nothing with the store, so the caller can encode
// them without holding any lock. The memory of dst's entries (their Key
// slices) is reused, so the caller must be done with the previous contents.
// It panics if shard is out of range.
func (s *Store) Capture(shard int, now int64, dst []Entry) []Entry {
	sh := &s.shards[shard]
	sh.mu.Lock()
	defer sh.mu.Unlock()

	old := dst[:cap(dst)]
	dst = dst[:0]
	// Key bytes that do not fit in a reused entry come from one block.
	var block []byte
	need := 0
	i := 0
	for j := range sh.recs {
		r := &sh.recs[j]
		if !r.live() || r.w() <= now {
			continue
		}
		if i >= len(old) || cap(old[i].Key) < r.keyLen() {
			need += r.keyLen()
		}
		i++
	}
	if need > 0 {
		block = make([]byte, 0, need)
	}
	i = 0
	for j := range sh.recs {
		r := &sh.recs[j]
		if !r.live() || r.w() <= now {
			continue
		}
		k := sh.key(r)
		var key []byte
		if i < len(old) && cap(old[i].Key) >= len(k) {
			key = append(old[i].Key[:0], k...)
		} else {
			start := len(block)
			block = append(block, k...)
			key = block[start:len(block):len(block)]
		}
		st := sh.state(j)
		if st.Log != nil {
			st.Log = append([]engine.LogEntry(nil), st.Log...)
		}
		dst = append(dst, Entry{Key: key, State: st})
		i++
	}
	return dst
}
