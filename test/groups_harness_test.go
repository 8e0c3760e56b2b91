package test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// A sharded cluster in these tests: several replication groups (raft
// clusters of three, started with --group), each owning one contiguous
// range of the 16384 hash slots, introduced to one another by CLUSTER MEET.

// slotCount is the number of hash slots of the Redis Cluster protocol.
const slotCount = 16384

// group is one replication group of a sharded test cluster.
type group struct {
	name   string
	lo, hi int // the slots it owns, inclusive
	nodes  []*clusterNode
}

// clusterIDOf is the node id the Redis Cluster protocol shows for node id
// of group: the SHA-1 of "group/id" in lowercase hex.
func clusterIDOf(group, id string) string {
	h := sha1.Sum([]byte(group + "/" + id))
	return hex.EncodeToString(h[:])
}

// cid returns nd's cluster node id.
func (g *group) cid(nd *clusterNode) string { return clusterIDOf(g.name, nd.id) }

// owns reports whether slot is in g's range.
func (g *group) owns(slot int) bool { return slot >= g.lo && slot <= g.hi }

// leader waits (up to 15 s) until a node of g reports itself the ready
// leader and returns it.
func (g *group) leader(t *testing.T) *clusterNode {
	t.Helper()
	return g.nodes[waitLeader(t, g.nodes)]
}

// others returns g's nodes other than nd.
func (g *group) others(nd *clusterNode) []*clusterNode {
	var o []*clusterNode
	for _, x := range g.nodes {
		if x != nd {
			o = append(o, x)
		}
	}
	return o
}

// groupNames names the groups startGroups makes: a, b, c, …
const groupNames = "abcdefghijklmnopqrstuvwxyz"

// startGroups starts n groups of three nodes each (named a, b, …; node ids
// a1…a3, b1…b3, …), every node with --group, --bootstrap-expect 3 and
// --join listing the others of its group, plus extra. The slots are split
// into n equal contiguous ranges (a gets the first), assigned with CLUSTER
// ADDSLOTSRANGE through one node of each group; the first group then MEETs
// every other. startGroups returns once every node reports cluster_state:ok
// and a CLUSTER SLOTS naming every group's current leader (waitGroups).
func startGroups(t *testing.T, n int, extra ...string) []*group {
	t.Helper()
	return startGroupsEach(t, n, nil, extra...)
}

// launchGroups starts the groups of startGroupsEach and returns once each
// has its three members and a leader, before any slot is assigned or any
// group introduced to another; lo and hi are the ranges startGroupsEach
// assigns.
func launchGroups(t *testing.T, n int, each func(id string) []string, extra ...string) []*group {
	t.Helper()
	if n < 1 || n > len(groupNames) {
		t.Fatalf("startGroups: %d groups, want 1 to %d", n, len(groupNames))
	}
	groups := make([]*group, n)
	for i := range groups {
		name := groupNames[i : i+1]
		g := &group{name: name, lo: i * slotCount / n, hi: (i+1)*slotCount/n - 1}
		for j := 1; j <= 3; j++ {
			id := name + strconv.Itoa(j)
			args := append([]string{"--group", name, "--node-id", id,
				"--raft-addr", "127.0.0.1:" + strconv.Itoa(freePort(t)), "--bootstrap-expect", "3"}, extra...)
			if each != nil {
				args = append(args, each(id)...)
			}
			g.nodes = append(g.nodes, &clusterNode{server: newServer(t, args...), id: id})
		}
		for _, nd := range g.nodes {
			var join []string
			for _, o := range g.others(nd) {
				join = append(join, o.Addr)
			}
			nd.args = append(nd.args, "--join", strings.Join(join, ","))
		}
		groups[i] = g
	}
	for _, g := range groups {
		for _, nd := range g.nodes {
			nd.launch()
		}
	}
	for _, g := range groups {
		for _, nd := range g.nodes {
			nd.waitReady()
		}
	}
	for _, g := range groups {
		waitMembers(t, g.nodes, 3)
	}
	return groups
}

