package main

import (
	"strings"
	"testing"
)

// planFDs raises the soft limit as far as maxclients needs and the hard
// limit allows, and lowers maxclients only when the hard limit is too low.
func TestPlanFDs(t *testing.T) {
	const inf = ^uint64(0)
	for _, tc := range []struct {
		requested  int
		soft, hard uint64
		want       fdPlan
		err        bool
	}{
		{10000, 1 << 20, 1 << 20, fdPlan{Soft: 1 << 20, MaxClients: 10000}, false}, // room already
		{10000, 1024, 1 << 20, fdPlan{Soft: 10032, MaxClients: 10000}, false},      // raise the soft limit
		{10000, 1024, inf, fdPlan{Soft: 10032, MaxClients: 10000}, false},          // unlimited hard limit
		{10000, 10032, 10032, fdPlan{Soft: 10032, MaxClients: 10000}, false},       // exactly enough
		{30000, 20000, 20000, fdPlan{Soft: 20000, MaxClients: 19968}, false},       // the hard limit binds
		{30000, 256, 4096, fdPlan{Soft: 4096, MaxClients: 4064}, false},            // raise to the hard limit, still short
		{30000, 256, 256, fdPlan{Soft: 256, MaxClients: 224}, false},
		{1, 33, 33, fdPlan{Soft: 33, MaxClients: 1}, false},
		{100, 32, 32, fdPlan{}, true}, // nothing left for a client
		{100, 10, 10, fdPlan{}, true},
	} {
		got, err := planFDs(tc.requested, reservedFDs, tc.soft, tc.hard)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("planFDs(%d, %d, %d) = %+v, %v; want %+v, error %v", tc.requested, tc.soft, tc.hard, got, err, tc.want, tc.err)
		}
	}
	// A cluster node keeps its raft port's descriptors too.
	var cfg Config
	if got := reservedFor(&cfg); got != reservedFDs {
		t.Errorf("standalone reserves %d, want %d", got, reservedFDs)
	}
	cfg.Cluster.NodeID, cfg.Cluster.Raft.MaxHandshakes = "n1", 1024
	if got, want := reservedFor(&cfg), reservedFDs+1024+raftPeerFDs; got != want {
		t.Errorf("a cluster node reserves %d, want %d", got, want)
	}
	if p, _ := planFDs(10000, reservedFor(&cfg), 1024, 1<<20); p.Soft != uint64(10000+reservedFor(&cfg)) {
		t.Errorf("cluster node: soft limit %d, want %d", p.Soft, 10000+reservedFor(&cfg))
	}
	w := reducedWarning(30000, reservedFDs, fdPlan{Soft: 20000, MaxClients: 19968})
	for _, part := range []string{"You requested maxclients of 30000 requiring at least 30032 max file descriptors.", "maxclients has been reduced to 19968"} {
		if !strings.Contains(w, part) {
			t.Errorf("warning %q lacks %q", w, part)
		}
	}
}
