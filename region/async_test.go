package region_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/testlog"
	"github.com/cellserver/cellserver/region"
)

// counter is a fixed window too large to limit anything and too long to
// roll over during a test: its count is what every region consumed.
func counter(q int64) engine.Request {
	return engine.Request{Kind: engine.KindFixedWindow, Burst: engine.MaxCount, Period: engine.MaxPeriod, Quantity: q}
}

// used peeks key's counter in r and returns its count.
func used(t *testing.T, r *testRegion, key string) int64 {
	t.Helper()
	res := r.limit(t, key, counter(0))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return engine.MaxCount - res.Results[0].Remaining
}

func syncAll(rs map[string]*testRegion) {
	for _, r := range rs {
		r.gate.Sync()
	}
}

func TestAsyncDeliversExactlyOnce(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	names := []string{"a", "b", "c"}
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol}, regionSpec{name: "c", policy: pol})
	keys := []string{"c:1", "c:2", "c:{x}3"}
	want := map[string]int64{}
	for i := range 300 {
		r := rs[names[i%3]]
		k := keys[i%len(keys)]
		q := int64(1 + i%4)
		if res := r.limit(t, k, counter(q)); res.Err != nil || res.Results[0].Limited {
			t.Fatalf("increment %d: %+v", i, res)
		}
		want[k] += q
		if i%37 == 0 {
			syncAll(rs) // some rounds in the middle of the load
		}
	}
	syncAll(rs)
	for _, n := range names {
		for _, k := range keys {
			if got := used(t, rs[n], k); got != want[k] {
				t.Errorf("region %s counts %d on %s, want %d", n, got, k, want[k])
			}
		}
	}
	// Nothing left to ship, and shipping again changes nothing.
	syncAll(rs)
	for _, n := range names {
		for _, p := range rs[n].gate.Status().Peers {
			if p.Queued != 0 || p.Dropped != 0 || p.LagMs != 0 {
				t.Errorf("%s → %s: queued %d, dropped %d, lag %d ms after the last round", n, p.Name, p.Queued, p.Dropped, p.LagMs)
			}
		}
		if got := used(t, rs[n], "c:1"); got != want["c:1"] {
			t.Errorf("after an idle round, region %s counts %d, want %d", n, got, want["c:1"])
		}
	}
}

// TestAsyncRetryAfterLostReply: a batch applied whose acknowledgement was
// lost is sent again and recognised: applied once.
func TestAsyncRetryAfterLostReply(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	for range 5 {
		rs["a"].limit(t, "c:1", counter(1))
	}
	// b applies the batch as if a's REGION.APPLY arrived, but a never
	// hears back: a still holds it in flight.
	slot := hashslot.Of([]byte("c:1"))
	call := region.ApplyCall{Origin: "a", Target: "b", Stream: rs["a"].gate.StreamID(), Slot: slot, Seq: 1,
		Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(5)}}
	if dup, err := rs["b"].gate.Apply(context.Background(), &call); err != nil || dup {
		t.Fatalf("first delivery: dup %v, %v", dup, err)
	}
	rs["a"].gate.Sync() // the same batch, sequence 1, sent again
	if got := used(t, rs["b"], "c:1"); got != 5 {
		t.Errorf("b counts %d after a retried batch, want 5", got)
	}
	st := rs["b"].gate.Status()
	if st.Peers[0].Duplicates != 1 || st.Peers[0].BatchesApplied != 1 {
		t.Errorf("b: %+v, want one batch applied and one duplicate", st.Peers[0])
	}
	if a := rs["a"].gate.Status().Peers[0]; a.Queued != 0 || a.BatchesSent != 1 {
		t.Errorf("a: %+v, want the batch acknowledged", a)
	}
	// The next batch follows in sequence.
	rs["a"].limit(t, "c:1", counter(2))
	rs["a"].gate.Sync()
	if got := used(t, rs["b"], "c:1"); got != 7 {
		t.Errorf("b counts %d, want 7", got)
	}
	// A batch out of sequence (3 before 2... here, 2 again) is a duplicate.
	call.Seq = 2
	if dup, err := rs["b"].gate.Apply(context.Background(), &call); err != nil || !dup {
		t.Errorf("replayed batch 2: dup %v, %v; want a duplicate", dup, err)
	}
}

