package shards

import (
	"strconv"
	"testing"
	"time"
)

// TestStatsAvgTTL: Stats estimates the mean time to live left, in ms, of
// the keys not yet expired (INFO keyspace's avg_ttl).
func TestStatsAvgTTL(t *testing.T) {
	tests := []struct {
		name    string
		windows map[time.Duration]int // FW.INCR window → keys created at t0
		at      time.Duration         // Stats at t0+at
		want    int64
	}{
		{"empty", nil, 0, 0},
		{"one window", map[time.Duration]int{60 * time.Second: 40}, 10 * time.Second, 50000},
		{"two windows", map[time.Duration]int{20 * time.Second: 20, 60 * time.Second: 20}, 0, 40000},
		{"expired keys left out", map[time.Duration]int{20 * time.Second: 20, 60 * time.Second: 20}, 30 * time.Second, 30000},
		{"all expired", map[time.Duration]int{time.Second: 10}, 2 * time.Second, 0},
		{"sampled", map[time.Duration]int{90 * time.Second: 50000}, 0, 90000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 4)
			i := 0
			for w, n := range tc.windows {
				for range n {
					exec(t, s, limitOp("k"+strconv.Itoa(i), fw(5, w, 1)), t0)
					i++
				}
			}
			if got := s.Stats(t0 + int64(tc.at)).AvgTTL; got != tc.want {
				t.Errorf("AvgTTL = %d ms, want %d", got, tc.want)
			}
		})
	}
}
