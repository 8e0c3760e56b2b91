package resp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/redis/go-redis/v9"
)

// A standalone server has no cluster support, as Redis without
// cluster-enabled.
func TestClusterStandalone(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := ts.client(t, proto, "")
		for _, args := range [][]any{
			{"CLUSTER", "SLOTS"}, {"CLUSTER", "NODES"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "INFO"}, {"CLUSTER", "MYID"},
			{"CLUSTER", "KEYSLOT", "foo"}, {"CLUSTER", "COUNTKEYSINSLOT", "1"}, {"CLUSTER", "GETKEYSINSLOT", "1", "1"},
			{"CLUSTER", "ADDSLOTS", "1"}, {"CLUSTER", "ADDSLOTSRANGE", "1", "2"}, {"CLUSTER", "DELSLOTS", "1"}, {"CLUSTER", "DELSLOTSRANGE", "1", "2"},
			{"CLUSTER", "MEET", "127.0.0.1", "7000"}, {"CLUSTER", "SETSLOT", "1", "STABLE"}, {"CLUSTER", "REPLICAS", "x"}, {"CLUSTER", "SLAVES", "x"},
			{"READONLY"}, {"READWRITE"}, {"ASKING"},
		} {
			err := c.Do(ctx, args...).Err()
			if err == nil || err.Error() != "ERR This instance has cluster support disabled" {
				t.Errorf("RESP%d %v: err = %v, want ERR This instance has cluster support disabled", proto, args, err)
			}
		}
		inf, err := c.Info(ctx, "cluster").Result()
		if err != nil || !strings.Contains(inf, "# Cluster\r\ncluster_enabled:0\r\n") {
			t.Errorf("RESP%d INFO cluster = %q, %v; want cluster_enabled:0", proto, inf, err)
		}
	}
}

