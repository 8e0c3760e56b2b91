package test

import (
	"cmp"
	"context"
	"fmt"
	"github.com/cellserver/cellserver/internal/poll"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGroups: two groups of three (a: slots 0-8191, b: 8192-16383) form
// one Redis Cluster; each subtest drives it one way.
func TestGroups(t *testing.T) {
	groups := startGroups(t, 2)
	t.Run("topology", func(t *testing.T) { testGroupsTopology(t, groups) })
	t.Run("clients", func(t *testing.T) { testGroupsClients(t, groups) })
	t.Run("exactness", func(t *testing.T) { testGroupsExactness(t, groups) })
	t.Run("redirects", func(t *testing.T) { testGroupsRedirects(t, groups) })
}

// Every node reports the same two-group topology in Redis's shapes:
// stable ids (SHA-1 of "group/node-id"), leaders as masters of their
// group's slots, followers as their replicas, and Redis's hash slots.
func testGroupsTopology(t *testing.T, groups []*group) {
	ctx := ctxT(t)
	leaders := map[string]string{} // cluster id → its group's leader's cluster id
	byID := map[string]*group{}
	for _, g := range groups {
		l := g.leader(t)
		for _, nd := range g.nodes {
			leaders[g.cid(nd)] = g.cid(l)
			byID[g.cid(nd)] = g
		}
	}
	// Member health comes from each leader's status rounds, once a
	// second: right after a start a member may still be starting when its
	// leader's first request reaches it (then shown fail? and
	// disconnected until the next round). Wait until every node sees
	// every member answering.
	poll.Until(t, 60*time.Second, func() error {
		for _, g := range groups {
			for _, nd := range g.nodes {
				text, err := noRetryClient(t, nd.Addr).ClusterNodes(ctx).Result()
				if err != nil {
					return err
				}
				if strings.Contains(text, "fail") || strings.Contains(text, "disconnected") {
					return fmt.Errorf("%s: CLUSTER NODES shows a member down:\n%s", nd.id, text)
				}
			}
		}
		return nil
	})
	for _, g := range groups {
		for _, nd := range g.nodes {
			c := noRetryClient(t, nd.Addr)
			if id, err := c.ClusterMyID(ctx).Result(); err != nil || id != g.cid(nd) {
				t.Errorf("%s: CLUSTER MYID = %q, %v; want %s (SHA-1 of %q)", nd.id, id, err, g.cid(nd), g.name+"/"+nd.id)
			}
			for _, key := range []string{"foo", "user:1", "{user1000}.following", "a{}b", "{}x{y}"} {
				if s, err := c.ClusterKeySlot(ctx, key).Result(); err != nil || int(s) != keySlot(key) {
					t.Errorf("%s: CLUSTER KEYSLOT %s = %d, %v; want %d", nd.id, key, s, err, keySlot(key))
				}
			}
			inf, err := c.ClusterInfo(ctx).Result()
			if f := parseInfo(inf); err != nil || f["cluster_state"] != "ok" || f["cluster_known_nodes"] != "6" || f["cluster_size"] != "2" {
				t.Errorf("%s: CLUSTER INFO = %q, %v; want cluster_state:ok, cluster_known_nodes:6, cluster_size:2", nd.id, inf, err)
			}
			checkNodesLines(t, c, nd, g.cid(nd), leaders, byID)
			shards, err := c.ClusterShards(ctx).Result()
			if err != nil || len(shards) != 2 || len(shards[0].Slots) == 0 || len(shards[1].Slots) == 0 {
				t.Errorf("%s: CLUSTER SHARDS = %+v, %v; want 2 shards", nd.id, shards, err)
				continue
			}
			slices.SortFunc(shards, func(x, y redis.ClusterShard) int { return cmp.Compare(x.Slots[0].Start, y.Slots[0].Start) })
			for i, sg := range groups {
				if s := shards[i]; len(s.Slots) != 1 || s.Slots[0] != (redis.SlotRange{Start: int64(sg.lo), End: int64(sg.hi)}) || len(s.Nodes) != 3 {
					t.Errorf("%s: CLUSTER SHARDS shard %d = %+v, want slots %d-%d and 3 nodes", nd.id, i, s, sg.lo, sg.hi)
				}
			}
		}
	}
	if got := keySlot("foo"); got != 12182 {
		t.Fatalf("keySlot(foo) = %d, want 12182 (Redis's)", got)
	}
}

// checkNodesLines checks nd's CLUSTER NODES: one line per node of every
// group in Redis 7's format, exactly one "myself" (self's id), each leader
// a master of its group's slots, each follower a slave of its leader.
func checkNodesLines(t *testing.T, c *redis.Client, nd *clusterNode, self string, leaders map[string]string, byID map[string]*group) {
	t.Helper()
	text, err := c.ClusterNodes(ctxT(t)).Result()
	if err != nil {
		t.Errorf("%s: CLUSTER NODES: %v", nd.id, err)
		return
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != len(leaders) {
		t.Errorf("%s: CLUSTER NODES has %d lines, want %d:\n%s", nd.id, len(lines), len(leaders), text)
	}
	myself := 0
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 8 {
			t.Errorf("%s: CLUSTER NODES line %q is not in Redis's format", nd.id, line)
			continue
		}
		g, known := byID[f[0]]
		if !known {
			t.Errorf("%s: CLUSTER NODES line %q has an unknown id", nd.id, line)
			continue
		}
		if strings.Contains(f[2], "myself") {
			myself++
			if f[0] != self {
				t.Errorf("%s: myself line %q, want id %s", nd.id, line, self)
			}
		}
		isLeader := leaders[f[0]] == f[0]
		wantSlots := fmt.Sprintf("%d-%d", g.lo, g.hi)
		switch {
		case isLeader && (!strings.HasSuffix(f[2], "master") || f[3] != "-" || len(f) != 9 || f[8] != wantSlots):
			t.Errorf("%s: leader line %q, want master - … %s", nd.id, line, wantSlots)
		case !isLeader && (!strings.HasSuffix(f[2], "slave") || f[3] != leaders[f[0]] || len(f) != 8):
			t.Errorf("%s: follower line %q, want slave of %s", nd.id, line, leaders[f[0]])
		}
	}
	if myself != 1 {
		t.Errorf("%s: %d myself lines, want 1", nd.id, myself)
	}
}

// throttleFlags are the limited flags three CL.THROTTLE key 1 2 60 (a
// limit of 2) answer on a fresh key.
const throttleFlags = "0 0 1"

// twoGroupKeys returns n keys of prefix in each group, a's first.
func twoGroupKeys(groups []*group, prefix string, n int) []string {
	var keys []string
	for _, g := range groups {
		keys = append(keys, keysIn(g, prefix, n)...)
	}
	return keys
}

// checkFlagLines compares "key f1 f2 f3" lines with throttleFlags for every
// key.
func checkFlagLines(t *testing.T, client, out string, keys []string) {
	t.Helper()
	want := make([]string, len(keys))
	for i, k := range keys {
		want[i] = k + " " + throttleFlags
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(got, want) {
		t.Errorf("%s: per key limited flags:\n%s\nwant:\n%s", client, out, strings.Join(want, "\n"))
	}
}

// Cluster-aware clients, each given the nodes' addresses (one node for
// redis-py, ioredis and the redis tools, of the other group than half the
// keys), drive keys of both groups: three CL.THROTTLE key 1 2 60 answer
// allowed, allowed, limited, and every key lands in the group owning its
// slot.
func testGroupsClients(t *testing.T, groups []*group) {
	a, b := groups[0], groups[1]
	seed := b.others(b.leader(t))[0] // a follower of b: the client must find both leaders

	t.Run("go-redis", func(t *testing.T) {
		keys := twoGroupKeys(groups, "gr", 4)
		cc := newClusterClient(t, groups, nil)
		ctx := ctxT(t)
		var out strings.Builder
		for _, k := range keys {
			var flags []string
			for range 3 {
				v, err := cc.Do(ctx, "CL.THROTTLE", k, 1, 2, 60).Int64Slice()
				if err != nil || len(v) != 5 {
					t.Fatalf("ClusterClient CL.THROTTLE %s 1 2 60 = %v, %v", k, v, err)
				}
				flags = append(flags, strconv.FormatInt(v[0], 10))
			}
			fmt.Fprintf(&out, "%s %s\n", k, strings.Join(flags, " "))
		}
		checkFlagLines(t, "go-redis ClusterClient", out.String(), keys)
		checkKeysLanded(t, groups, "gr:*", keys)
	})

	t.Run("redis-py", func(t *testing.T) {
		py := pythonWithRedis(t)
		keys := twoGroupKeys(groups, "py", 4)
		script := `
import sys
from redis.cluster import RedisCluster, ClusterNode
rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", int(sys.argv[1]))])
for key in sys.argv[2:]:
    print(key, *[rc.execute_command("CL.THROTTLE", key, 1, 2, 60)[0] for _ in range(3)])
rc.close()
`
		out, err := exec.Command(py, append([]string{"-c", script, strconv.Itoa(seed.Port)}, keys...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-py RedisCluster: %v\n%s", err, out)
		}
		checkFlagLines(t, "redis-py RedisCluster", string(out), keys)
		checkKeysLanded(t, groups, "py:*", keys)
	})

	t.Run("ioredis", func(t *testing.T) {
		node := nodeWithIORedis(t)
		keys := twoGroupKeys(groups, "js", 4)
		out, err := exec.Command(node, append([]string{"node/cluster_groups.js", strconv.Itoa(seed.Port)}, keys...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ioredis Cluster: %v\n%s", err, out)
		}
		checkFlagLines(t, "ioredis Cluster", string(out), keys)
		checkKeysLanded(t, groups, "js:*", keys)
	})

	t.Run("redis-cli -c", func(t *testing.T) {
		if _, err := exec.LookPath("redis-cli"); err != nil {
			t.Skip("redis-cli not installed (scripts/test.sh installs it)")
		}
		keys := twoGroupKeys(groups, "cli", 4)
		var in strings.Builder
		for _, k := range keys {
			for range 3 {
				fmt.Fprintf(&in, "CL.THROTTLE %s 1 2 60\n", k)
			}
		}
		cmd := exec.Command("redis-cli", "-c", "-p", strconv.Itoa(a.nodes[0].Port))
		cmd.Stdin = strings.NewReader(in.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli -c: %v\n%s", err, out)
		}
		// Each reply is five integer lines; anything else (a redirect
		// notice) is skipped, an error reply shows in the comparison.
		var nums []string
		for _, l := range strings.Split(string(out), "\n") {
			l = strings.TrimSpace(l)
			if _, err := strconv.Atoi(l); err == nil {
				nums = append(nums, l)
			} else if l != "" && !strings.HasPrefix(l, "-> Redirected") {
				t.Errorf("redis-cli -c printed %q", l)
			}
		}
		if len(nums) != 15*len(keys) {
			t.Fatalf("redis-cli -c: %d integers, want %d:\n%s", len(nums), 15*len(keys), out)
		}
		var lines strings.Builder
		for i, k := range keys {
			r := nums[15*i:]
			fmt.Fprintf(&lines, "%s %s %s %s\n", k, r[0], r[5], r[10])
		}
		checkFlagLines(t, "redis-cli -c", lines.String(), keys)
		checkKeysLanded(t, groups, "cli:*", keys)
	})

	t.Run("redis-benchmark --cluster", func(t *testing.T) {
		if _, err := exec.LookPath("redis-benchmark"); err != nil {
			t.Skip("redis-benchmark not installed (scripts/test.sh installs it)")
		}
		// In cluster mode redis-benchmark gives each client one master
		// and replaces {tag} by a hash tag of that master's slots: keys
		// without it would be sent to the wrong group.
		out, err := exec.Command("redis-benchmark", "--cluster", "-h", "127.0.0.1", "-p", strconv.Itoa(seed.Port),
			"-n", "20000", "-r", "100000", "-c", "50", "-q", "CL.THROTTLE", "rb:{tag}:__rand_int__", "15", "30", "60").CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark --cluster: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "requests per second") || strings.Contains(strings.ToLower(string(out)), "error") {
			t.Errorf("redis-benchmark --cluster output:\n%s", out)
		}
		total := 0
		for _, g := range groups {
			keys := groupKeys(t, g, "rb:*")
			if len(keys) == 0 {
				t.Errorf("group %s holds no key of redis-benchmark", g.name)
			}
			for _, k := range keys {
				if !g.owns(keySlot(k)) {
					t.Errorf("group %s holds %s, of slot %d", g.name, k, keySlot(k))
					break
				}
			}
			total += len(keys)
		}
		if total > 20000 {
			t.Errorf("%d keys after 20000 requests", total)
		}
	})
}

// nodeWithIORedis returns the node binary when ioredis is installed in
// test/node, or skips.
func nodeWithIORedis(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	if _, err := exec.Command(node, "-e", `require.resolve("ioredis", {paths: ["node"]})`).CombinedOutput(); err != nil {
		t.Skip("ioredis not installed in test/node (scripts/test.sh runs npm ci there)")
	}
	return node
}

// The 50 × 200 exactness test across groups: 50 goroutines send 200
// CL.THROTTLE each through one go-redis ClusterClient, spread over ten keys
// (five per group) with a limit of 100 and a rate so slow nothing refills:
// 1000 requests per key, exactly 100 allowed per key.
func testGroupsExactness(t *testing.T, groups []*group) {
	const (
		clients, requests = 50, 200
		limit             = 100
	)
	keys := twoGroupKeys(groups, "exact", 5)
	cc := newClusterClient(t, groups, &redis.ClusterOptions{PoolSize: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	allowed := make([]atomic.Int64, len(keys))
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests {
				k := (g + i) % len(keys)
				v, err := cc.Do(ctx, "CL.THROTTLE", keys[k], limit-1, 1, 3600).Int64Slice()
				if err != nil {
					errs <- fmt.Errorf("CL.THROTTLE %s: %w", keys[k], err)
					return
				}
				if v[0] == 0 {
					allowed[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("client error: %v", err)
	}
	for i, k := range keys {
		if got := allowed[i].Load(); got != limit {
			t.Errorf("%s (slot %d): allowed = %d of %d requests, want exactly %d", k, keySlot(k), got, clients*requests/len(keys), limit)
		}
	}
	checkKeysLanded(t, groups, "exact:*", keys)
}

// A node answers -MOVED naming the owner group's leader for a key of the
// other group, whether it leads its own group or follows; CL.THROTTLEALL
// over keys of both groups is -CROSSSLOT and consumes nothing; over keys
// of different slots of one group it works, through any node of it.
func testGroupsRedirects(t *testing.T, groups []*group) {
	ctx := ctxT(t)
	for i, g := range groups {
		other := groups[1-i]
		ol := other.leader(t)
		key := keysIn(other, "mv"+g.name, 1)[0]
		want := fmt.Sprintf("MOVED %d %s", keySlot(key), ol.Addr)
		for _, nd := range g.nodes {
			_, err := throttle(ctx, noRetryClient(t, nd.Addr), key, 1, 2, 60)
			if err == nil || err.Error() != want {
				t.Errorf("%s/%s: CL.THROTTLE %s (slot %d of group %s) = %v, want %q", g.name, nd.id, key, keySlot(key), other.name, err, want)
			}
		}
	}

	a, b := groups[0], groups[1]
	ka, kb := keysIn(a, "xs", 1)[0], keysIn(b, "xs", 1)[0]
	for _, nd := range allNodes(groups) {
		err := noRetryClient(t, nd.Addr).Do(ctx, "CL.THROTTLEALL", ka, 1, 2, 60, 1, kb, 1, 2, 60, 1).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT ") {
			t.Errorf("%s: CL.THROTTLEALL %s %s (groups a and b) = %v, want CROSSSLOT", nd.id, ka, kb, err)
		}
	}
	for _, p := range []struct {
		g   *group
		key string
	}{{a, ka}, {b, kb}} {
		// A peek (quantity 0): nothing was consumed, 2 remain.
		if v, err := throttle(ctx, noRetryClient(t, p.g.leader(t).Addr), p.key, 1, 2, 60, 0); err != nil || v[2] != 2 {
			t.Errorf("peek of %s after CROSSSLOT = %v, %v; want remaining 2", p.key, v, err)
		}
	}

	// Two keys of group a in different slots, through a follower of a and
	// through the ClusterClient.
	pair := keysIn(a, "same", 2)
	if keySlot(pair[0]) == keySlot(pair[1]) {
		t.Fatalf("%s and %s share slot %d", pair[0], pair[1], keySlot(pair[0]))
	}
	f := a.others(a.leader(t))[0]
	cc := newClusterClient(t, groups, nil)
	for _, via := range []struct {
		name string
		do   func(args ...any) *redis.Cmd
	}{
		{"follower " + f.id, func(args ...any) *redis.Cmd { return noRetryClient(t, f.Addr).Do(ctx, args...) }},
		{"ClusterClient", func(args ...any) *redis.Cmd { return cc.Do(ctx, args...) }},
	} {
		v, err := via.do("CL.THROTTLEALL", pair[0], 1, 2, 60, 1, pair[1], 1, 2, 60, 1).Slice()
		if err != nil || len(v) != 2 {
			t.Fatalf("%s: CL.THROTTLEALL %s %s (slots %d, %d of group a) = %v, %v; want two replies", via.name, pair[0], pair[1], keySlot(pair[0]), keySlot(pair[1]), v, err)
		}
		for i, r := range v {
			if rr := ints(t, r); rr[0] != 0 {
				t.Errorf("%s: CL.THROTTLEALL reply %d = %v, want allowed", via.name, i, rr)
			}
		}
	}
	// Both consumed twice: the next one is refused, for both.
	v, err := noRetryClient(t, a.leader(t).Addr).Do(ctx, "CL.THROTTLEALL", pair[0], 1, 2, 60, 1, pair[1], 1, 2, 60, 1).Slice()
	if err != nil || len(v) != 2 {
		t.Fatalf("third CL.THROTTLEALL %v = %v, %v; want two replies", pair, v, err)
	}
	if r0, r1 := ints(t, v[0]), ints(t, v[1]); r0[0] != 1 || r1[0] != 1 {
		t.Errorf("third CL.THROTTLEALL %v = %v, %v; want both limited", pair, r0, r1)
	}
}