// TestAsyncPeerDownQueuesThenDelivers: consumption waits while a peer is
// down, bounded by the backlog, and is delivered once it is back.
func TestAsyncPeerDownQueuesThenDelivers(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	b := rs["b"]
	addr := b.addr
	b.stop()
	for i := range 20 {
		rs["a"].limit(t, "c:"+strconv.Itoa(i%4), counter(1))
	}
	rs["a"].gate.Sync()
	clock.ns.Add(int64(time.Second))
	st := rs["a"].gate.Status().Peers[0]
	if st.State != "down" || st.Queued != 4 || st.Retries == 0 || st.LagMs != 1000 {
		t.Fatalf("with b down: %+v, want down, 4 merged consumptions queued, retried, 1000 ms of lag", st)
	}
	// b comes back on the same address, empty (as a region restarted
	// from nothing); a's next round after its backoff delivers.
	b2 := restartRegion(t, clock, b, addr, pol)
	time.Sleep(300 * time.Millisecond) // past the link's 250 ms down-backoff (real time)
	rs["a"].gate.Sync()
	for i := range 4 {
		if got := used(t, b2, "c:"+strconv.Itoa(i)); got != 5 {
			t.Errorf("b counts %d on c:%d, want 5", got, i)
		}
	}
}

func TestAsyncBacklogBound(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol, backlog: 1024}, regionSpec{name: "b", policy: pol})
	for i := range 100 {
		rs["a"].limit(t, "c:"+strconv.Itoa(i), counter(1)) // distinct keys: no merging
	}
	st := rs["a"].gate.Status().Peers[0]
	// 1024 bytes hold 15 entries of a 3-byte key plus 64 bytes each.
	if st.Queued+st.Dropped != 100 || st.Queued > 1024/67 || st.Dropped == 0 {
		t.Errorf("queued %d, dropped %d; want at most %d queued and the rest counted as dropped", st.Queued, st.Dropped, 1024/67)
	}
}

func TestAsyncRefusesBadBatches(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	b := rs["b"].gate
	ok := region.ApplyCall{Origin: "a", Target: "b", Stream: "00ff", Slot: hashslot.Of([]byte("c:1")), Seq: 1,
		Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(1)}}
	for _, c := range []struct {
		mutate func(*region.ApplyCall)
		want   error
	}{
		{func(c *region.ApplyCall) { c.Target = "x" }, region.ErrWrongRegion},
		{func(c *region.ApplyCall) { c.Origin = "x" }, region.ErrUnknownPeer},
	} {
		call := ok
		c.mutate(&call)
		if _, err := b.Apply(context.Background(), &call); !errors.Is(err, c.want) {
			t.Errorf("Apply = %v, want %v", err, c.want)
		}
	}
	if got := used(t, rs["b"], "c:1"); got != 0 {
		t.Errorf("refused batches applied %d", got)
	}
	// Malformed on the wire: a key of another slot, a zero quantity, a
	// sequence of 0, a bad stream id.
	good := []string{"a", "b", "00ff", strconv.Itoa(hashslot.Of([]byte("c:1"))), "1", "c:1", "fixed-window", "5", "0", "1000000000", "1", "0"}
	with := func(i int, v string) [][]byte {
		out := make([][]byte, len(good))
		for j, s := range good {
			out[j] = []byte(s)
		}
		out[i] = []byte(v)
		return out
	}
	for _, args := range [][][]byte{with(5, "c:2"), with(10, "0"), with(4, "0"), with(2, "xyz"), with(3, "16384"), with(5, "region:seq:a")} {
		if _, err := region.DecodeApply(args, 1000); !errors.Is(err, region.ErrBadBatch) {
			t.Errorf("DecodeApply(%q) = %v, want ErrBadBatch", args, err)
		}
	}
	if _, err := region.DecodeApply(with(0, "a"), 1000); err != nil {
		t.Errorf("a good batch: %v", err)
	}
}

// TestAsyncCloseShipsTheRest: a gate that stops cleanly ships what it
// queued since its last round before closing its links.
func TestAsyncCloseShipsTheRest(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	// a again, with a background sender whose first round is an hour away.
	a := rs["a"]
	cfg := a.cfg
	cfg.SyncInterval = time.Hour
	a.stop()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	a2 := serveRegion(t, clock, cfg, "", ln)
	for range 3 {
		a2.limit(t, "c:1", counter(2))
	}
	a2.stop()
	if got := used(t, rs["b"], "c:1"); got != 6 {
		t.Errorf("b counts %d after a stopped, want the 6 it shipped on the way out", got)
	}
}

