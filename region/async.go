package region

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/respclient"
	"github.com/cellserver/cellserver/shards"
)

// The peer-facing command that carries a batch of async consumption:
//
//	REGION.APPLY origin target stream slot seq key kind burst rate period quantity interval [key ...]
//
// stream names the sending process and the era it started in
// ("<random hex>-<era>"; a new one each era, see Gate.streamAt), slot is
// the hash slot every key of the batch hashes to, seq the batch's number in
// the stream's lane for that slot (1, 2, ...). The fields per key are
// REGION.EXEC's. The reply is +OK when applied, +DUP when the batch had
// already been applied (a retry), and an error whose first word is
// OutOfSequenceCode, followed by the sequence number the lane expects,
// when batches before it are missing (nothing applied; see
// SequenceError).
const (
	// ApplyCommand is the command's name.
	ApplyCommand = "REGION.APPLY"
	// applyHead is the number of arguments before the first key.
	applyHead = 5
	// maxBatchOps bounds the consumptions of one batch.
	maxBatchOps = 256
	// entryOverhead is what one queued consumption counts against
	// region-backlog-bytes beyond its key.
	entryOverhead = 64
	// seqKeyPrefix starts the keys that record applied batches.
	seqKeyPrefix = "region:seq:"
	// OutOfSequenceCode is the first word of the error reply to a batch
	// that skips some of its lane (a SequenceError); the sequence number
	// the lane expects follows it.
	OutOfSequenceCode = respclient.CodeOutOfSequence
)

// slotTags holds, per hash slot, a short string hashing to it: the hash tag
// of the key recording a lane's applied sequence, so that the record lives
// in the slot of the keys it guards (one group of a sharded region applies
// both in one entry). Computed once; immutable.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, hashslot.Count)
	left := hashslot.Count
	for i := 0; left > 0; i++ {
		s := strconv.Itoa(i)
		if slot := hashslot.Of([]byte(s)); tags[slot] == "" {
			tags[slot] = s
			left--
		}
	}
	return tags
})

// seqKey is the key recording which batches of origin's stream, lane slot,
// were applied: a fixed-window counter whose count is the last applied
// sequence number (see RecordPeriod for its window). It names the stream
// by a digest (streamDigest), never by the id itself: the id is what a
// sender must know to add to a stream, and KEYS or SCAN must not tell it.
func seqKey(origin, stream string, slot int) []byte {
	return []byte(seqKeyPrefix + origin + ":" + streamDigest(stream) + ":{" + slotTags()[slot] + "}")
}

// streamDigest names stream in its records: the first 128 bits of its
// SHA-256, in hex. A peer that reads the record's name (KEYS, SCAN) cannot
// turn it back into the stream's id, so it cannot send a batch counted in
// that stream: the 128 random bits of the id (newStreamID) are the
// stream's capability.
func streamDigest(stream string) string {
	sum := sha256.Sum256([]byte(stream))
	return hex.EncodeToString(sum[:16])
}

// seqRequest is the fixed-window request that admits batch seq of a stream
// started in era exactly when seq-1 batches were applied (the count goes
// from seq-1 to seq: engine.Request.Exact), and records it. Refused, its
// result's Remaining tells why: 0, the batch was applied already (the
// count is seq or more); above 0, the count is seq - Remaining, so batches
// are missing before it and seq - Remaining + 1 is the one expected.
func seqRequest(seq, era int64) engine.Request {
	return engine.Request{Kind: engine.KindFixedWindow, Burst: seq, Period: RecordPeriod(era), Quantity: 1, Exact: true}
}

// StreamEra is how long a sender's stream lasts: the first batch it cuts
// in a new era starts a new stream (sequences from 1 again). Its sequence
// records then live a few eras (RecordPeriod), so the records of a sender
// that restarted, or of an era gone by, do not stay in the keyspace.
const StreamEra = 24 * time.Hour

