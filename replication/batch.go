package replication

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/shards"
)

// The submit path. Every write on this node, from every connection and from
// forwarding followers, becomes a pending on one queue. One goroutine (run)
// packs whatever is queued, up to MaxBatch operations, into one log entry,
// stamps it and hands it to raft.Apply (the only call site). The FSM
// answers the callers as it applies the entry; another goroutine (complete)
// waits for each entry in log order, fails the callers of an entry that was
// not applied and frees its slot. On a follower the same batches are
// forwarded to the leader instead.

// pending is one caller's write: its operations and where its results go.
type pending struct {
	ops        []shards.Op
	res        []shards.Result
	leaderOnly bool      // forwarded from a follower: never forward again
	deadline   time.Time // when waiting for a leader gives up
	member     *memberChange
	control    []byte // the body of an entryCluster entry (slotstate.go)
	setting    *settingChange
	groupID    string       // an entryGroupID entry's id (groupid.go)
	state      atomic.Int32 // pendingWaiting, pendingClaimed, pendingAbandoned
	err        error
	done       chan struct{}
}

// alone reports whether p is an entry of its own (a membership or cluster
// change), never packed with operations.
func (p *pending) alone() bool {
	return p.member != nil || p.control != nil || p.setting != nil || p.groupID != ""
}

// settingChange is a replicated setting riding the submit path.
type settingChange struct{ name, value string }

// memberChange is a membership entry riding the submit path (so that every
// entry is stamped in one place).
type memberChange struct {
	id, respAddr string
	remove       bool
}

// A pending is waiting until the submit path claims it (before reading its
// operations, whose keys the caller owns). Until then the caller may abandon
// it (its context ended) and return; once claimed, the caller waits for the
// outcome, which comes within the bounds of raft and NoLeaderTimeout.
const (
	pendingWaiting = iota
	pendingClaimed
	pendingAbandoned
)

// claim reports whether the submit path may use p (it was waiting or is
// already claimed, e.g. requeued), marking it claimed.
func (p *pending) claim() bool {
	return p.state.CompareAndSwap(pendingWaiting, pendingClaimed) || p.state.Load() == pendingClaimed
}

// deliver hands the outcome to the caller unless it gave up. fill copies
// results into p.res.
func (p *pending) deliver(err error, fill func()) {
	if !p.claim() {
		return
	}
	if err == nil && fill != nil {
		fill()
	}
	p.err = err
	close(p.done)
}

// abandon reports whether the caller may return without waiting for done
// (nothing has touched or will touch p.ops and p.res).
func (p *pending) abandon() bool {
	return p.state.CompareAndSwap(pendingWaiting, pendingAbandoned)
}

// flight is one submitted log entry.
type flight struct {
	f     raft.ApplyFuture
	batch []*pending
	seq   uint64
	at    time.Time
}

// submit queues p and waits for its outcome.
func (n *Node) submit(ctx context.Context, p *pending) error {
	p.done = make(chan struct{})
	p.deadline = time.Now().Add(n.cfg.NoLeaderTimeout)
	select {
	case n.queue <- p:
	case <-n.ctx.Done():
		return ErrShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		if p.abandon() {
			return ctx.Err()
		}
	case <-n.ctx.Done():
		if p.abandon() {
			return ErrShutdown
		}
	}
	<-p.done
	return p.err
}

// run is the batching goroutine.
func (n *Node) run() {
	defer n.wg.Done()
	defer close(n.inflight)
	var carry *pending
	for {
		var first *pending
		if carry != nil {
			first, carry = carry, nil
		} else {
			select {
			case first = <-n.queue:
			case <-n.ctx.Done():
				n.failQueued(ErrShutdown)
				return
			}
		}
		if !first.claim() {
			continue // abandoned by its caller
		}
		// Wait for an in-flight slot before packing: whatever queues while
		// earlier entries commit goes into this one (group commit).
		select {
		case n.slots <- struct{}{}:
		case <-n.ctx.Done():
			first.deliver(ErrShutdown, nil)
			n.failQueued(ErrShutdown)
			return
		}
		batch := []*pending{first}
		nops := len(first.ops)
	fill:
		for nops < n.cfg.MaxBatch && !first.alone() {
			select {
			case p := <-n.queue:
				if !p.claim() {
					continue
				}
				if p.alone() || nops+len(p.ops) > n.cfg.MaxBatch {
					carry = p
					break fill
				}
				batch = append(batch, p)
				nops += len(p.ops)
			default:
				break fill
			}
		}
		n.dispatch(batch)
	}
}

