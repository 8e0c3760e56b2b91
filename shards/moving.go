package shards

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/engine"
)

// Key moves. When a cluster moves keys to another group (MIGRATE), the
// source takes each key out of its keyspace into the moving set (OpMoveOut)
// until the target has it (OpMoveDone) or the move failed (OpMoveAbort,
// which puts it back). Meanwhile the key is absent for every read and every
// write naming it fails with ErrMoving, so neither group can change it: its
// state exists exactly once, whatever the outcome.
//
// Lock order: a shard's lock, then the moving set's. Every change that adds
// a key to the set holds that key's shard lock, so a write that checks the
// set under the same shard lock cannot interleave with the key's move.

// movingSet is the set of keys in flight, with their states. Safe for
// concurrent use (its own mutex). The states it holds are owned by it: logs
// are copied in and out, never shared.
type movingSet struct {
	// n is len(m), kept so that the hot path reads one atomic word, and
	// takes no lock, while nothing is moving (nearly always).
	n  atomic.Int64
	mu sync.Mutex
	m  map[string]engine.State
}

// active reports whether any key is moving.
func (ms *movingSet) active() bool { return ms.n.Load() != 0 }

// has reports whether key is moving.
func (ms *movingSet) has(key []byte) bool {
	ms.mu.Lock()
	_, ok := ms.m[string(key)]
	ms.mu.Unlock()
	return ok
}

// hasAny reports whether any of keys is moving.
func (ms *movingSet) hasAny(keys [][]byte) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, k := range keys {
		if _, ok := ms.m[string(k)]; ok {
			return true
		}
	}
	return false
}

// get returns key's moving state (not a copy) and whether it is moving.
func (ms *movingSet) get(key []byte) (engine.State, bool) {
	ms.mu.Lock()
	st, ok := ms.m[string(key)]
	ms.mu.Unlock()
	return st, ok
}

// take removes key from the set and returns its state, if it was there.
func (ms *movingSet) take(key []byte) (engine.State, bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	st, ok := ms.m[string(key)]
	if ok {
		delete(ms.m, string(key))
		ms.n.Store(int64(len(ms.m)))
	}
	return st, ok
}

// add installs key with st, which the set then owns.
func (ms *movingSet) add(key []byte, st engine.State) {
	ms.mu.Lock()
	if ms.m == nil {
		ms.m = make(map[string]engine.State)
	}
	ms.m[string(key)] = st
	ms.n.Store(int64(len(ms.m)))
	ms.mu.Unlock()
}

// drop removes keys from the set and returns how many were in it.
func (ms *movingSet) drop(keys [][]byte) int64 {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var n int64
	for _, k := range keys {
		if _, ok := ms.m[string(k)]; ok {
			delete(ms.m, string(k))
			n++
		}
	}
	ms.n.Store(int64(len(ms.m)))
	return n
}

// clear empties the set.
func (ms *movingSet) clear() {
	ms.mu.Lock()
	ms.m = nil
	ms.n.Store(0)
	ms.mu.Unlock()
}

// copyLog returns st with its log in a fresh array.
func copyLog(st engine.State) engine.State {
	if st.Log != nil {
		st.Log = append([]engine.LogEntry(nil), st.Log...)
	}
	return st
}

// moveOut runs OpMoveOut: every live key of keys leaves the keyspace for
// the moving set. It returns how many of keys are moving afterwards
// (counting a key named twice twice). exclusive refuses the op with
// ErrMoving, changing nothing, when a key is moving already.
func (s *Store) moveOut(keys [][]byte, now int64, exclusive bool) (int64, error) {
	if exclusive && s.moving.active() {
		for _, key := range keys {
			sh, _ := s.route(key)
			sh.mu.Lock()
			busy := s.moving.has(key)
			sh.mu.Unlock()
			if busy {
				return 0, ErrMoving
			}
		}
	}
	var n int64
	for _, key := range keys {
		if len(key) > MaxKeyLen {
			continue // never stored
		}
		sh, h := s.route(key)
		sh.mu.Lock()
		if s.moving.active() && s.moving.has(key) {
			n++
		} else if pos, idx := sh.find(h, key); idx >= 0 {
			if sh.recs[idx].w() > now {
				s.moving.add(key, copyLog(sh.state(idx)))
				sh.changes.Add(1)
				n++
			} else {
				sh.countExpired(idx)
			}
			sh.removeAt(pos, idx)
			sh.maybeShrink()
		}
		sh.mu.Unlock()
	}
	return n, nil
}

// moveAbort runs OpMoveAbort: every key of keys in the moving set goes
// back into the keyspace, overwriting a key created meanwhile (the moving
// state is the one the client last saw), and leaves the set. A state that
// expired meanwhile leaves the key absent. It returns how many keys left
// the set; an insert beyond a shard's capacity stops it with the error,
// that key still moving.
func (s *Store) moveAbort(keys [][]byte, now int64) (int64, error) {
	var n int64
	for _, key := range keys {
		if !s.moving.active() {
			break
		}
		sh, h := s.route(key)
		sh.mu.Lock()
		// Taken out under the shard lock: no write to the key can run
		// until it is back, and a concurrent OpMoveDone finds it gone.
		if st, ok := s.moving.take(key); ok {
			if err := sh.putBack(h, key, &st, now); err != nil {
				s.moving.add(key, st)
				sh.mu.Unlock()
				return n, err
			}
			sh.changes.Add(1)
			n++
		}
		sh.mu.Unlock()
	}
	return n, nil
}

