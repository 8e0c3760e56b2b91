package resp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestCRC16(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint16
	}{
		{"123456789", 0x31C3}, // the CRC16-XMODEM check value Redis's crc16.c cites
		{"", 0},
		{"A", 0x58E5},
	} {
		if got := crc16([]byte(tc.in)); got != tc.want {
			t.Errorf("crc16(%q) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

func TestKeySlot(t *testing.T) {
	whole := func(s string) int { return int(crc16([]byte(s)) % 16384) }
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"foo", 12182}, // Redis: CLUSTER KEYSLOT foo
		{"bar", 5061},
		{"hello", 866},
		{"somekey", 11058},
		{"", 0},
		{"{user1000}.following", whole("user1000")},
		{"{user1000}.followers", whole("user1000")},
		{"foo{}{bar}", whole("foo{}{bar}")}, // empty first tag: the whole key
		{"foo{{bar}}zap", whole("{bar")},    // first '{', first '}' after it
		{"foo{bar}{zap}", whole("bar")},
		{"{", whole("{")},
		{"}{", whole("}{")},
		{"a{b", whole("a{b")},
	} {
		if got := keySlot([]byte(tc.key)); got != tc.want {
			t.Errorf("keySlot(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
	if keySlot([]byte("{user1000}.following")) != 3443 {
		t.Errorf("keySlot({user1000}.following) = %d, want 3443 (Redis)", keySlot([]byte("{user1000}.following")))
	}
}

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

// fixedCluster is a Cluster whose topology is set by the test: the
// replication group itself is exercised end to end in test/.
type fixedCluster struct{ topo Topology }

func (f fixedCluster) Role() RoleInfo          { return RoleInfo{Leader: true} }
func (f fixedCluster) InfoFields() [][2]string { return [][2]string{{"role", "master"}} }
func (f fixedCluster) Topology() Topology      { return f.topo }

func TestClusterOneShard(t *testing.T) {
	topo := Topology{SelfID: "n2", Term: 7, Nodes: []TopologyNode{
		{ID: "n1", Host: "127.0.0.1", Port: 7001, BusPort: 17001, Leader: true},
		{ID: "n2", Host: "127.0.0.1", Port: 7002, BusPort: 17002},
		{ID: "n3", Host: "127.0.0.1", Port: 7003, BusPort: 17003},
	}}
	ts := startServer(t, func(c *Config) { c.Cluster = fixedCluster{topo} })
	ctx := context.Background()
	id := func(s string) string { return clusterNodeID(s) }
	if got, want := id("n1"), "40b3eab63f3f1d4fa48e09559401c5ed4efceaa6"; got != want { // SHA-1 of "n1"
		t.Fatalf("clusterNodeID(n1) = %q, want %q", got, want)
	}
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
			shards[0].Nodes[0].Role != "master" || shards[0].Nodes[1].Role != "replica" || shards[0].Nodes[2].ID != id("n3") || shards[0].Nodes[2].Port != 7003 {
			t.Errorf("RESP%d CLUSTER SHARDS = %+v, %v", proto, shards, err)
		}
		inf, err := c.ClusterInfo(ctx).Result()
		if err != nil || !strings.HasPrefix(inf, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n") || !strings.Contains(inf, "cluster_known_nodes:3\r\ncluster_size:1\r\ncluster_current_epoch:7\r\n") {
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
	}

	// Keys in slots: {a}1..{a}5 share a slot; b does not.
	c := ts.client(t, 2, "")
	for _, k := range []string{"{a}1", "{a}2", "{a}3", "{a}4", "{a}5", "b"} {
		if err := c.Do(ctx, "CL.THROTTLE", k, 5, 10, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slotA, slotB := keySlot([]byte("a")), keySlot([]byte("b"))
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
