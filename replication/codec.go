package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/engine/codec"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// This file is the one place replicated commands are encoded and decoded.
//
// A log entry (version 1):
//
//	byte    version (1)
//	byte    type: entryOps, entrySetMember, entryRemoveMember or
//	        entryCluster (a cluster state change, decoded in slotstate.go)
//	int64   stamped now, Unix ns, little endian
//	entryOps:          ops (below)
//	entrySetMember:    string id, string RESP address
//	entryRemoveMember: string id
//	entrySetting:      string name, string value
//	entryGroupID:      string group id
//
// ops is uvarint count, then per op: byte code (bit 7: NoGrow, bit 6:
// Asking, bit 5: Dest, bit 4: Exclusive), uvarint key count, keys (uvarint length + bytes),
// uvarint request count, requests (engine/codec's binary form: byte kind,
// byte flags (bit 0: Interval, bit 1: Shadow, bit 2: Exact), varint burst,
// rate, period, quantity); with bit 5 the destination
// (string) follows; an OpRestore then has byte flags (bit 0: Replace) and
// the state (snapshot.AppendState).
//
// A forwarded batch (the forwarding service's apply request, service.go) is
// byte version followed by ops: it carries no time, because only the leader
// stamps. Its reply is byte version,
// uvarint count, then per op: uvarint error code (0 none, errOther followed
// by a string, else 1+index in resultErrs), varint N, uvarint result count,
// results (byte limited: 1 limited, 2 a shadow request's refusal answered
// allowed (engine.Result.Shadowed; an older node reads it as allowed), else
// 0; varint limit, remaining, retry_after, reset_after, wait).

const codecVersion = 1

// An entry's id travels beside it, in the raft log's Extensions (which
// older nodes ignore, so the entry format did not change): uint64 origin,
// uint64 seq, little endian. The origin is random per Node, seq counts the
// entries it submitted; the submitting leader matches an applied entry to
// its callers by them.
const entryIDLen = 16

// encodeEntryID encodes an entry id.
func encodeEntryID(origin, seq uint64) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, entryIDLen), origin)
	return binary.LittleEndian.AppendUint64(b, seq)
}

// decodeEntryID decodes an entry id; ok is false for anything else
// (entries without one, written before ids existed, have none).
func decodeEntryID(b []byte) (origin, seq uint64, ok bool) {
	if len(b) != entryIDLen {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), true
}

// Entry types.
const (
	entryOps          = 1
	entrySetMember    = 2
	entryRemoveMember = 3
	// entrySetting is a replicated setting (limit-override, limit-shadow):
	// added after the others; a node older than it refuses the entry
	// (unknown type), so a group runs one version before using it.
	entrySetting = 5 // 4 is entryCluster
	// entryGroupID records the group's id (groupid.go), written once by
	// the first leader that finds none; added after the others, so a node
	// older than it logs the entry as refused and otherwise ignores it.
	entryGroupID = 6
)

const entryHeader = 10 // version, type, now

// opNoGrow is the op code byte's flag for shards.Op.NoGrow. Op codes are
// small, so the bit was always 0 before it existed: entries written earlier
// decode as they always did. A node older than the flag refuses an entry
// that carries it as a whole (an unknown op code), so a cluster must run
// one version before its nodes go over maxmemory under noeviction.
const opNoGrow = 0x80

// opAsking is the op code byte's flag for shards.Op.Asking, added as
// opNoGrow was: entries written before it never set it.
const opAsking = 0x40

// opDest is the op code byte's flag for shards.Op.Dest (an OpMoveOut's
// destination), added as opNoGrow was: the destination follows the op's
// requests as a string.
const opDest = 0x20

// A request is engine/codec's binary form; its flags byte holds Interval,
// Shadow (limit-shadow) and Exact (a region's in-sequence batch record).
// Shadow and Exact were added later: entries written before them never set
// them. A node older than Shadow reads a shadow request as enforced, one
// older than Exact would record a batch that skips some as the next one, so
// a group runs one version before using limit-shadow, and a region's group
// before its peers ship async consumption to it. A flag this version does
// not know makes the entry bad as a whole.

