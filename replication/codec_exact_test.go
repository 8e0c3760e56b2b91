package replication

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/engine/codec"
	"github.com/cellserver/cellserver/shards"
)

// engine.Request.Exact (a region's in-sequence batch record) travels in bit
// 2 of a request's flags byte, through log entries and forwarded batches
// alike, and a request without it encodes as before the flag existed.
func TestCodecExact(t *testing.T) {
	for _, exact := range []bool{false, true} {
		reqs := []engine.Request{
			{Kind: engine.KindFixedWindow, Burst: 7, Period: 3 * 86_400e9, Quantity: 1, Exact: exact},
			{Kind: engine.KindFixedWindow, Burst: engine.MaxCount, Period: 1e9, Quantity: 3},
		}
		ops := []shards.Op{{Code: shards.OpLimitAll, Keys: [][]byte{[]byte("r"), []byte("k")}, Reqs: reqs}}
		b := encodeOpsEntry(nil, 7, ops)
		// header, op count, code, key count, two keys of one byte each,
		// request count, then the first request's kind and flags.
		if got := b[entryHeader+1+1+1+2*2+1+1]; (got&codec.FlagExact != 0) != exact || got&^codec.FlagExact != 0 {
			t.Errorf("Exact=%v: flags byte = %#x", exact, got)
		}
		e, err := decodeEntry(b, nil)
		if err != nil {
			t.Fatalf("Exact=%v: decodeEntry = %v", exact, err)
		}
		if got := e.ops[0].Reqs; got[0] != reqs[0] || got[1] != reqs[1] {
			t.Errorf("decodeEntry(Exact=%v) requests = %+v, want %+v", exact, got, reqs)
		}
		fw, err := decodeForward(encodeForward(ops))
		if err != nil || fw[0].Reqs[0] != reqs[0] || fw[0].Reqs[1] != reqs[1] {
			t.Errorf("decodeForward(Exact=%v) = %+v, %v", exact, fw, err)
		}
	}
}

// A forwarded batch's reply carries each result's Limited and Shadowed (a
// shadow request's refusal answered allowed), so that a follower's region
// gate never ships a shadowed refusal as async consumption.
func TestCodecResultShadowed(t *testing.T) {
	want := []engine.Result{
		{Limited: true, Limit: 2, RetryAfter: 5, ResetAfter: 9, Wait: -1},
		{Shadowed: true, Limit: 2, RetryAfter: -1, ResetAfter: 9},
		{Limit: 2, Remaining: 1, RetryAfter: -1, ResetAfter: 3},
		// A CC.ACQUIRE's lease id travels back to the follower that
		// forwarded it, allowed, shadowed or limited.
		{Limit: 2, Remaining: 1, RetryAfter: -1, ResetAfter: 3, Lease: "job-7"},
		{Shadowed: true, Limit: 2, RetryAfter: -1, ResetAfter: 3, Lease: "dn6g4g7fn63r-2"},
		{Limited: true, Limit: 2, RetryAfter: 4, ResetAfter: 3, Lease: "x"},
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
