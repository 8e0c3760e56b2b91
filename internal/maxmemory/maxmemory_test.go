package maxmemory

import (
	"context"
	"errors"
	"testing"
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