// MaxRecordEras bounds, in eras after the one its stream started in, how
// long a sequence record lives: RecordPeriod's window ends by then for
// every era Unix nanoseconds reach (until 2262; TestRecordWindow checks
// them all). Most end 2 or 3 eras after it (85 % of eras).
const MaxRecordEras = 12

// RecordPeriod is the window (ns) of the sequence records of a stream
// started in era: the shortest multiple k·StreamEra (k >= 3) whose
// epoch-aligned window holding the era also holds the era before and the
// one after. So every batch of the stream counts in that one window — sent
// during its era, received by a node whose clock is up to an era behind,
// or sent again in the next era after a lost acknowledgement — and the
// record is gone within MaxRecordEras eras.
func RecordPeriod(era int64) int64 {
	k := int64(3)
	for era > 0 && (era%k == 0 || (era+1)%k == 0) {
		k++
	}
	return min(k*int64(StreamEra), engine.MaxPeriod)
}

// newStreamID names a new stream started in era: 128 random bits (see
// streamDigest) and the era.
func newStreamID(era int64) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "-" + strconv.FormatInt(era, 10)
}

// streamEra returns the era a stream id names, and whether it is one:
// 1 to 32 hex digits, '-', the era in decimal.
func streamEra(stream string) (int64, bool) {
	id, e, ok := strings.Cut(stream, "-")
	if !ok || len(id) == 0 || len(id) > 32 {
		return 0, false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return 0, false
	}
	era, err := strconv.ParseInt(e, 10, 64)
	if err != nil || era < 0 || e[0] == '+' {
		return 0, false
	}
	return era, true
}

// entry is one queued consumption: the key and the request that consumed.
type entry struct {
	key []byte
	req engine.Request
	at  int64 // Unix ns it was first queued
}

// mergeKey identifies entries that add up into one (same key, same
// algorithm and rate): their quantities are summed.
type mergeKey struct {
	key      string
	kind     engine.Kind
	rate     int64
	period   int64
	interval bool
}

// batch is one lane's batch in flight: sent, not yet acknowledged.
type batch struct {
	stream  string // the stream seq counts in
	seq     int64
	entries []entry
	bytes   int64
	since   int64 // the oldest entry's at
}

// lane is the queue of one (peer, slot): batches go out in sequence, the
// next only once the previous is acknowledged.
type lane struct {
	entries  []entry
	index    map[mergeKey]int
	inflight *batch
	seq      int64 // of the last batch cut, in the outbox's stream
}

// outbox is the consumption waiting for one peer.
type outbox struct {
	mu     sync.Mutex
	lanes  map[int]*lane
	stream string // the stream the lanes' seq count in
	bytes  int64  // queued and in flight, against limit
	limit  int64

	queued                        atomic.Int64 // consumptions queued or in flight
	dropped                       atomic.Int64 // consumptions dropped (backlog full, or refused by the peer)
	batchesSent, opsSent, retries atomic.Int64
	lastAck                       atomic.Int64 // Unix ns of the last acknowledgement
	// resequenced counts batches renumbered because the peer reported
	// that batches were missing before them (resequence);
	// resequenceLogged is the Unix ns of the last one logged.
	resequenced, resequenceLogged atomic.Int64
}

func newOutbox(limit int64) *outbox { return &outbox{lanes: map[int]*lane{}, limit: limit} }

