package replication

import (
	"bytes"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/engine"
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
