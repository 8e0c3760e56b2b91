package replication

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// A CL.THROTTLEALL … WAIT is one op of one log entry: every request keeps
// its Wait in the entry and in a forwarded batch, and the reply carries
// every admitted key's Delay, a shadowed one's too.
func TestCodecThrottleAllWait(t *testing.T) {
	reqs := []engine.Request{
		{Kind: engine.KindGCRA, Burst: 0, Rate: 10, Period: 1e9, Quantity: 1, Wait: 2e9},
		{Kind: engine.KindGCRA, Burst: 0, Rate: 5, Period: 1e9, Quantity: 1, Wait: 2e9, Shadow: true},
	}
	ops := []shards.Op{{Code: shards.OpLimitAll, Keys: [][]byte{[]byte("{t}a"), []byte("{t}b")}, Reqs: reqs}}
	e, err := decodeEntry(encodeOpsEntry(nil, 7, ops), nil)
	if err != nil || len(e.ops) != 1 || len(e.ops[0].Reqs) != 2 || e.ops[0].Reqs[0] != reqs[0] || e.ops[0].Reqs[1] != reqs[1] {
		t.Fatalf("decodeEntry = %+v, %v; want one op with both waits", e, err)
	}
	fw, err := decodeForward(encodeForward(ops))
	if err != nil || len(fw) != 1 || fw[0].Reqs[0] != reqs[0] || fw[0].Reqs[1] != reqs[1] {
		t.Fatalf("decodeForward = %+v, %v", fw, err)
	}
	sent := []engine.Result{
		{Limit: 1, RetryAfter: -1, ResetAfter: 1e8, Delay: 2e8},
		{Limit: 1, RetryAfter: -1, ResetAfter: 2e8, Delay: 2e8, Shadowed: true},
	}
	got := make([]shards.Result, 1)
	if err := decodeResults(encodeResults(nil, []shards.Result{{Results: sent}}), got); err != nil {
		t.Fatalf("decodeResults = %v", err)
	}
	want := sent
	for i := range want {
		if i >= len(got[0].Results) || got[0].Results[i] != want[i] {
			t.Errorf("result %d round trip = %+v, want %+v", i, got[0].Results, want[i])
		}
	}
}