func TestClusterOneShard(t *testing.T) {
	// One group, no slot, no other group: an unsharded routing.
	fc := newFakeCluster(0, "n2", []cluster.GroupView{{Name: "g", Term: 7, Reachable: true, Members: []cluster.GroupMember{
		member("g", "n1", 7001, true), member("g", "n2", 7002, false), member("g", "n3", 7003, false),
	}}})
	ts := startServer(t, func(c *Config) { c.Cluster = fc })
	ctx := context.Background()
	id := func(s string) string { return cluster.NodeID("g", s) }
	for _, proto := range []int{2, 3} {
		c := ts.client(t, proto, "")
		slots, err := c.ClusterSlots(ctx).Result()
		if err != nil || len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || len(slots[0].Nodes) != 3 {
			t.Fatalf("RESP%d CLUSTER SLOTS = %+v, %v; want one range 0-16383 with 3 nodes", proto, slots, err)
		}
		for i, want := range []string{"n1", "n2", "n3"} {
			nd := slots[0].Nodes[i]
			if nd.ID != id(want) || nd.Addr != fmt.Sprintf("127.0.0.1:700%d", i+1) {
				t.Errorf("RESP%d CLUSTER SLOTS node %d = %+v, want %s at 127.0.0.1:700%d", proto, i, nd, want, i+1)
			}
		}
		nodes, err := c.ClusterNodes(ctx).Result()
		want := id("n1") + " 127.0.0.1:7001@17001 master - 0 0 7 connected 0-16383\n" +
			id("n2") + " 127.0.0.1:7002@17002 myself,slave " + id("n1") + " 0 0 7 connected\n" +
			id("n3") + " 127.0.0.1:7003@17003 slave " + id("n1") + " 0 0 7 connected\n"
		if err != nil || nodes != want {
			t.Errorf("RESP%d CLUSTER NODES = %q, %v; want %q", proto, nodes, err, want)
		}
		shards, err := c.ClusterShards(ctx).Result()
		if err != nil || len(shards) != 1 || !slices.Equal(shards[0].Slots, []redis.SlotRange{{Start: 0, End: 16383}}) || len(shards[0].Nodes) != 3 ||
			shards[0].Nodes[0].Role != "master" || shards[0].Nodes[1].Role != "replica" || shards[0].Nodes[2].ID != id("n3") || shards[0].Nodes[2].Port != 7003 ||
			shards[0].Nodes[0].Health != "online" {
			t.Errorf("RESP%d CLUSTER SHARDS = %+v, %v", proto, shards, err)
		}
		inf, err := c.ClusterInfo(ctx).Result()
		if err != nil || !strings.HasPrefix(inf, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n") ||
			!strings.Contains(inf, "cluster_known_nodes:3\r\ncluster_size:1\r\ncluster_current_epoch:7\r\ncluster_my_epoch:7\r\n") {
			t.Errorf("RESP%d CLUSTER INFO = %q, %v", proto, inf, err)
		}
		if got, err := c.ClusterMyID(ctx).Result(); err != nil || got != id("n2") {
			t.Errorf("RESP%d CLUSTER MYID = %q, %v; want %q", proto, got, err, id("n2"))
		}
		if got, err := c.ClusterKeySlot(ctx, "foo").Result(); err != nil || got != 12182 {
			t.Errorf("RESP%d CLUSTER KEYSLOT foo = %d, %v; want 12182", proto, got, err)
		}
		for _, cmd := range []string{"READONLY", "READWRITE", "ASKING"} {
			if err := c.Do(ctx, cmd).Err(); err != nil {
				t.Errorf("RESP%d %s: %v, want OK", proto, cmd, err)
			}
		}
		if inf, err := c.Info(ctx, "cluster").Result(); err != nil || !strings.Contains(inf, "cluster_enabled:1\r\n") {
			t.Errorf("RESP%d INFO cluster = %q, %v; want cluster_enabled:1", proto, inf, err)
		}
		// Unsharded: every key is served here, whatever its slot.
		if err := c.Do(ctx, "CL.THROTTLE", "foo", 5, 10, 60).Err(); err != nil {
			t.Errorf("RESP%d CL.THROTTLE foo: %v", proto, err)
		}
	}

	// Keys in slots: {a}1..{a}5 share a slot; b does not.
	c := ts.client(t, 2, "")
	for _, k := range []string{"{a}1", "{a}2", "{a}3", "{a}4", "{a}5", "b"} {
		if err := c.Do(ctx, "CL.THROTTLE", k, 5, 10, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slotA, slotB := hashslot.Of([]byte("a")), hashslot.Of([]byte("b"))
	for _, tc := range []struct {
		args []any
		want any // int64, int (a count of keys), or an error text
	}{
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", slotA}, int64(5)},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", slotB}, int64(1)},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", (slotB + 1) % 16384}, int64(0)},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", 16384}, "ERR Invalid slot"},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", -1}, "ERR Invalid slot"},
		{[]any{"CLUSTER", "COUNTKEYSINSLOT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", slotA, 3}, 3},
		{[]any{"CLUSTER", "GETKEYSINSLOT", slotA, 100}, 5},
		{[]any{"CLUSTER", "GETKEYSINSLOT", slotA, 0}, 0},
		{[]any{"CLUSTER", "GETKEYSINSLOT", slotA, -1}, "ERR Invalid slot or number of keys"},
		{[]any{"CLUSTER", "GETKEYSINSLOT", 16384, 1}, "ERR Invalid slot or number of keys"},
		{[]any{"CLUSTER", "KEYSLOT"}, "ERR wrong number of arguments for 'cluster|keyslot' command"},
	} {
		v, err := c.Do(ctx, tc.args...).Result()
		switch want := tc.want.(type) {
		case string:
			if err == nil || err.Error() != want {
				t.Errorf("%v = %v, %v; want error %q", tc.args, v, err, want)
			}
		case int64:
			if err != nil || v != want {
				t.Errorf("%v = %v, %v; want %d", tc.args, v, err, want)
			}
		case int:
			keys, ok := v.([]any)
			if err != nil || !ok || len(keys) != want {
				t.Errorf("%v = %v, %v; want %d keys", tc.args, v, err, want)
				continue
			}
			for _, k := range keys {
				if s, _ := k.(string); !strings.HasPrefix(s, "{a}") {
					t.Errorf("%v returned %q, not a key of slot %d", tc.args, k, slotA)
				}
			}
		}
	}
}

// twoGroups is this node (a2, a follower) in group a owning 0-8191 and
// migrating slot 100 to b; b owns 8192-16383 (and shows slot 100
// importing); c has no leader and has not answered.
func twoGroups() *fakeCluster {
	return newFakeCluster(0, "a2", []cluster.GroupView{
		{Name: "a", Term: 3, Reachable: true, Slots: [][2]int{{0, 8191}}, Migrating: map[int]string{100: "b"},
			Members: []cluster.GroupMember{member("a", "a1", 7001, true), member("a", "a2", 7002, false)}},
		{Name: "b", Term: 5, Reachable: true, Slots: [][2]int{{8192, 16383}}, Importing: map[int]string{100: "a"},
			Members: []cluster.GroupMember{member("b", "b1", 7011, true), member("b", "b2", 7012, false)}},
		{Name: "c", Term: 1, Members: []cluster.GroupMember{member("c", "c1", 7021, false)}},
	})
}