func (n *Node) failQueued(err error) {
	for {
		select {
		case p := <-n.queue:
			p.deliver(err, nil)
		default:
			return
		}
	}
}

// dispatch submits a batch to raft on a ready leader, forwards it from a
// follower, and waits (bounded) while a new leader catches up. It holds one
// in-flight slot, released once the batch is answered.
func (n *Node) dispatch(batch []*pending) {
	for {
		if n.ready.Load() {
			n.submitLocal(batch)
			return
		}
		if n.raft.State() != raft.Leader {
			var fwd []*pending
			for _, p := range batch {
				switch {
				case p.leaderOnly, p.alone():
					p.deliver(fmt.Errorf("replication: submit: %w", ErrNotLeader), nil)
				default:
					fwd = append(fwd, p)
				}
			}
			if len(fwd) > 0 {
				n.forwardAsync(fwd)
			} else {
				<-n.slots
			}
			return
		}
		// Leader, but entries of earlier terms are not all applied yet:
		// stamping now could run time backwards. Wait for the barrier.
		change := n.leaderChanged()
		wait := time.Until(batch[0].deadline)
		if wait <= 0 {
			n.failAll(batch, fmt.Errorf("replication: submit: %w", ErrNoLeader))
			<-n.slots
			return
		}
		t := time.NewTimer(min(wait, 50*time.Millisecond))
		select {
		case <-change:
		case <-t.C:
		case <-n.ctx.Done():
			t.Stop()
			n.failAll(batch, ErrShutdown)
			<-n.slots
			return
		}
		t.Stop()
	}
}

func (n *Node) failAll(batch []*pending, err error) {
	for _, p := range batch {
		p.deliver(err, nil)
	}
}

// submitLocal stamps, encodes and applies one entry. This is the one call
// site of raft.Apply.
func (n *Node) submitLocal(batch []*pending) {
	groups := make([][]shards.Op, len(batch))
	nops := 0
	for i, p := range batch {
		groups[i] = p.ops
		nops += len(p.ops)
	}
	n.stampMu.Lock()
	now := max(n.clock(), n.lastStamp, n.fsm.LastTime())
	n.lastStamp = now
	n.seq++
	seq := n.seq
	n.stampMu.Unlock()

	var data []byte
	if m := batch[0].member; m != nil {
		data = encodeMemberEntry(now, m.id, m.respAddr, m.remove)
	} else if st := batch[0].setting; st != nil {
		data = encodeSettingEntry(now, st.name, st.value)
	} else if g := batch[0].groupID; g != "" {
		data = encodeGroupIDEntry(now, g)
	} else if c := batch[0].control; c != nil {
		data = append(appendEntryHeader(make([]byte, 0, entryHeader+len(c)), entryCluster, now), c...)
	} else {
		// Encoded into a buffer reused by this goroutine, then copied to
		// an exact fit: raft keeps the entry (log cache, futures).
		n.encBuf = encodeOpsEntry(n.encBuf[:0], now, groups...)
		data = append(make([]byte, 0, len(n.encBuf)), n.encBuf...)
		n.batches.Add(1)
		n.batchedOps.Add(uint64(nops))
	}
	// Registered before raft can apply it: the FSM answers the callers as
	// it applies the entry (deliverApplied), without a hop through
	// complete.
	fl := &flight{batch: batch, seq: seq, at: time.Now()}
	n.ownMu.Lock()
	n.own[seq] = fl
	n.ownMu.Unlock()
	fl.f = n.raft.ApplyLog(raft.Log{Data: data, Extensions: encodeEntryID(n.origin, seq)}, n.cfg.NoLeaderTimeout)
	n.inflight <- fl
}

// complete waits for each submitted entry in log order, fails the callers
// of an entry that was not applied (the FSM answers the others as it
// applies), records the entry as done (for reads) and frees its slot.
func (n *Node) complete() {
	defer n.wg.Done()
	for fl := range n.inflight {
		err := n.futureError(fl.f)
		n.commitNanos.Add(uint64(time.Since(fl.at)))
		n.ownMu.Lock()
		_, unanswered := n.own[fl.seq]
		delete(n.own, fl.seq)
		n.ownMu.Unlock()
		if unanswered {
			// The FSM answers every entry it applies here; this one
			// failed (or, should raft ever report success without an
			// apply, its outcome is unknown).
			if err == nil {
				err = fmt.Errorf("replication: apply: %w: entry not applied", ErrLeadershipLost)
			} else {
				err = translate("apply", err)
			}
			if errors.Is(err, ErrNotLeader) {
				// Never appended (this node was deposed before raft took
				// the entry): the writes of this node's own clients go to
				// the new leader instead, as a follower's do.
				n.retryDeposed(fl.batch, err)
			} else {
				n.failAll(fl.batch, err)
			}
		}
		n.done.advance(fl.seq)
		<-n.slots
	}
}