// startGroupsEach is startGroups with each(id) appended to the arguments of
// the node with that id (nil: nothing more).
func startGroupsEach(t *testing.T, n int, each func(id string) []string, extra ...string) []*group {
	t.Helper()
	groups := launchGroups(t, n, each, extra...)
	for _, g := range groups {
		// Through a follower: any node of the group assigns its slots.
		l := g.leader(t)
		via := g.others(l)[0]
		clusterDo(t, via, "CLUSTER", "ADDSLOTSRANGE", g.lo, g.hi)
	}
	for _, g := range groups[1:] {
		nd := g.nodes[0]
		clusterDo(t, groups[0].nodes[0], "CLUSTER", "MEET", "127.0.0.1", nd.Port)
	}
	waitGroups(t, groups, 20*time.Second)
	return groups
}

// clusterDo runs an administrative command on nd, retrying only while the
// group has no leader (CLUSTERDOWN, TRYAGAIN) for up to 15 s, and fails the
// test on any other error.
func clusterDo(t *testing.T, nd *clusterNode, args ...any) any {
	t.Helper()
	c := noRetryClient(t, nd.Addr)
	var v any
	poll.Until(t, 15*time.Second, func() error {
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err = c.Do(ctx, args...).Result()
		if err != nil && (strings.HasPrefix(err.Error(), "CLUSTERDOWN") || strings.HasPrefix(err.Error(), "TRYAGAIN")) {
			return fmt.Errorf("%s: %v: %v", nd.id, args, err)
		}
		if err != nil {
			t.Fatalf("%s: %v = %v", nd.id, args, err)
		}
		return nil
	})
	return v
}

// allNodes returns every node of every group.
func allNodes(groups []*group) []*clusterNode {
	var all []*clusterNode
	for _, g := range groups {
		all = append(all, g.nodes...)
	}
	return all
}

// waitGroups polls until every live node (not killed) of every group
// reports cluster_state:ok in CLUSTER INFO and a CLUSTER SLOTS that names
// every group's current leader (checkGroupSlots), or fails after timeout.
// It returns how long that took.
func waitGroups(t *testing.T, groups []*group, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	poll.Until(t, timeout, func() error {
		leaders := map[string]*clusterNode{}
		for _, g := range groups {
			l := leaderOf(g.nodes)
			if l < 0 {
				return fmt.Errorf("group %s has no ready leader", g.name)
			}
			leaders[g.name] = g.nodes[l]
		}
		for _, nd := range allNodes(groups) {
			if !nd.alive() {
				continue
			}
			if err := checkClusterOK(nd); err != nil {
				return err
			}
			if err := checkGroupSlots(nd, groups, leaders); err != nil {
				return err
			}
		}
		return nil
	})
	return time.Since(start)
}

// alive reports whether the node's process is running.
func (nd *clusterNode) alive() bool {
	if nd.cmd == nil || nd.done == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// quickClient returns a go-redis client for one short question: no
// retries, short timeouts. The caller closes it.
func quickClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
}

// checkClusterOK asks nd for CLUSTER INFO and wants cluster_state:ok with
// every slot assigned.
func checkClusterOK(nd *clusterNode) error {
	c := quickClient(nd.Addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("%s: CLUSTER INFO: %w", nd.id, err)
	}
	inf := parseInfo(s)
	if inf["cluster_state"] != "ok" || inf["cluster_slots_assigned"] != strconv.Itoa(slotCount) {
		return fmt.Errorf("%s: CLUSTER INFO cluster_state %q, cluster_slots_assigned %q; want ok, %d", nd.id, inf["cluster_state"], inf["cluster_slots_assigned"], slotCount)
	}
	return nil
}

