package replication

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/hashslot"
	"io"
	"net"
	"slices"
	"time"
)

// The forwarding service: how a node asks the leader to do what only the
// leader may (apply a batch, give a read point, change membership). It runs
// on the raft port, behind the header byte headerForward and the handshake
// of auth.go, so it shares raft's TLS and cluster secret and needs none of
// the RESP server's settings (requirepass, protected mode).
//
// After the handshake the dialer sends requests and the acceptor answers
// each before reading the next (one request at a time per connection).
// Both directions use one frame shape:
//
//	byte    kind: a request type, or in a response a status
//	uint32  payload length, big endian (at most maxFrame)
//	bytes   payload
//
// Requests:
//
//	reqApply      the codec's forwarded batch (encodeForward) → results (encodeResults)
//	reqReadIndex  empty → encodeReadIndex(index, instant)
//	reqJoin       uvarint-prefixed id, raft address, RESP address → empty
//	reqRemove     uvarint-prefixed id → empty
//	reqStatus     uvarint-prefixed id of the asker → encodeStatus (any node answers)
//	reqGroupView  empty → the node's group as JSON (groupWire; any node answers)
//	reqMeet       an actMeet cluster change → empty (leader: record that group)
//	reqCluster    a cluster change (slotstate.go) → empty (leader: check, commit)
//	reqClusterList an actList cluster change → per change, byte status and
//	              uvarint-prefixed body as a response's (leader: check each
//	              in order, commit those that pass as one entry)
//	reqFailover   uvarint-prefixed id → empty (leader: hand leadership to id)
//	reqSlotKeys   uvarint slot → one byte, 1 when this node's keyspace holds a
//	              key of the slot, live or in flight (any node answers)
//
// A response's status is statusOK (the payload is the answer) or the code
// of a whole-request error: one of the sentinels in codeErrors, with an
// empty payload or, for the sentinels that carry figures (QuorumError,
// PendingError, RemovedError, cluster.SlotError, LogError), their fields
// (encodeErrorDetail); or codeOther with the error's reply text (a
// *PeerError on the other side). Per-operation errors travel
// inside the results (codec.go).

const (
	reqApply       byte = 1
	reqReadIndex   byte = 2
	reqJoin        byte = 3
	reqRemove      byte = 4
	reqStatus      byte = 5
	reqGroupView   byte = 6
	reqMeet        byte = 7
	reqCluster     byte = 8
	reqClusterList byte = 9
	reqFailover    byte = 10
	reqSlotKeys    byte = 11
)

const (
	statusOK  byte = 0
	codeOther byte = 255
)

// codeErrors names the sentinels by their code on the wire. Codes are part
// of the protocol: never renumber one.
var codeErrors = [...]error{
	1:  ErrNotLeader,
	2:  ErrNoLeader,
	3:  ErrLeadershipLost,
	4:  ErrShutdown,
	5:  ErrBadPayload,
	6:  ErrUnknownNode,
	7:  ErrQuorumAtRisk,
	8:  ErrNotPromoted,
	9:  ErrRemoved,
	10: ErrIDInUse,
	11: cluster.ErrSlotBusy, // any *SlotError, with its detail
	12: cluster.ErrUnknownNode,
	13: ErrOwnGroup,
	14: ErrOtherGroup,
	15: cluster.ErrGroupUnknown,
	16: ErrNotVoter,
	17: ErrAlreadyLeader,
	18: ErrNotGroupLog,      // a *LogError, with its detail
	19: cluster.ErrMoveBusy, // a *cluster.MoveBusyError, with its holder
}

// slotErrs are the sentinels a *cluster.SlotError wraps, by their index in
// the forwarding service's detail of a *SlotError (the slot, that index and
// an unused text kept for older nodes): never renumber one.
var slotErrs = [...]error{cluster.ErrSlotBusy, cluster.ErrSlotNotOwned, cluster.ErrSlotOwned, cluster.ErrSlotHasKeys, cluster.ErrSlotUnassigned}

