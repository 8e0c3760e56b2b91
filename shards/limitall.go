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

// allPlan is execAll's view of one OpLimitAll, indexed like its keys: where
// each key lives, which earlier key it repeats, the shards to lock and each
// key's stored and working state.
type allPlan struct {
	shardOf []int          // the key's shard
	alias   []int          // the index of the key's first occurrence
	locks   []int          // the shards involved, ascending
	hash    []uint32       // the key's hash within its shard
	stale   []bool         // the stored key has expired (first occurrences only)
	orig    []engine.State // the stored state at now (first occurrences only)
	work    []engine.State // the state the requests so far leave (first occurrences only)
}

// execAll runs OpLimitAll (CL.THROTTLEALL). The shards involved are locked in
// ascending index order, so concurrent calls naming keys in any order never
// deadlock. Every request is evaluated at now, in order, against a working
// copy of its key's state, so a key named twice has both quantities counted
// against it. If every request allows, every key's final working state is
// committed. If any limits, nothing is: each refusing request reports its own
// limited result and each allowing one reports what a peek (quantity 0) of its
// key answers at now. A key of another kind fails the whole op with
// ErrWrongType. With op.NoGrow, an op that would commit a new key or a
// larger state fails with ErrWouldGrow, committing nothing.
//
// Waiting (CL.THROTTLEALL … WAIT): an op whose requests all carry a Wait
// and that some request refuses at now is admitted as a whole at the
// first instant t <= now + Wait at which every request allows (waitAll):
// every key's state is the one the same op arriving at t writes, and
// every result is its allowed reply at t with Delay = t − now. Each key
// is reserved at that one instant, so the keys wait together; when no
// such t is found, the op is refused at now as without Wait, consuming
// nothing. Requests never reserve one by one (evalAll applies them
// without their Wait).
func (s *Store) execAll(op *Op, now int64, res *Result) {
	if len(op.Keys) == 0 {
		return
	}
	var sc allScratch
	p := newAllPlan(len(op.Keys), &sc)
	var err error
	if p.locks, err = s.planAll(op.Keys, &p); err != nil {
		res.Err = err
		return
	}
	s.lockShards(p.locks)
	defer s.unlockShards(p.locks)
	if s.moving.active() && s.moving.hasAny(op.Keys) {
		res.Err = ErrMoving
		return
	}

	s.loadAll(op.Keys, now, &p)
	limited, err := evalAll(op, now, &p, res)
	if limited && err == nil {
		if at, ok := waitAll(op, now, &p, res); ok {
			limited = false
			for i := range res.Results {
				res.Results[i].Delay = at - now
			}
		} else if at != now { // the tries overwrote the results at now
			resetWork(&p)
			res.Results = res.Results[:0]
			limited, err = evalAll(op, now, &p, res)
		}
	}
	if err == nil {
		s.countShadowed(res)
	}
	switch {
	case err != nil:
		res.Results = res.Results[:0]
		res.Err = err
		s.reclaimStale(op.Keys, &p)
	case limited:
		peekAllowed(op, now, &p, res)
		s.reclaimStale(op.Keys, &p)
	case op.NoGrow && growsAll(&p):
		res.Results = res.Results[:0]
		res.Err = ErrWouldGrow
		s.reclaimStale(op.Keys, &p)
	default:
		s.commitAll(op.Keys, op.Reqs, &p, res)
	}
}

// newAllPlan returns a plan for n keys, backed by sc when n is small enough.
func newAllPlan(n int, sc *allScratch) allPlan {
	if n <= smallAll {
		return allPlan{
			shardOf: sc.shardOf[:n], alias: sc.alias[:n], locks: sc.locks[:0],
			hash: sc.hash[:n], stale: sc.stale[:n],
			orig: sc.orig[:n], work: sc.work[:n],
		}
	}
	return allPlan{
		shardOf: make([]int, n), alias: make([]int, n), locks: make([]int, 0, n),
		hash: make([]uint32, n), stale: make([]bool, n),
		orig: make([]engine.State, n), work: make([]engine.State, n),
	}
}

