package shards

import (
	"errors"
	"math/bits"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/cellserver/cellserver/engine"
)

// Errors reported in Result.Err by Exec. In every case nothing changed.
var (
	// ErrWrongType is returned when an operation names a key that holds
	// another kind of limiter (the wire layer answers WRONGTYPE).
	ErrWrongType = errors.New("shards: wrong kind of limiter for the key")
	// ErrBadOp is returned for a malformed Op: an unknown code, Keys and
	// Reqs of different lengths, or a request without a valid kind.
	ErrBadOp = errors.New("shards: malformed operation")
	// ErrKeyTooLarge is returned for a key longer than MaxKeyLen bytes.
	ErrKeyTooLarge = errors.New("shards: key too large")
	// ErrShardFull is returned when a shard's keys would exceed 4 GiB, or
	// its key count 16,777,215 (the default shard count, 16 per CPU, holds
	// at least 268 million keys).
	ErrShardFull = errors.New("shards: shard key space full")
	// ErrWouldGrow is returned for an op with NoGrow set that would create
	// a key or grow a key's accounted size (the wire layer answers OOM).
	ErrWouldGrow = errors.New("shards: operation would grow the keyspace")
	// ErrBusyKey is returned by OpRestore without Replace for a key that
	// is live (the wire layer answers BUSYKEY).
	ErrBusyKey = errors.New("shards: restore target key exists")
	// ErrMoving is returned for an op naming a key in the moving set: in
	// flight to another group, neither here nor there yet (the cluster
	// answers TRYAGAIN).
	ErrMoving = errors.New("shards: key is moving to another group")
)

// Store is the sharded keyspace. All methods are safe for concurrent use;
// each key's operations are linearizable (one lock per shard), and
// OpLimitAll is atomic across the shards it touches. Besides the keyspace
// it holds the moving set (moving.go): keys taken out by OpMoveOut while a
// cluster moves them to another group.
type Store struct {
	shards    []shard
	mask      uint64
	shardBits uint
	sweepNext uint64 // next shard the sweeper visits; guarded by sweepMu
	sweepMu   chanMutex
	moving    movingSet
	// shadowed counts the shadow requests (engine.Request.Shadow) that
	// would have been limited and were answered allowed.
	shadowed atomic.Uint64
	// grantHook is told of the waiters an op granted (grant.go).
	grantHook atomic.Pointer[GrantHook]
}

// unenforce turns the limited result r of a shadow request into an allowed
// one (Shadowed, retry_after -1; every other field as computed: the state is what a
// refusal leaves, unchanged) and counts it.
func (s *Store) unenforce(r *engine.Result) {
	markShadowed(r)
	s.shadowed.Add(1)
}

// markShadowed is unenforce without the count (execAll counts once its
// results are final: a waiting op evaluates its requests more than once).
func markShadowed(r *engine.Result) {
	r.Limited = false
	r.RetryAfter = -1
	r.Shadowed = true
}

// Shadowed returns how many shadow requests would have been limited and
// were answered allowed since the store was made. Every replica applying
// the same log counts the same.
func (s *Store) Shadowed() uint64 { return s.shadowed.Load() }

// chanMutex is a try-lockable mutex so that concurrent Sweep calls do not
// queue behind each other.
type chanMutex chan struct{}

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.Shards
	if n == 0 {
		n = defaultShards()
	}
	s := &Store{
		shards:    make([]shard, n),
		mask:      uint64(n - 1),
		shardBits: uint(bits.TrailingZeros(uint(n))),
		sweepMu:   make(chanMutex, 1),
	}
	for i := range s.shards {
		s.shards[i].init()
	}
	return s, nil
}

// NumShards returns the number of shards (a power of two).
func (s *Store) NumShards() int { return len(s.shards) }

// route returns the shard of a key's hash and the in-shard hash.
func (s *Store) route(key []byte) (*shard, uint32) {
	h := xxhash.Sum64(key)
	return &s.shards[h&s.mask], uint32(h >> 32)
}

func (s *Store) shardIndex(key []byte) (int, uint32) {
	h := xxhash.Sum64(key)
	return int(h & s.mask), uint32(h >> 32)
}

