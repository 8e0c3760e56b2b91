package test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// nodeIDOf is the cluster node id CLUSTER reports for a --node-id of the
// default group: the SHA-1 of "default/<id>" in lowercase hex.
func nodeIDOf(id string) string {
	h := sha1.Sum([]byte("default/" + id))
	return hex.EncodeToString(h[:])
}

// checkSlots asks nd for CLUSTER SLOTS and checks that it reports one range
// 0-16383 served by leader as master and the others as replicas.
func checkSlots(nd *clusterNode, leader *clusterNode, replicas []*clusterNode) error {
	c := redis.NewClient(&redis.Options{Addr: nd.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return fmt.Errorf("%s: CLUSTER SLOTS: %w", nd.id, err)
	}
	if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || len(slots[0].Nodes) != 1+len(replicas) {
		return fmt.Errorf("%s: CLUSTER SLOTS = %+v, want 0-16383 with %d nodes", nd.id, slots, 1+len(replicas))
	}
	if m := slots[0].Nodes[0]; m.Addr != leader.Addr || m.ID != nodeIDOf(leader.id) {
		return fmt.Errorf("%s: CLUSTER SLOTS master = %+v, want %s at %s", nd.id, m, leader.id, leader.Addr)
	}
	want := map[string]bool{}
	for _, r := range replicas {
		want[r.Addr+" "+nodeIDOf(r.id)] = true
	}
	for _, r := range slots[0].Nodes[1:] {
		if !want[r.Addr+" "+r.ID] {
			return fmt.Errorf("%s: CLUSTER SLOTS replica %+v is not one of the followers", nd.id, r)
		}
	}
	return nil
}

// A 3-node group speaks the Redis Cluster protocol as one shard: a
// go-redis ClusterClient given the three addresses finds the leader and
// writes through it, every node reports the same topology, and after the
// leader is killed every survivor names the new one and the client keeps
// working.
func TestClusterProtocol(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	others := func(skip int) []*clusterNode {
		var o []*clusterNode
		for i, nd := range nodes {
			if i != skip {
				o = append(o, nd)
			}
		}
		return o
	}
	// Every node's view names the leader (followers learn it from raft).
	poll.Until(t, 20*time.Second, func() error {
		for _, nd := range nodes {
			if err := checkSlots(nd, nodes[l], others(l)); err != nil {
				return err
			}
		}
		return nil
	})

	ctx := ctxT(t)
	var addrs []string
	for _, nd := range nodes {
		addrs = append(addrs, nd.Addr)
	}
	// go-redis re-reads CLUSTER SLOTS every ClusterStateReloadInterval
	// (60 s by default): a master that died is only left behind then.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second, ReadTimeout: 5 * time.Second,
		ClusterStateReloadInterval: 2 * time.Second})
	t.Cleanup(func() { cc.Close() })
	for i := range 200 {
		key := "user:" + strconv.Itoa(i)
		v, err := cc.Do(ctx, "CL.THROTTLE", key, 0, 1, 60).Int64Slice()
		if err != nil || len(v) != 5 || v[0] != 0 {
			t.Fatalf("ClusterClient CL.THROTTLE %s 0 1 60 = %v, %v; want allowed", key, v, err)
		}
	}
	// The writes reached the leader: each key is now limited on every node.
	for _, nd := range nodes {
		c := noRetryClient(t, nd.Addr)
		if v, err := throttle(ctx, c, "user:7", 0, 1, 60); err != nil || v[0] != 1 {
			t.Fatalf("%s: CL.THROTTLE user:7 0 1 60 = %v, %v; want limited", nd.id, v, err)
		}
	}

	for _, nd := range nodes {
		c := noRetryClient(t, nd.Addr)
		nodesText, err := c.ClusterNodes(ctx).Result()
		if err != nil {
			t.Fatalf("%s: CLUSTER NODES: %v", nd.id, err)
		}
		lines := strings.Split(strings.TrimSuffix(nodesText, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: CLUSTER NODES has %d lines, want 3:\n%s", nd.id, len(lines), nodesText)
		}
		myself := 0
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) < 8 || len(f[0]) != 40 {
				t.Fatalf("%s: CLUSTER NODES line %q is not in Redis's format", nd.id, line)
			}
			if strings.Contains(f[2], "myself") {
				myself++
				if f[0] != nodeIDOf(nd.id) {
					t.Errorf("%s: myself line %q has the wrong id", nd.id, line)
				}
			}
			isLeader := f[0] == nodeIDOf(nodes[l].id)
			switch {
			case isLeader && (!strings.HasSuffix(f[2], "master") || f[3] != "-" || len(f) != 9 || f[8] != "0-16383"):
				t.Errorf("%s: leader line %q, want master - … 0-16383", nd.id, line)
			case !isLeader && (!strings.HasSuffix(f[2], "slave") || f[3] != nodeIDOf(nodes[l].id) || len(f) != 8):
				t.Errorf("%s: follower line %q, want slave of %s", nd.id, line, nodeIDOf(nodes[l].id))
			}
		}
		if myself != 1 {
			t.Errorf("%s: %d myself lines, want 1", nd.id, myself)
		}
		shards, err := c.ClusterShards(ctx).Result()
		if err != nil || len(shards) != 1 || len(shards[0].Slots) != 1 || shards[0].Slots[0] != (redis.SlotRange{Start: 0, End: 16383}) || len(shards[0].Nodes) != 3 {
			t.Errorf("%s: CLUSTER SHARDS = %+v, %v", nd.id, shards, err)
		}
		inf, err := c.ClusterInfo(ctx).Result()
		if err != nil || parseInfo(inf)["cluster_state"] != "ok" || parseInfo(inf)["cluster_slots_assigned"] != "16384" || parseInfo(inf)["cluster_known_nodes"] != "3" {
			t.Errorf("%s: CLUSTER INFO = %q, %v", nd.id, inf, err)
		}
		if id, err := c.ClusterMyID(ctx).Result(); err != nil || id != nodeIDOf(nd.id) {
			t.Errorf("%s: CLUSTER MYID = %q, %v; want %s", nd.id, id, err, nodeIDOf(nd.id))
		}
		if s, err := c.Info(ctx, "cluster").Result(); err != nil || parseInfo(s)["cluster_enabled"] != "1" {
			t.Errorf("%s: INFO cluster = %q, %v; want cluster_enabled:1", nd.id, s, err)
		}
	}

	// Kill the leader: every survivor names the new one; the killed node
	// stays a (down) voter, listed as a replica.
	old := nodes[l]
	old.kill()
	survivors := others(l)
	killed := time.Now()
	poll.Until(t, 30*time.Second, func() error {
		nl := leaderOf(survivors)
		if nl < 0 {
			return fmt.Errorf("no new leader yet")
		}
		reps := []*clusterNode{old, survivors[1-nl]}
		for _, nd := range survivors {
			if err := checkSlots(nd, survivors[nl], reps); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("every survivor's CLUSTER SLOTS named the new leader %v after the kill", time.Since(killed))
	// The ClusterClient finds the new leader by itself.
	poll.Until(t, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := cc.Do(cctx, "CL.THROTTLE", "after:0", 0, 1, 60).Int64Slice()
		if err != nil {
			return err
		}
		if v[0] != 0 && v[0] != 1 {
			return fmt.Errorf("CL.THROTTLE after:0 = %v", v)
		}
		return nil
	})
	for i := 1; i < 50; i++ {
		key := "after:" + strconv.Itoa(i)
		if v, err := cc.Do(ctx, "CL.THROTTLE", key, 0, 1, 60).Int64Slice(); err != nil || v[0] != 0 {
			t.Fatalf("ClusterClient CL.THROTTLE %s after failover = %v, %v; want allowed", key, v, err)
		}
	}
}

// TestClusterModeClients: redis-py's RedisCluster and ioredis's Cluster,
// given one node's address, read CLUSTER SLOTS and drive the group: three
// CL.THROTTLE with a limit of 2 on one key answer allowed, allowed,
// limited, wherever each client sends them.
func TestClusterModeClients(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	var followers []*clusterNode
	for i, nd := range nodes {
		if i != l {
			followers = append(followers, nd)
		}
	}
	poll.Until(t, 20*time.Second, func() error {
		for _, nd := range nodes {
			if err := checkSlots(nd, nodes[l], followers); err != nil {
				return err
			}
		}
		return nil
	})
	port := strconv.Itoa(followers[0].Port) // a follower: the client must find the leader
	want := "0 0 1"

	t.Run("redis-py", func(t *testing.T) {
		py := pythonWithRedis(t)
		script := `
import sys
from redis.cluster import RedisCluster, ClusterNode
rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", int(sys.argv[1]))])
print(*[rc.execute_command("CL.THROTTLE", "py:cluster", 1, 2, 60)[0] for _ in range(3)])
rc.close()
`
		out, err := exec.Command(py, "-c", script, port).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-py RedisCluster: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("redis-py RedisCluster limited flags = %q, want %q", got, want)
		}
	})

	t.Run("ioredis", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node not installed")
		}
		if _, err := exec.Command(node, "-e", `require.resolve("ioredis", {paths: ["node"]})`).CombinedOutput(); err != nil {
			t.Skip("ioredis not installed in test/node (scripts/test.sh runs npm ci there)")
		}
		script := `
const Redis = require(require.resolve("ioredis", {paths: ["node"]}));
const c = new Redis.Cluster([{host: "127.0.0.1", port: Number(process.argv[1])}]);
(async () => {
  const flags = [];
  for (let i = 0; i < 3; i++) flags.push((await c.call("CL.THROTTLE", "js:cluster", 1, 2, 60))[0]);
  console.log(flags.join(" "));
  c.disconnect();
})().catch(e => { console.error(e); process.exit(1); });
`
		out, err := exec.Command(node, "-e", script, port).CombinedOutput()
		if err != nil {
			t.Fatalf("ioredis Cluster: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("ioredis Cluster limited flags = %q, want %q", got, want)
		}
	})
}