// planAll resolves every key's shard and hash, points each repeated key at
// its first occurrence, and returns the shards to lock in ascending order
// (appended to p.locks). It fails with ErrKeyTooLarge before anything is
// locked.
func (s *Store) planAll(keys [][]byte, p *allPlan) ([]int, error) {
	// Returned rather than stored in p, so that the scratch behind it stays
	// on execAll's stack.
	locks := p.locks
	for i, key := range keys {
		if len(key) > MaxKeyLen {
			return nil, ErrKeyTooLarge
		}
		p.shardOf[i], p.hash[i] = s.shardIndex(key)
		p.alias[i] = i
		for j := 0; j < i; j++ {
			if p.alias[j] == j && p.shardOf[j] == p.shardOf[i] && p.hash[j] == p.hash[i] && bytes.Equal(keys[j], key) {
				p.alias[i] = j
				break
			}
		}
		locks = insertSorted(locks, p.shardOf[i])
	}
	return locks, nil
}

// lockShards locks the shards of locks, which is in ascending order.
func (s *Store) lockShards(locks []int) {
	for _, si := range locks {
		s.shards[si].mu.Lock()
	}
}

// unlockShards gives back the memory the op freed and unlocks the shards.
func (s *Store) unlockShards(locks []int) {
	for _, si := range locks {
		sh := &s.shards[si]
		sh.maybeShrink()
		sh.mu.Unlock()
	}
}

// loadAll reads each distinct key's stored state at now into p.orig (marking
// expired ones stale and leaving them fresh) and copies it into p.work.
func (s *Store) loadAll(keys [][]byte, now int64, p *allPlan) {
	for i, key := range keys {
		if p.alias[i] != i {
			continue
		}
		sh := &s.shards[p.shardOf[i]]
		if _, idx := sh.find(p.hash[i], key); idx >= 0 {
			if sh.recs[idx].w() <= now {
				p.stale[i] = true
			} else {
				p.orig[i] = sh.state(idx)
			}
		}
		p.work[i] = origCopy(p, i)
	}
}

// origCopy returns a copy of key i's stored state that the engine may modify.
func origCopy(p *allPlan, i int) engine.State {
	st := p.orig[i]
	if st.Log != nil { // the engine may reuse the log's array
		st.Log = append([]engine.LogEntry(nil), st.Log...)
	}
	return st
}

// evalAll applies every request in order to its key's working state at
// at, without its Wait (the op waits as a whole: waitAll), appending the
// results to res, and reports whether any request limited. A shadow
// request's refusal is answered allowed (Result.Shadowed, counted by the
// caller once the results are final). A key of another kind stops it with
// ErrWrongType.
func evalAll(op *Op, at int64, p *allPlan, res *Result) (limited bool, err error) {
	for i := range op.Reqs {
		a := p.alias[i]
		if p.work[a].Kind != engine.KindNone && p.work[a].Kind != op.Reqs[i].Kind {
			return false, ErrWrongType
		}
		req := &op.Reqs[i]
		if req.Wait != 0 {
			plain := *req
			plain.Wait = 0
			req = &plain
		}
		next, r := engine.Apply(p.work[a], req, at)
		if next.ExpireAt <= at || next.Kind != req.Kind {
			next = engine.State{} // back to fresh: the key would be deleted
		}
		p.work[a] = next
		if r.Limited && req.Shadow {
			markShadowed(&r) // a limited request left the working state as it was
		}
		limited = limited || r.Limited
		res.Results = append(res.Results, r)
	}
	return limited, nil
}

// waitAll looks for the first instant at which every request of op allows,
// op having been refused at now (res holds those results): t = now + the
// largest RetryAfter of the refusals, tried again from the stored states
// while some request still refuses (a key named twice may need more than
// its first refusal said) and t stays within the op's wait. It reports t
// and true with p.work and res as of t, or the last instant tried and
// false (p.work and res as of it: the caller evaluates now again when it
// is not now). GCRA admits at any instant after one at which it admits,
// so the first t found admits every key; the tries are bounded by the
// number of requests and a few more.
func waitAll(op *Op, now int64, p *allPlan, res *Result) (int64, bool) {
	wait := opWait(op)
	at := now
	for try := 0; try < len(op.Reqs)+3 && wait > 0; try++ {
		ahead := int64(0)
		for i := range res.Results {
			if r := &res.Results[i]; r.Limited {
				if r.RetryAfter <= 0 {
					return at, false // never, whatever the wait
				}
				ahead = max(ahead, r.RetryAfter)
			}
		}
		if ahead > wait-(at-now) {
			return at, false
		}
		at += ahead
		resetWork(p)
		res.Results = res.Results[:0]
		if limited, _ := evalAll(op, at, p, res); !limited {
			return at, true
		}
	}
	return at, false
}