// opExclusive is the op code byte's flag for shards.Op.Exclusive, added
// as opNoGrow was.
const opExclusive = 0x10

// opFlags are the op code byte's flag bits.
const opFlags = opNoGrow | opAsking | opDest | opExclusive

// restoreReplace is an OpRestore flags byte's bit for shards.Op.Replace;
// the other bits must be 0.
const restoreReplace = 0x01

// A result's limited byte (a forwarded batch's reply): in its low bits 1
// limited, 2 shadowed, or 3 delayed — an allowed result of a waiting
// request (engine.Result.Delay > 0), whose delay follows the other fields
// as one more varint (only a request that carried a wait, codec.FlagWait,
// which an older leader refuses, gets one back, so an older follower never
// reads it) —; and resultLease set when a CC.ACQUIRE's lease id follows
// (a length-prefixed string, after the delay if any); resultQueued set
// with resultLimited for a CC.ACQUIRE now waiting in its key's line
// (engine.Result.Queued; only a request that carried a wait gets one);
// resultShadowDelay set with resultShadowed for a shadowed result of an
// admitted CL.THROTTLEALL … WAIT, whose delay (the call's turn) then
// follows as for resultDelayed.
const (
	resultLimited     = 1
	resultShadowed    = 2
	resultDelayed     = 3
	resultLease       = 4
	resultQueued      = 8
	resultShadowDelay = 16
)

// errOther marks an op error that is not in resultErrs; its text follows.
const errOther = 255

// resultErrs are the per-operation errors that keep their identity across a
// forwarded call (errors.Is works on the forwarding node). An error's code
// is 1 + its index, so the list is only ever appended to.
var resultErrs = [...]error{
	shards.ErrWrongType, shards.ErrBadOp, shards.ErrKeyTooLarge, shards.ErrShardFull,
	engine.ErrNotInteger, engine.ErrSyntax, engine.ErrNegative, engine.ErrZero,
	engine.ErrInvalidDuration, engine.ErrOverflow, engine.ErrLogLimit,
	shards.ErrWouldGrow,
	shards.ErrBusyKey, shards.ErrMoving,
	cluster.ErrMoved, cluster.ErrAsk, cluster.ErrTryAgain,
}

// appendEntryHeader starts a log entry of type typ stamped at now.
func appendEntryHeader(dst []byte, typ byte, now int64) []byte {
	dst = append(dst, codecVersion, typ)
	return binary.LittleEndian.AppendUint64(dst, uint64(now))
}

// appendOps appends the encoding of the operations of every group, in
// order, as one list.
func appendOps(dst []byte, groups ...[]shards.Op) []byte {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, g := range groups {
		for i := range g {
			dst = appendOp(dst, &g[i])
		}
	}
	return dst
}