// Exec applies one write operation at the instant now (Unix ns) and fills
// res, reusing res.Results' capacity. On any error in res.Err nothing
// changed and res.Results is empty.
//
// OpLimit runs Reqs[0] on Keys[0]: an expired key counts as missing, a key of
// another kind fails with ErrWrongType, and the new state is stored when its
// ExpireAt is after now and deleted otherwise. OpLimitAll runs every request
// at the same instant with the shards involved locked in ascending order; it
// commits all if all allow and none otherwise (see execAll). OpDel sets res.N
// to the number of live keys deleted. OpFlush deletes every key. With
// op.NoGrow, an OpLimit or OpLimitAll that would create a key or grow one
// fails with ErrWouldGrow instead (see Op.NoGrow). OpRestore and the moves
// are described with their codes; an op naming a moving key fails with
// ErrMoving (checked under the key's shard lock, so it cannot race a move).
func (s *Store) Exec(op *Op, now int64, res *Result) {
	res.Err = nil
	res.N = 0
	res.Results = res.Results[:0]
	switch op.Code {
	case OpLimit:
		if len(op.Keys) != 1 || len(op.Reqs) != 1 || !op.Reqs[0].Kind.Valid() {
			res.Err = ErrBadOp
			return
		}
		s.execOne(op.Keys[0], &op.Reqs[0], op.NoGrow, now, res)
	case OpLimitAll:
		if len(op.Keys) != len(op.Reqs) {
			res.Err = ErrBadOp
			return
		}
		for i := range op.Reqs {
			if !op.Reqs[i].Kind.Valid() {
				res.Err = ErrBadOp
				return
			}
		}
		s.execAll(op, now, res)
	case OpDel:
		// Read before any lock: a move racing this DEL (impossible in a
		// cluster, whose log orders both) finds the moved key absent.
		if s.moving.active() {
			res.N, res.Err = s.delChecked(op.Keys, now)
			return
		}
		res.N = s.del(op.Keys, now)
	case OpFlush:
		s.Flush()
	case OpRestore:
		if len(op.Keys) != 1 || len(op.Reqs) != 0 || !op.State.Kind.Valid() {
			res.Err = ErrBadOp
			return
		}
		res.N, res.Err = s.restore(op, now)
	case OpMoveOut:
		res.N, res.Err = s.moveOut(op.Keys, now, op.Exclusive)
	case OpMoveDone:
		res.N = s.moving.drop(op.Keys)
	case OpMoveAbort:
		res.N, res.Err = s.moveAbort(op.Keys, now)
	default:
		res.Err = ErrBadOp
	}
}

func (s *Store) execOne(key []byte, req *engine.Request, noGrow bool, now int64, res *Result) {
	if len(key) > MaxKeyLen {
		res.Err = ErrKeyTooLarge
		return
	}
	sh, h := s.route(key)
	sh.mu.Lock()
	if s.moving.active() && s.moving.has(key) {
		sh.mu.Unlock()
		res.Err = ErrMoving
		return
	}
	pos, idx := sh.find(h, key)
	var st engine.State
	expired := false
	if idx >= 0 {
		if sh.recs[idx].w() <= now {
			expired = true // reuse the record in place if the key lives on
			sh.countExpired(idx)
		} else {
			if sh.recs[idx].kind() != req.Kind {
				sh.mu.Unlock()
				res.Err = ErrWrongType
				return
			}
			st = sh.state(idx)
		}
	}
	next, r := engine.Apply(st, req, now)
	if r.Limited && req.Shadow {
		s.unenforce(&r)
	}
	if r.ExpiredLeases > 0 {
		sh.leasesExpired.Add(uint64(r.ExpiredLeases))
	}
	if noGrow && next.ExpireAt > now && next.Kind == req.Kind && grows(&st, &next) { // st is empty for a missing or expired key
		// Refused before anything is stored. The engine enlarges a log by
		// appending into a new array (it writes in place only within the
		// capacity it was given), so the stored state is intact.
		if idx >= 0 && expired {
			sh.removeAt(pos, idx)
			sh.maybeShrink()
		}
		sh.mu.Unlock()
		res.Err = ErrWouldGrow
		return
	}
	changed := true
	switch {
	case next.ExpireAt > now && next.Kind == req.Kind:
		if idx >= 0 {
			if expired || !sameState(&st, &next) {
				sh.set(idx, &next)
			} else {
				changed = false
			}
		} else if idx, res.Err = sh.insertIdx(h, key, &next); res.Err != nil {
			sh.mu.Unlock()
			return
		}
		if req.Kind != engine.KindConcurrency || req.Op == engine.LeaseAcquire {
			sh.setParams(idx, req) // a release or renew names no limit
		}
	case idx >= 0:
		sh.removeAt(pos, idx)
		changed = !expired
		sh.maybeShrink()
	default:
		changed = false
	}
	if changed {
		sh.changes.Add(1)
	}
	sh.mu.Unlock()
	res.Results = append(res.Results, r)
	if st.C > 0 && st.Kind == engine.KindConcurrency {
		s.granted(key, &st, &next, now)
	}
}