// opWait returns how long op may wait: the smallest Wait of its requests
// (CL.THROTTLEALL gives them one), 0 when one has none.
func opWait(op *Op) int64 {
	wait := int64(0)
	for i := range op.Reqs {
		w := op.Reqs[i].Wait
		if w <= 0 {
			return 0
		}
		if i == 0 || w < wait {
			wait = w
		}
	}
	return wait
}

// resetWork copies every distinct key's stored state into p.work again.
func resetWork(p *allPlan) {
	for i := range p.work {
		if p.alias[i] == i {
			p.work[i] = origCopy(p, i)
		}
	}
}

// countShadowed counts the shadow requests of res answered allowed.
func (s *Store) countShadowed(res *Result) {
	for i := range res.Results {
		if res.Results[i].Shadowed {
			s.shadowed.Add(1)
		}
	}
}

// growsAll reports whether committing p would create a key (one missing or
// expired) or grow a stored key's accounted size.
func growsAll(p *allPlan) bool {
	for i := range p.work {
		if p.alias[i] != i || p.work[i].Kind == engine.KindNone {
			continue
		}
		if p.stale[i] || grows(&p.orig[i], &p.work[i]) {
			return true
		}
	}
	return false
}

// peekAllowed replaces the result of every request that allowed with what a
// peek (quantity 0) of its key's stored state answers at now.
func peekAllowed(op *Op, now int64, p *allPlan, res *Result) {
	for i := range op.Reqs {
		if res.Results[i].Limited {
			continue
		}
		peek := op.Reqs[i]
		peek.Quantity = 0
		_, res.Results[i] = engine.Apply(origCopy(p, p.alias[i]), &peek, now)
	}
}

// commitAll writes every distinct key's working state back (deleting the
// keys it leaves fresh) and counts one change if anything visible changed.
func (s *Store) commitAll(keys [][]byte, reqs []engine.Request, p *allPlan, res *Result) {
	changed := false
	for i, key := range keys {
		if p.alias[i] == i && s.commitKey(key, reqs, i, p, res) {
			changed = true
		}
	}
	if changed {
		s.shards[p.locks[0]].changes.Add(1)
	}
}

// commitKey writes key i's working state back, with the parameters of the
// first request naming it, and reports whether that changed what a client
// can see. An insert beyond a shard's capacity sets
// res.Err.
func (s *Store) commitKey(key []byte, reqs []engine.Request, i int, p *allPlan, res *Result) bool {
	sh := &s.shards[p.shardOf[i]]
	pos, idx := sh.find(p.hash[i], key)
	if p.stale[i] && idx >= 0 {
		sh.countExpired(idx)
	}
	switch {
	case p.work[i].Kind != engine.KindNone:
		if idx < 0 {
			idx, err := sh.insertIdx(p.hash[i], key, &p.work[i])
			if err != nil {
				res.Err = err // only beyond 4 GiB of keys in one shard
				return false
			}
			sh.setParams(idx, &reqs[i])
			return true
		}
		sh.setParams(idx, &reqs[i])
		if p.stale[i] || !sameState(&p.orig[i], &p.work[i]) {
			sh.set(idx, &p.work[i])
			return true
		}
	case idx >= 0:
		sh.removeAt(pos, idx)
		return !p.stale[i]
	}
	return false
}

// reclaimStale deletes the expired keys execAll found (their shards locked).
func (s *Store) reclaimStale(keys [][]byte, p *allPlan) {
	for i, key := range keys {
		if p.alias[i] != i || !p.stale[i] {
			continue
		}
		sh := &s.shards[p.shardOf[i]]
		if pos, idx := sh.find(p.hash[i], key); idx >= 0 {
			sh.countExpired(idx)
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
