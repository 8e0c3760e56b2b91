package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/poll"
)

// TestMemberHealthVerdicts: a stopped follower is judged by the leader
// suspected, then failed after NodeTimeout; the other follower's routing
// table shows the leader's verdict; once restarted it is online on both.
func TestMemberHealthVerdicts(t *testing.T) {
	const nodeTimeout = 2 * time.Second
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.NodeTimeout = nodeTimeout })
	l := c.WaitForLeader(10 * time.Second)
	c.waitMembers(3, 20*time.Second)
	fs := c.followers(l)
	dead, other := fs[0], fs[1]
	deadID := c.nodes[dead].id
	verdicts := func() (onLeader, onFollower cluster.Health) {
		for _, m := range c.nodes[l].node.Info().Members {
			if m.ID == deadID {
				onLeader = m.State
			}
		}
		r := c.nodes[other].node.Routing()
		for _, m := range r.Groups[r.Self].Members {
			if m.ID == deadID {
				onFollower = m.Health
			}
		}
		return onLeader, onFollower
	}
	want := func(ok func(cluster.Health) bool, what string) func() error {
		return func() error {
			if !isLeader(c.nodes[l].node) {
				t.Fatalf("%s lost leadership", c.nodes[l].id)
			}
			if onL, onF := verdicts(); !ok(onL) || !ok(onF) {
				return fmt.Errorf("%s: leader's verdict %v, follower %s shows %v; want %s", deadID, onL, c.nodes[other].id, onF, what)
			}
			return nil
		}
	}
	online := func(h cluster.Health) bool { return h == cluster.HealthOnline }
	poll.Until(t, 20*time.Second, want(online, "online"))

	c.stop(dead)
	poll.Until(t, 20*time.Second, want(func(h cluster.Health) bool { return !h.Reachable() }, "pfail or fail"))
	// fail once it has been silent for the node timeout (counted from its
	// last answer, which came up to a second before it stopped).
	poll.Until(t, 20*time.Second, want(func(h cluster.Health) bool { return h == cluster.HealthFailed }, "fail"))

	c.restart(dead)
	poll.Until(t, 30*time.Second, want(online, "online again"))
}