// checkGroupSlots asks nd for CLUSTER SLOTS and wants one range per group,
// exactly the group's slots, served by leaders[group] as master (address
// and id) and by the group's other nodes as replicas.
func checkGroupSlots(nd *clusterNode, groups []*group, leaders map[string]*clusterNode) error {
	c := quickClient(nd.Addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return fmt.Errorf("%s: CLUSTER SLOTS: %w", nd.id, err)
	}
	if len(slots) != len(groups) {
		return fmt.Errorf("%s: CLUSTER SLOTS has %d ranges, want %d: %+v", nd.id, len(slots), len(groups), slots)
	}
	slices.SortFunc(slots, func(x, y redis.ClusterSlot) int { return x.Start - y.Start })
	for i, g := range groups {
		s, l := slots[i], leaders[g.name]
		if s.Start != g.lo || s.End != g.hi {
			return fmt.Errorf("%s: CLUSTER SLOTS range %d = %d-%d, want %d-%d (group %s)", nd.id, i, s.Start, s.End, g.lo, g.hi, g.name)
		}
		if len(s.Nodes) != len(g.nodes) {
			return fmt.Errorf("%s: CLUSTER SLOTS %d-%d lists %d nodes, want %d: %+v", nd.id, s.Start, s.End, len(s.Nodes), len(g.nodes), s.Nodes)
		}
		if m := s.Nodes[0]; m.Addr != l.Addr || m.ID != g.cid(l) {
			return fmt.Errorf("%s: CLUSTER SLOTS %d-%d master = %+v, want %s/%s at %s (%s)", nd.id, s.Start, s.End, m, g.name, l.id, l.Addr, g.cid(l))
		}
		want := map[string]bool{}
		for _, r := range g.others(l) {
			want[r.Addr+" "+g.cid(r)] = true
		}
		for _, r := range s.Nodes[1:] {
			if !want[r.Addr+" "+r.ID] {
				return fmt.Errorf("%s: CLUSTER SLOTS %d-%d replica %+v is not a follower of group %s", nd.id, s.Start, s.End, r, g.name)
			}
		}
	}
	return nil
}

// keySlot is Redis Cluster's hash slot of key: CRC16-XMODEM (polynomial
// 0x1021, initial 0) of the key, or of its non-empty {hash tag}, modulo
// 16384. Written here bit by bit so that the server's table-driven version
// is checked against an independent one.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for _, b := range []byte(key) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}

// keysWhere returns the first n keys prefix:0, prefix:1, … whose slot
// satisfies in.
func keysWhere(prefix string, n int, in func(slot int) bool) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := prefix + ":" + strconv.Itoa(i)
		if in(keySlot(k)) {
			keys = append(keys, k)
		}
	}
	return keys
}

// keysIn returns n keys prefix:i whose slots g owns.
func keysIn(g *group, prefix string, n int) []string {
	return keysWhere(prefix, n, g.owns)
}

// groupKeys returns the keys matching pattern in g's keyspace (KEYS on its
// leader), sorted.
func groupKeys(t *testing.T, g *group, pattern string) []string {
	t.Helper()
	c := quickClient(g.leader(t).Addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := c.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatalf("group %s: KEYS %s: %v", g.name, pattern, err)
	}
	slices.Sort(keys)
	return keys
}

// checkKeysLanded wants exactly the keys of want (matching pattern) in
// each group's keyspace: every group holds those whose slot it owns.
func checkKeysLanded(t *testing.T, groups []*group, pattern string, want []string) {
	t.Helper()
	for _, g := range groups {
		var mine []string
		for _, k := range want {
			if g.owns(keySlot(k)) {
				mine = append(mine, k)
			}
		}
		slices.Sort(mine)
		if got := groupKeys(t, g, pattern); !slices.Equal(got, mine) {
			t.Errorf("group %s (slots %d-%d): KEYS %s = %v, want %v", g.name, g.lo, g.hi, pattern, got, mine)
		}
	}
}

// newClusterClient returns a go-redis ClusterClient seeded with every node
// of groups; it reloads the slot map every 2 s so that it leaves a dead
// leader behind quickly.
func newClusterClient(t testing.TB, groups []*group, opt *redis.ClusterOptions) *redis.ClusterClient {
	t.Helper()
	if opt == nil {
		opt = &redis.ClusterOptions{}
	}
	for _, g := range groups {
		for _, nd := range g.nodes {
			opt.Addrs = append(opt.Addrs, nd.Addr)
		}
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = time.Second
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = 5 * time.Second
	}
	if opt.ClusterStateReloadInterval == 0 {
		opt.ClusterStateReloadInterval = 2 * time.Second
	}
	cc := redis.NewClusterClient(opt)
	t.Cleanup(func() { cc.Close() })
	return cc
}