const (
	frameHeaderLen = 5
	// maxFrame bounds a frame's payload (512 MiB: a batch may carry a key
	// of up to shards.MaxKeyLen). The reader allocates as bytes arrive,
	// so a peer that claims a large frame must also send it.
	maxFrame = 512 << 20
	// serviceIdle is how long the acceptor keeps a connection with no
	// request; the client notices the close before reusing it (connAlive).
	serviceIdle = 5 * time.Minute
	// serviceIO bounds reading the rest of a request once it has started,
	// and writing a response.
	serviceIO = 30 * time.Second
)

var errFrameTooLarge = errors.New("frame larger than the limit")

func writeFrame(w *bufio.Writer, kind byte, payload []byte) error {
	var h [frameHeaderLen]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	w.Write(h[:])
	w.Write(payload)
	return w.Flush()
}

// readFrameHeader reads a frame's kind and length. It returns io.EOF only
// when the connection ended before the first byte.
func readFrameHeader(r *bufio.Reader) (byte, int, error) {
	var h [frameHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return 0, 0, fmt.Errorf("%w: %d bytes", errFrameTooLarge, n)
	}
	return h[0], int(n), nil
}

// readPayload reads n bytes, growing the buffer as they arrive (at most
// twice what was received).
func readPayload(r *bufio.Reader, n int) ([]byte, error) {
	buf := make([]byte, min(n, 64<<10))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, noEOF(err)
	}
	for len(buf) < n {
		have := len(buf)
		buf = append(buf, make([]byte, min(have, n-have))...)
		if _, err := io.ReadFull(r, buf[have:]); err != nil {
			return nil, noEOF(err)
		}
	}
	return buf, nil
}

// noEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF: only a
// connection that ends between frames ended cleanly.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// forwardService is a Node's side of the forwarding service on the raft
// port: it answers the requests other members send to the leader.
type forwardService struct{ n *Node }

