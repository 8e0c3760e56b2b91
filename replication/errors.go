package replication

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Sentinel errors. Each sentinel's text is the Redis error reply a client
// sees, prefix included (CLUSTERDOWN, TRYAGAIN, ERR), and each has a
// RESPError method returning it, so the wire layer answers a wrapped
// sentinel with the sentinel's exact text. Test with errors.Is; the errors
// returned by this package wrap them with context.
var (
	// ErrNoLeader is returned when no leader became known within
	// Config.NoLeaderTimeout (an election is under way, or there is no
	// quorum). Nothing was applied; the client may retry.
	ErrNoLeader error = sentinel("CLUSTERDOWN The cluster is down: no leader")
	// ErrNotLeader is returned by the leader-only entry points (ApplyEncoded,
	// ReadIndexEncoded) on a node that is not the leader. Nothing was
	// applied; the forwarding node retries against the new leader.
	ErrNotLeader error = sentinel("TRYAGAIN This node is not the leader")
	// ErrLeadershipLost is returned when leadership changed while a command
	// was in flight: it may or may not have been applied. The client may
	// retry (a retried request that had been applied counts twice, which
	// errs on the side of limiting).
	ErrLeadershipLost error = sentinel("TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied")
	// ErrShutdown is returned once the node is closing or closed.
	ErrShutdown error = sentinel("CLUSTERDOWN This node is shutting down")
	// ErrBadPayload is returned by ApplyEncoded and by the FSM for an entry
	// or payload that does not decode (a corrupt or newer-version encoding).
	// Nothing was applied.
	ErrBadPayload error = sentinel("ERR invalid replication payload")
	// ErrUnknownNode is returned by Remove for an id that is not a member.
	ErrUnknownNode error = sentinel("ERR no such cluster member")
)

// sentinels lists the errors a RESP reply can name by its text (see
// errorFromReply: the reply to a new node's RAFT.JOIN); order does not
// matter. The forwarding service names them by code instead (codeErrors).
var sentinels = [...]error{ErrNoLeader, ErrNotLeader, ErrLeadershipLost, ErrShutdown, ErrBadPayload, ErrUnknownNode}

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

// errorFromReply maps an error reply received from another node back to the
// sentinel it names, so that errors.Is works across a forwarded call.
func errorFromReply(msg string) error {
	for _, s := range sentinels {
		if msg == s.Error() {
			return s
		}
	}
	return &RemoteError{Msg: msg}
}

// sentinel is an error whose text is its Redis error reply.
type sentinel string

func (e sentinel) Error() string { return string(e) }

// RESPError returns the reply text (the wire layer's RESPError interface).
func (e sentinel) RESPError() string { return string(e) }

// RemoteError is an error reply from another node that is not one of this
// package's sentinels; Msg is the reply text without the leading '-'.
type RemoteError struct{ Msg string }

// Error returns the reply text.
func (e *RemoteError) Error() string { return e.Msg }

// RESPError returns the reply text, relayed verbatim.
func (e *RemoteError) RESPError() string { return e.Msg }
