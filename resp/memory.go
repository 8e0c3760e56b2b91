package resp

import (
	"fmt"
	"strings"
	"time"

	"github.com/cellserver/cellserver/shards"
)

// maxmemory. The server checks the keyspace's memory (shards'
// Store.UsedBytes: records, key bytes and sliding logs of the live keys) on
// a timer rather than per command, so that the hot path pays one atomic
// load. Between two checks the keyspace can outgrow the limit by what new
// keys and growing logs take in one interval.

// MemoryPolicy is what happens when the keyspace is over maxmemory.
type MemoryPolicy int32

const (
	// NoEviction refuses limiter commands that would create a key or grow
	// one (a sliding log's new entry that needs a larger array): "OOM
	// command not allowed when used memory > 'maxmemory'.". New clients
	// fail closed; keys that exist keep limiting.
	NoEviction MemoryPolicy = iota
	// VolatileTTL deletes the keys nearest to expiry until the keyspace is
	// under the limit: the limits of those keys fail open (they start
	// afresh). Every limiter key has an expiry, so every key is a candidate.
	VolatileTTL
)

// DefaultMemoryCheckInterval is how often maxmemory is checked.
const DefaultMemoryCheckInterval = 100 * time.Millisecond

// Eviction tuning: keys deleted per write and records sampled per key
// (Redis's maxmemory-samples default).
const (
	evictBatch   = 128
	evictSamples = 5
	evictRounds  = 256
)

// String returns the policy's redis.conf name.
func (p MemoryPolicy) String() string {
	if p == VolatileTTL {
		return "volatile-ttl"
	}
	return "noeviction"
}

// ParseMemoryPolicy reads a maxmemory-policy name (noeviction, volatile-ttl).
func ParseMemoryPolicy(s string) (MemoryPolicy, error) {
	switch strings.ToLower(s) {
	case "noeviction":
		return NoEviction, nil
	case "volatile-ttl":
		return VolatileTTL, nil
	}
	return 0, fmt.Errorf("invalid maxmemory-policy %q (want noeviction or volatile-ttl)", s)
}

// memoryLoop enforces maxmemory until the server's context ends.
func (s *Server) memoryLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.cfg.MemoryCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.checkMemory()
	}
}

// checkMemory compares the keyspace with maxmemory once and applies the
// policy.
func (s *Server) checkMemory() {
	limit := s.maxMemory.Load()
	if limit <= 0 {
		s.oom.Store(false)
		return
	}
	store := s.backend.Store()
	keys, used := store.Usage()
	if used <= limit {
		s.oom.Store(false)
		return
	}
	if MemoryPolicy(s.policy.Load()) == NoEviction || !s.mayEvict() {
		s.oom.Store(true)
		return
	}
	// Evict in batches until under the limit; with nothing left to evict,
	// refuse new keys instead.
	var ops [1]shards.Op
	var res [1]shards.Result
	// At most evictRounds batches per check, so that one check never holds
	// the loop for long; the next check continues.
	for round := 0; used > limit && round < evictRounds && s.ctx.Err() == nil; round++ {
		// Evict about as many keys as the excess takes, at the mean size.
		n := evictBatch
		if keys > 0 {
			n = int(min(int64(evictBatch), (used-limit)/max(used/keys, 1)+1))
		}
		cands := store.EvictionCandidates(n, evictSamples)
		if len(cands) == 0 {
			s.oom.Store(true)
			return
		}
		ops[0] = shards.Op{Code: shards.OpDel, Keys: cands}
		if err := s.backend.Write(s.ctx, ops[:], res[:]); err != nil {
			s.log.Warn("maxmemory: eviction failed", "err", err)
			s.oom.Store(true)
			return
		}
		s.stats.evicted.Add(res[0].N)
		keys, used = store.Usage()
	}
	s.oom.Store(used > limit) // still over after this check's rounds: refuse new keys meanwhile
}

// mayEvict reports whether this node deletes keys for maxmemory: a
// standalone server, or a cluster's leader (followers apply its deletions).
func (s *Server) mayEvict() bool {
	return s.cfg.Cluster == nil || s.cfg.Cluster.Role().Leader
}

// markNoGrow sets op.NoGrow when the noeviction policy applies: the
// keyspace is over maxmemory and op is a limiter op. The keyspace then
// refuses the op, under the key's lock, exactly when it would create a key
// or grow one (a sliding log that must enlarge its array), answered as OOM;
// fixed-size updates, denials and peeks go on (see DESIGN.md).
func (c *Conn) markNoGrow(op *shards.Op) {
	op.NoGrow = c.srv.oom.Load() && (op.Code == shards.OpLimit || op.Code == shards.OpLimitAll || op.Code == shards.OpRestore)
}