// add queues one consumption, merged with a queued one of the same key and
// algorithm; it is dropped (and counted) when the backlog is full.
func (o *outbox) add(key []byte, req engine.Request, now int64) {
	size := int64(len(key)) + entryOverhead
	slot := hashslot.Of(key)
	mk := mergeKey{key: string(key), kind: req.Kind, rate: req.Rate, period: req.Period, interval: req.Interval}
	o.mu.Lock()
	defer o.mu.Unlock()
	ln := o.lanes[slot]
	if ln == nil {
		ln = &lane{index: map[mergeKey]int{}}
		o.lanes[slot] = ln
	}
	if i, ok := ln.index[mk]; ok {
		if q := ln.entries[i].req.Quantity + req.Quantity; q <= engine.MaxCount && q >= -engine.MaxCount {
			ln.entries[i].req.Quantity = q
			ln.entries[i].req.Burst = max(ln.entries[i].req.Burst, req.Burst)
			return
		}
	}
	if o.bytes+size > o.limit {
		o.dropped.Add(1)
		return
	}
	o.bytes += size
	o.queued.Add(1)
	ln.index[mk] = len(ln.entries)
	ln.entries = append(ln.entries, entry{key: append([]byte(nil), key...), req: req, at: now})
}

// toSend returns the batch in flight of every lane with one, cutting a new
// batch from the queue of each lane without one, in stream (a new stream
// numbers its batches from 1 again; a batch in flight keeps its own).
func (o *outbox) toSend(stream string) (slots []int, batches []*batch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stream != o.stream {
		o.stream = stream
		for _, ln := range o.lanes {
			ln.seq = 0
		}
	}
	for slot, ln := range o.lanes {
		if ln.inflight == nil && len(ln.entries) > 0 {
			n := min(len(ln.entries), maxBatchOps)
			b := &batch{entries: ln.entries[:n:n], since: ln.entries[0].at}
			for _, e := range b.entries {
				b.bytes += int64(len(e.key)) + entryOverhead
				b.since = min(b.since, e.at)
			}
			ln.seq++
			b.stream, b.seq = stream, ln.seq
			ln.entries = append([]entry(nil), ln.entries[n:]...)
			clear(ln.index)
			for i, e := range ln.entries {
				ln.index[mergeKey{key: string(e.key), kind: e.req.Kind, rate: e.req.Rate, period: e.req.Period, interval: e.req.Interval}] = i
			}
			ln.inflight = b
		}
		if ln.inflight != nil {
			slots = append(slots, slot)
			batches = append(batches, ln.inflight)
		}
	}
	return slots, batches
}

// done retires lane slot's batch b: acknowledged, or dropped (refused by
// the peer for good).
func (o *outbox) done(slot int, b *batch, dropped bool, now int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ln := o.lanes[slot]
	if ln == nil || ln.inflight != b {
		return
	}
	ln.inflight = nil
	o.bytes -= b.bytes
	o.queued.Add(-int64(len(b.entries)))
	if dropped {
		o.dropped.Add(int64(len(b.entries)))
	} else {
		o.batchesSent.Add(1)
		o.opsSent.Add(int64(len(b.entries)))
		o.lastAck.Store(now)
	}
	// A lane is kept once used, empty or not: its sequence goes on (at
	// most one lane per hash slot).
}

// resequence renumbers lane slot's batch b, which the peer refused because
// batches are missing before it, as the one the peer expects, so that the
// next round sends it again in order; it reports whether it did. The
// peer's record lacks batches it had acknowledged (it lost them: restored
// from an older snapshot, its record evicted or deleted), so they cannot be
// sent again (acknowledged batches are not kept); b, never applied (a
// batch out of sequence changes nothing), is. The batches cut after b
// follow from expected.
func (o *outbox) resequence(slot int, b *batch, expected int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	ln := o.lanes[slot]
	if ln == nil || ln.inflight != b || expected < 1 || expected >= b.seq {
		return false
	}
	b.seq = expected
	if b.stream == o.stream {
		ln.seq = expected
	}
	o.resequenced.Add(1)
	return true
}

// lag is how long the oldest consumption not yet acknowledged has waited
// (ns), 0 when none.
func (o *outbox) lag(now int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var oldest int64
	older := func(at int64) {
		if oldest == 0 || at < oldest {
			oldest = at
		}
	}
	for _, ln := range o.lanes {
		if ln.inflight != nil {
			older(ln.inflight.since)
		}
		for i := range ln.entries {
			older(ln.entries[i].at)
		}
	}
	if oldest == 0 {
		return 0
	}
	return now - oldest
}