// sameState reports whether storing b over a would change nothing. A
// sliding log compares by length and its oldest and newest entries: the
// engine only ever drops old entries and appends new ones, so a log that
// changed differs in one of these.
func sameState(a, b *engine.State) bool {
	if a.Kind != b.Kind || a.ExpireAt != b.ExpireAt || a.A != b.A || a.B != b.B || a.C != b.C || len(a.Log) != len(b.Log) || len(a.Leases) != len(b.Leases) {
		return false
	}
	if len(a.Leases) > 0 && &a.Leases[0] != &b.Leases[0] {
		return false // the engine replaces the array on every change
	}
	if n := len(a.Log); n > 0 {
		return a.Log[0] == b.Log[0] && a.Log[n-1] == b.Log[n-1] && &a.Log[0] == &b.Log[0]
	}
	return true
}

func (s *Store) del(keys [][]byte, now int64) int64 {
	var n int64
	for _, key := range keys {
		sh, h := s.route(key)
		sh.mu.Lock()
		if sh.delLocked(h, key, now) {
			n++
		}
		sh.maybeShrink()
		sh.mu.Unlock()
	}
	return n
}

// delLocked deletes key (its shard locked) and reports whether it was live
// at now; the caller gives memory back (maybeShrink).
func (sh *shard) delLocked(h uint32, key []byte, now int64) bool {
	pos, idx := sh.find(h, key)
	if idx < 0 {
		return false
	}
	live := sh.recs[idx].w() > now
	if live {
		sh.changes.Add(1)
	} else {
		sh.countExpired(idx)
	}
	sh.removeAt(pos, idx)
	return live
}

