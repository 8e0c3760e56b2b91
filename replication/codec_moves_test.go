package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

const movesT0 = int64(1767225600) * 1e9

func movesKeys(keys ...string) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(k)
	}
	return out
}

// movesLogState is a valid sliding-log state.
func movesLogState() engine.State {
	return engine.State{Kind: engine.KindSlidingLog, ExpireAt: movesT0 + 9e9, A: 3,
		Log: []engine.LogEntry{{At: movesT0 - 1e9, Count: 1}, {At: movesT0, Count: 2}}}
}

// TestCodecMoveOps: every new op, with each combination of the Asking,
// NoGrow and Replace bits, survives a log entry and a forwarded batch.
func TestCodecMoveOps(t *testing.T) {
	gcra := engine.State{Kind: engine.KindGCRA, ExpireAt: movesT0 + 5e9, A: movesT0 + 5e9}
	req := []engine.Request{{Kind: engine.KindGCRA, Burst: 5, Rate: 1, Period: 1e9, Quantity: 1}}
	var ops []shards.Op
	for _, asking := range []bool{false, true} {
		for _, noGrow := range []bool{false, true} {
			for _, replace := range []bool{false, true} {
				for _, st := range []engine.State{gcra, movesLogState()} {
					ops = append(ops, shards.Op{Code: shards.OpRestore, Keys: movesKeys("{u}k"), State: st,
						Replace: replace, NoGrow: noGrow, Asking: asking})
				}
			}
			for _, code := range []shards.OpCode{shards.OpMoveOut, shards.OpMoveDone, shards.OpMoveAbort} {
				ops = append(ops, shards.Op{Code: code, Keys: movesKeys("{u}a", "{u}b", ""), NoGrow: noGrow, Asking: asking})
			}
			ops = append(ops,
				shards.Op{Code: shards.OpMoveOut, Keys: movesKeys("{u}a"), Dest: "127.0.0.1:7004", NoGrow: noGrow, Asking: asking},
				shards.Op{Code: shards.OpMoveOut, Keys: movesKeys("{u}a", "{u}b"), Dest: "127.0.0.1:7004", Exclusive: true, NoGrow: noGrow, Asking: asking},
				shards.Op{Code: shards.OpLimit, Keys: movesKeys("k"), Reqs: req, NoGrow: noGrow, Asking: asking},
				shards.Op{Code: shards.OpDel, Keys: movesKeys("k", "j"), NoGrow: noGrow, Asking: asking})
		}
	}
	var s opsScratch
	for _, sc := range []*opsScratch{nil, &s} {
		e, err := decodeEntry(encodeOpsEntry(nil, movesT0, ops[:3], ops[3:]), sc)
		if err != nil {
			t.Fatalf("decodeEntry = %v", err)
		}
		if e.now != movesT0 || !reflect.DeepEqual(e.ops, ops) {
			t.Errorf("decodeEntry(scratch %v) = %+v at %d, want %+v", sc != nil, e.ops, e.now, ops)
		}
	}
	fw, err := decodeForward(encodeForward(ops))
	if err != nil || !reflect.DeepEqual(fw, ops) {
		t.Errorf("decodeForward = %+v, %v; want %+v", fw, err, ops)
	}
	// Each flag sits in its own bit of the op code byte.
	b := encodeForward([]shards.Op{{Code: shards.OpMoveOut, Keys: movesKeys("k"), Asking: true}})
	if got := b[2]; got != byte(shards.OpMoveOut)|opAsking {
		t.Errorf("op code byte of an asking move = %#x, want %#x", got, byte(shards.OpMoveOut)|opAsking)
	}
	b = encodeForward([]shards.Op{{Code: shards.OpMoveOut, Keys: movesKeys("k"), Exclusive: true}})
	if got := b[2]; got != byte(shards.OpMoveOut)|opExclusive {
		t.Errorf("op code byte of an exclusive move = %#x, want %#x", got, byte(shards.OpMoveOut)|opExclusive)
	}
}

