package maxmemory

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Policy is what happens when the keyspace is over maxmemory.
type Policy int32

const (
	// NoEviction refuses limiter commands that would create a key or grow
	// one (a sliding log's new entry that needs a larger array): "OOM
	// command not allowed when used memory > 'maxmemory'.". New clients
	// fail closed; keys that exist keep limiting.
	NoEviction Policy = iota
	// VolatileTTL deletes the keys nearest to expiry until the keyspace is
	// under the limit: the limits of those keys fail open (they start
	// afresh). Every limiter key has an expiry, so every key is a candidate.
	VolatileTTL
)

// DefaultCheckInterval is how often maxmemory is checked.
const DefaultCheckInterval = 100 * time.Millisecond

// Eviction tuning: keys deleted per write, records sampled per key
// (Redis's maxmemory-samples default), and batches per check.
const (
	evictBatch   = 128
	evictSamples = 5
	evictRounds  = 256
)

// String returns the policy's redis.conf name.
func (p Policy) String() string {
	if p == VolatileTTL {
		return "volatile-ttl"
	}
	return "noeviction"
}

// ParsePolicy reads a maxmemory-policy name (noeviction, volatile-ttl).
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(s) {
	case "noeviction":
		return NoEviction, nil
	case "volatile-ttl":
		return VolatileTTL, nil
	}
	return 0, fmt.Errorf("invalid maxmemory-policy %q (want noeviction or volatile-ttl)", s)
}

// Keyspace is what a check reads of the keyspace (shards' Store).
type Keyspace interface {
	// Usage returns the live keys and the bytes they need.
	Usage() (keys, bytes int64)
	// EvictionCandidates returns up to n keys nearest to expiry, sampling
	// samples records per key.
	EvictionCandidates(n, samples int) [][]byte
}

// Check compares the keyspace with limit (bytes; 0: none) once and
// applies policy: under noeviction, or when this node may not delete
// (mayEvict false: a follower, whose leader deletes; asked only then), it only reports
// oom; under volatile-ttl it deletes candidates with del (which returns
// how many keys it deleted) in batches sized from the excess, at most
// evictRounds of them so that one check never runs long. oom is whether
// the keyspace is still over the limit (growth is to be refused until the
// next check); evicted counts the keys deleted; err is del's failure
// (oom is then true).
func Check(ctx context.Context, limit int64, policy Policy, mayEvict func() bool, ks Keyspace, del func(keys [][]byte) (int64, error)) (oom bool, evicted int64, err error) {
	if limit <= 0 {
		return false, 0, nil
	}
	keys, used := ks.Usage()
	if used <= limit {
		return false, 0, nil
	}
	if policy == NoEviction || !mayEvict() {
		return true, 0, nil
	}
	for round := 0; used > limit && round < evictRounds && ctx.Err() == nil; round++ {
		// Evict about as many keys as the excess takes, at the mean size.
		n := evictBatch
		if keys > 0 {
			n = int(min(int64(evictBatch), (used-limit)/max(used/keys, 1)+1))
		}
		cands := ks.EvictionCandidates(n, evictSamples)
		if len(cands) == 0 {
			return true, evicted, nil // nothing left to evict: refuse new keys instead
		}
		d, err := del(cands)
		evicted += d
		if err != nil {
			return true, evicted, err
		}
		keys, used = ks.Usage()
	}
	return used > limit, evicted, nil // still over after this check's rounds: refuse new keys meanwhile
}