// Lookup returns a copy of the state of key (its Log copied) and true when
// the key is live at now; the zero State and false when it is missing or
// expired (an expired key found is reclaimed).
func (s *Store) Lookup(key []byte, now int64) (engine.State, bool) {
	sh, h := s.route(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, idx := sh.find(h, key)
	if idx < 0 {
		return engine.State{}, false
	}
	if sh.recs[idx].w() <= now {
		sh.countExpired(idx)
		sh.removeAt(pos, idx)
		sh.maybeShrink()
		return engine.State{}, false
	}
	st := sh.state(idx)
	if st.Log != nil {
		st.Log = append([]engine.LogEntry(nil), st.Log...)
	}
	return st, true
}

// Inspect returns what Lookup does and the parameters the key was last
// used with; known is false when they are not remembered (a key restored
// from a snapshot, RESTORE or a move and not used since, or a shard whose
// table of parameter sets was full; see maxParamSets). It changes nothing
// a client can see (an expired key found is reclaimed, as by Lookup).
func (s *Store) Inspect(key []byte, now int64) (st engine.State, p Params, known, ok bool) {
	sh, h := s.route(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, idx := sh.find(h, key)
	if idx < 0 {
		return engine.State{}, Params{}, false, false
	}
	if sh.recs[idx].w() <= now {
		sh.countExpired(idx)
		sh.removeAt(pos, idx)
		sh.maybeShrink()
		return engine.State{}, Params{}, false, false
	}
	st = sh.state(idx)
	if st.Log != nil {
		st.Log = append([]engine.LogEntry(nil), st.Log...)
	}
	p, known = sh.paramsOf(idx)
	return st, p, known, true
}

// Exists returns how many of keys are live at now, counting a key named
// twice twice (Redis's EXISTS).
func (s *Store) Exists(keys [][]byte, now int64) int64 {
	var n int64
	for _, key := range keys {
		sh, h := s.route(key)
		sh.mu.Lock()
		if _, idx := sh.find(h, key); idx >= 0 && sh.recs[idx].w() > now {
			n++
		}
		sh.mu.Unlock()
	}
	return n
}

// Put stores st under key, replacing whatever was there (snapshot
// restore). The Log is copied. A state of no valid kind deletes the key; a
// key longer than MaxKeyLen (which Exec can never have stored) is ignored.
// Put does not count as a change for Changes.
func (s *Store) Put(key []byte, st engine.State) {
	if len(key) > MaxKeyLen {
		return
	}
	if st.Log != nil {
		st.Log = append([]engine.LogEntry(nil), st.Log...)
	}
	sh, h := s.route(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, idx := sh.find(h, key)
	switch {
	case !st.Kind.Valid():
		if idx >= 0 {
			sh.removeAt(pos, idx)
			sh.maybeShrink()
		}
	case idx >= 0:
		sh.set(idx, &st)
		sh.setParams(idx, nil)
	default:
		_ = sh.insert(h, key, &st) // only fails beyond 4 GiB of keys in one shard
	}
}

// Flush deletes every key (FLUSHALL) and empties the moving set,
// atomically: all shards are locked in ascending order first.
func (s *Store) Flush() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
	for i := range s.shards {
		sh := &s.shards[i]
		if sh.count > 0 {
			sh.changes.Add(1)
		}
		sh.init()
	}
	s.moving.clear()
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
}

// Len returns the number of live keys at now (DBSIZE). It first reclaims
// every expired key, a shard at a time in chunks (never a long hold of one
// lock), so its cost is O(keys); use Stats for an O(shards) figure.
func (s *Store) Len(now int64) int {
	total := 0
	for i := range s.shards {
		sh := &s.shards[i]
		for attempt := 0; ; attempt++ {
			sh.mu.Lock()
			gen := sh.gen
			sh.mu.Unlock()
			for pos, done := 0, false; !done; {
				sh.mu.Lock()
				if sh.gen != gen {
					sh.mu.Unlock()
					break
				}
				pos, _, _ = sh.reclaim(pos, reclaimChunk, reclaimChunk, now)
				done = pos >= len(sh.recs)
				sh.mu.Unlock()
			}
			sh.mu.Lock()
			if sh.gen == gen || attempt >= 3 {
				// No record moved during the pass: every key expired at
				// now has been reclaimed, so count is exact.
				total += sh.count
				sh.maybeShrink()
				sh.mu.Unlock()
				break
			}
			sh.mu.Unlock()
		}
	}
	return total
}

// reclaimChunk bounds the records examined under one lock hold by Len and Sweep.
const reclaimChunk = 1024

// Stats describes the store at one moment.
type Stats struct {
	// Keys is the number of keys held, including keys expired but not yet
	// reclaimed (as Redis's INFO keyspace counts them).
	Keys int64
	// KeysByKind is Keys by limiter kind, indexed by engine.Kind.
	KeysByKind [8]int64
	// Expired is the total number of expired keys reclaimed, lazily on
	// access or by the sweeper, since the store was created.
	Expired uint64
	// ExpiredByKind is Expired by limiter kind, indexed by engine.Kind.
	ExpiredByKind [8]uint64
	// Leases is the number of leases the concurrency keys hold (those
	// expired but not yet reclaimed included).
	Leases int64
	// LeasesExpired counts the leases freed because their ttl passed
	// without CC.RELEASE or CC.RENEW (a holder that crashed or forgot).
	LeasesExpired uint64
	// Bytes approximates the memory held by the store's tables, records,
	// key bytes and side tables.
	Bytes int64
	// AvgTTL is the mean time to live left, in milliseconds, of a sample
	// of the keys not yet expired (at most ttlSample records per shard);
	// 0 when the sample holds none. An estimate, as Redis's avg_ttl.
	AvgTTL int64
}

// ttlSample bounds the records Stats examines per shard for AvgTTL, so that
// INFO stays O(shards).
const ttlSample = 16

// Stats returns counters summed over the shards (each read under its lock;
// O(shards), plus O(keys) of non-compact kinds for Bytes). now is Unix
// nanoseconds.
func (s *Store) Stats(now int64) Stats {
	var st Stats
	var ttlSum, ttlN int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sum, n := sh.sampleTTL(now)
		ttlSum, ttlN = ttlSum+sum, ttlN+n
		st.Keys += int64(sh.count)
		for k, n := range sh.byKind {
			st.KeysByKind[k] += int64(n)
		}
		st.Bytes += sh.bytes()
		st.Leases += sh.leases
		sh.mu.Unlock()
		st.Expired += sh.expired.Load()
		st.LeasesExpired += sh.leasesExpired.Load()
		for k := range sh.expiredByKind {
			st.ExpiredByKind[k] += sh.expiredByKind[k].Load()
		}
	}
	if ttlN > 0 {
		st.AvgTTL = ttlSum / ttlN / 1e6 // ns to ms
	}
	return st
}

// sampleTTL returns the sum (ns) and number of the times to live left at
// now of up to ttlSample live, unexpired records among at most 4*ttlSample
// slots, read from a position that moves with now so that successive calls
// see different keys. The caller holds sh.mu.
func (sh *shard) sampleTTL(now int64) (sum, n int64) {
	if sh.count == 0 || len(sh.recs) == 0 {
		return 0, 0
	}
	start := int(uint64(now) % uint64(len(sh.recs)))
	for j, seen := 0, 0; j < len(sh.recs) && j < 4*ttlSample && seen < ttlSample; j++ {
		r := &sh.recs[(start+j)%len(sh.recs)]
		if !r.live() {
			continue
		}
		seen++
		if w := r.w(); w > now {
			sum += w - now
			n++
		}
	}
	return sum, n
}

// Changes returns the total number of write operations applied that changed
// something (Redis's rdb_changes_since_last_save is its difference from the
// value at the last save). It never decreases.
func (s *Store) Changes() uint64 {
	var n uint64
	for i := range s.shards {
		n += s.shards[i].changes.Load()
	}
	return n
}
