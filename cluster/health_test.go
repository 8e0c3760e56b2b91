package cluster

import (
	"testing"
	"time"
)

// TestJudgeHealth: the one rule behind every view's verdict on a member.
func TestJudgeHealth(t *testing.T) {
	const timeout = 15 * time.Second
	tests := []struct {
		asked    bool
		answered bool
		silence  time.Duration
		lag      uint64
		hasLog   bool
		want     Health
	}{
		{true, true, 0, 0, true, HealthOnline},
		{false, false, 0, 0, true, HealthUnknown},                     // its first answer is on its way: no verdict
		{false, false, time.Hour, 0, false, HealthUnknown},            // however long the first request takes
		{true, true, 900 * time.Millisecond, 256, true, HealthOnline}, // at the loading lag: still online
		{true, true, 0, 257, true, HealthLoading},
		{true, true, 0, 0, false, HealthLoading}, // answers, but has no log yet
		{true, false, 0, 0, true, HealthSuspect},
		{true, false, timeout - time.Millisecond, 0, true, HealthSuspect},
		{true, false, timeout, 0, true, HealthFailed},
		{true, false, time.Hour, 999, false, HealthFailed},
	}
	for _, tc := range tests {
		if got := JudgeHealth(tc.asked, tc.answered, tc.silence, tc.lag, 256, tc.hasLog, timeout); got != tc.want {
			t.Errorf("JudgeHealth(asked %v, %v, %v, lag %d, 256, log %v, %v) = %v, want %v", tc.asked, tc.answered, tc.silence, tc.lag, tc.hasLog, timeout, got, tc.want)
		}
	}
}

// TestHealthWords: String and ParseHealth are inverses (the words travel
// between groups); an unknown word is no verdict.
func TestHealthWords(t *testing.T) {
	for h := HealthUnknown; h <= HealthFailed; h++ {
		if got := ParseHealth(h.String()); got != h {
			t.Errorf("ParseHealth(%q) = %v, want %v", h.String(), got, h)
		}
	}
	if got := ParseHealth("quarantined"); got != HealthUnknown {
		t.Errorf("ParseHealth(quarantined) = %v, want unknown", got)
	}
	if got := Health(200).String(); got != "unknown" {
		t.Errorf("Health(200) = %q, want unknown", got)
	}
	for h, want := range map[Health]bool{HealthUnknown: true, HealthOnline: true, HealthLoading: true, HealthSuspect: false, HealthFailed: false} {
		if h.Reachable() != want {
			t.Errorf("%v.Reachable() = %v, want %v", h, !want, want)
		}
	}
}

// TestViewHealth: a member's verdict and offset reach its ViewNode; every
// member of a group that has not answered lately is failed, whatever its
// leader said.
func TestViewHealth(t *testing.T) {
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Reachable: true, Members: []GroupMember{
			{ID: "a1", ClusterID: "ida1", Leader: true, Health: HealthOnline, Offset: 42},
			{ID: "a2", ClusterID: "ida2", Health: HealthSuspect, Offset: 40},
			{ID: "a3", ClusterID: "ida3", Health: HealthLoading, Offset: 3}}},
		{Name: "b", Members: []GroupMember{{ID: "b1", ClusterID: "idb1", Leader: true, Health: HealthOnline, Offset: 7}}},
	})
	sh := r.Shards()
	for _, tc := range []struct {
		g, i   int
		health Health
		offset uint64
	}{
		{0, 0, HealthOnline, 42}, {0, 1, HealthSuspect, 40}, {0, 2, HealthLoading, 3}, {1, 0, HealthFailed, 7},
	} {
		n := sh[tc.g].Nodes[tc.i]
		if n.Health != tc.health || n.Offset != tc.offset {
			t.Errorf("shard %d node %d (%s): health %v offset %d, want %v %d", tc.g, tc.i, n.ID, n.Health, n.Offset, tc.health, tc.offset)
		}
	}
}
