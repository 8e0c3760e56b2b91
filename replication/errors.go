package replication

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Sentinel errors. Their texts are plain; the Redis wording a client sees
// (CLUSTERDOWN, TRYAGAIN, ERR) is the wire layer's (resp's appendErrorText).
// Test with errors.Is; the errors returned by this package wrap them with
// context.
var (
	// ErrNoLeader is returned when no leader became known within
	// Config.NoLeaderTimeout (an election is under way, or there is no
	// quorum). Nothing was applied; the client may retry.
	ErrNoLeader = errors.New("replication: no leader")
	// ErrNotLeader is returned by the leader-only entry points (ApplyEncoded,
	// ReadIndexEncoded) on a node that is not the leader. Nothing was
	// applied; the forwarding node retries against the new leader.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrLeadershipLost is returned when leadership changed while a command
	// was in flight: it may or may not have been applied. The client may
	// retry (a retried request that had been applied counts twice, which
	// errs on the side of limiting).
	ErrLeadershipLost = errors.New("replication: leadership lost while the command was in flight")
	// ErrShutdown is returned once the node is closing or closed.
	ErrShutdown = errors.New("replication: node shutting down")
	// ErrBadPayload is returned by ApplyEncoded and by the FSM for an entry
	// or payload that does not decode (a corrupt or newer-version encoding).
	// Nothing was applied.
	ErrBadPayload = errors.New("replication: invalid payload")
	// ErrUnknownNode is returned by Remove for an id that is not a member.
	ErrUnknownNode = errors.New("replication: no such cluster member")
	// ErrQuorumAtRisk is returned by Remove when the voters left after the
	// change would not include a reachable majority; nothing was changed.
	// The error is a *QuorumError with the figures.
	ErrQuorumAtRisk = errors.New("replication: the change would leave no reachable majority")
	// ErrNotPromoted is returned by Join when the node was added as a
	// non-voter but had not caught up (or could not be reached) in time to
	// be promoted to voter. The change stands: the leader promotes it once
	// it catches up. The error is a *PendingError naming the node.
	ErrNotPromoted = errors.New("replication: added as a non-voter, not yet promoted")
	// ErrRemoved is returned at once by Write and ReadNow on a node that
	// was removed from the cluster and has not been added back; nothing
	// was applied. The error is a *RemovedError naming the last leader
	// this node knows of.
	ErrRemoved = errors.New("replication: this node was removed from the cluster")
	// ErrIDInUse is returned by Join for an id that is a member at another
	// raft address when the leader could not confirm that the node at the
	// new address is that member, restarted with its raft state (see
	// verifyMove; the leader logs why): a new node must not take over a
	// member's id (raft would keep the member's vote for a node with an
	// empty log). Remove the member first. Nothing was changed.
	ErrIDInUse = errors.New("replication: the id is a member at another raft address")
	// ErrNotGroupLog is returned by Join for a node whose raft log this
	// group cannot give a place to (checkLog): another group's log, a log
	// without a group id past the index where this group's records one,
	// or, for a member's place, no log at all. The error is a *LogError
	// with the figures. Nothing was changed.
	ErrNotGroupLog = errors.New("replication: the node does not hold this group's raft log")
	// ErrAlreadyLeader is returned by Failover on the leader: only a
	// follower can take leadership over.
	ErrAlreadyLeader = errors.New("replication: this node is the leader")
	// ErrNotVoter is returned by Failover for a node that is not a voter
	// (yet): it cannot be elected. Nothing was changed.
	ErrNotVoter = errors.New("replication: the node is not a voter")
)

// QuorumError is ErrQuorumAtRisk with its figures: removing ID would leave
// Remaining voters of which Reachable answered the leader, while a
// majority of them is Needed.
type QuorumError struct {
	ID                           string
	Reachable, Remaining, Needed int
}

func (e *QuorumError) Error() string {
	return fmt.Sprintf("replication: refusing to remove %s: %d of the remaining %d voters would be reachable, a majority needs %d",
		e.ID, e.Reachable, e.Remaining, e.Needed)
}

// Unwrap returns ErrQuorumAtRisk.
func (e *QuorumError) Unwrap() error { return ErrQuorumAtRisk }

// PendingError is ErrNotPromoted for node ID: at the last check it was
// Reachable (or not) and Lag log entries behind the leader.
type PendingError struct {
	ID        string
	Reachable bool
	Lag       uint64
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("replication: %s was added as a non-voter and is not yet promoted (reachable %v, %d entries behind)", e.ID, e.Reachable, e.Lag)
}

// Unwrap returns ErrNotPromoted.
func (e *PendingError) Unwrap() error { return ErrNotPromoted }

// RemovedError is ErrRemoved with the last leader this node knows of
// (LeaderID and its RESP address LeaderRespAddr; either may be empty when
// unknown).
type RemovedError struct {
	LeaderID, LeaderRespAddr string
}

func (e *RemovedError) Error() string {
	return fmt.Sprintf("replication: this node was removed from the cluster (leader %q at %q)", e.LeaderID, e.LeaderRespAddr)
}

// Unwrap returns ErrRemoved.
func (e *RemovedError) Unwrap() error { return ErrRemoved }

// translate maps an error returned by hashicorp/raft to this package's
// sentinels, keeping the original text as context. Errors it does not know
// are wrapped as they are.
func translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("replication: %s: %w (%v)", op, ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("replication: %s: %w (%v)", op, ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("replication: %s: %w", op, ErrShutdown)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("replication: %s: %w (%v)", op, ErrNoLeader, err)
	}
	return fmt.Errorf("replication: %s: %w", op, err)
}

// errorFromReply wraps an error reply from another node's RESP server (the
// answer to a new node's RAFT.JOIN, which discoverLoop logs and retries).
func errorFromReply(msg string) error { return &RemoteError{Msg: msg} }

// PeerError is an error another node of the cluster answered over the
// forwarding link that is none of this package's sentinels (which travel
// by code): Text is its plain text, unworded. The wire layer words it as
// any error without a sentinel ("ERR " and the text).
type PeerError struct{ Text string }

// Error returns the text.
func (e *PeerError) Error() string { return e.Text }

// RemoteError is an error reply from another node that is not one of this
// package's sentinels; Msg is the reply text, worded by the other node,
// without the leading '-'. The wire layer relays it verbatim.
type RemoteError struct{ Msg string }

// Error returns the reply text.
func (e *RemoteError) Error() string { return e.Msg }
