package region_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/testlog"
	"github.com/cellserver/cellserver/region"
)

// TestApplyInSequence: a lane applies its batches only in order. The next
// one is applied; one already applied answers DUP (exactly once); one that
// skips some (a gap, forged or after a loss) is refused with a
// SequenceError naming the one expected, changes nothing and is counted.
func TestApplyInSequence(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	b := rs["b"]
	stream := strings.Repeat("0f", 16) + "-" + strconv.FormatInt(t0/int64(region.StreamEra), 10)
	steps := []struct {
		seq      int64
		dup      bool
		expected int64 // > 0: refused as out of sequence, this one expected
		count    int64 // b's count of c:1 afterwards
	}{
		{seq: 2000, expected: 1, count: 0}, // the forged gap on a fresh lane
		{seq: 2, expected: 1, count: 0},
		{seq: 1, count: 1},
		{seq: 1, dup: true, count: 1},
		{seq: 3, expected: 2, count: 1},
		{seq: 2, count: 2},
		{seq: 2, dup: true, count: 2},
		{seq: 1, dup: true, count: 2},
		{seq: 5, expected: 3, count: 2},
		{seq: 3, count: 3},
		{seq: engine.MaxCount, expected: 4, count: 3},
		{seq: 4, count: 4},
	}
	var dups, gaps, applied int64
	for i, s := range steps {
		call := region.ApplyCall{Origin: "a", Target: "b", Stream: stream, Slot: hashslot.Of([]byte("c:1")), Seq: s.seq,
			Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(1)}}
		dup, err := b.gate.Apply(context.Background(), &call)
		var gap *region.SequenceError
		switch {
		case s.expected > 0:
			gaps++
			if !errors.As(err, &gap) || gap.Expected != s.expected || gap.Seq != s.seq || dup {
				t.Errorf("step %d: Apply(seq %d) = dup %v, %v; want a SequenceError expecting %d", i, s.seq, dup, err, s.expected)
			}
		case s.dup:
			dups++
			if err != nil || !dup {
				t.Errorf("step %d: Apply(seq %d) = dup %v, %v; want DUP", i, s.seq, dup, err)
			}
		default:
			applied++
			if err != nil || dup {
				t.Errorf("step %d: Apply(seq %d) = dup %v, %v; want applied", i, s.seq, dup, err)
			}
		}
		if got := used(t, b, "c:1"); got != s.count {
			t.Errorf("step %d (seq %d): b counts %d, want %d", i, s.seq, got, s.count)
		}
	}
	p := b.gate.Status().Peers[0]
	if p.OutOfSequence != gaps || p.Duplicates != dups || p.BatchesApplied != applied {
		t.Errorf("b's counters for a: out_of_sequence %d, duplicates %d, batches_applied %d; want %d, %d, %d",
			p.OutOfSequence, p.Duplicates, p.BatchesApplied, gaps, dups, applied)
	}
	st := b.gate.Status()
	var field string
	for _, kv := range st.Fields() {
		if kv[0] == "region_peer_a" {
			field = kv[1]
		}
	}
	if want := ",out_of_sequence=" + strconv.FormatInt(gaps, 10) + ","; !strings.Contains(field, want) {
		t.Errorf("INFO regions region_peer_a = %q, want %s", field, want)
	}
}