// An entry written before the new ops and flags (hand-encoded here as the
// format has always been) decodes unchanged and re-encodes to the same
// bytes.
func TestCodecOldEntryUnchanged(t *testing.T) {
	old := []byte{codecVersion, entryOps}
	old = binary.LittleEndian.AppendUint64(old, uint64(movesT0))
	old = append(old, 3)                                                                // ops
	old = append(old, byte(shards.OpLimit), 1, 1, 'k', 1)                               // code, 1 key "k", 1 request
	old = append(old, byte(engine.KindGCRA), 0, 10, 2, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 2) // kind, flags, burst 5, rate 1, period 1e9, quantity 1
	old = append(old, byte(shards.OpDel)|opNoGrow, 2, 1, 'a', 1, 'b', 0)
	old = append(old, byte(shards.OpFlush), 0, 0)
	e, err := decodeEntry(old, nil)
	if err != nil {
		t.Fatalf("decodeEntry(old entry) = %v", err)
	}
	want := []shards.Op{
		{Code: shards.OpLimit, Keys: movesKeys("k"), Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: 5, Rate: 1, Period: 1e9, Quantity: 1}}},
		{Code: shards.OpDel, Keys: movesKeys("a", "b"), NoGrow: true},
		{Code: shards.OpFlush},
	}
	if !reflect.DeepEqual(e.ops, want) {
		t.Errorf("old entry decodes to %+v, want %+v", e.ops, want)
	}
	if again := encodeOpsEntry(nil, movesT0, e.ops); !bytes.Equal(again, old) {
		t.Errorf("old entry re-encodes to %x, want %x", again, old)
	}
}

// A restore whose state no limiter can hold, or whose framing is wrong,
// makes the whole entry bad; so does a move of the wrong shape.
func TestCodecMovesRefused(t *testing.T) {
	good := movesLogState()
	bad := good
	bad.A = 4 // differs from its entries' sum
	restore := func(flags byte, st *engine.State, extra ...byte) []byte {
		b := []byte{codecVersion, 1, byte(shards.OpRestore), 1, 1, 'k', 0, flags}
		b = snapshot.AppendState(b, st)
		return append(b, extra...)
	}
	goodBytes := restore(0, &good)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"invalid state", restore(0, &bad)},
		{"unknown restore flag", restore(0x02, &good)},
		{"no flags byte", []byte{codecVersion, 1, byte(shards.OpRestore), 1, 1, 'k', 0}},
		{"no state", []byte{codecVersion, 1, byte(shards.OpRestore), 1, 1, 'k', 0, 0}},
		{"truncated state", goodBytes[:len(goodBytes)-1]},
		{"trailing byte", restore(0, &good, 0)},
		{"restore with two keys", append([]byte{codecVersion, 1, byte(shards.OpRestore), 2, 1, 'k', 1, 'j', 0, 0}, snapshot.AppendState(nil, &good)...)},
		{"restore without key", append([]byte{codecVersion, 1, byte(shards.OpRestore), 0, 0, 0}, snapshot.AppendState(nil, &good)...)},
		{"move out without key", []byte{codecVersion, 1, byte(shards.OpMoveOut), 0, 0}},
		{"move done without key", []byte{codecVersion, 1, byte(shards.OpMoveDone), 0, 0}},
		{"move abort with a request", []byte{codecVersion, 1, byte(shards.OpMoveAbort), 1, 1, 'k', 1, 1, 0, 2, 2, 2, 2}},
		{"unknown op code", []byte{codecVersion, 1, byte(shards.OpMoveAbort) + 1, 1, 1, 'k', 0}},
		{"unknown op code with flags", []byte{codecVersion, 1, 0x3f | opAsking, 1, 1, 'k', 0}},
		{"destination on a delete", []byte{codecVersion, 1, byte(shards.OpDel) | opDest, 1, 1, 'k', 0, 1, 'x'}},
		{"empty destination", []byte{codecVersion, 1, byte(shards.OpMoveOut) | opDest, 1, 1, 'k', 0, 0}},
		{"truncated destination", []byte{codecVersion, 1, byte(shards.OpMoveOut) | opDest, 1, 1, 'k', 0, 3, 'x'}},
	} {
		if ops, err := decodeForward(tc.in); !errors.Is(err, ErrBadPayload) {
			t.Errorf("%s: decodeForward(%x) = %+v, %v; want ErrBadPayload", tc.name, tc.in, ops, err)
		}
	}
	if ops, err := decodeForward(goodBytes); err != nil || !reflect.DeepEqual(ops[0].State, good) {
		t.Errorf("control: decodeForward = %+v, %v", ops, err)
	}
	// The same refusal inside a log entry.
	entry := appendEntryHeader(nil, entryOps, movesT0)
	entry = append(entry, restore(0, &bad)[1:]...)
	if _, err := decodeEntry(entry, nil); !errors.Is(err, ErrBadPayload) {
		t.Errorf("decodeEntry(invalid restore state) = %v, want ErrBadPayload", err)
	}
}