// encodeApply returns the REGION.APPLY call of lane slot's batch b.
func encodeApply(origin, target, stream string, slot int, b *batch) [][]byte {
	args := make([][]byte, 0, 1+applyHead+execFields*len(b.entries))
	args = append(args, []byte(ApplyCommand), []byte(origin), []byte(target), []byte(stream),
		strconv.AppendInt(nil, int64(slot), 10), strconv.AppendInt(nil, b.seq, 10))
	for i := range b.entries {
		args = appendRequest(args, b.entries[i].key, &b.entries[i].req)
	}
	return args
}

// ApplyCall is a decoded REGION.APPLY.
type ApplyCall struct {
	Origin, Target, Stream string
	Slot                   int
	Seq                    int64
	Keys                   [][]byte
	Reqs                   []engine.Request
	// NoGrow refuses the batch, whole, when it would create a key (a new
	// consumption's key, or a new lane's record): the caller sets it while
	// the keyspace is over maxmemory under noeviction, as for its own
	// clients (shards.Op.NoGrow). The sender keeps the batch and sends it
	// again later.
	NoGrow bool
}

// DecodeApply decodes REGION.APPLY's arguments after the command name: the
// stream is 1 to 32 hex digits, '-' and its era, slot a hash slot every key
// hashes to, seq 1..MaxCount, and the requests as DecodeExec checks them.
// An error wraps ErrBadBatch.
func DecodeApply(args [][]byte, maxLogLimit int64) (ApplyCall, error) {
	var c ApplyCall
	if len(args) < applyHead+execFields || (len(args)-applyHead)%execFields != 0 {
		return c, fmt.Errorf("%w: %d arguments, want 5 + 7 per key", ErrBadBatch, len(args))
	}
	c.Origin, c.Target, c.Stream = string(args[0]), string(args[1]), string(args[2])
	if _, ok := streamEra(c.Stream); !ok {
		return c, fmt.Errorf("%w: stream %q is not 1 to 32 hex digits, '-' and an era", ErrBadBatch, args[2])
	}
	slot, err := strconv.Atoi(string(args[3]))
	if err != nil || slot < 0 || slot >= hashslot.Count {
		return c, fmt.Errorf("%w: slot %q", ErrBadBatch, args[3])
	}
	c.Slot = slot
	if c.Seq, err = strconv.ParseInt(string(args[4]), 10, 64); err != nil || c.Seq < 1 || c.Seq > engine.MaxCount {
		return c, fmt.Errorf("%w: sequence %q", ErrBadBatch, args[4])
	}
	n := (len(args) - applyHead) / execFields
	for i := range n {
		f := args[applyHead+i*execFields:]
		req, err := decodeField(f, maxLogLimit)
		switch {
		case err != nil:
		case req.Quantity == 0:
			err = fmt.Errorf("quantity 0 consumes nothing")
		case req.Shadow || req.Exact || req.Wait != 0:
			err = fmt.Errorf("a consumption carries no shadow, exact or wait flag")
		case hashslot.Of(f[0]) != slot:
			err = fmt.Errorf("key hashes to slot %d, not %d", hashslot.Of(f[0]), slot)
		case strings.HasPrefix(string(f[0]), seqKeyPrefix):
			err = fmt.Errorf("a sequence record is no consumption")
		}
		if err != nil {
			return c, fmt.Errorf("%w: key %d: %v", ErrBadBatch, i+1, err)
		}
		c.Keys = append(c.Keys, f[0])
		c.Reqs = append(c.Reqs, req)
	}
	return c, nil
}

