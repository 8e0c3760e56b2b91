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
)

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
// answer to a new node's RAFT.JOIN, which joinLoop logs and retries).
func errorFromReply(msg string) error { return &RemoteError{Msg: msg} }

// RemoteError is an error reply from another node that is not one of this
// package's sentinels; Msg is the reply text, worded by the other node,
// without the leading '-'. The wire layer relays it verbatim.
type RemoteError struct{ Msg string }

// Error returns the reply text.
func (e *RemoteError) Error() string { return e.Msg }