// serveForward answers forwarding requests on one authenticated connection
// until the peer closes it, it idles for serviceIdle, a frame is malformed,
// or the node closes (its stream then closes every connection). Requests run
// with the node's context and only on the leader: a node that is not the
// leader answers ErrNotLeader and never forwards further.
func (fs *forwardService) serveForward(c net.Conn) {
	n := fs.n
	defer c.Close()
	r := bufio.NewReaderSize(c, 16<<10)
	w := bufio.NewWriterSize(c, 16<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(serviceIdle))
		kind, size, err := readFrameHeader(r)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(serviceIO))
			var payload []byte
			if payload, err = readPayload(r, size); err == nil {
				out, rerr := fs.serveRequest(kind, payload)
				status, body := statusOK, out
				if rerr != nil {
					status, body = fs.errorStatus(rerr)
				}
				_ = c.SetWriteDeadline(time.Now().Add(serviceIO))
				err = writeFrame(w, status, body)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && n.ctx.Err() == nil {
				n.log.Debug("replication: forwarding connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
	}
}

// serveRequest runs one request on this node.
func (fs *forwardService) serveRequest(kind byte, payload []byte) ([]byte, error) {
	n := fs.n
	ctx := n.ctx
	switch kind {
	case reqApply:
		return n.ApplyEncoded(ctx, payload)
	case reqReadIndex:
		if len(payload) != 0 {
			return nil, fmt.Errorf("%w: read-index request with a payload", ErrBadPayload)
		}
		return n.reads.ReadIndexEncoded(ctx)
	case reqJoin:
		r := reader{b: payload}
		id, raftAddr, respAddr := string(r.bytes("id")), string(r.bytes("raft address")), string(r.bytes("RESP address"))
		if err := r.end(); err != nil {
			return nil, err
		}
		return nil, fs.onlyLeader(func() error { return n.members.join(ctx, id, raftAddr, respAddr) })
	case reqRemove:
		r := reader{b: payload}
		id := string(r.bytes("id"))
		if err := r.end(); err != nil {
			return nil, err
		}
		return nil, fs.onlyLeader(func() error { return n.members.removeMember(ctx, id, "") })
	case reqStatus:
		r := reader{b: payload}
		asker := string(r.bytes("id"))
		if err := r.end(); err != nil {
			return nil, err
		}
		return encodeStatus(n.mship.status(asker)), nil
	case reqGroupView:
		if len(payload) != 0 {
			return nil, fmt.Errorf("%w: group view request with a payload", ErrBadPayload)
		}
		return json.Marshal(n.dir.ownWire())
	case reqMeet:
		return nil, fs.onlyLeader(func() error { return n.dir.serveMeet(ctx, payload) })
	case reqFailover:
		r := reader{b: payload}
		id := string(r.bytes("id"))
		if err := r.end(); err != nil {
			return nil, err
		}
		return nil, fs.onlyLeader(func() error { return n.members.transferLeadership(id) })
	case reqSlotKeys:
		r := reader{b: payload}
		slot := r.uvarint("slot")
		if err := r.end(); err != nil {
			return nil, err
		}
		if slot >= hashslot.Count {
			return nil, fmt.Errorf("%w: slot %d", ErrBadPayload, slot)
		}
		if n.clusterSlots.slotHasKeys(int(slot)) {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case reqCluster:
		c, err := decodeClusterChange(payload)
		if err != nil {
			return nil, err
		}
		return nil, fs.onlyLeader(func() error { return n.clusterSlots.changeClusterOnLeader(ctx, &c) })
	case reqClusterList:
		c, err := decodeClusterChange(payload)
		if err != nil {
			return nil, err
		}
		if c.Action != actList {
			return nil, fmt.Errorf("%w: cluster list request with action %d", ErrBadPayload, c.Action)
		}
		var errs []error
		if err := fs.onlyLeader(func() error {
			var err error
			errs, err = n.clusterSlots.changeListOnLeader(ctx, c.List)
			return err
		}); err != nil {
			return nil, err
		}
		return fs.encodeChangeErrors(errs), nil
	}
	return nil, fmt.Errorf("%w: unknown request type %d", ErrBadPayload, kind)
}

// encodeChangeErrors encodes the per-change answers of a list of cluster
// changes: per change a status (statusOK or errorStatus's code) and its
// uvarint-prefixed body.
func (fs *forwardService) encodeChangeErrors(errs []error) []byte {
	var b []byte
	for _, err := range errs {
		if err == nil {
			b = append(b, statusOK)
			b = appendBytes(b, nil)
			continue
		}
		code, body := fs.errorStatus(err)
		b = append(b, code)
		b = appendBytes(b, body)
	}
	return b
}

// decodeChangeErrors decodes encodeChangeErrors' answer for n changes.
func decodeChangeErrors(b []byte, n int) ([]error, error) {
	r := reader{b: b}
	errs := make([]error, n)
	for i := 0; i < n && r.err == nil; i++ {
		status := r.byte1("status")
		body := r.bytes("error")
		if r.err == nil && status != statusOK {
			errs[i] = statusError(status, body)
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return errs, nil
}

// onlyLeader runs fn on the ready leader; elsewhere it answers ErrNotLeader.
func (fs *forwardService) onlyLeader(fn func() error) error {
	n := fs.n
	if !n.ready.Load() {
		return ErrNotLeader
	}
	return fn()
}

// errorStatus encodes a whole-request error: a sentinel by its code, any
// other error as codeOther with its reply text. An error caused by this
// node closing (its context ended) is ErrShutdown.
func (fs *forwardService) errorStatus(err error) (byte, []byte) {
	n := fs.n
	if code, body, ok := encodeErrorDetail(err); ok {
		return code, body
	}
	for code, s := range codeErrors {
		if s != nil && errors.Is(err, s) {
			return byte(code), nil
		}
	}
	if n.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return errorCode(ErrShutdown), nil
	}
	return codeOther, []byte(err.Error())
}

func errorCode(sentinel error) byte {
	for code, s := range codeErrors {
		if s == sentinel {
			return byte(code)
		}
	}
	return codeOther
}

// statusError decodes a response's error status.
func statusError(status byte, body []byte) error {
	if int(status) < len(codeErrors) && codeErrors[status] != nil {
		if len(body) > 0 {
			if err := decodeErrorDetail(status, body); err != nil {
				return err
			}
		}
		return codeErrors[status]
	}
	if status == codeOther {
		return &PeerError{Text: string(body)}
	}
	return fmt.Errorf("%w: unknown response status %d", ErrBadPayload, status)
}

// end reports a decoding error, or trailing bytes after a complete
// payload.
func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrBadPayload, len(r.b))
	}
	return r.err
}