// Apply applies a peer's batch of consumption here, exactly once: the
// consumptions (forced: see forced) and the lane's sequence record are one
// CL.THROTTLEALL-like op of the inner Backend (one entry of a group's log),
// applied only when the record says the batch is the next of its lane. dup
// is true when it had been applied already (nothing changes); a batch
// that skips some of its lane is refused with a *SequenceError naming the
// one expected (nothing changes; counted, and logged at most once a minute
// per peer). A call whose names are wrong, like Exec, is refused and
// logged, nothing applied.
func (g *Gate) Apply(ctx context.Context, call *ApplyCall) (dup bool, err error) {
	switch {
	case call.Target != g.cfg.Name:
		g.refuseBatch(call, "it names another target region")
		return false, fmt.Errorf("%w: this is region %s, not %s", ErrWrongRegion, g.cfg.Name, call.Target)
	case g.links[call.Origin] == nil:
		g.refuseBatch(call, "its origin is not a region-peer")
		return false, fmt.Errorf("%w: %s is not a region-peer of %s", ErrUnknownPeer, call.Origin, g.cfg.Name)
	}
	era, ok := streamEra(call.Stream)
	if !ok {
		g.refuseBatch(call, "its stream names no era")
		return false, fmt.Errorf("%w: stream %q", ErrBadBatch, call.Stream)
	}
	op := shards.Op{Code: shards.OpLimitAll, NoGrow: call.NoGrow,
		Keys: append([][]byte{seqKey(call.Origin, call.Stream, call.Slot)}, call.Keys...),
		Reqs: make([]engine.Request, 0, 1+len(call.Reqs))}
	op.Reqs = append(op.Reqs, seqRequest(call.Seq, era))
	for i := range call.Reqs {
		op.Reqs = append(op.Reqs, forced(call.Reqs[i], g.cfg.MaxLogLimit))
	}
	res := []shards.Result{{}}
	if err := g.inner.Write(ctx, []shards.Op{op}, res); err != nil {
		return false, err
	}
	if res[0].Err != nil {
		return false, res[0].Err
	}
	in := g.inbox(call.Origin)
	if rec := res[0].Results[0]; rec.Limited {
		if rec.Remaining == 0 {
			in.duplicates.Add(1)
			return true, nil
		}
		gap := &SequenceError{Expected: call.Seq - rec.Remaining + 1, Seq: call.Seq}
		g.outOfSequence(in, call, gap)
		return false, gap
	}
	for i, r := range res[0].Results[1:] {
		if r.Limited {
			return false, fmt.Errorf("%w: key %d: its consumption exceeds what the key can hold", ErrBadBatch, i+1)
		}
	}
	pol := g.policy.Load()
	for _, k := range call.Keys {
		if r := pol.Match(k); r.Mode != ModeAsync {
			g.disagree(in, call.Origin, k, r, ModeAsync)
		}
	}
	in.batches.Add(1)
	in.ops.Add(int64(len(call.Keys)))
	in.last.Store(g.cfg.Now())
	return false, nil
}

// outOfSequence counts and logs (the first, then at most once a minute
// per peer) a batch of origin's that skipped some of its lane. The sender
// sends it again as the one expected; a peer that keeps sending gaps
// (a forged or broken sender) shows in the counter, not in a flood of
// lines.
func (g *Gate) outOfSequence(in *inboxStats, call *ApplyCall, gap *SequenceError) {
	n := in.outOfSequence.Add(1)
	now := g.cfg.Now()
	last := in.gapLogged.Load()
	if last != 0 && now-last < int64(mismatchLogEvery) || !in.gapLogged.CompareAndSwap(last, now) {
		return
	}
	g.cfg.Logger.Warn("refused a region peer's async batch out of sequence: batches of its lane are missing before it (nothing applied; the peer sends it again as the one expected; counted as out_of_sequence, logged at most once a minute per peer)",
		"region", g.cfg.Name, "origin", call.Origin, "slot", call.Slot, "seq", gap.Seq, "expected", gap.Expected, "out_of_sequence", n)
}

func (g *Gate) refuseBatch(call *ApplyCall, why string) {
	g.refused.Add(1)
	g.cfg.Logger.Warn("refused a region peer's batch: "+why, "region", g.cfg.Name, "origin", call.Origin, "target", call.Target, "seq", call.Seq)
}