// TestCodecResultErrs: every error of resultErrs, the new ones included and
// wrapped ones too, keeps its identity across a forwarded call; the codes
// of the errors that existed before keep their numbers.
func TestCodecResultErrs(t *testing.T) {
	newErrs := []error{shards.ErrBusyKey, shards.ErrMoving, cluster.ErrMoved, cluster.ErrAsk, cluster.ErrTryAgain}
	var res []shards.Result
	for _, err := range append(resultErrs[:], newErrs...) {
		res = append(res, shards.Result{Err: err, N: 3}, shards.Result{Err: fmt.Errorf("slot 12: %w", err)})
	}
	got := make([]shards.Result, len(res))
	if err := decodeResults(encodeResults(nil, res), got); err != nil {
		t.Fatal(err)
	}
	for i := range res {
		if !errors.Is(got[i].Err, errors.Unwrap(res[i].Err)) && !errors.Is(got[i].Err, res[i].Err) || got[i].N != res[i].N {
			t.Errorf("result %d: %v (N %d) came back as %v (N %d)", i, res[i].Err, res[i].N, got[i].Err, got[i].N)
		}
	}
	for _, err := range newErrs {
		if code := errCode(err); code == errOther {
			t.Errorf("%v has no code", err)
		}
	}
	// Codes are 1 + index: the first twelve are on the wire already.
	if errCode(shards.ErrWrongType) != 1 || errCode(shards.ErrWouldGrow) != 12 || errCode(shards.ErrBusyKey) != 13 || errCode(cluster.ErrTryAgain) != 17 {
		t.Errorf("error codes renumbered: WRONGTYPE %d, WouldGrow %d, BusyKey %d, TryAgain %d",
			errCode(shards.ErrWrongType), errCode(shards.ErrWouldGrow), errCode(shards.ErrBusyKey), errCode(cluster.ErrTryAgain))
	}
}

// Two moves of one key started at once from different nodes of a group
// (two MIGRATEs): their Exclusive OpMoveOuts go through the one log, so
// exactly one takes the key and the other is refused with ErrMoving,
// whichever nodes they start from. Only the one that took the key may put
// it back.
func TestExclusiveMoveOutAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	for round := 0; round < 5; round++ {
		key := fmt.Sprintf("{m}%d", round)
		if _, err := write(t, c.nodes[l].node, throttle(key, 9, 1, 3600, 1)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range c.nodes {
			wg.Go(func() {
				res := make([]shards.Result, 1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				op := shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{[]byte(key)}, Dest: "127.0.0.1:1", Exclusive: true}
				if err := c.nodes[i].node.Write(ctx, []shards.Op{op}, res); err != nil {
					errs[i] = err
					return
				}
				errs[i] = res[0].Err
			})
		}
		wg.Wait()
		took, refused := 0, 0
		for i, err := range errs {
			switch {
			case err == nil:
				took++
			case errors.Is(err, shards.ErrMoving):
				refused++
			default:
				t.Fatalf("round %d: move via %s: %v", round, c.nodes[i].id, err)
			}
		}
		if took != 1 || refused != 2 {
			t.Fatalf("round %d: %d moves took %s, %d were refused; want 1 and 2", round, took, key, refused)
		}
	}
}
