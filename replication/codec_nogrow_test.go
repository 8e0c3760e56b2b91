package replication

import (
	"errors"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// Op.NoGrow travels in bit 7 of the op code byte, entries without it encode
// exactly as before the flag existed, and ErrWouldGrow keeps its identity
// across a forwarded call.
func TestCodecNoGrow(t *testing.T) {
	req := []engine.Request{{Kind: engine.KindSlidingLog, Burst: 10, Period: 1e9, Quantity: 1}}
	for _, noGrow := range []bool{false, true} {
		ops := []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")}, Reqs: req, NoGrow: noGrow}}
		b := encodeOpsEntry(nil, 7, ops)
		// entry header, op count, then the op code byte.
		if got, want := b[entryHeader+1], byte(shards.OpLimit); (got == want) == noGrow || got&^opNoGrow != want {
			t.Errorf("NoGrow=%v: op code byte = %#x", noGrow, got)
		}
		e, err := decodeEntry(b, nil)
		if err != nil {
			t.Fatalf("NoGrow=%v: decodeEntry = %v", noGrow, err)
		}
		if op := e.ops[0]; op.Code != shards.OpLimit || op.NoGrow != noGrow {
			t.Errorf("decodeEntry(NoGrow=%v) = code %d, NoGrow %v", noGrow, op.Code, op.NoGrow)
		}
		fw, err := decodeForward(encodeForward(ops))
		if err != nil || fw[0].NoGrow != noGrow || fw[0].Code != shards.OpLimit {
			t.Errorf("decodeForward(NoGrow=%v) = %+v, %v", noGrow, fw, err)
		}
	}
	got := make([]shards.Result, 1)
	if err := decodeResults(encodeResults(nil, []shards.Result{{Err: shards.ErrWouldGrow}}), got); err != nil || !errors.Is(got[0].Err, shards.ErrWouldGrow) {
		t.Errorf("ErrWouldGrow round trip = %v, %v", got[0].Err, err)
	}
}