// putBack stores st under key (its shard locked), replacing whatever is
// there, or deletes the key when st has expired at now.
func (sh *shard) putBack(h uint32, key []byte, st *engine.State, now int64) error {
	pos, idx := sh.find(h, key)
	switch {
	case st.ExpireAt <= now:
		if idx >= 0 {
			sh.removeAt(pos, idx)
			sh.maybeShrink()
		}
		return nil
	case idx >= 0:
		sh.set(idx, st)
		sh.setParams(idx, nil)
		return nil
	default:
		return sh.insert(h, key, st)
	}
}

// restore runs OpRestore (see its doc) and returns 1 when the key was
// stored.
func (s *Store) restore(op *Op, now int64) (_ int64, err error) {
	key := op.Keys[0]
	if len(key) > MaxKeyLen {
		return 0, ErrKeyTooLarge
	}
	sh, h := s.route(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// A key in flight out of here that is restored here came back: the
	// restored state is the key's (its move landed elsewhere and was sent
	// back), and the stale copy of the moving set goes once it is stored.
	if s.moving.active() && s.moving.has(key) {
		defer func() {
			if err == nil {
				s.moving.take(key)
				sh.changes.Add(1)
			}
		}()
	}
	pos, idx := sh.find(h, key)
	if idx >= 0 && sh.recs[idx].w() <= now {
		// Expired: reclaimed first, so that what follows sees a
		// missing key. That changes nothing a client can see.
		sh.countExpired(idx)
		sh.removeAt(pos, idx)
		sh.maybeShrink()
		pos, idx = sh.find(h, key)
	}
	var old engine.State
	if idx >= 0 {
		if !op.Replace {
			return 0, ErrBusyKey
		}
		old = sh.state(idx)
	}
	st := op.State
	if st.ExpireAt <= now {
		// Nothing to store, as a snapshot load drops an expired record;
		// REPLACE still deletes the key it names.
		if idx >= 0 {
			sh.removeAt(pos, idx)
			sh.maybeShrink()
			sh.changes.Add(1)
		}
		return 0, nil
	}
	if op.NoGrow && grows(&old, &st) {
		return 0, ErrWouldGrow
	}
	st = copyLog(st) // the op's state may alias a decoded log entry
	if idx >= 0 {
		sh.set(idx, &st)
		sh.setParams(idx, nil) // a restored state's parameters are unknown
	} else if err := sh.insert(h, key, &st); err != nil {
		return 0, err
	}
	sh.changes.Add(1)
	return 1, nil
}

// delChecked runs OpDel while keys are moving: the shards of keys are
// locked together (ascending), so that the op fails as a whole with
// ErrMoving, deleting nothing, when it names a moving key, and no move
// interleaves between the check and the deletions.
func (s *Store) delChecked(keys [][]byte, now int64) (int64, error) {
	locks := make([]int, 0, len(keys))
	for _, key := range keys {
		si, _ := s.shardIndex(key)
		locks = append(locks, si)
	}
	slices.Sort(locks)
	locks = slices.Compact(locks)
	s.lockShards(locks)
	defer s.unlockShards(locks)
	if s.moving.hasAny(keys) {
		return 0, ErrMoving
	}
	var n int64
	for _, key := range keys {
		sh, h := s.route(key)
		if sh.delLocked(h, key, now) {
			n++
		}
	}
	return n, nil
}

// Moving returns a copy of key's state (its Log copied) and true when key
// is in the moving set; the zero State and false otherwise. Moving keys
// are absent for Lookup, Exists, Len, Scan and Capture.
func (s *Store) Moving(key []byte) (engine.State, bool) {
	if !s.moving.active() {
		return engine.State{}, false
	}
	st, ok := s.moving.get(key)
	return copyLog(st), ok
}

// MovingKeys calls fn for every key of the moving set, in ascending key
// order, with a copy of its key and state, until fn returns false. It
// iterates over a copy taken at one instant, so fn may call any Store
// method (GETKEYSINSLOT, raft snapshots).
func (s *Store) MovingKeys(fn func(key []byte, st engine.State) bool) {
	if !s.moving.active() {
		return
	}
	s.moving.mu.Lock()
	es := make([]Entry, 0, len(s.moving.m))
	for k, st := range s.moving.m {
		es = append(es, Entry{Key: []byte(k), State: copyLog(st)})
	}
	s.moving.mu.Unlock()
	slices.SortFunc(es, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
	for _, e := range es {
		if !fn(e.Key, e.State) {
			return
		}
	}
}

// SetMoving installs key in the moving set with st (its Log copied),
// taking the key out of the keyspace if it is there: restoring a raft
// snapshot that holds keys in flight. A state of no valid kind, or a key
// longer than MaxKeyLen, is ignored.
func (s *Store) SetMoving(key []byte, st engine.State) {
	if !st.Kind.Valid() || len(key) > MaxKeyLen {
		return
	}
	sh, h := s.route(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if pos, idx := sh.find(h, key); idx >= 0 {
		sh.removeAt(pos, idx)
		sh.maybeShrink()
	}
	s.moving.add(key, copyLog(st))
}