// TestForgedGapLosesNothing is issue 27's case: a peer that knows the
// region's password sends a batch far ahead in a real lane (its stream read
// from the record's name, as KEYS shows it, or guessed from it); the
// sender's real batches that follow are applied, none is answered DUP.
func TestForgedGapLosesNothing(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	a, b := rs["a"], rs["b"]
	a.limit(t, "c:1", counter(5))
	a.gate.Sync()
	// The record's name: region:seq:a:<digest>:{tag}.
	var record string
	seqRecordsScan(b, func(k string) { record = k })
	parts := strings.Split(record, ":")
	if len(parts) != 5 || parts[2] != "a" {
		t.Fatalf("sequence record %q, want region:seq:a:<digest>:{tag}", record)
	}
	if strings.Contains(record, a.gate.StreamID()) {
		t.Fatalf("record %q names the stream %s itself", record, a.gate.StreamID())
	}
	era := strconv.FormatInt(t0/int64(region.StreamEra), 10)
	slot := hashslot.Of([]byte("c:1"))
	// A forger does not know the stream's id (only its digest): a stream
	// named after the digest is a lane of its own, fresh, where a batch
	// other than 1 is a gap and batch 1 touches nothing of a's.
	stream := parts[3] + "-" + era
	for _, seq := range []int64{2, 2000} {
		forged := region.ApplyCall{Origin: "a", Target: "b", Stream: stream, Slot: slot, Seq: seq,
			Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(1)}}
		var gap *region.SequenceError
		if dup, err := b.gate.Apply(context.Background(), &forged); !errors.As(err, &gap) || dup || gap.Expected != 1 {
			t.Errorf("forged batch %d of stream %s: dup %v, %v; want refused out of sequence, 1 expected", seq, stream, dup, err)
		}
	}
	// Far ahead in a's own stream (were its id known, as before streams
	// were named by a digest): refused all the same.
	forged := region.ApplyCall{Origin: "a", Target: "b", Stream: a.gate.StreamID(), Slot: slot, Seq: 2000,
		Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(1)}}
	var gap *region.SequenceError
	if dup, err := b.gate.Apply(context.Background(), &forged); !errors.As(err, &gap) || dup || gap.Expected != 2 {
		t.Errorf("forged batch 2000 of a's stream: dup %v, %v; want refused out of sequence, 2 expected", dup, err)
	}
	// The real batches that follow are applied.
	for i := range 3 {
		a.limit(t, "c:1", counter(int64(10+i)))
		a.gate.Sync()
	}
	if got, want := used(t, b, "c:1"), int64(5+10+11+12); got != want {
		t.Errorf("b counts %d after the forged batches and 3 real ones, want %d", got, want)
	}
	if got := used(t, a, "c:1"); got != 5+10+11+12 {
		t.Errorf("a counts %d, want %d", got, 5+10+11+12)
	}
	if p := b.gate.Status().Peers[0]; p.Duplicates != 0 || p.BatchesApplied != 4 {
		t.Errorf("b: %d duplicates, %d batches applied; want 0 and 4", p.Duplicates, p.BatchesApplied)
	}
	if p := a.gate.Status().Peers[0]; p.Queued != 0 || p.Dropped != 0 || p.BatchesSent != 4 {
		t.Errorf("a: queued %d, dropped %d, batches_sent %d; want 0, 0, 4", p.Queued, p.Dropped, p.BatchesSent)
	}
}

// seqRecordsScan calls fn with the name of every sequence record of r.
func seqRecordsScan(r *testRegion, fn func(key string)) {
	for cursor := uint64(0); ; {
		cursor = r.store.Scan(cursor, 100, r.cfg.Now(), func(key []byte, _ engine.Kind) {
			if strings.HasPrefix(string(key), "region:seq:") {
				fn(string(key))
			}
		})
		if cursor == 0 {
			return
		}
	}
}

// TestResequenceAfterLostRecord: a receiver whose record of a lane went
// back (restored from a snapshot older than batches it acknowledged, or
// the record evicted or deleted) refuses the sender's next batch as out of
// sequence; the sender sends it again as the one expected, and nothing is
// lost or applied twice from then on.
func TestResequenceAfterLostRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		back func(t *testing.T, b *testRegion, record []byte, older engine.State)
		// count is what b's c:1 holds after the loss, before the next batch.
		count int64
	}{
		{"record restored older", func(t *testing.T, b *testRegion, record []byte, older engine.State) {
			b.store.Put(record, older)
		}, 6},
		{"record deleted", func(t *testing.T, b *testRegion, record []byte, _ engine.State) {
			if n := b.store.Exists([][]byte{record}, b.cfg.Now()); n != 1 {
				t.Fatalf("record %s missing", record)
			}
			b.store.Flush() // everything, as a restart from a snapshot taken before the lane began
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{}
			clock.ns.Store(t0)
			pol := "c:* async"
			rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
			a, b := rs["a"], rs["b"]
			a.limit(t, "c:1", counter(1))
			a.gate.Sync()
			var record []byte
			seqRecordsScan(b, func(k string) { record = []byte(k) })
			older, ok := b.store.Lookup(record, clock.Now())
			if !ok || older.B != 1 {
				t.Fatalf("record after batch 1: %+v, %v", older, ok)
			}
			for q := int64(2); q <= 3; q++ { // batches 2 and 3
				a.limit(t, "c:1", counter(q))
				a.gate.Sync()
			}
			if got := used(t, b, "c:1"); got != 6 {
				t.Fatalf("b counts %d after 3 batches, want 6", got)
			}
			tc.back(t, b, record, older)
			a.limit(t, "c:1", counter(10)) // batch 4, refused: the lane is back at 1 or 0
			a.gate.Sync()
			if got := used(t, b, "c:1"); got != tc.count {
				t.Fatalf("b counts %d after a batch out of sequence, want %d (nothing applied)", got, tc.count)
			}
			if p := a.gate.Status().Peers[0]; p.Resequenced != 1 || p.Queued != 1 || p.Dropped != 0 {
				t.Fatalf("a: resequenced %d, queued %d, dropped %d; want 1, 1, 0", p.Resequenced, p.Queued, p.Dropped)
			}
			a.gate.Sync() // sent again as the batch b expects
			a.limit(t, "c:1", counter(20))
			a.gate.Sync() // and the next follows it
			a.gate.Sync() // nothing more: no batch twice
			if got := used(t, b, "c:1"); got != tc.count+30 {
				t.Errorf("b counts %d, want %d", got, tc.count+30)
			}
			pa, pb := a.gate.Status().Peers[0], b.gate.Status().Peers[0]
			if pa.Queued != 0 || pa.Dropped != 0 || pa.Resequenced != 1 {
				t.Errorf("a: queued %d, dropped %d, resequenced %d; want 0, 0, 1", pa.Queued, pa.Dropped, pa.Resequenced)
			}
			if pb.OutOfSequence != 1 || pb.Duplicates != 0 {
				t.Errorf("b: out_of_sequence %d, duplicates %d; want 1, 0", pb.OutOfSequence, pb.Duplicates)
			}
		})
	}
}