// encodeJoin and encodeRemove build the payloads of reqJoin and reqRemove.
func encodeJoin(id, raftAddr, respAddr string) []byte {
	b := appendBytes(nil, []byte(id))
	b = appendBytes(b, []byte(raftAddr))
	return appendBytes(b, []byte(respAddr))
}

func encodeRemove(id string) []byte { return appendBytes(nil, []byte(id)) }

// encodeErrorDetail encodes the figures of a sentinel that carries them,
// for errorStatus; ok is false for any other error.
func encodeErrorDetail(err error) (code byte, body []byte, ok bool) {
	var (
		q  *QuorumError
		p  *PendingError
		r  *RemovedError
		s  *cluster.SlotError
		l  *LogError
		mb *cluster.MoveBusyError
	)
	switch {
	case errors.As(err, &mb):
		b := appendBytes(nil, []byte(mb.Holder))
		return errorCode(cluster.ErrMoveBusy), binary.AppendUvarint(b, uint64(mb.Until)), true
	case errors.As(err, &l):
		b := appendBytes(nil, []byte(l.ID))
		b = appendBytes(b, []byte(l.Addr))
		b = append(b, byte(l.Reason))
		b = appendBytes(b, []byte(l.GroupID))
		b = appendBytes(b, []byte(l.NodeGroupID))
		b = binary.AppendUvarint(b, l.Index)
		member := byte(0)
		if l.Member {
			member = 1
		}
		return errorCode(ErrNotGroupLog), append(b, member), true
	case errors.As(err, &s):
		b := binary.AppendUvarint(nil, uint64(s.Slot))
		b = append(b, byte(max(slices.Index(slotErrs[:], s.Err), 0)))
		return errorCode(cluster.ErrSlotBusy), appendBytes(b, nil), true
	case errors.As(err, &q):
		b := appendBytes(nil, []byte(q.ID))
		b = binary.AppendUvarint(b, uint64(q.Reachable))
		b = binary.AppendUvarint(b, uint64(q.Remaining))
		return errorCode(ErrQuorumAtRisk), binary.AppendUvarint(b, uint64(q.Needed)), true
	case errors.As(err, &p):
		b := appendBytes(nil, []byte(p.ID))
		reach := byte(0)
		if p.Reachable {
			reach = 1
		}
		b = append(b, reach)
		return errorCode(ErrNotPromoted), binary.AppendUvarint(b, p.Lag), true
	case errors.As(err, &r):
		b := appendBytes(nil, []byte(r.LeaderID))
		return errorCode(ErrRemoved), appendBytes(b, []byte(r.LeaderRespAddr)), true
	}
	return 0, nil, false
}

// decodeErrorDetail decodes what encodeErrorDetail encoded for status; nil
// when the body does not decode (the bare sentinel is used then).
func decodeErrorDetail(status byte, body []byte) error {
	r := reader{b: body}
	var err error
	switch codeErrors[status] {
	case ErrQuorumAtRisk:
		q := &QuorumError{ID: string(r.bytes("id"))}
		q.Reachable, q.Remaining, q.Needed = int(r.uvarint("reachable")), int(r.uvarint("remaining")), int(r.uvarint("needed"))
		err = q
	case ErrNotPromoted:
		p := &PendingError{ID: string(r.bytes("id"))}
		p.Reachable = r.byte1("reachable") == 1
		p.Lag = r.uvarint("lag")
		err = p
	case ErrRemoved:
		err = &RemovedError{LeaderID: string(r.bytes("leader id")), LeaderRespAddr: string(r.bytes("leader address"))}
	case ErrNotGroupLog:
		l := &LogError{ID: string(r.bytes("id")), Addr: string(r.bytes("address"))}
		l.Reason = LogMismatch(r.byte1("reason"))
		l.GroupID, l.NodeGroupID = string(r.bytes("group id")), string(r.bytes("node's group id"))
		l.Index = r.uvarint("index")
		l.Member = r.byte1("member") == 1
		err = l
	case cluster.ErrMoveBusy:
		err = &cluster.MoveBusyError{Holder: string(r.bytes("holder")), Until: int64(r.uvarint("until"))}
	case cluster.ErrSlotBusy:
		s := &cluster.SlotError{Slot: int(r.uvarint("slot"))}
		if i := int(r.byte1("slot error")); i < len(slotErrs) {
			s.Err = slotErrs[i]
		}
		r.bytes("message") // worded by older nodes; the wire layer words it now
		err = s
	default:
		return nil
	}
	if r.end() != nil {
		return nil
	}
	return err
}

