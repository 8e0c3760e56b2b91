package main

import (
	"strings"
	"testing"
)

// TestParseNodes: what --assign-slots reads from CLUSTER NODES: the
// node's id, the slots of its group (from the group's master line, also
// when the node is a replica), nothing owned for a lone group that serves
// every key, and an error while its group has no leader.
func TestParseNodes(t *testing.T) {
	const (
		a1 = "a1 10.0.0.1:6379@7000 "
		a2 = "a2 10.0.0.2:6379@7000 "
		b1 = "b1 10.0.0.3:6379@7000 "
	)
	for _, tt := range []struct {
		name, nodes string
		id          string
		owned       int
		err         string
	}{
		{"lone group", a1 + "myself,master - 0 0 2 connected 0-16383\n" + a2 + "slave a1 0 0 2 connected\n", "a1", 0, ""},
		{"replica of an owner", a1 + "master - 0 0 2 connected 0-99 200 [5->-b1]\n" + a2 + "myself,slave a1 0 0 2 connected\n" + b1 + "master - 0 0 3 connected 100-199\n", "a2", 101, ""},
		{"owns all, knows another", a1 + "myself,master - 0 0 2 connected 0-16383\n" + b1 + "master - 0 0 3 connected\n", "a1", 16384, ""},
		{"owns nothing, knows another", a1 + "myself,master - 0 0 2 connected\n" + a2 + "slave a9 0 0 2 connected\n", "a1", 0, ""},
		{"master unknown", a2 + "myself,slave a9 0 0 2 connected\n", "", 0, "no leader yet"},
		{"empty", "", "", 0, "not a cluster node"},
		{"bad range", a1 + "myself,master - 0 0 2 connected 9-x\n", "", 0, "bad slot range"},
	} {
		g := &slotGroup{slots: make([]bool, slotCount)}
		err := g.parseNodes(tt.nodes)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || g.id != tt.id || g.owned != tt.owned {
			t.Errorf("%s: id %q, owned %d, err %v; want %q, %d", tt.name, g.id, g.owned, err, tt.id, tt.owned)
		}
	}
}
