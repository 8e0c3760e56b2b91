package maxmemory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// keyspace is a keyspace of n keys of size bytes each, nearest to expiry
// first.
type keyspace struct{ n, size int64 }

func (k *keyspace) Usage() (int64, int64) { return k.n, k.n * k.size }

func (k *keyspace) EvictionCandidates(n, _ int) [][]byte {
	out := make([][]byte, min(int64(n), k.n))
	for i := range out {
		out[i] = []byte("k")
	}
	return out
}

// TestCheck checks each policy's outcome and that volatile-ttl deletes
// about the excess.
func TestCheck(t *testing.T) {
	yes := func() bool { return true }
	for _, tc := range []struct {
		name        string
		limit       int64
		policy      Policy
		mayEvict    func() bool
		keys        int64
		delErr      error
		oom         bool
		evicted     int64
		wantErr     bool
		keysLeftMax int64
	}{
		{"no limit", 0, VolatileTTL, yes, 100, nil, false, 0, false, 100},
		{"under", 1000, VolatileTTL, yes, 10, nil, false, 0, false, 10},
		{"noeviction over", 500, NoEviction, yes, 100, nil, true, 0, false, 100},
		{"follower over", 500, VolatileTTL, func() bool { return false }, 100, nil, true, 0, false, 100},
		{"volatile-ttl over", 500, VolatileTTL, yes, 100, nil, false, 51, false, 50}, // the excess at the mean size, plus one
		{"delete fails", 500, VolatileTTL, yes, 100, errors.New("no leader"), true, 0, true, 100},
	} {
		ks := &keyspace{n: tc.keys, size: 10}
		oom, evicted, err := Check(context.Background(), tc.limit, tc.policy, tc.mayEvict, ks, func(keys [][]byte) (int64, error) {
			if tc.delErr != nil {
				return 0, tc.delErr
			}
			ks.n -= int64(len(keys))
			return int64(len(keys)), nil
		})
		if oom != tc.oom || evicted != tc.evicted || (err != nil) != tc.wantErr || ks.n > tc.keysLeftMax {
			t.Errorf("%s: oom %v, evicted %d, err %v, %d keys left; want %v, %d, error %v, at most %d left",
				tc.name, oom, evicted, err, ks.n, tc.oom, tc.evicted, tc.wantErr, tc.keysLeftMax)
		}
	}
	if p, err := ParsePolicy("VOLATILE-TTL"); err != nil || p != VolatileTTL || p.String() != "volatile-ttl" {
		t.Errorf("ParsePolicy(VOLATILE-TTL) = %v, %v", p, err)
	}
	if _, err := ParsePolicy("allkeys-lru"); err == nil {
		t.Error("ParsePolicy(allkeys-lru) accepted")
	}
}

// TestMonitorRun: the monitor's checks use the limit and policy in force
// (changed while it runs) and publish OOM and the deletions.
func TestMonitorRun(t *testing.T) {
	ks := &keyspace{n: 100, size: 10} // 1000 bytes
	m := NewMonitor(500, NoEviction)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var evicted int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.Run(ctx, time.Millisecond, func() bool { return true }, lockedKeyspace{&mu, ks}, func(keys [][]byte) (int64, error) {
			mu.Lock()
			defer mu.Unlock()
			ks.n -= int64(len(keys))
			return int64(len(keys)), nil
		}, func(n int64, err error) {
			mu.Lock()
			defer mu.Unlock()
			evicted += n
		})
	}()
	poll.Until(t, 10*time.Second, func() error {
		if !m.OOM() {
			return errors.New("over the limit under noeviction, OOM is false")
		}
		return nil
	})
	m.SetPolicy(VolatileTTL)
	poll.Until(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if m.OOM() || evicted < 50 {
			return fmt.Errorf("volatile-ttl: OOM %v, %d evicted; want false, at least 50", m.OOM(), evicted)
		}
		return nil
	})
	m.SetLimit(0)
	if m.Limit() != 0 || m.Policy() != VolatileTTL {
		t.Errorf("Limit %d, Policy %v; want 0, volatile-ttl", m.Limit(), m.Policy())
	}
	cancel()
	<-stopped
}

// lockedKeyspace reads a keyspace under mu (the test's deletions change it).
type lockedKeyspace struct {
	mu *sync.Mutex
	ks *keyspace
}

func (l lockedKeyspace) Usage() (int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ks.Usage()
}

func (l lockedKeyspace) EvictionCandidates(n, s int) [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ks.EvictionCandidates(n, s)
}