func appendOp(dst []byte, op *shards.Op) []byte {
	code := byte(op.Code)
	if op.NoGrow {
		code |= opNoGrow
	}
	if op.Asking {
		code |= opAsking
	}
	if op.Dest != "" {
		code |= opDest
	}
	if op.Exclusive {
		code |= opExclusive
	}
	dst = append(dst, code)
	dst = binary.AppendUvarint(dst, uint64(len(op.Keys)))
	for _, k := range op.Keys {
		dst = appendBytes(dst, k)
	}
	dst = binary.AppendUvarint(dst, uint64(len(op.Reqs)))
	for j := range op.Reqs {
		dst = codec.AppendBinary(dst, &op.Reqs[j])
	}
	if op.Dest != "" {
		dst = appendBytes(dst, []byte(op.Dest))
	}
	if op.Code == shards.OpRestore {
		var flags byte
		if op.Replace {
			flags |= restoreReplace
		}
		dst = append(dst, flags)
		dst = snapshot.AppendState(dst, &op.State)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// encodeOpsEntry encodes a log entry applying the operations of every
// group, in order, at now.
func encodeOpsEntry(dst []byte, now int64, groups ...[]shards.Op) []byte {
	return appendOps(appendEntryHeader(dst, entryOps, now), groups...)
}

// encodeMemberEntry encodes a membership change: set id's RESP address, or
// remove id when remove is true.
func encodeMemberEntry(now int64, id, respAddr string, remove bool) []byte {
	typ := byte(entrySetMember)
	if remove {
		typ = entryRemoveMember
	}
	b := appendEntryHeader(nil, typ, now)
	b = appendBytes(b, []byte(id))
	if !remove {
		b = appendBytes(b, []byte(respAddr))
	}
	return b
}

// encodeSettingEntry encodes a replicated setting: name takes value.
func encodeSettingEntry(now int64, name, value string) []byte {
	b := appendEntryHeader(nil, entrySetting, now)
	b = appendBytes(b, []byte(name))
	return appendBytes(b, []byte(value))
}

// encodeGroupIDEntry encodes the record of the group's id.
func encodeGroupIDEntry(now int64, id string) []byte {
	return appendBytes(appendEntryHeader(nil, entryGroupID, now), []byte(id))
}

// encodeForward encodes the operations of every group, in order, for
// forwarding to the leader.
func encodeForward(groups ...[]shards.Op) []byte {
	return appendOps([]byte{codecVersion}, groups...)
}

// encodeReadIndex encodes the answer to a read-index request.
func encodeReadIndex(index uint64, now int64) []byte {
	b := binary.AppendUvarint([]byte{codecVersion}, index)
	return binary.AppendVarint(b, now)
}

func decodeReadIndex(b []byte) (uint64, int64, error) {
	if len(b) < 1 || b[0] != codecVersion {
		return 0, 0, fmt.Errorf("%w: read index version", ErrBadPayload)
	}
	r := reader{b: b[1:]}
	idx := r.uvarint("read index")
	now := r.varint("read time")
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrBadPayload, len(r.b))
	}
	return idx, now, r.err
}

// reader decodes; the first error sticks and every later read returns zeros.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated or malformed %s", ErrBadPayload, what)
	}
	r.b = nil
}

