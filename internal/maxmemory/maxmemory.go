package maxmemory

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
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

// Monitor is maxmemory on one server: the limit in bytes (0: none) and the
// policy in force, both changeable live (CONFIG SET), and the outcome of
// the last check. Its methods are safe for concurrent use.
type Monitor struct {
	limit  atomic.Int64
	policy atomic.Int32
	oom    atomic.Bool
}

// NewMonitor returns a monitor with limit and policy in force.
func NewMonitor(limit int64, policy Policy) *Monitor {
	m := new(Monitor)
	m.SetLimit(limit)
	m.SetPolicy(policy)
	return m
}

// Limit returns the limit in force, in bytes (0: none).
func (m *Monitor) Limit() int64 { return m.limit.Load() }

// SetLimit puts limit (bytes; 0: none) in force from the next check.
func (m *Monitor) SetLimit(limit int64) { m.limit.Store(limit) }

// Policy returns the policy in force.
func (m *Monitor) Policy() Policy { return Policy(m.policy.Load()) }

// SetPolicy puts p in force from the next check.
func (m *Monitor) SetPolicy(p Policy) { m.policy.Store(int32(p)) }

// OOM reports whether the last check left the keyspace over the limit
// (Check's oom): growing writes are refused until the next check. One
// atomic load, for the hot path.
func (m *Monitor) OOM() bool { return m.oom.Load() }

// Run checks the keyspace every interval (> 0) with the limit and policy
// in force (Check, with mayEvict, ks and del), until ctx ends. done gets
// each check's deleted keys and del's failure. The server checks on a
// timer rather than per command, so that the hot path pays one atomic
// load (OOM); between two checks the keyspace can outgrow the limit by
// what new keys and growing logs take in one interval.
func (m *Monitor) Run(ctx context.Context, interval time.Duration, mayEvict func() bool, ks Keyspace, del func(keys [][]byte) (int64, error), done func(evicted int64, err error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		oom, evicted, err := Check(ctx, m.Limit(), m.Policy(), mayEvict, ks, del)
		m.oom.Store(oom)
		done(evicted, err)
	}
}
