package replication

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

// newTestFSM returns an FSM over a fresh store, handing outcomes to deliver
// (nil: dropped).
func newTestFSM(t *testing.T, deliver DeliverFunc) *FSM {
	t.Helper()
	st, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	return NewFSM(st, deliver, nil)
}

// outcome is what a deliver hook received for one entry, copied out of the
// FSM's reused buffers.
type outcome struct {
	res []shards.Result // nil for an entry that is not a batch of operations
	err error
}

// recorder is a deliver hook for tests: it keeps a deep copy of every
// entry's outcome, in apply order, and claims none.
type recorder struct{ out []outcome }

func (r *recorder) deliver(_ []byte, res []shards.Result, err error) bool {
	o := outcome{err: err}
	if res != nil {
		o.res = make([]shards.Result, len(res))
		copyResults(o.res, res)
	}
	r.out = append(r.out, o)
	return false
}

// freshResults applies the operations entries of logs to a store of its
// own, each operation into a Result of its own (nothing reused), at the
// time the FSM applies them: the reference for what a deliver hook gets.
func freshResults(t *testing.T, logs []*raft.Log) map[int][]shards.Result {
	t.Helper()
	st, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]shards.Result{}
	last := int64(math.MinInt64)
	for i, l := range logs {
		e, err := decodeEntry(l.Data, nil)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		last = max(last, e.now)
		if e.typ != entryOps {
			continue
		}
		res := make([]shards.Result, len(e.ops))
		for j := range e.ops {
			st.Exec(&e.ops[j], last, &res[j])
		}
		out[i] = res
	}
	return out
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// testLog builds a log of command entries exercising every limiter kind,
// deletes, a flush, membership changes and one entry stamped in the past.
func testLog() []*raft.Log {
	base := int64(1_700_000_000) * int64(time.Second)
	var logs []*raft.Log
	add := func(data []byte) {
		logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Term: 1, Type: raft.LogCommand, Data: data})
	}
	add(encodeMemberEntry(base, "n0", "127.0.0.1:7000", false))
	add(encodeMemberEntry(base, "n1", "127.0.0.1:7001", false))
	kinds := []engine.Request{
		{Kind: engine.KindGCRA, Burst: 5, Rate: 10, Period: int64(time.Minute), Quantity: 1},
		{Kind: engine.KindTokenBucket, Burst: 10, Rate: 1, Period: int64(time.Second), Quantity: 3},
		{Kind: engine.KindLeakyBucket, Burst: 10, Rate: 2, Period: int64(time.Second), Quantity: 1},
		{Kind: engine.KindFixedWindow, Burst: 100, Period: int64(time.Hour), Quantity: 7},
		{Kind: engine.KindSlidingWindow, Burst: 100, Period: int64(time.Minute), Quantity: 2},
		{Kind: engine.KindSlidingLog, Burst: 50, Period: int64(time.Minute), Quantity: 1},
	}
	for step := 0; step < 200; step++ {
		now := base + int64(step)*int64(37*time.Millisecond)
		if step == 120 {
			now = base // a stamp in the past: applied at the last time instead
		}
		var ops []shards.Op
		for j := 0; j < 5; j++ {
			k := (step*5 + j) % 60
			ops = append(ops, shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(fmt.Sprintf("key:%d", k))}, Reqs: []engine.Request{kinds[k%len(kinds)]}})
		}
		if step%50 == 49 {
			ops = append(ops, shards.Op{Code: shards.OpDel, Keys: [][]byte{[]byte("key:3"), []byte("key:4")}})
		}
		if step == 100 {
			ops = append(ops, shards.Op{Code: shards.OpFlush})
		}
		ops = append(ops, shards.Op{Code: shards.OpLimitAll,
			Keys: [][]byte{[]byte("all:a"), []byte("all:b")},
			Reqs: []engine.Request{kinds[0], {Kind: engine.KindGCRA, Burst: 2, Rate: 1, Period: int64(time.Second), Quantity: 1}}})
		add(encodeOpsEntry(nil, now, ops))
	}
	add(encodeMemberEntry(base, "n1", "", true))
	return logs
}