// inboxStats counts what one peer's calls did here.
type inboxStats struct {
	batches, ops, duplicates atomic.Int64
	last                     atomic.Int64 // Unix ns of the last batch applied
	// outOfSequence counts the peer's batches refused because batches of
	// their lane were missing before them; gapLogged is the Unix ns of
	// the last one logged.
	outOfSequence, gapLogged atomic.Int64
	// mismatches counts the peer's consumptions and global decisions for
	// keys this region's policy puts under another mode (or home);
	// mismatchLogged is the Unix ns of the last one logged.
	mismatches, mismatchLogged atomic.Int64
}

// mismatchLogEvery bounds the log lines about one peer's disagreeing
// policy: the counter shows them all.
const mismatchLogEvery = time.Minute

// disagree records that origin sent a call for key under mode sent while
// this region's policy gives the key rule here. The call is served anyway:
// the peer decided by its own policy, and serving it only ever adds
// consumption (errs towards refusing). Policies must agree between regions
// (nothing exchanges them), so an operator learns of a difference here.
func (g *Gate) disagree(in *inboxStats, origin string, key []byte, here Rule, sent Mode) {
	in.mismatches.Add(1)
	now := g.cfg.Now()
	last := in.mismatchLogged.Load()
	if last != 0 && now-last < int64(mismatchLogEvery) || !in.mismatchLogged.CompareAndSwap(last, now) {
		return
	}
	what := "async consumption"
	if sent == ModeGlobal {
		what = "a global decision"
	}
	mode := here.Mode.String()
	if here.Mode == ModeGlobal {
		mode += " " + here.Home
	}
	g.cfg.Logger.Warn("region policies disagree: a peer sent "+what+" for a key this region's region-policy puts under another mode or home (served anyway; counted as policy_mismatches, logged at most once a minute per peer)",
		"region", g.cfg.Name, "origin", origin, "key", string(key), "mode", mode)
}

func (g *Gate) inbox(origin string) *inboxStats {
	v, _ := g.inboxes.LoadOrStore(origin, new(inboxStats))
	return v.(*inboxStats)
}

// enqueue queues the consumption of an async op that was admitted for
// every peer. A shadow request's refusal, answered allowed
// (engine.Result.Shadowed), consumed nothing and ships nothing: a rule
// only being tried (limit-shadow) never charges the peers. What a shadow
// request did consume ships as any consumption, without the flag (a peer
// applies it forced, enforced or not).
func (g *Gate) enqueue(op *shards.Op, res *shards.Result) {
	if res.Err != nil || len(res.Results) != len(op.Keys) {
		return
	}
	for i := range res.Results {
		if res.Results[i].Limited {
			return // a refused CL.THROTTLEALL consumed nothing
		}
	}
	now := g.cfg.Now()
	for i, k := range op.Keys {
		if op.Reqs[i].Quantity == 0 || res.Results[i].Shadowed {
			continue
		}
		req := op.Reqs[i]
		// A consumption is applied as of its arrival; a waiter's turn was
		// decided here (docs/regions.md).
		req.Shadow, req.Exact, req.Wait = false, false, 0
		for _, o := range g.outboxes {
			o.add(k, req, now)
		}
	}
}

// Sync ships one round to every peer: each lane's batch in flight again,
// or its next batch. It returns once every peer answered or failed; what
// failed stays queued for the next round. The background sender calls it
// every sync interval; tests call it directly.
func (g *Gate) Sync() {
	var wg sync.WaitGroup
	for name, o := range g.outboxes {
		wg.Go(func() { g.syncPeer(g.links[name], o) })
	}
	wg.Wait()
}

