package shards

import (
	"bytes"

	"github.com/cellserver/cellserver/engine"
)

// smallAll is the number of keys of an OpLimitAll handled without allocating.
const smallAll = 8

// allScratch is execAll's working memory for small operations; it lives on
// the stack.
type allScratch struct {
	shardOf [smallAll]int
	alias   [smallAll]int
	locks   [smallAll]int
	hash    [smallAll]uint32
	stale   [smallAll]bool
	orig    [smallAll]engine.State
	work    [smallAll]engine.State
}

// execAll runs OpLimitAll (CL.THROTTLEALL). The shards involved are locked in
// ascending index order, so concurrent calls naming keys in any order never
// deadlock. Every request is evaluated at now, in order, against a working
// copy of its key's state, so a key named twice has both quantities counted
// against it. If every request allows, every key's final working state is
// committed. If any limits, nothing is: each refusing request reports its own
// limited result and each allowing one reports what a peek (quantity 0) of its
// key answers at now. A key of another kind fails the whole op with
// ErrWrongType.
func (s *Store) execAll(op *Op, now int64, res *Result) {
	n := len(op.Keys)
	if n == 0 {
		return
	}
	var sc allScratch
	var (
		shardOf, alias, locks []int
		hash                  []uint32
		stale                 []bool
		orig, work            []engine.State
	)
	if n <= smallAll {
		shardOf, alias, locks = sc.shardOf[:n], sc.alias[:n], sc.locks[:0]
		hash, stale = sc.hash[:n], sc.stale[:n]
		orig, work = sc.orig[:n], sc.work[:n]
	} else {
		shardOf, alias, locks = make([]int, n), make([]int, n), make([]int, 0, n)
		hash, stale = make([]uint32, n), make([]bool, n)
		orig, work = make([]engine.State, n), make([]engine.State, n)
	}
	for i, key := range op.Keys {
		if len(key) > MaxKeyLen {
			res.Err = ErrKeyTooLarge
			return
		}
		shardOf[i], hash[i] = s.shardIndex(key)
		alias[i] = i
		for j := 0; j < i; j++ {
			if alias[j] == j && shardOf[j] == shardOf[i] && hash[j] == hash[i] && bytes.Equal(op.Keys[j], key) {
				alias[i] = j
				break
			}
		}
		locks = insertSorted(locks, shardOf[i])
	}
	for _, si := range locks {
		s.shards[si].mu.Lock()
	}
	defer func() {
		for _, si := range locks {
			sh := &s.shards[si]
			sh.maybeShrink()
			sh.mu.Unlock()
		}
	}()

	for i, key := range op.Keys {
		if alias[i] != i {
			continue
		}
		sh := &s.shards[shardOf[i]]
		if _, idx := sh.find(hash[i], key); idx >= 0 {
			if sh.recs[idx].w() <= now {
				stale[i] = true
			} else {
				orig[i] = sh.state(idx)
			}
		}
		work[i] = orig[i]
		if work[i].Log != nil { // the engine may reuse the log's array
			work[i].Log = append([]engine.LogEntry(nil), work[i].Log...)
		}
	}

	limited := false
	for i := range op.Reqs {
		a := alias[i]
		if work[a].Kind != engine.KindNone && work[a].Kind != op.Reqs[i].Kind {
			res.Results = res.Results[:0]
			res.Err = ErrWrongType
			s.reclaimStale(op.Keys, shardOf, hash, alias, stale)
			return
		}
		next, r := engine.Apply(work[a], &op.Reqs[i], now)
		if next.ExpireAt <= now || next.Kind != op.Reqs[i].Kind {
			next = engine.State{} // back to fresh: the key would be deleted
		}
		work[a] = next
		limited = limited || r.Limited
		res.Results = append(res.Results, r)
	}

	if limited {
		for i := range op.Reqs {
			if res.Results[i].Limited {
				continue
			}
			peek := op.Reqs[i]
			peek.Quantity = 0
			st := orig[alias[i]]
			if st.Log != nil {
				st.Log = append([]engine.LogEntry(nil), st.Log...)
			}
			_, res.Results[i] = engine.Apply(st, &peek, now)
		}
		s.reclaimStale(op.Keys, shardOf, hash, alias, stale)
		return
	}

	changed := false
	for i, key := range op.Keys {
		if alias[i] != i {
			continue
		}
		sh := &s.shards[shardOf[i]]
		pos, idx := sh.find(hash[i], key)
		if stale[i] && idx >= 0 {
			sh.countExpired(sh.recs[idx].kind())
		}
		switch {
		case work[i].Kind != engine.KindNone:
			if idx >= 0 {
				if stale[i] || !sameState(&orig[i], &work[i]) {
					sh.set(idx, &work[i])
					changed = true
				}
			} else if err := sh.insert(hash[i], key, &work[i]); err != nil {
				res.Err = err // only beyond 4 GiB of keys in one shard
			} else {
				changed = true
			}
		case idx >= 0:
			sh.removeAt(pos, idx)
			changed = changed || !stale[i]
		}
	}
	if changed {
		s.shards[locks[0]].changes.Add(1)
	}
}

// reclaimStale deletes the expired keys execAll found (their shards locked).
func (s *Store) reclaimStale(keys [][]byte, shardOf []int, hash []uint32, alias []int, stale []bool) {
	for i, key := range keys {
		if alias[i] != i || !stale[i] {
			continue
		}
		sh := &s.shards[shardOf[i]]
		if pos, idx := sh.find(hash[i], key); idx >= 0 {
			sh.countExpired(sh.recs[idx].kind())
			sh.removeAt(pos, idx)
		}
	}
}

// insertSorted adds v to the ascending list l unless present.
func insertSorted(l []int, v int) []int {
	i := 0
	for i < len(l) && l[i] < v {
		i++
	}
	if i < len(l) && l[i] == v {
		return l
	}
	l = append(l, 0)
	copy(l[i+1:], l[i:])
	l[i] = v
	return l
}