// TestRecordsRefuseClientWrites: a client's limiter command cannot move a
// lane's record ahead (its real batches would be taken for duplicates);
// a peek reads it, and a DEL only makes the next batch resequenced.
func TestRecordsRefuseClientWrites(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	for _, pol := range []string{"c:* async", ""} { // b with rules, and with none
		t.Run("policy "+strconv.Quote(pol), func(t *testing.T) {
			rs := startRegions(t, clock, regionSpec{name: "a", policy: "c:* async"}, regionSpec{name: "b", policy: pol})
			a, b := rs["a"], rs["b"]
			a.limit(t, "c:1", counter(1))
			a.gate.Sync()
			var record string
			seqRecordsScan(b, func(k string) { record = k })
			st, ok := b.store.Lookup([]byte(record), clock.Now())
			if !ok {
				t.Fatalf("no record")
			}
			fw := engine.Request{Kind: engine.KindFixedWindow, Burst: engine.MaxCount, Period: st.ExpireAt - st.A, Quantity: 1000}
			if res := b.limit(t, record, fw); !errors.Is(res.Err, region.ErrSequenceRecord) {
				t.Errorf("FW.INCR on the record = %+v, want ErrSequenceRecord", res)
			}
			fw.Quantity = 0
			if res := b.limit(t, record, fw); res.Err != nil || res.Results[0].Remaining != engine.MaxCount-1 {
				t.Errorf("a peek of the record = %+v, want count 1", res)
			}
			a.limit(t, "c:1", counter(2))
			a.gate.Sync()
			if got := used(t, b, "c:1"); got != 3 {
				t.Errorf("b counts %d, want 3", got)
			}
		})
	}
}

// TestGapsLoggedOnce: a receiver that lost its records (a restore) refuses
// the next batch of every lane; each side logs one line for them all (then
// at most one a minute per peer), while the counters count every batch,
// and every lane goes on resequenced, nothing lost.
func TestGapsLoggedOnce(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	var aLog, bLog testlog.Buffer
	pol := "c:* async"
	rs := startRegions(t, clock,
		regionSpec{name: "a", policy: pol, logger: slog.New(slog.NewTextHandler(&aLog, nil))},
		regionSpec{name: "b", policy: pol, logger: slog.New(slog.NewTextHandler(&bLog, nil))})
	a, b := rs["a"], rs["b"]
	const lanes = 20
	keys := make([]string, lanes)
	slots := map[int]bool{}
	for i := 0; len(slots) < lanes; i++ {
		k := "c:" + strconv.Itoa(i)
		if s := hashslot.Of([]byte(k)); !slots[s] {
			slots[s] = true
			keys[len(slots)-1] = k
		}
	}
	for round := range 3 {
		if round == 2 {
			b.store.Flush() // b restarts from a snapshot taken before any batch
		}
		for _, k := range keys {
			a.limit(t, k, counter(1))
		}
		a.gate.Sync()
	}
	a.gate.Sync() // the resequenced batches
	for _, k := range keys {
		if got := used(t, b, k); got != 1 {
			t.Errorf("b counts %d on %s after the restore and one more batch, want 1", got, k)
		}
	}
	if pa, pb := a.gate.Status().Peers[0], b.gate.Status().Peers[0]; pa.Resequenced != lanes || pb.OutOfSequence != lanes || pa.Queued != 0 {
		t.Errorf("resequenced %d, out_of_sequence %d, queued %d; want %d, %d, 0", pa.Resequenced, pb.OutOfSequence, pa.Queued, lanes, lanes)
	}
	for _, c := range []struct {
		log  *testlog.Buffer
		line string
	}{
		{&aLog, "lacks batches it had acknowledged"},
		{&bLog, "out of sequence"},
	} {
		if n := strings.Count(c.log.String(), c.line); n != 1 {
			t.Errorf("%d log lines with %q for %d lanes, want 1:\n%s", n, c.line, lanes, c.log)
		}
	}
}