func (g *Gate) syncPeer(l *link, o *outbox) {
	slots, batches := o.toSend(g.streamAt(g.cfg.Now()))
	if len(batches) == 0 {
		return
	}
	calls := make([][][]byte, len(batches))
	for i, b := range batches {
		calls[i] = encodeApply(g.cfg.Name, l.name, b.stream, slots[i], b)
	}
	replies, err := l.callMany(calls)
	if err != nil {
		o.retries.Add(int64(len(batches)))
		return
	}
	now := g.cfg.Now()
	for i, v := range replies {
		switch err := v.Err(); {
		case err == nil:
			o.done(slots[i], batches[i], false, now)
		case errors.Is(err, respclient.ErrOutOfSequence):
			g.resequence(l, o, slots[i], batches[i], err)
		case transient(err), errors.Is(err, respclient.ErrOOM):
			// OOM: the peer is over maxmemory and refuses new keys for
			// now; the batch waits here (region-backlog-bytes bounds it).
			o.retries.Add(1)
		default:
			g.cfg.Logger.Warn("a region peer refused a batch; its consumption is dropped",
				"region", l.name, "seq", batches[i].seq, "ops", len(batches[i].entries), "err", v.Str)
			o.done(slots[i], batches[i], true, now)
		}
	}
}

// resequence handles a peer's refusal of lane slot's batch b as out of
// sequence (refusal, the decoded error reply): b is renumbered as the batch the peer
// expects and goes out again next round, nothing dropped. A peer restored
// from an older snapshot refuses the next batch of every lane it had
// records of, so the line is logged for the first and then at most once a
// minute per peer (resequenced counts them all); a reply it cannot act on
// (no expected number below b's) keeps b for the next round, as a retry.
func (g *Gate) resequence(l *link, o *outbox, slot int, b *batch, refusal error) {
	seq := b.seq
	var gap *respclient.OutOfSequenceError
	expected := int64(-1)
	if errors.As(refusal, &gap) {
		expected = gap.Expected
	}
	ok := expected >= 0 && o.resequence(slot, b, expected)
	if !ok {
		o.retries.Add(1)
	}
	now := g.cfg.Now()
	last := o.resequenceLogged.Load()
	if last != 0 && now-last < int64(mismatchLogEvery) || !o.resequenceLogged.CompareAndSwap(last, now) {
		return
	}
	if !ok {
		g.cfg.Logger.Warn("a region peer refused a batch as out of sequence without a usable expected batch; it is kept and sent again (logged at most once a minute per peer)",
			"region", l.name, "slot", slot, "seq", seq, "err", refusal.Error())
		return
	}
	g.cfg.Logger.Warn("a region peer lacks batches it had acknowledged (restored from an older snapshot, or its sequence record was evicted or deleted); the batch in flight is sent again as the one it expects (counted as resequenced, logged at most once a minute per peer)",
		"region", l.name, "slot", slot, "seq", seq, "expected", expected, "resequenced", o.resequenced.Load())
}

// transient reports whether a peer's error reply (decoded by respclient)
// asks to try again later: the region is between leaders or loading, a
// redirection was not followed, or the link's credentials are refused
// (until an operator fixes them).
func transient(err error) bool {
	for _, t := range transientErrs {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

var transientErrs = [...]error{respclient.ErrTryAgain, respclient.ErrClusterDown, respclient.ErrLoading,
	respclient.ErrMoved, respclient.ErrAsk, respclient.ErrNoAuth, respclient.ErrWrongPass}

// transientReply is transient for the text of an error reply.
func transientReply(msg string) bool { return transient(respclient.DecodeError(msg)) }

// runSync ships to every peer every interval until ctx ends, each peer on
// its own schedule (a peer that does not answer delays no other), then
// ships once more, so that a server stopping cleanly leaves nothing behind
// that its peers could still take (bounded by region-timeout).
func (g *Gate) runSync(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	for name, o := range g.outboxes {
		l := g.links[name]
		wg.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					g.syncPeer(l, o)
					return
				case <-t.C:
					g.syncPeer(l, o)
				}
			}
		})
	}
	wg.Wait()
}