func (r *reader) byte1(what string) byte {
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a uvarint element count and checks it against the bytes left
// (each element takes at least min bytes), so a corrupt count cannot make
// the decoder allocate wildly.
func (r *reader) count(what string, min int) int {
	v := r.uvarint(what)
	if r.err != nil {
		return 0
	}
	if v > uint64(len(r.b)/min) {
		r.fail(what)
		return 0
	}
	return int(v)
}

// request decodes one request (engine/codec's binary form).
func (r *reader) request() engine.Request {
	if r.err != nil {
		return engine.Request{}
	}
	q, n, err := codec.ReadBinary(r.b)
	if err != nil {
		r.err = fmt.Errorf("%w: request: %v", ErrBadPayload, err)
		r.b = nil
		return engine.Request{}
	}
	r.b = r.b[n:]
	return q
}

// bytes returns a slice of the input (no copy).
func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// opsScratch holds decoding buffers that one goroutine reuses from entry to
// entry (the FSM's apply loop), so that applying an entry allocates nothing
// for its operations.
type opsScratch struct {
	ops  []shards.Op
	keys [][]byte
	reqs []engine.Request
}

// release drops the references to the last decoded input (the keys alias
// it), so that the scratch does not keep a log entry alive.
func (s *opsScratch) release() {
	clear(s.keys)
	s.keys = s.keys[:0]
}

// ops decodes what appendOps wrote. Keys alias the input. With a scratch,
// the operations live in its buffers until the next call; without one they
// are freshly allocated (a forwarded batch outlives the call).
func (r *reader) ops(s *opsScratch) []shards.Op {
	n := r.count("op count", 3)
	if r.err != nil {
		return nil
	}
	if s == nil {
		s = &opsScratch{}
	}
	// One backing array for all keys and one for all requests of the
	// entry (most ops have one of each), instead of two allocations per op.
	ops := slices.Grow(s.ops[:0], n)[:n]
	keys := slices.Grow(s.keys[:0], n)
	reqs := slices.Grow(s.reqs[:0], n)
	defer func() { s.ops, s.keys, s.reqs = ops[:0], keys, reqs[:0] }()
	for i := range ops {
		op := &ops[i]
		code := r.byte1("op code")
		*op = shards.Op{Code: shards.OpCode(code &^ opFlags), NoGrow: code&opNoGrow != 0, Asking: code&opAsking != 0, Exclusive: code&opExclusive != 0}
		nk := r.count("key count", 1)
		if nk > 0 {
			k0 := len(keys)
			for j := 0; j < nk; j++ {
				keys = append(keys, r.bytes("key"))
			}
			op.Keys = keys[k0:len(keys):len(keys)]
		}
		nr := r.count("request count", codec.MinBinary)
		if nr > 0 {
			q0 := len(reqs)
			for j := 0; j < nr; j++ {
				reqs = append(reqs, r.request())
			}
			op.Reqs = reqs[q0:len(reqs):len(reqs)]
		}
		if code&opDest != 0 {
			op.Dest = string(r.bytes("destination"))
			if r.err == nil && (op.Code != shards.OpMoveOut || op.Dest == "") {
				r.err = fmt.Errorf("%w: destination on op %d", ErrBadPayload, op.Code)
			}
		}
		if op.Code == shards.OpRestore {
			r.restore(op)
		}
		if r.err != nil {
			return nil
		}
		if err := checkOp(op); err != nil {
			r.err = err
			return nil
		}
	}
	return ops
}

// restore decodes what follows an OpRestore's requests: its flags and its
// state, validated (a state no limiter can hold makes the entry bad). The
// state's log is a fresh slice; the store copies it again when it keeps it.
func (r *reader) restore(op *shards.Op) {
	flags := r.byte1("restore flags")
	if r.err != nil {
		return
	}
	if flags&^restoreReplace != 0 {
		r.err = fmt.Errorf("%w: restore flags %#x", ErrBadPayload, flags)
		return
	}
	op.Replace = flags&restoreReplace != 0
	st, rest, err := snapshot.ParseState(r.b)
	if err != nil {
		r.err = fmt.Errorf("%w: restore state: %v", ErrBadPayload, err)
		r.b = nil
		return
	}
	op.State, r.b = st, rest
}

// checkOp rejects an op whose shape the keyspace does not accept, so that a
// corrupt entry is refused as a whole instead of half applied.
func checkOp(op *shards.Op) error {
	switch op.Code {
	case shards.OpLimit:
		if len(op.Keys) != 1 || len(op.Reqs) != 1 {
			return fmt.Errorf("%w: limit op with %d keys, %d requests", ErrBadPayload, len(op.Keys), len(op.Reqs))
		}
	case shards.OpLimitAll:
		if len(op.Keys) == 0 || len(op.Keys) != len(op.Reqs) {
			return fmt.Errorf("%w: limit-all op with %d keys, %d requests", ErrBadPayload, len(op.Keys), len(op.Reqs))
		}
	case shards.OpDel:
		if len(op.Reqs) != 0 {
			return fmt.Errorf("%w: del op with requests", ErrBadPayload)
		}
	case shards.OpFlush:
		if len(op.Keys) != 0 || len(op.Reqs) != 0 {
			return fmt.Errorf("%w: flush op with arguments", ErrBadPayload)
		}
	case shards.OpRestore:
		if len(op.Keys) != 1 || len(op.Reqs) != 0 {
			return fmt.Errorf("%w: restore op with %d keys, %d requests", ErrBadPayload, len(op.Keys), len(op.Reqs))
		}
	case shards.OpMoveOut, shards.OpMoveDone, shards.OpMoveAbort:
		if len(op.Keys) == 0 || len(op.Reqs) != 0 {
			return fmt.Errorf("%w: move op %d with %d keys, %d requests", ErrBadPayload, op.Code, len(op.Keys), len(op.Reqs))
		}
	default:
		return fmt.Errorf("%w: unknown op code %d", ErrBadPayload, op.Code)
	}
	for i := range op.Reqs {
		if !op.Reqs[i].Kind.Valid() {
			return fmt.Errorf("%w: unknown limiter kind %d", ErrBadPayload, op.Reqs[i].Kind)
		}
	}
	return nil
}

// entry is a decoded log entry.
type entry struct {
	typ      byte
	now      int64
	ops      []shards.Op
	id, addr string // a member's id and address; a setting's name and value; the group id (id)
}

// decodeEntry decodes a log entry. With a scratch (nil: allocate), the
// operations are valid until its next use.
func decodeEntry(b []byte, s *opsScratch) (entry, error) {
	var e entry
	if len(b) < entryHeader {
		return e, fmt.Errorf("%w: entry of %d bytes", ErrBadPayload, len(b))
	}
	if b[0] != codecVersion {
		return e, fmt.Errorf("%w: entry version %d, want %d", ErrBadPayload, b[0], codecVersion)
	}
	e.typ = b[1]
	e.now = int64(binary.LittleEndian.Uint64(b[2:]))
	r := reader{b: b[entryHeader:]}
	switch e.typ {
	case entryOps:
		e.ops = r.ops(s)
	case entrySetMember:
		e.id = string(r.bytes("member id"))
		e.addr = string(r.bytes("member address"))
	case entryRemoveMember:
		e.id = string(r.bytes("member id"))
	case entrySetting:
		e.id = string(r.bytes("setting name"))
		e.addr = string(r.bytes("setting value"))
	case entryGroupID:
		e.id = string(r.bytes("group id"))
	default:
		return e, fmt.Errorf("%w: unknown entry type %d", ErrBadPayload, e.typ)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrBadPayload, len(r.b))
	}
	return e, r.err
}

