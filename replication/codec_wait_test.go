package replication

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// A waiting request's Wait travels in log entries and forwarded batches
// (so every replica reserves alike), and the reply of a forwarded batch
// carries each admitted waiter's Delay (so a follower holds the reply
// until its turn).
func TestCodecWait(t *testing.T) {
	reqs := []engine.Request{
		{Kind: engine.KindGCRA, Burst: 0, Rate: 10, Period: 1e9, Quantity: 1, Wait: 2e9},
		{Kind: engine.KindTokenBucket, Burst: 1, Rate: 1, Period: 1e8, Quantity: 1},
	}
	ops := []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte("w")}, Reqs: reqs[:1]}, {Code: shards.OpLimit, Keys: [][]byte{[]byte("t")}, Reqs: reqs[1:]}}
	e, err := decodeEntry(encodeOpsEntry(nil, 7, ops), nil)
	if err != nil || e.ops[0].Reqs[0] != reqs[0] || e.ops[1].Reqs[0] != reqs[1] {
		t.Fatalf("decodeEntry = %+v, %v; want the requests with their waits", e, err)
	}
	fw, err := decodeForward(encodeForward(ops))
	if err != nil || fw[0].Reqs[0] != reqs[0] || fw[1].Reqs[0] != reqs[1] {
		t.Fatalf("decodeForward = %+v, %v", fw, err)
	}
	want := []engine.Result{
		{Limit: 1, RetryAfter: -1, ResetAfter: 1e8, Delay: 3e8},
		{Limited: true, Limit: 1, RetryAfter: 5e8, ResetAfter: 6e8},
		{Limit: 1, RetryAfter: -1, ResetAfter: 1e8},
	}
	got := make([]shards.Result, 1)
	if err := decodeResults(encodeResults(nil, []shards.Result{{Results: want}}), got); err != nil {
		t.Fatalf("decodeResults = %v", err)
	}
	for i := range want {
		if i >= len(got[0].Results) || got[0].Results[i] != want[i] {
			t.Errorf("result %d round trip = %+v, want %+v", i, got[0].Results, want[i])
		}
	}
}