// TestAsyncStreamAcrossSequenceWindow: the sequence records count in a
// fixed window of engine.MaxPeriod aligned to the epoch, which turns (the
// next time on 2030-02-16). A batch cut after the turn belongs to a new
// stream numbered from 1, so a batch whose acknowledgement was lost is
// still recognised when sent again; a stream that went on across the turn
// would find its record's count back at 0 and apply the resent batch twice.
func TestAsyncStreamAcrossSequenceWindow(t *testing.T) {
	turn := (t0/engine.MaxPeriod + 1) * engine.MaxPeriod
	clock := &fakeClock{}
	clock.ns.Store(turn - 1e9)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	for range 5 {
		rs["a"].limit(t, "c:1", counter(1))
	}
	rs["a"].gate.Sync()
	if got := used(t, rs["b"], "c:1"); got != 5 {
		t.Fatalf("b counts %d before the turn, want 5", got)
	}
	before := rs["a"].gate.StreamID()

	clock.ns.Store(turn + 1e9)
	rs["a"].limit(t, "c:other", counter(1))
	rs["a"].gate.Sync() // the first batch after the turn starts the new stream
	after := rs["a"].gate.StreamID()
	if after == before {
		t.Fatalf("stream %s went on across the sequence records' window", before)
	}
	for range 5 {
		rs["a"].limit(t, "c:1", counter(1))
	}
	// b applies a's next batch of c:1, but a never hears back.
	call := region.ApplyCall{Origin: "a", Target: "b", Stream: after, Slot: hashslot.Of([]byte("c:1")), Seq: 1,
		Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(5)}}
	if dup, err := rs["b"].gate.Apply(context.Background(), &call); err != nil || dup {
		t.Fatalf("first delivery after the turn: dup %v, %v", dup, err)
	}
	rs["a"].gate.Sync() // the same batch sent again
	// c:1's own counter started a new window at the turn too.
	if got := used(t, rs["b"], "c:1"); got != 5 {
		t.Errorf("b counts %d after the resent batch, want 5 (applied once)", got)
	}
	if st := rs["b"].gate.Status().Peers[0]; st.Duplicates != 1 {
		t.Errorf("b: %+v, want the resent batch recognised as a duplicate", st)
	}
}

// Regions whose policies disagree still apply what a peer sends (more
// consumption only errs towards refusing), but each counts and logs the
// calls its own policy would not have sent: async consumption for a key it
// does not hold async, a global decision for a key it is not the home of.
func TestPolicyDisagreementCounted(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	var aLog, bLog testlog.Buffer
	rs := startRegions(t, clock,
		regionSpec{name: "a", policy: "c:* async", logger: slog.New(slog.NewTextHandler(&aLog, nil))},
		regionSpec{name: "b", policy: "c:1 async g:* global a", logger: slog.New(slog.NewTextHandler(&bLog, nil))})

	for _, k := range []string{"c:1", "c:2", "c:2", "c:3"} {
		if res := rs["a"].limit(t, k, counter(1)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if res := rs["b"].limit(t, "g:k", counter(1)); res.Err != nil || res.Results[0].Limited {
		t.Fatalf("global decision through a: %+v", res)
	}
	syncAll(rs)

	// b applied everything a sent, agreeing on c:1 only.
	for k, want := range map[string]int64{"c:1": 1, "c:2": 2, "c:3": 1} {
		if got := used(t, rs["b"], k); got != want {
			t.Errorf("b counts %d on %s, want %d", got, k, want)
		}
	}
	tests := []struct {
		region, peer string
		want         int64
		log          *testlog.Buffer
		logWants     string
	}{
		{"b", "a", 2, &bLog, `key=c:2 mode=local`}, // c:2 (merged into one consumption) and c:3
		{"a", "b", 1, &aLog, `key=g:k mode=local`}, // g:k is local in a
	}
	for _, tt := range tests {
		st := rs[tt.region].gate.Status()
		if got := st.Peers[0].PolicyMismatches; got != tt.want {
			t.Errorf("%s: %d policy mismatches from %s, want %d", tt.region, got, tt.peer, tt.want)
		}
		if !strings.Contains(tt.log.String(), "policies disagree") || !strings.Contains(tt.log.String(), tt.logWants) {
			t.Errorf("%s's log has no disagreement naming %q:\n%s", tt.region, tt.logWants, tt.log.String())
		}
		if f := st.Fields(); !slices.ContainsFunc(f, func(kv [2]string) bool {
			return kv[0] == "region_peer_"+tt.peer && strings.Contains(kv[1], ",policy_mismatches="+strconv.FormatInt(tt.want, 10))
		}) {
			t.Errorf("%s: INFO regions fields %v have no policy_mismatches=%d", tt.region, f, tt.want)
		}
	}
	// The log is bounded: more disagreeing batches count, but are not
	// logged again within a minute.
	before := strings.Count(bLog.String(), "policies disagree")
	for range 3 {
		rs["a"].limit(t, "c:2", counter(1))
		syncAll(rs)
	}
	if st := rs["b"].gate.Status(); st.Peers[0].PolicyMismatches != 5 {
		t.Errorf("b: %d policy mismatches, want 5", st.Peers[0].PolicyMismatches)
	}
	if n := strings.Count(bLog.String(), "policies disagree"); n != before {
		t.Errorf("b logged %d more disagreements within a minute, want none", n-before)
	}
	clock.ns.Add(int64(time.Minute))
	rs["a"].limit(t, "c:2", counter(1))
	syncAll(rs)
	if n := strings.Count(bLog.String(), "policies disagree"); n != before+1 {
		t.Errorf("a minute later b logged %d more disagreements, want 1", n-before)
	}
}
