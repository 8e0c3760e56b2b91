package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The Mover serialises a group's moves (MIGRATE's phases: take the keys
// out, send them, settle them; and CLUSTER ABORTMOVE) by the group's log:
// each holds the group's move lease, a record in the replicated State
// taken and dropped by log entries, so two moves sent to two nodes of one
// group never interleave, and a lease whose holder died (a failover mid-
// move) lapses at a time every replica agrees on, after which the next
// move finds the keys the dead one left in flight and completes or puts
// them back by the usual rules.

// MoveLog is the group's log as the Mover needs it: replication.Node in
// a cluster, LocalMoves on a standalone server.
type MoveLog interface {
	// TakeMove takes (or renews) the move lease for holder for lease from
	// the log's time, or refuses with an error wrapping ErrMoveBusy while
	// another holder's has not lapsed.
	TakeMove(ctx context.Context, holder string, lease time.Duration) error
	// DropMove frees the lease if holder holds it.
	DropMove(ctx context.Context, holder string) error
	// MoveLease returns the lease as this node's replica of the log has
	// applied it, without writing to the log: what a waiting Mover
	// watches for the lease's release.
	MoveLease() MoveLease
}

// Mover runs a group's moves one at a time across the group. Safe for
// concurrent use.
type Mover struct {
	log  MoveLog
	self string
	seq  atomic.Uint64
}

// NewMover returns the Mover of the node self (its id, unique in the
// group) over the group's log.
func NewMover(log MoveLog, self string) *Mover { return &Mover{log: log, self: self} }

// NewGroupMover returns the Mover of a node over its group's log, or over
// a LocalMoves lease in memory when log is nil (a standalone server: one
// process is the whole group). Its holder id is random, so that two nodes
// of a group never share one.
func NewGroupMover(log MoveLog) *Mover {
	var id [8]byte
	rand.Read(id[:])
	if log == nil {
		log = NewLocalMoves(nil)
	}
	return NewMover(log, hex.EncodeToString(id[:]))
}

// Run runs fn holding the group's move lease for lease (which must cover
// fn's longest run: a lease that lapses while fn runs lets the next move
// start). While another move holds it, Run waits for it, for up to wait,
// watching the lease this node's replica applies (MoveLease) and asking
// the log again only once that shows the lease released, taken by
// another, or lapsed (waitRelease): a wait writes nothing to the log.
// After wait it returns the last refusal (wrapping ErrMoveBusy) without
// running fn. The lease is dropped when fn returns, whatever it returns;
// a drop that fails (no leader) leaves it to lapse.
func (m *Mover) Run(ctx context.Context, lease, wait time.Duration, fn func() error) error {
	holder := m.self + "/" + strconv.FormatUint(m.seq.Add(1), 10)
	deadline := time.Now().Add(wait)
	pause := moveRetryMin
	var last MoveLease // the lease of the previous refusal
	for {
		err := m.log.TakeMove(ctx, holder, lease)
		if err == nil {
			break
		}
		var busy *MoveBusyError
		if !errors.As(err, &busy) || time.Until(deadline) <= 0 {
			return err
		}
		held := MoveLease{Holder: busy.Holder, Until: busy.Until}
		if held != last {
			pause = moveRetryMin // a new holder: its release is news
		}
		last = held
		if !m.waitRelease(ctx, held, deadline, pause) {
			return err
		}
		pause = min(2*pause, moveRetryMax)
	}
	defer func() {
		// A fresh context: the lease is dropped even when ctx ended.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		m.log.DropMove(dctx, holder)
		cancel()
	}()
	return fn()
}

// RunFor runs fn as Run does, for a move whose steps are each bounded by
// timeout (MIGRATE's exchange and resend; the take and the settle, each a
// log write bounded by the no-leader timeout): it holds the lease for
// 3×timeout + 30 s, which a move whose node dies leaves to lapse, and
// waits at least 5 s, or timeout, for a lease another holds.
func (m *Mover) RunFor(ctx context.Context, timeout time.Duration, fn func() error) error {
	return m.Run(ctx, 3*timeout+30*time.Second, max(timeout, 5*time.Second), fn)
}