// Two FSMs fed the same log produce byte-identical snapshots, and a third
// restored from that snapshot snapshots to the same bytes again.
func TestDeterministicSnapshots(t *testing.T) {
	logs := testLog()
	a, b := newTestFSM(t, nil), newTestFSM(t, nil)
	for _, l := range logs {
		a.Apply(l)
	}
	// b applies the same log in batches of varying size.
	for i := 0; i < len(logs); {
		j := min(len(logs), i+1+i%7)
		b.ApplyBatch(logs[i:j])
		i = j
	}
	sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ: %d and %d bytes", len(sa), len(sb))
	}
	if a.LastIndex() != uint64(len(logs)) || a.LastTime() != b.LastTime() {
		t.Fatalf("last index/time = %d/%d and %d, want %d", a.LastIndex(), a.LastTime(), b.LastTime(), len(logs))
	}
	if got := a.Members(); len(got) != 1 || got["n0"] != "127.0.0.1:7000" {
		t.Fatalf("members = %v, want only n0", got)
	}
	c := newTestFSM(t, nil)
	if err := c.Restore(io.NopCloser(bytes.NewReader(sa))); err != nil {
		t.Fatal(err)
	}
	if sc := snapshotBytes(t, c); !bytes.Equal(sa, sc) {
		t.Fatal("snapshot of the restored FSM differs from the original")
	}
	if c.LastIndex() != a.LastIndex() || c.LastTime() != a.LastTime() {
		t.Fatalf("restored index/time = %d/%d, want %d/%d", c.LastIndex(), c.LastTime(), a.LastIndex(), a.LastTime())
	}
}

// A corrupt snapshot is refused and leaves the FSM as it was.
func TestRestoreCorruptLeavesState(t *testing.T) {
	a := newTestFSM(t, nil)
	for _, l := range testLog() {
		a.Apply(l)
	}
	good := snapshotBytes(t, a)
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	before := a.store.Len(a.LastTime())
	if err := a.Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
		t.Fatal("Restore(corrupt) = nil, want an error")
	}
	if got := a.store.Len(a.LastTime()); got != before || got == 0 {
		t.Fatalf("keys after a refused restore = %d, want %d", got, before)
	}
}

