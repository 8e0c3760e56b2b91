package resp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// The errors of other packages carry plain texts; appendErrorText gives
// them their Redis wording. These texts are what clients match on: they
// must not change.
func TestErrorWording(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{replication.ErrNoLeader, "CLUSTERDOWN The cluster is down: no leader"},
		{replication.ErrNotLeader, "TRYAGAIN This node is not the leader"},
		{replication.ErrLeadershipLost, "TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied"},
		{replication.ErrShutdown, "CLUSTERDOWN This node is shutting down"},
		{replication.ErrBadPayload, "ERR invalid replication payload"},
		{replication.ErrUnknownNode, "ERR no such cluster member"},
		{&replication.QuorumError{ID: "n2", Reachable: 1, Remaining: 2, Needed: 2}, "ERR refusing to remove n2: 1 of the remaining 2 voters would be reachable, a majority needs 2"},
		{fmt.Errorf("forward: %w", &replication.QuorumError{ID: "n5", Reachable: 2, Remaining: 4, Needed: 3}), "ERR refusing to remove n5: 2 of the remaining 4 voters would be reachable, a majority needs 3"},
		{&replication.PendingError{ID: "n4", Reachable: true, Lag: 900}, "ERR n4 was added as a non-voter and will be promoted to voter once it catches up (900 log entries behind); RAFT.INFO on the leader shows its progress"},
		{&replication.PendingError{ID: "n4"}, "ERR n4 was added as a non-voter and will be promoted to voter once it catches up (not reachable from the leader yet); RAFT.INFO on the leader shows its progress"},
		{&replication.RemovedError{LeaderID: "n2", LeaderRespAddr: "127.0.0.1:7002"}, "CLUSTERDOWN this node was removed from the cluster (leader n2 at 127.0.0.1:7002); RAFT.JOIN it again to rejoin"},
		{&replication.RemovedError{}, "CLUSTERDOWN this node was removed from the cluster (leader unknown); RAFT.JOIN it again to rejoin"},
		{replication.ErrRemoved, "CLUSTERDOWN this node was removed from the cluster; RAFT.JOIN it again to rejoin"},
		{fmt.Errorf("replication: join n1: %w", replication.ErrIDInUse), "ERR a member with this id exists at another raft address, and the leader could not confirm that the node at the new one is that member (its log says why); RAFT.REMOVE it first to replace it"},
		{shards.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		// Wrapped with context: the sentinel's wording alone.
		{fmt.Errorf("replication: apply: %w (leadership lost while processing command)", replication.ErrLeadershipLost), "TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied"},
		{fmt.Errorf("%w: 3 trailing bytes", replication.ErrBadPayload), "ERR invalid replication payload"},
		// Another node's reply, relayed verbatim (CR and LF made spaces).
		{&replication.RemoteError{Msg: "ERR replication: join: raft\r\nfailed"}, "ERR replication: join: raft  failed"},
		{fmt.Errorf("forward: %w", &replication.RemoteError{Msg: "odd"}), "odd"},
		{fmt.Errorf("forward: %w", &replication.PeerError{Text: "period: zero rate\r\nor period"}), "ERR period: zero rate  or period"},
		// Anything else: ERR and the text.
		{errors.New("bad rate"), "ERR bad rate"},
	}
	for _, tt := range tests {
		if got := string(appendErrorText(nil, tt.err)); got != tt.want {
			t.Errorf("appendErrorText(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestSentinelRepliesWrapped checks that every sentinel of the table is
// worded by its own entry, also when wrapped with context (as the packages
// below resp return them), and that no sentinel is listed twice.
func TestSentinelRepliesWrapped(t *testing.T) {
	seen := map[error]bool{}
	for _, r := range sentinelReplies {
		if seen[r.err] {
			t.Errorf("%v listed twice", r.err)
		}
		seen[r.err] = true
		wrapped := fmt.Errorf("context: %w", r.err)
		if got := string(appendErrorText(nil, wrapped)); got != r.text {
			t.Errorf("appendErrorText(%v) = %q, want %q", wrapped, got, r.text)
		}
	}
}