// decodeForward decodes a forwarded batch.
func decodeForward(b []byte) ([]shards.Op, error) {
	if len(b) < 1 || b[0] != codecVersion {
		return nil, fmt.Errorf("%w: forwarded batch version", ErrBadPayload)
	}
	r := reader{b: b[1:]}
	ops := r.ops(nil)
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrBadPayload, len(r.b))
	}
	if r.err == nil && len(ops) == 0 {
		r.err = fmt.Errorf("%w: empty batch", ErrBadPayload)
	}
	return ops, r.err
}

// encodeResults encodes the replies of a forwarded batch.
func encodeResults(dst []byte, res []shards.Result) []byte {
	dst = append(dst, codecVersion)
	dst = binary.AppendUvarint(dst, uint64(len(res)))
	for i := range res {
		rs := &res[i]
		switch code := errCode(rs.Err); code {
		case errOther:
			dst = append(dst, errOther)
			dst = appendBytes(dst, []byte(rs.Err.Error()))
		default:
			dst = append(dst, code)
		}
		dst = binary.AppendVarint(dst, rs.N)
		dst = binary.AppendUvarint(dst, uint64(len(rs.Results)))
		for j := range rs.Results {
			x := &rs.Results[j]
			var limited byte
			switch {
			case x.Limited:
				limited = resultLimited
			case x.Shadowed && x.Delay > 0:
				limited = resultShadowed | resultShadowDelay
			case x.Shadowed:
				limited = resultShadowed
			case x.Delay > 0:
				limited = resultDelayed
			}
			if x.Lease != "" {
				limited |= resultLease
			}
			if x.Queued {
				limited |= resultQueued
			}
			dst = append(dst, limited)
			dst = binary.AppendVarint(dst, x.Limit)
			dst = binary.AppendVarint(dst, x.Remaining)
			dst = binary.AppendVarint(dst, x.RetryAfter)
			dst = binary.AppendVarint(dst, x.ResetAfter)
			dst = binary.AppendVarint(dst, x.Wait)
			if limited&^resultLease == resultDelayed || limited&resultShadowDelay != 0 {
				dst = binary.AppendVarint(dst, x.Delay)
			}
			if x.Lease != "" {
				dst = appendBytes(dst, []byte(x.Lease))
			}
		}
	}
	return dst
}

func errCode(err error) byte {
	if err == nil {
		return 0
	}
	for i, e := range resultErrs {
		if errors.Is(err, e) {
			return byte(i + 1)
		}
	}
	return errOther
}