// Entries round-trip through the codec; malformed ones are refused whole.
func TestCodec(t *testing.T) {
	ops := []shards.Op{
		{Code: shards.OpLimit, Keys: [][]byte{[]byte("a\r\n\x00b")}, Reqs: []engine.Request{{Kind: engine.KindTokenBucket, Burst: 1 << 40, Rate: 3, Period: engine.MaxPeriod, Quantity: -5, Interval: true}}},
		{Code: shards.OpDel, Keys: [][]byte{[]byte("x"), []byte("")}},
		{Code: shards.OpFlush},
	}
	e, err := decodeEntry(encodeOpsEntry(nil, -42, ops), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.now != -42 || len(e.ops) != 3 || string(e.ops[0].Keys[0]) != "a\r\n\x00b" || e.ops[0].Reqs[0] != ops[0].Reqs[0] || len(e.ops[1].Keys) != 2 {
		t.Fatalf("round trip = %+v", e)
	}
	fw, err := decodeForward(encodeForward(ops[:1], ops[1:]))
	if err != nil || len(fw) != 3 {
		t.Fatalf("forward round trip = %d ops, %v", len(fw), err)
	}
	res := []shards.Result{
		{Results: []engine.Result{{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 5, ResetAfter: 9, Wait: -1}}},
		{Err: shards.ErrWrongType},
		{Err: errors.New("odd"), N: 3},
	}
	got := make([]shards.Result, 3)
	if err := decodeResults(encodeResults(nil, res), got); err != nil {
		t.Fatal(err)
	}
	if got[0].Results[0] != res[0].Results[0] || !errors.Is(got[1].Err, shards.ErrWrongType) || got[2].Err.Error() != "odd" || got[2].N != 3 {
		t.Fatalf("results round trip = %+v", got)
	}
	good := encodeOpsEntry(nil, 1, ops)
	bad := [][]byte{
		nil,
		good[:len(good)-1],
		append(bytes.Clone(good), 0),
		append([]byte{9}, good[1:]...),
		encodeOpsEntry(nil, 1, []shards.Op{{Code: 99}}),
		encodeOpsEntry(nil, 1, []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")}}}),
		encodeOpsEntry(nil, 1, []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")}, Reqs: []engine.Request{{Kind: 77}}}}),
		append(appendEntryHeader(nil, entryOps, 1), 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for i, b := range bad {
		if _, err := decodeEntry(b, &opsScratch{}); !errors.Is(err, ErrBadPayload) {
			t.Errorf("decodeEntry(bad[%d]) = %v, want ErrBadPayload", i, err)
		}
	}
	// The FSM refuses a bad entry as a whole and changes nothing.
	var rec recorder
	f := newTestFSM(t, rec.deliver)
	if r := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: bad[1]}); r != nil {
		t.Fatalf("Apply(bad) = %v, want nil (the outcome goes to the hook)", r)
	}
	if len(rec.out) != 1 || rec.out[0].res != nil || !errors.Is(rec.out[0].err, ErrBadPayload) {
		t.Fatalf("Apply(bad) delivered %+v, want one outcome with ErrBadPayload", rec.out)
	}
}

// The deliver hook gets every entry's outcome once, from buffers the FSM
// reuses, and raft gets nothing: a hook that claims some entries (as a
// Node's does, by the id in their Extensions) and one that records all see
// the results fresh buffers give, and the state is the same.
func TestDeliverHook(t *testing.T) {
	logs := testLog()
	// b's hook claims every third entry, identified by the id the
	// leader's submit path gives it, and copies its results.
	claimed := map[uint64]bool{}
	for i, l := range logs {
		l.Extensions = encodeEntryID(1, uint64(i))
		if i%3 == 0 {
			claimed[uint64(i)] = true
		}
	}
	got := map[int][]shards.Result{}
	cur, calls := 0, 0
	var rec recorder
	a := newTestFSM(t, rec.deliver)
	b := newTestFSM(t, func(id []byte, res []shards.Result, err error) bool {
		calls++
		if err != nil {
			t.Errorf("deliver: %v", err)
		}
		if _, seq, ok := decodeEntryID(id); !ok || !claimed[seq] {
			return false
		}
		got[cur] = make([]shards.Result, len(res))
		copyResults(got[cur], res)
		return true
	})
	for i, l := range logs {
		cur = i
		if ra, rb := a.Apply(l), b.Apply(l); ra != nil || rb != nil {
			t.Fatalf("entry %d: responses %v and %v, want nil", i, ra, rb)
		}
	}
	if len(rec.out) != len(logs) || calls != len(logs) {
		t.Fatalf("deliver called %d and %d times, want once per entry (%d)", len(rec.out), calls, len(logs))
	}
	// Compared after every entry was applied: a delivered copy must not
	// share the buffers the FSM reuses.
	fresh := freshResults(t, logs)
	compared := 0
	for i, o := range rec.out {
		if o.err != nil {
			t.Fatalf("entry %d: %v", i, o.err)
		}
		w, ok := fresh[i]
		if ok != (o.res != nil) || fmt.Sprint(w) != fmt.Sprint(o.res) {
			t.Fatalf("entry %d: recorded %v, want %v", i, o.res, w)
		}
		if ok && i%3 == 0 {
			if fmt.Sprint(w) != fmt.Sprint(got[i]) {
				t.Fatalf("entry %d: delivered %v, want %v", i, got[i], w)
			}
			compared++
		}
	}
	if compared < 60 {
		t.Fatalf("only %d claimed command entries compared", compared)
	}
	if sa, sb := snapshotBytes(t, a), snapshotBytes(t, b); !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ: %d and %d bytes", len(sa), len(sb))
	}
}

// A writer woken with its answer must find its entry applied: LastIndex is
// at or past the entry when the deliver hook runs, whatever the entry's
// kind (waiting for convergence by LastIndex relies on it).
func TestFSMIndexSetBeforeDeliver(t *testing.T) {
	var f *FSM
	var seen []uint64
	f = newTestFSM(t, func([]byte, []shards.Result, error) bool {
		seen = append(seen, f.LastIndex())
		return false
	})
	entries := []struct {
		name string
		data []byte
	}{
		{"ops", encodeOpsEntry(nil, time.Second.Nanoseconds(), []shards.Op{throttle("k", 1, 1, 60, 1)})},
		{"member", encodeMemberEntry(2*time.Second.Nanoseconds(), "n1", "127.0.0.1:1", false)},
		{"corrupt", []byte{codecVersion, 0xff, 1, 2, 3}},
	}
	for i, e := range entries {
		seen = seen[:0]
		idx := uint64(10 + i)
		f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: e.data})
		if len(seen) != 1 {
			t.Fatalf("%s: deliver ran %d times, want 1", e.name, len(seen))
		}
		if seen[0] < idx {
			t.Errorf("%s: LastIndex was %d when the writer was answered, want %d", e.name, seen[0], idx)
		}
	}
}

// neverFuture is a raft future raft never answers, as one left in a
// buffered channel when raft shuts down.
type neverFuture struct{ block chan struct{} }

func (f neverFuture) Error() error { <-f.block; return nil }

type doneFuture struct{ err error }

func (f doneFuture) Error() error { return f.err }

// futureError returns a future's answer, and ErrShutdown instead of
// waiting forever for one raft will never answer once it has stopped.
func TestFutureErrorAfterShutdown(t *testing.T) {
	n := &Node{raftStopped: make(chan struct{})}
	want := errors.New("answered")
	if err := n.futureError(doneFuture{want}); err != want {
		t.Fatalf("answered future: %v, want %v", err, want)
	}
	f := neverFuture{block: make(chan struct{})}
	defer close(f.block)
	got := make(chan error, 1)
	go func() { got <- n.futureError(f) }()
	select {
	case err := <-got:
		t.Fatalf("returned %v before raft stopped", err)
	case <-time.After(50 * time.Millisecond): // still waiting, as it must
	}
	close(n.raftStopped)
	select {
	case err := <-got:
		if !errors.Is(err, ErrShutdown) {
			t.Fatalf("after raft stopped: %v, want ErrShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting 10 s after raft stopped")
	}
}