func TestClusterGroupsViews(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Cluster = twoGroups() })
	ctx := context.Background()
	a1, a2 := cluster.NodeID("a", "a1"), cluster.NodeID("a", "a2")
	b1, b2 := cluster.NodeID("b", "b1"), cluster.NodeID("b", "b2")
	c1 := cluster.NodeID("c", "c1")
	wantNodes := a1 + " 127.0.0.1:7001@17001 master - 0 0 3 connected 0-8191 [100->-" + b1 + "]\n" +
		a2 + " 127.0.0.1:7002@17002 myself,slave " + a1 + " 0 0 3 connected\n" +
		b1 + " 127.0.0.1:7011@17011 master - 0 0 5 connected 8192-16383 [100-<-" + a1 + "]\n" +
		b2 + " 127.0.0.1:7012@17012 slave " + b1 + " 0 0 5 connected\n" +
		c1 + " 127.0.0.1:7021@17021 master,fail - 0 0 1 disconnected\n"
	for _, proto := range []int{2, 3} {
		c := ts.client(t, proto, "")
		slots, err := c.ClusterSlots(ctx).Result()
		want := []redis.ClusterSlot{
			{Start: 0, End: 8191, Nodes: []redis.ClusterNode{{ID: a1, Addr: "127.0.0.1:7001"}, {ID: a2, Addr: "127.0.0.1:7002"}}},
			{Start: 8192, End: 16383, Nodes: []redis.ClusterNode{{ID: b1, Addr: "127.0.0.1:7011"}, {ID: b2, Addr: "127.0.0.1:7012"}}},
		}
		if err != nil || fmt.Sprint(slots) != fmt.Sprint(want) {
			t.Errorf("RESP%d CLUSTER SLOTS = %+v, %v; want %+v", proto, slots, err, want)
		}
		if nodes, err := c.ClusterNodes(ctx).Result(); err != nil || nodes != wantNodes {
			t.Errorf("RESP%d CLUSTER NODES = %q, %v; want %q", proto, nodes, err, wantNodes)
		}
		sh, err := c.ClusterShards(ctx).Result()
		if err != nil || len(sh) != 3 {
			t.Fatalf("RESP%d CLUSTER SHARDS = %+v, %v; want 3 shards", proto, sh, err)
		}
		for i, w := range []struct {
			slots  []redis.SlotRange
			ids    []string
			roles  string
			health string
		}{
			{[]redis.SlotRange{{Start: 0, End: 8191}}, []string{a1, a2}, "master replica", "online"},
			{[]redis.SlotRange{{Start: 8192, End: 16383}}, []string{b1, b2}, "master replica", "online"},
			{nil, []string{c1}, "master", "failed"},
		} {
			var ids, roles []string
			for _, n := range sh[i].Nodes {
				ids, roles = append(ids, n.ID), append(roles, n.Role)
				if n.Health != w.health {
					t.Errorf("RESP%d CLUSTER SHARDS shard %d node %s health = %q, want %q", proto, i, n.ID, n.Health, w.health)
				}
			}
			if !slices.Equal(sh[i].Slots, w.slots) || !slices.Equal(ids, w.ids) || strings.Join(roles, " ") != w.roles {
				t.Errorf("RESP%d CLUSTER SHARDS shard %d = %+v; want slots %v nodes %v roles %s", proto, i, sh[i], w.slots, w.ids, w.roles)
			}
		}
		inf, err := c.ClusterInfo(ctx).Result()
		wantInfo := "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\n" +
			"cluster_known_nodes:5\r\ncluster_size:2\r\ncluster_current_epoch:5\r\ncluster_my_epoch:3\r\n"
		if err != nil || !strings.HasPrefix(inf, wantInfo) {
			t.Errorf("RESP%d CLUSTER INFO = %q, %v; want prefix %q", proto, inf, err, wantInfo)
		}
		if got, err := c.ClusterMyID(ctx).Result(); err != nil || got != a2 {
			t.Errorf("RESP%d CLUSTER MYID = %q, %v; want %q", proto, got, err, a2)
		}
		for _, sub := range []string{"REPLICAS", "SLAVES"} {
			got, err := c.Do(ctx, "CLUSTER", sub, a1).StringSlice()
			if want := strings.Split(wantNodes, "\n")[1]; err != nil || len(got) != 1 || got[0] != want {
				t.Errorf("RESP%d CLUSTER %s a1 = %q, %v; want [%q]", proto, sub, got, err, want)
			}
			for _, tc := range []struct{ id, want string }{{a2, "ERR The specified node is not a master"}, {"zz", "ERR Unknown node zz"}} {
				if err := c.Do(ctx, "CLUSTER", sub, tc.id).Err(); err == nil || err.Error() != tc.want {
					t.Errorf("RESP%d CLUSTER %s %s: %v, want %s", proto, sub, tc.id, err, tc.want)
				}
			}
		}
	}
}