// retryDeposed handles a batch raft refused with err (ErrNotLeader: the
// entry was never appended, so nothing of it applied): the callers of
// forwarded requests and of membership or cluster changes get err (their
// senders retry), the other writes are queued again once a leader change
// is seen (or after a short poll), to be forwarded to the new leader,
// until their deadline.
func (n *Node) retryDeposed(batch []*pending, err error) {
	var again []*pending
	for _, p := range batch {
		if p.leaderOnly || p.alone() {
			p.deliver(err, nil)
		} else {
			again = append(again, p)
		}
	}
	if len(again) == 0 {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if !n.waitLeaderChange(again[0].deadline) {
			n.failAll(again, err)
			return
		}
		n.requeue(again)
	}()
}

// forwardAsync forwards a batch to the leader on its own goroutine, which
// releases the batch's in-flight slot when done.
func (n *Node) forwardAsync(batch []*pending) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() { <-n.slots }()
		n.forward(batch)
	}()
}

// forward sends a batch to the leader's forwarding service (an apply
// request) and relays the results, retrying while the attempt certainly
// applied nothing (no leader known, the target was not the leader, the
// connection or its handshake could not be made) until the batch's
// deadline.
func (n *Node) forward(batch []*pending) {
	groups := make([][]shards.Op, len(batch))
	nops := 0
	for i, p := range batch {
		groups[i] = p.ops
		nops += len(p.ops)
	}
	payload := encodeForward(groups...)
	deadline := batch[0].deadline
	for {
		if n.ready.Load() || n.raft.State() == raft.Leader {
			// This node became the leader meanwhile: submit locally.
			n.requeue(batch)
			return
		}
		addr, ok := n.forwardTarget()
		if ok {
			// The leader answers quickly or steps down (lease); the grace
			// covers a slow commit without stretching the no-leader bound.
			ctx, cancel := context.WithDeadline(n.ctx, deadline.Add(forwardGrace))
			body, err := n.fwd.do(ctx, addr, reqApply, payload, false)
			cancel()
			if err == nil {
				res := make([]shards.Result, nops)
				if err = decodeResults(body, res); err == nil {
					off := 0
					for _, p := range batch {
						part := res[off : off+len(p.ops)]
						p.deliver(nil, func() { copy(p.res, part) })
						off += len(p.ops)
					}
					return
				}
			}
			retry := errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, errNotSent)
			if !retry {
				var pe *PeerError
				if !errors.As(err, &pe) && !errors.Is(err, ErrBadPayload) && !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, ErrShutdown) {
					// Sent, then the connection failed: the leader may
					// have applied it.
					err = fmt.Errorf("replication: forward to %s: %w (%v)", addr, ErrLeadershipLost, err)
				}
				if errors.Is(err, ErrShutdown) {
					err = fmt.Errorf("replication: forward to %s: %w", addr, ErrLeadershipLost)
				}
				n.failAll(batch, err)
				return
			}
		}
		if !n.waitLeaderChange(deadline) {
			n.failAll(batch, fmt.Errorf("replication: forward: %w", ErrNoLeader))
			return
		}
	}
}

// forwardGrace is how long past a batch's no-leader deadline a request
// already sent to the leader may take.
const forwardGrace = time.Second

// requeue puts a batch back on the submit queue.
func (n *Node) requeue(batch []*pending) {
	for _, p := range batch {
		select {
		case n.queue <- p:
		case <-n.ctx.Done():
			p.deliver(ErrShutdown, nil)
		}
	}
}

// waitLeaderChange waits for a leader change, at most a short poll interval
// and never past deadline; it reports false once deadline has passed.
func (n *Node) waitLeaderChange(deadline time.Time) bool {
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	change := n.leaderChanged()
	t := time.NewTimer(min(wait, 50*time.Millisecond))
	defer t.Stop()
	select {
	case <-change:
	case <-t.C:
	case <-n.ctx.Done():
		return false
	}
	return time.Now().Before(deadline)
}
