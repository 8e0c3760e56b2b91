package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// TestClusterOverrideShadow: on a 3-node group, the same load before and
// after CONFIG SET limit-override and limit-shadow, through the leader and
// a follower: the replies follow the rules in force, every node holds the
// same rules and counts the same shadow_limited, CL.INSPECT answers alike
// on every node, a follower refuses the CONFIG SET naming the leader, and
// a restarted follower gets the rules back from the group's log.
func TestClusterOverrideShadow(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	f := (l + 1) % 3
	ctx := context.Background()
	lc, fc := noRetryClient(t, nodes[l].Addr), noRetryClient(t, nodes[f].Addr)

	// load sends, for a round's keys, CL.THROTTLE key 0 1 60 through the
	// leader and then the follower, for vip and try keys, and returns the
	// four replies.
	load := func(round string) [][]int64 {
		t.Helper()
		var out [][]int64
		for _, key := range []string{"vip:" + round, "try:" + round} {
			for _, via := range []string{"leader", "follower"} {
				c := lc
				if via == "follower" {
					c = fc
				}
				r, err := throttle(ctx, c, key, 0, 1, 60)
				if err != nil {
					t.Fatalf("round %s: CL.THROTTLE %s 0 1 60 via the %s: %v", round, key, via, err)
				}
				out = append(out, r)
			}
		}
		return out
	}

	// Before: max_burst 0 → the second request of each key is limited.
	before := load("a")
	for i, want := range [][]int64{{0, 1, 0, -1, 60}, {1, 1, 0, 60, 60}, {0, 1, 0, -1, 60}, {1, 1, 0, 60, 60}} {
		if before[i][0] != want[0] || before[i][1] != want[1] {
			t.Fatalf("before: reply %d = %v, want limited=%d limit=%d", i, before[i], want[0], want[1])
		}
	}

	// A follower refuses, naming the leader.
	err := fc.ConfigSet(ctx, "limit-override", "vip:* 9 1 60").Err()
	if err == nil || !strings.Contains(err.Error(), "set it on the leader, "+nodes[l].Addr) {
		t.Fatalf("CONFIG SET limit-override on a follower = %v, want a refusal naming the leader %s", err, nodes[l].Addr)
	}
	for _, kv := range [][2]string{{"limit-override", "vip:* 9 1 60"}, {"limit-shadow", "try:*"}} {
		if err := lc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %q on the leader: %v", kv[0], kv[1], err)
		}
	}
	waitRules(t, nodes, "vip:* 9 1 60", "try:*")

	// After: vip keys take burst 9 (limit 10) and both requests pass; try
	// keys keep the caller's limit of 1, the second answers allowed
	// (shadow) with retry_after -1.
	after := load("b")
	for i, r := range after[:2] {
		if r[0] != 0 || r[1] != 10 || r[2] != int64(9-i) {
			t.Errorf("after: vip reply %d = %v, want allowed, limit 10, remaining %d", i, r, 9-i)
		}
	}
	if r := after[2]; r[0] != 0 || r[1] != 1 {
		t.Errorf("after: first try reply = %v, want allowed, limit 1", r)
	}
	if r := after[3]; r[0] != 0 || r[1] != 1 || r[2] != 0 || r[3] != -1 {
		t.Errorf("after: second try reply = %v, want allowed by shadow: 0 1 0 -1", r)
	}

	// Every node counts one shadowed refusal and answers CL.INSPECT alike.
	poll.Until(t, 15*time.Second, func() error {
		for _, nd := range nodes {
			c := noRetryClient(t, nd.Addr)
			inf := parseInfo(c.Info(ctx, "stats").Val())
			if inf["shadow_limited"] != "1" || inf["limit_overrides"] != "1" || inf["limit_shadows"] != "1" {
				return fmt.Errorf("%s: shadow_limited %q, limit_overrides %q, limit_shadows %q; want 1, 1, 1", nd.id, inf["shadow_limited"], inf["limit_overrides"], inf["limit_shadows"])
			}
		}
		return nil
	})
	var ref []any
	for _, nd := range nodes {
		c := nd.client(t, 2) // RESP2: the map as a flat array
		v, err := c.Do(ctx, "CL.INSPECT", "vip:b").Slice()
		if err != nil {
			t.Fatalf("%s: CL.INSPECT vip:b: %v", nd.id, err)
		}
		// Fields 16..19 are reset_ms and ttl_ms: read at each node's own
		// instant; the rest must match exactly.
		if len(v) != 24 || v[1] != "gcra" || v[5] != int64(9) || v[21] != "vip:* 9 1 60" {
			t.Fatalf("%s: CL.INSPECT vip:b = %v, want gcra, burst 9, override vip:* 9 1 60", nd.id, v)
		}
		if ref == nil {
			ref = v
			continue
		}
		for i := range v {
			if (i < 16 || i > 19) && v[i] != ref[i] {
				t.Errorf("%s: CL.INSPECT vip:b field %d = %v, want %v as on %s", nd.id, i, v[i], ref[i], nodes[0].id)
			}
		}
	}

	// A restarted follower replays the group's log: the rules come back
	// although its own configuration has none.
	nodes[f].kill()
	nodes[f].restart()
	waitRules(t, nodes, "vip:* 9 1 60", "try:*")
}

// waitRules polls until every node's CONFIG GET shows the rules.
func waitRules(t *testing.T, nodes []*clusterNode, override, shadow string) {
	t.Helper()
	ctx := context.Background()
	poll.Until(t, 20*time.Second, func() error {
		for _, nd := range nodes {
			c := noRetryClient(t, nd.Addr)
			got, err := c.ConfigGet(ctx, "limit-*").Result()
			if err != nil {
				return fmt.Errorf("%s: %v", nd.id, err)
			}
			if got["limit-override"] != override || got["limit-shadow"] != shadow {
				return fmt.Errorf("%s: limit-override %q, limit-shadow %q", nd.id, got["limit-override"], got["limit-shadow"])
			}
		}
		return nil
	})
}
