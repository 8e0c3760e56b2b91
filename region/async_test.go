package region_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/respclient"
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
	stream := "00ff-" + strconv.FormatInt(t0/int64(region.StreamEra), 10)
	ok := region.ApplyCall{Origin: "a", Target: "b", Stream: stream, Slot: hashslot.Of([]byte("c:1")), Seq: 1,
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
	// sequence of 0, bad stream ids (not hex, no era, a bad era), a
	// consumption flagged shadow or exact, an unknown flag.
	good := []string{"a", "b", stream, strconv.Itoa(hashslot.Of([]byte("c:1"))), "1", "c:1", "fixed-window", "5", "0", "1000000000", "1", "0"}
	with := func(i int, v string) [][]byte {
		out := make([][]byte, len(good))
		for j, s := range good {
			out[j] = []byte(s)
		}
		out[i] = []byte(v)
		return out
	}
	for _, args := range [][][]byte{with(5, "c:2"), with(10, "0"), with(4, "0"), with(2, "xyz"), with(2, "00ff"), with(2, "00ff-"), with(2, "00ff--1"), with(2, "-5"), with(2, "00ff-x"), with(3, "16384"), with(5, "region:seq:a"), with(11, "2"), with(11, "4"), with(11, "8")} {
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

// TestAsyncStreamAcrossSequenceWindow: a stream lasts one era
// (region.StreamEra) and the next era starts a new stream numbered from 1,
// whose record is a new key; a batch of the old stream whose
// acknowledgement was lost, sent again after the turn, is still recognised
// (its record outlives the era), and so is the new stream's.
func TestAsyncStreamAcrossSequenceWindow(t *testing.T) {
	era := int64(region.StreamEra)
	turn := (t0/era + 1) * era
	clock := &fakeClock{}
	clock.ns.Store(turn - 1e9)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	for range 5 {
		rs["a"].limit(t, "c:1", counter(1))
	}
	before := rs["a"].gate.StreamID()
	// a cuts its last batch of the era and sends it; b applies it, but a
	// never hears back (b's server is closed while a waits for the
	// answer, so the batch stays in flight).
	b := rs["b"]
	b.closeServer()
	rs["a"].gate.Sync()
	last := region.ApplyCall{Origin: "a", Target: "b", Stream: before, Slot: hashslot.Of([]byte("c:1")), Seq: 1,
		Keys: [][]byte{[]byte("c:1")}, Reqs: []engine.Request{counter(5)}}
	if dup, err := b.gate.Apply(context.Background(), &last); err != nil || dup {
		t.Fatalf("the era's last batch: dup %v, %v", dup, err)
	}
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	b.serve(t, clock, ln)

	clock.ns.Store(turn + 1e9)
	rs["a"].gate.Sync() // the old stream's batch, sent again after the turn
	if got := used(t, rs["b"], "c:1"); got != 5 {
		t.Fatalf("b counts %d after the era's last batch was sent again, want 5 (applied once)", got)
	}
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
	if got := used(t, rs["b"], "c:1"); got != 10 {
		t.Errorf("b counts %d after the resent batch, want 10 (applied once)", got)
	}
	if st := rs["b"].gate.Status().Peers[0]; st.Duplicates != 2 {
		t.Errorf("b: %+v, want both resent batches recognised as duplicates", st)
	}
}

// seqRecords counts r's sequence records.
func seqRecords(t *testing.T, r *testRegion, now int64) int {
	t.Helper()
	n := 0
	for cursor := uint64(0); ; {
		cursor = r.store.Scan(cursor, 100, now, func(key []byte, _ engine.Kind) {
			if strings.HasPrefix(string(key), "region:seq:") {
				n++
			}
		})
		if cursor == 0 {
			return n
		}
	}
}

// TestSequenceRecordsExpire: a stream's records go away a few eras after
// the stream ends, so a sender that restarts often (a rolling restart
// every day) does not leave one key per slot it used behind for years.
func TestSequenceRecordsExpire(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	for i := range 50 {
		rs["a"].limit(t, "c:"+strconv.Itoa(i), counter(1))
	}
	rs["a"].gate.Sync()
	lanes := seqRecords(t, rs["b"], clock.Now())
	if lanes < 40 {
		t.Fatalf("%d sequence records for 50 keys, want one per slot used", lanes)
	}
	if got := used(t, rs["b"], "c:7"); got != 1 {
		t.Fatalf("b counts %d on c:7, want 1", got)
	}
	keys, bytes := rs["b"].store.Usage()
	t.Logf("%d keys (%d records), %d bytes accounted: about %d bytes a key", keys, lanes, bytes, bytes/max(keys, 1))
	// The longest a record can live: region.MaxRecordEras eras after the
	// era its stream started in.
	clock.ns.Add(int64(region.MaxRecordEras+1) * int64(region.StreamEra))
	if n := seqRecords(t, rs["b"], clock.Now()); n != 0 {
		t.Errorf("%d sequence records left %d eras later, want none", n, region.MaxRecordEras+1)
	}
}

// The record of a stream started in era e (any until int64 nanoseconds
// end, in 2262) counts in one window that holds the eras e-1, e and e+1 (so a receiver whose clock is an era behind, and
// a batch sent again in the next era, both find it) and ends within
// MaxRecordEras eras.
func TestRecordWindow(t *testing.T) {
	w := int64(region.StreamEra)
	now := int64(1_800_000_000) * 1e9
	for e := now / w; (e+int64(region.MaxRecordEras))*w/w == e+int64(region.MaxRecordEras); e++ { // every era Unix ns can reach
		p := region.RecordPeriod(e)
		start := (e - 1) * w / p * p
		end := start + p
		if (e+2)*w > end || start > (e-1)*w {
			t.Fatalf("era %d: record window [%d, %d) eras does not hold eras %d to %d", e, start/w, end/w, e-1, e+1)
		}
		if end > (e+int64(region.MaxRecordEras))*w || p > engine.MaxPeriod {
			t.Fatalf("era %d: record window ends %d eras later, want at most %d", e, end/w-e, region.MaxRecordEras)
		}
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
		logWants     []string // one of: the first disagreement is logged
	}{
		{"b", "a", 2, &bLog, []string{`key=c:2 mode=local`, `key=c:3 mode=local`}}, // c:2 (merged into one consumption) and c:3, in two lanes
		{"a", "b", 1, &aLog, []string{`key=g:k mode=local`}},                       // g:k is local in a
	}
	for _, tt := range tests {
		st := rs[tt.region].gate.Status()
		if got := st.Peers[0].PolicyMismatches; got != tt.want {
			t.Errorf("%s: %d policy mismatches from %s, want %d", tt.region, got, tt.peer, tt.want)
		}
		logged := tt.log.String()
		if !strings.Contains(logged, "policies disagree") || !slices.ContainsFunc(tt.logWants, func(w string) bool { return strings.Contains(logged, w) }) {
			t.Errorf("%s's log has no disagreement naming one of %q:\n%s", tt.region, tt.logWants, logged)
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

// configSet runs CONFIG SET name value on r's server.
func configSet(t *testing.T, r *testRegion, name, value string) {
	t.Helper()
	c, err := respclient.Dial(context.Background(), r.addr, respclient.Config{Timeout: 5 * time.Second, Password: r.pass})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := c.Do([]byte("CONFIG"), []byte("SET"), []byte(name), []byte(value)); err != nil || v.Kind == respclient.Error {
		t.Fatalf("CONFIG SET %s %s: %+v %v", name, value, v, err)
	}
}

// A region over maxmemory (noeviction) takes from its peers what it takes
// from its clients: consumption of keys it holds, not new keys. A batch
// that would create one waits in the sender's backlog, neither applied nor
// dropped, until the region has room; a global decision that would create
// a key at the home answers OOM, as it would to the home's own client.
func TestAsyncOverMaxmemory(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	pol := "c:* async g:* global b"
	rs := startRegions(t, clock, regionSpec{name: "a", policy: pol}, regionSpec{name: "b", policy: pol})
	a, b := rs["a"], rs["b"]
	a.limit(t, "c:1", counter(1))
	a.gate.Sync()
	if got := used(t, b, "c:1"); got != 1 {
		t.Fatalf("b counts %d on c:1, want 1", got)
	}
	overMemory := func(want bool) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			if b.srv.OverMemory() != want {
				return fmt.Errorf("b over maxmemory: %v, want %v", !want, want)
			}
			return nil
		})
	}
	configSet(t, b, "maxmemory", "1")
	overMemory(true)

	a.limit(t, "c:1", counter(2)) // a key b holds: applied
	a.limit(t, "c:2", counter(1)) // a new key (and a new lane's record): waits
	if hashslot.Of([]byte("c:1")) == hashslot.Of([]byte("c:2")) {
		t.Fatal("c:1 and c:2 share a slot; the test needs two lanes")
	}
	a.gate.Sync()
	if got := used(t, b, "c:1"); got != 3 {
		t.Errorf("over maxmemory, b counts %d on c:1, want 3", got)
	}
	if _, ok := b.store.Lookup([]byte("c:2"), clock.Now()); ok {
		t.Error("over maxmemory, b created c:2")
	}
	if st := a.gate.Status().Peers[0]; st.Queued != 1 || st.Dropped != 0 || st.Retries == 0 {
		t.Errorf("a → b: queued %d, dropped %d, retries %d; want c:2's batch kept and retried", st.Queued, st.Dropped, st.Retries)
	}
	if res := a.limit(t, "g:k", counter(1)); res.Err == nil || !strings.Contains(res.Err.Error(), "OOM") {
		t.Errorf("a global decision creating a key at a home over maxmemory: %+v, want OOM", res)
	}

	configSet(t, b, "maxmemory", "0")
	overMemory(false)
	a.gate.Sync()
	if got := used(t, b, "c:2"); got != 1 {
		t.Errorf("with room again, b counts %d on c:2, want 1", got)
	}
	if st := a.gate.Status().Peers[0]; st.Queued != 0 || st.Dropped != 0 {
		t.Errorf("a → b: queued %d, dropped %d after b had room, want 0 and 0", st.Queued, st.Dropped)
	}
	if res := a.limit(t, "g:k", counter(1)); res.Err != nil || res.Results[0].Limited {
		t.Errorf("the global decision with room at the home: %+v", res)
	}
}