// decodeResults fills res (len(res) must equal the forwarded op count).
func decodeResults(b []byte, res []shards.Result) error {
	if len(b) < 1 || b[0] != codecVersion {
		return fmt.Errorf("%w: reply version", ErrBadPayload)
	}
	r := reader{b: b[1:]}
	n := r.count("result count", 3)
	if r.err == nil && n != len(res) {
		return fmt.Errorf("%w: %d results for %d operations", ErrBadPayload, n, len(res))
	}
	for i := 0; i < n && r.err == nil; i++ {
		rs := &res[i]
		*rs = shards.Result{Results: rs.Results[:0]}
		switch code := r.byte1("error code"); {
		case code == 0:
		case code == errOther:
			rs.Err = &PeerError{Text: string(r.bytes("error text"))}
		case int(code) <= len(resultErrs):
			rs.Err = resultErrs[code-1]
		default:
			r.fail("error code")
		}
		rs.N = r.varint("count")
		nr := r.count("limiter result count", 6)
		for j := 0; j < nr && r.err == nil; j++ {
			var x engine.Result
			lb := r.byte1("limited")
			shadowDelay := lb&resultShadowDelay != 0
			if shadowDelay {
				if lb &^= resultShadowDelay; lb&^resultLease != resultShadowed {
					r.fail("limited")
				}
			}
			if lb&resultQueued != 0 {
				x.Queued = true
				if lb &^= resultQueued; lb&^resultLease != resultLimited {
					r.fail("limited")
				}
			}
			switch lb &^ resultLease {
			case 0, resultDelayed:
			case resultLimited:
				x.Limited = true
			case resultShadowed:
				x.Shadowed = true
			default:
				r.fail("limited")
			}
			x.Limit = r.varint("limit")
			x.Remaining = r.varint("remaining")
			x.RetryAfter = r.varint("retry_after")
			x.ResetAfter = r.varint("reset_after")
			x.Wait = r.varint("wait")
			if lb&^resultLease == resultDelayed || shadowDelay {
				x.Delay = r.varint("delay")
			}
			if lb&resultLease != 0 {
				x.Lease = string(r.bytes("lease"))
			}
			rs.Results = append(rs.Results, x)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrBadPayload, len(r.b))
	}
	return r.err
}

// Cluster state changes (slotstate.go applies them).
//
// An entryCluster entry (after the entry header above):
//
//	byte  action
//	addSlots, delSlots:        uvarint n, n × (uvarint first, uvarint last)
//	migrating, importing:      uvarint slot, string group
//	stable, own, disown:       uvarint slot
//	meet:                      string group, uvarint n, n × string raft address,
//	                           uvarint m, m × string RESP address
//	list:                      uvarint n, n × uvarint-prefixed body of a change
//	                           (any action but list), applied in order

// entryCluster is the log entry type of a cluster state change.
const entryCluster = 4

// The actions of an entryCluster entry are cluster.Change's, whose
// numbers are the byte written here (part of the log format: never
// renumber one).
const (
	actAddSlots  = cluster.AddSlots
	actDelSlots  = cluster.DelSlots
	actMigrating = cluster.Migrating
	actImporting = cluster.Importing
	actStable    = cluster.Stable
	actOwn       = cluster.Own
	actDisown    = cluster.Disown
	actMeet      = cluster.Meet
	actList      = cluster.List
	actTakeMove  = cluster.TakeMove
	actDropMove  = cluster.DropMove
)

// clusterChange is one entryCluster entry, decoded.
type clusterChange = cluster.Change

// peerSeeds are where another group can be reached.
type peerSeeds = cluster.Seeds

func appendString(dst []byte, s string) []byte { return appendBytes(dst, []byte(s)) }

func appendStrings(dst []byte, v []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	for _, s := range v {
		dst = appendString(dst, s)
	}
	return dst
}

