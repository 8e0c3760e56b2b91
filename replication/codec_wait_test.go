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
		{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Burst: 2, Period: 3e8, Quantity: 1, Lease: "w-1", Wait: 5e9},
	}
	var ops []shards.Op
	for i, k := range []string{"w", "t", "c"} {
		ops = append(ops, shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(k)}, Reqs: reqs[i : i+1]})
	}
	e, err := decodeEntry(encodeOpsEntry(nil, 7, ops), nil)
	if err != nil {
		t.Fatalf("decodeEntry = %v", err)
	}
	fw, err := decodeForward(encodeForward(ops))
	if err != nil {
		t.Fatalf("decodeForward = %v", err)
	}
	for i := range reqs {
		if e.ops[i].Reqs[0] != reqs[i] || fw[i].Reqs[0] != reqs[i] {
			t.Fatalf("request %d: entry %+v, forward %+v; want %+v with its wait", i, e.ops[i].Reqs[0], fw[i].Reqs[0], reqs[i])
		}
	}
	want := []engine.Result{
		{Limit: 1, RetryAfter: -1, ResetAfter: 1e8, Delay: 3e8},
		{Limited: true, Limit: 1, RetryAfter: 5e8, ResetAfter: 6e8},
		{Limit: 1, RetryAfter: -1, ResetAfter: 1e8},
		// A CC.ACQUIRE now in line (queued), and one granted at once.
		{Limited: true, Queued: true, Limit: 2, RetryAfter: 2e8, ResetAfter: 3e8, Lease: "w-1"},
		{Limited: true, Queued: true, Limit: 2, RetryAfter: -1, Lease: "x"},
		{Limit: 2, Remaining: 1, RetryAfter: -1, ResetAfter: 3e8, Lease: "w-2"},
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
