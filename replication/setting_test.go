package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

// TestSettingEntries: setting entries reach OnSetting in log order on every
// FSM that applies them, survive a snapshot (a fresh FSM restored from it
// receives each), and a shadow request's flag survives the encoding.
func TestSettingEntries(t *testing.T) {
	now := int64(1_700_000_000) * int64(time.Second)
	entries := []struct{ name, value string }{
		{"limit-override", "vip:* 100 1000 60"},
		{"limit-shadow", "try:*"},
		{"limit-override", ""},
	}
	var logs []*raft.Log
	for i, e := range entries {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: encodeSettingEntry(now, e.name, e.value)})
	}
	type call struct{ name, value string }
	var got []call
	f := newTestFSM(t, nil)
	f.onSetting = func(n, v string) { got = append(got, call{n, v}) }
	f.ApplyBatch(logs)
	if len(got) != len(entries) {
		t.Fatalf("OnSetting called %d times, want %d: %v", len(got), len(entries), got)
	}
	for i, e := range entries {
		if got[i] != (call{e.name, e.value}) {
			t.Errorf("call %d = %v, want %v", i, got[i], e)
		}
	}
	want := map[string]string{"limit-override": "", "limit-shadow": "try:*"}
	if s := f.Settings(); !maps.Equal(s, want) {
		t.Errorf("Settings = %v, want %v", s, want)
	}

	snap := snapshotBytes(t, f)
	g := newTestFSM(t, nil)
	restored := map[string]string{}
	g.onSetting = func(n, v string) { restored[n] = v }
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(restored, want) || !maps.Equal(g.Settings(), want) {
		t.Errorf("after restore: OnSetting got %v, Settings %v; want %v", restored, g.Settings(), want)
	}

	// The shadow flag travels with the request.
	op := shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")}, Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: int64(time.Hour), Quantity: 1, Shadow: true}}}
	e, err := decodeEntry(encodeOpsEntry(nil, now, []shards.Op{op}), nil)
	if err != nil || len(e.ops) != 1 || !e.ops[0].Reqs[0].Shadow || e.ops[0].Reqs[0] != op.Reqs[0] {
		t.Fatalf("decode(encode(shadow op)) = %+v, %v", e.ops, err)
	}
}

// TestSetSettingGroup: on a 3-node group, SetSetting on the leader reaches
// every node's OnSetting; a follower refuses it with ErrNotLeader and knows
// the leader's RESP address; a shadow request sent through a follower is
// answered allowed and counted alike on every node.
func TestSetSettingGroup(t *testing.T) {
	var mu sync.Mutex
	got := map[string]map[string]string{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		id := cfg.NodeID
		cfg.OnSetting = func(name, value string) {
			mu.Lock()
			defer mu.Unlock()
			if got[id] == nil {
				got[id] = map[string]string{}
			}
			got[id][name] = value
		}
	})
	l := c.WaitForLeader(10 * time.Second)
	f := (l + 1) % 3
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.nodes[f].node.SetSetting(ctx, "limit-shadow", "x*"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("SetSetting on a follower = %v, want ErrNotLeader", err)
	}
	if addr, ok := c.nodes[f].node.LeaderResp(); !ok || addr != c.nodes[l].respAddr {
		t.Errorf("follower's LeaderResp = %q, %v; want %q", addr, ok, c.nodes[l].respAddr)
	}
	if err := c.nodes[l].node.SetSetting(ctx, "limit-shadow", "try:*"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, tn := range c.nodes {
			if got[tn.id]["limit-shadow"] != "try:*" {
				return fmt.Errorf("%s: OnSetting got %v", tn.id, got[tn.id])
			}
		}
		return nil
	})

	shadow := throttle("try:1", 0, 1, 60, 1)
	shadow.Reqs[0].Shadow = true
	for i := range 3 {
		r, err := write(t, c.nodes[f].node, shadow)
		if err != nil || r.Limited || (i > 0 && r.RetryAfter != -1) {
			t.Fatalf("shadow request %d via a follower = %+v, %v; want allowed", i, r, err)
		}
	}
	c.waitConverged(10 * time.Second)
	for _, tn := range c.nodes {
		if n := tn.node.store.Shadowed(); n != 2 {
			t.Errorf("%s: Shadowed = %d, want 2", tn.id, n)
		}
	}
}