// The slot commands: Redis's argument errors, then the change as the
// group's log would make it, seen in the views.
func TestClusterSlotCommands(t *testing.T) {
	fc := twoGroups()
	ts := startServer(t, func(c *Config) { c.Cluster = fc })
	ctx := context.Background()
	c := ts.client(t, 2, "")
	b1 := cluster.NodeID("b", "b1")
	for _, tc := range []struct {
		args []any
		want string // "OK" or the error
	}{
		{[]any{"CLUSTER", "ADDSLOTS", 5}, "ERR Slot 5 is already busy"},
		{[]any{"CLUSTER", "ADDSLOTS", 1, 1}, "ERR Slot 1 specified multiple times"},
		{[]any{"CLUSTER", "ADDSLOTS", "x"}, "ERR Invalid or out of range slot"},
		{[]any{"CLUSTER", "ADDSLOTS", 16384}, "ERR Invalid or out of range slot"},
		{[]any{"CLUSTER", "ADDSLOTS"}, "ERR wrong number of arguments for 'cluster|addslots' command"},
		{[]any{"CLUSTER", "ADDSLOTSRANGE", 10, 5}, "ERR start slot number 10 is greater than end slot number 5"},
		{[]any{"CLUSTER", "ADDSLOTSRANGE", 1, 3, 3, 4}, "ERR Slot 3 specified multiple times"},
		{[]any{"CLUSTER", "ADDSLOTSRANGE", 1, 2, 3}, "ERR wrong number of arguments for 'cluster|addslotsrange' command"},
		{[]any{"CLUSTER", "DELSLOTS", 9000}, "ERR Slot 9000 is already unassigned"},
		{[]any{"CLUSTER", "DELSLOTSRANGE", 0, 99}, "OK"},
		{[]any{"CLUSTER", "INFO"}, "cluster_state:fail\r\ncluster_slots_assigned:16284\r\ncluster_slots_ok:16284\r\n"},
		{[]any{"CLUSTER", "ADDSLOTSRANGE", 0, 49, 50, 98}, "OK"},
		{[]any{"CLUSTER", "ADDSLOTS", 99}, "OK"},
		{[]any{"CLUSTER", "INFO"}, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"},
		{[]any{"CLUSTER", "DELSLOTS", 7, 8}, "OK"},
		{[]any{"CLUSTER", "NODES"}, cluster.NodeID("a", "a1") + " 127.0.0.1:7001@17001 master - 0 0 3 connected 0-6 9-8191 [100->-" + b1 + "]\n"},
		{[]any{"CLUSTER", "MEET", "127.0.0.1", 7100}, "OK"},
		{[]any{"CLUSTER", "MEET", "127.0.0.1", 7100, 17100}, "OK"},
		{[]any{"CLUSTER", "MEET", "127.0.0.1", "x"}, "ERR Invalid base port specified: x"},
		{[]any{"CLUSTER", "MEET", "127.0.0.1", 7100, "y"}, "ERR Invalid bus port specified: y"},
		{[]any{"CLUSTER", "MEET", "127.0.0.1", 1, 2, 3}, "ERR wrong number of arguments for 'cluster|meet' command"},
		{[]any{"CLUSTER", "SETSLOT", 200, "MIGRATING", b1}, "OK"},
		{[]any{"CLUSTER", "SETSLOT", 200, "MIGRATING", "zzz"}, "ERR I don't know about node zzz"},
		{[]any{"CLUSTER", "SETSLOT", 9000, "MIGRATING", b1}, "ERR I'm not the owner of hash slot 9000"},
		{[]any{"CLUSTER", "SETSLOT", 200, "FOO", b1}, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{[]any{"CLUSTER", "SETSLOT", 200, "STABLE", b1}, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{[]any{"CLUSTER", "SETSLOT", 200, "NODE"}, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{[]any{"CLUSTER", "SETSLOT", 16384, "STABLE"}, "ERR Invalid or out of range slot"},
		{[]any{"CLUSTER", "NODES"}, cluster.NodeID("a", "a1") + " 127.0.0.1:7001@17001 master - 0 0 3 connected 0-6 9-8191 [100->-" + b1 + "] [200->-" + b1 + "]\n"},
		{[]any{"CLUSTER", "SETSLOT", 200, "STABLE"}, "OK"},
		{[]any{"CLUSTER", "SETSLOT", 200, "NODE", b1}, "OK"},
		{[]any{"CLUSTER", "NODES"}, cluster.NodeID("a", "a1") + " 127.0.0.1:7001@17001 master - 0 0 3 connected 0-6 9-199 201-8191 [100->-" + b1 + "]\n"},
	} {
		v, err := c.Do(ctx, tc.args...).Result()
		got := fmt.Sprint(v)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v = %q, want %q", tc.args, got, tc.want)
		}
	}
	if want := []string{"127.0.0.1:7100", "127.0.0.1:7100"}; !slices.Equal(fc.met, want) {
		t.Errorf("CLUSTER MEET met %q, want %q", fc.met, want)
	}
}