// nodeStatus is a node's answer to a status request: what the leader's
// autopilot needs to judge a member (reachable, caught up), and what a
// removed node needs to name the current leader.
type nodeStatus struct {
	ID                               string
	Term, LastIndex, AppliedIndex    uint64
	LeaderID, LeaderRaft, LeaderResp string
	// Ready is true when the answering node is the ready leader; Member
	// tells whether the asker is in its latest configuration.
	Ready, Member bool
	// Group is the answering node's group ("" from a node that predates
	// groups).
	Group string
	// Instance is random for each run of the answering node (its entry
	// origin): two answers with the same nonzero Instance come from one
	// process (0 from a node that predates it).
	Instance uint64
	// GroupID is the group id the answering node's log records ("" when
	// none: a new node, a log from before group ids, or a node that
	// predates them). OwnLog is true when it has none and the node
	// bootstrapped its log (a new group's, before its first leader
	// recorded an id).
	GroupID string
	OwnLog  bool
}

const (
	statusReady  = 1 << 0
	statusMember = 1 << 1
	statusOwnLog = 1 << 2 // added later: older nodes never set it
)

// encodeStatus encodes the answer to reqStatus.
func encodeStatus(st nodeStatus) []byte {
	b := appendBytes(nil, []byte(st.ID))
	b = binary.AppendUvarint(b, st.Term)
	b = binary.AppendUvarint(b, st.LastIndex)
	b = binary.AppendUvarint(b, st.AppliedIndex)
	b = appendBytes(b, []byte(st.LeaderID))
	b = appendBytes(b, []byte(st.LeaderRaft))
	b = appendBytes(b, []byte(st.LeaderResp))
	var flags byte
	if st.Ready {
		flags |= statusReady
	}
	if st.Member {
		flags |= statusMember
	}
	if st.OwnLog {
		flags |= statusOwnLog
	}
	b = append(b, flags)
	b = appendBytes(b, []byte(st.Group))
	b = binary.AppendUvarint(b, st.Instance)
	return appendBytes(b, []byte(st.GroupID))
}

// decodeStatus decodes encodeStatus's output.
func decodeStatus(b []byte) (nodeStatus, error) {
	r := reader{b: b}
	st := nodeStatus{ID: string(r.bytes("id"))}
	st.Term, st.LastIndex, st.AppliedIndex = r.uvarint("term"), r.uvarint("last index"), r.uvarint("applied index")
	st.LeaderID, st.LeaderRaft, st.LeaderResp = string(r.bytes("leader id")), string(r.bytes("leader raft address")), string(r.bytes("leader RESP address"))
	flags := r.byte1("flags")
	st.Ready, st.Member, st.OwnLog = flags&statusReady != 0, flags&statusMember != 0, flags&statusOwnLog != 0
	if r.err == nil && len(r.b) > 0 {
		st.Group = string(r.bytes("group"))
	}
	if r.err == nil && len(r.b) > 0 {
		st.Instance = r.uvarint("instance")
	}
	if r.err == nil && len(r.b) > 0 {
		st.GroupID = string(r.bytes("group id"))
	}
	return st, r.end()
}