// encodeClusterChange returns the body of c's entry (after the entry
// header).
func encodeClusterChange(c *clusterChange) []byte {
	b := []byte{byte(c.Action)}
	switch c.Action {
	case actAddSlots, actDelSlots:
		b = binary.AppendUvarint(b, uint64(len(c.Ranges)))
		for _, r := range c.Ranges {
			b = binary.AppendUvarint(b, uint64(r[0]))
			b = binary.AppendUvarint(b, uint64(r[1]))
		}
	case actMigrating, actImporting:
		b = binary.AppendUvarint(b, uint64(c.Slot))
		b = appendString(b, c.Group)
	case actStable, actOwn, actDisown:
		b = binary.AppendUvarint(b, uint64(c.Slot))
	case actMeet:
		b = appendString(b, c.Group)
		b = appendStrings(b, c.Seeds.Raft)
		b = appendStrings(b, c.Seeds.Resp)
	case actTakeMove:
		b = appendString(b, c.Holder)
		b = binary.AppendUvarint(b, uint64(c.Lease))
	case actDropMove:
		b = appendString(b, c.Holder)
	case actList:
		b = binary.AppendUvarint(b, uint64(len(c.List)))
		for i := range c.List {
			b = appendBytes(b, encodeClusterChange(&c.List[i]))
		}
	}
	return b
}

func (r *reader) slot(what string) int {
	v := r.uvarint(what)
	if r.err == nil && v >= hashslot.Count {
		r.err = fmt.Errorf("%w: %s %d out of range", ErrBadPayload, what, v)
	}
	return int(v)
}

// group reads a group name, refusing one Config.Validate would.
func (r *reader) group() string {
	g := string(r.bytes("group"))
	if r.err == nil && !validGroupName(g) {
		r.err = fmt.Errorf("%w: group name %q", ErrBadPayload, g)
	}
	return g
}

func (r *reader) strings(what string) []string {
	n := r.count(what, 1)
	var v []string
	for i := 0; i < n && r.err == nil; i++ {
		v = append(v, string(r.bytes(what)))
	}
	return v
}

// decodeClusterChange decodes an entry body written by
// encodeClusterChange.
func decodeClusterChange(b []byte) (clusterChange, error) {
	r := reader{b: b}
	c := clusterChange{Action: cluster.Action(r.byte1("cluster action"))}
	switch c.Action {
	case actAddSlots, actDelSlots:
		n := r.count("slot ranges", 2)
		for i := 0; i < n && r.err == nil; i++ {
			first, last := r.slot("first slot"), r.slot("last slot")
			if r.err == nil && first > last {
				r.err = fmt.Errorf("%w: slot range %d-%d", ErrBadPayload, first, last)
			}
			c.Ranges = append(c.Ranges, [2]int{first, last})
		}
	case actMigrating, actImporting:
		c.Slot = r.slot("slot")
		c.Group = r.group()
	case actStable, actOwn, actDisown:
		c.Slot = r.slot("slot")
	case actMeet:
		c.Group = r.group()
		c.Seeds.Raft = r.strings("raft address")
		c.Seeds.Resp = r.strings("RESP address")
		if r.err == nil && len(c.Seeds.Raft) == 0 {
			r.err = fmt.Errorf("%w: meet of group %s without a raft address", ErrBadPayload, c.Group)
		}
	case actTakeMove, actDropMove:
		c.Holder = string(r.bytes("move holder"))
		if c.Action == actTakeMove {
			c.Lease = int64(r.uvarint("move lease"))
		}
		if r.err == nil && (c.Holder == "" || c.Action == actTakeMove && c.Lease <= 0) {
			r.err = fmt.Errorf("%w: move lease without a holder or a duration", ErrBadPayload)
		}
	case actList:
		n := r.count("cluster changes", 2)
		for i := 0; i < n && r.err == nil; i++ {
			body := r.bytes("cluster change")
			if r.err != nil {
				break
			}
			sub, err := decodeClusterChange(body)
			if err == nil && (sub.Action == actList || sub.Action == actTakeMove || sub.Action == actDropMove) {
				err = fmt.Errorf("%w: cluster change %d inside a list", ErrBadPayload, sub.Action)
			}
			if err != nil {
				r.err = err
				break
			}
			c.List = append(c.List, sub)
		}
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: unknown cluster action %d", ErrBadPayload, c.Action)
		}
	}
	if err := r.end(); err != nil {
		return c, err
	}
	return c, nil
}