const (
	// moveWatch is how often a waiting Mover reads the lease its replica
	// applied (a read of local state: no log entry, no network).
	moveWatch = 5 * time.Millisecond
	// moveRetryMin and moveRetryMax bound the pause before a Mover asks
	// the log again when its replica's view of the lease has not caught
	// up with a refusal (a lagging follower) or its clock and the log's
	// disagree on a lapse: at most one refused entry per moveRetryMax.
	moveRetryMin = 5 * time.Millisecond
	moveRetryMax = 200 * time.Millisecond
)

// waitRelease waits until the log is worth asking again after a refusal
// naming held: this node's replica shows the lease no longer held as
// held (released, or taken by another) after having shown it held — a
// replica still behind the refusal shows the older lease, which says
// nothing —, or held's time has passed, and in either case at least
// pause since the refusal when the replica never showed held. It reports
// false when deadline or ctx ends first.
func (m *Mover) waitRelease(ctx context.Context, held MoveLease, deadline time.Time, pause time.Duration) bool {
	start := time.Now()
	seen := false
	t := time.NewTicker(moveWatch)
	defer t.Stop()
	for {
		now := time.Now()
		l := m.log.MoveLease()
		if l == held {
			seen = true
		}
		changed := l != held || now.UnixNano() >= held.Until
		if changed && (seen || now.Sub(start) >= pause) {
			return true
		}
		if !now.Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// LocalMoves is the MoveLog of a standalone server, whose one process is
// the whole group: the lease kept in memory, with time from now. Safe for
// concurrent use.
type LocalMoves struct {
	now func() time.Time
	mu  sync.Mutex
	st  State
}

// NewLocalMoves returns a free lease read against the clock now
// (time.Now when nil).
func NewLocalMoves(now func() time.Time) *LocalMoves {
	if now == nil {
		now = time.Now
	}
	return &LocalMoves{now: now}
}

// TakeMove is MoveLog's.
func (l *LocalMoves) TakeMove(_ context.Context, holder string, lease time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.ApplyMove(&Change{Action: TakeMove, Holder: holder, Lease: int64(lease)}, l.now().UnixNano())
}

// DropMove is MoveLog's.
func (l *LocalMoves) DropMove(_ context.Context, holder string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.ApplyMove(&Change{Action: DropMove, Holder: holder}, l.now().UnixNano())
}

// MoveLease is MoveLog's.
func (l *LocalMoves) MoveLease() MoveLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Lease
}

var _ MoveLog = (*LocalMoves)(nil)

// The Mover's questions about other groups, answered from the routing
// model (the directory's last answers) instead of each caller dialing the
// groups and reading CLUSTER NODES text.

// MayTakeSlot reports whether group g, as this node's routing table shows
// it, may hold or take a key of slot from a RESTORE arriving now: it owns
// the slot, any known group's view shows the slot importing (a group
// importing it takes a RESTORE sent after ASKING), its view is stale (not
// Reachable: what it does now is unknown), or it has no member to ask.
// False means the routing model rules the group out; whether it still
// holds keys of the slot restored earlier is a count only its members know
// (CLUSTER COUNTKEYSINSLOT). g out of range counts as may.
func (r *Routing) MayTakeSlot(g, slot int) bool {
	if g < 0 || g >= len(r.Groups) || slot < 0 || slot >= len(r.owner) {
		return true
	}
	gv := &r.Groups[g]
	if r.Owner(slot) == g || !gv.Reachable || len(gv.Members) == 0 {
		return true
	}
	for i := range r.Groups {
		if _, ok := r.Groups[i].Importing[slot]; ok {
			return true
		}
	}
	return r.ImportingFrom(slot) >= 0
}
