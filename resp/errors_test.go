package resp

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/clientlist"
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
		{fmt.Errorf("forward: %w", &cluster.MoveBusyError{Holder: "n2/5f1c"}), "TRYAGAIN another MIGRATE or CLUSTER ABORTMOVE of this group is running (n2/5f1c): retry once it is done"},
		{&cluster.AbortBlockedError{Slot: 7, Keys: 2, Dest: "10.0.0.2:7000", Group: "b"}, "ERR 2 key(s) of slot 7 are in flight to 10.0.0.2:7000, a member of group b, which may hold them: MIGRATE them there again, or CLUSTER ABORTMOVE 7 FORCE once sure it does not have them"},
		{&cluster.AbortBlockedError{Slot: 7, Keys: 1}, "ERR 1 key(s) of slot 7 are in flight to an unknown destination, which may hold them: MIGRATE them there again, or CLUSTER ABORTMOVE 7 FORCE once sure it does not have them"},
		{cluster.ErrTargetUnreachable, "IOERR error or timeout connecting to the client"},
		{&cluster.InFlightError{Err: &textError{"IOERR error or timeout reading to target instance"}, Keys: 3}, "IOERR error or timeout reading to target instance; 3 key(s) are in flight: they answer TRYAGAIN until a MIGRATE naming them again completes the move, or CLUSTER ABORTMOVE puts them back"},
		{&cluster.InFlightError{Err: cluster.ErrTargetUnreachable, Keys: 1}, "IOERR error or timeout connecting to the client; 1 key(s) are in flight: they answer TRYAGAIN until a MIGRATE naming them again completes the move, or CLUSTER ABORTMOVE puts them back"},
		{&cluster.ResendError{Key: []byte("k"), Dest: "10.0.0.2:7000", Group: "b"}, "ERR key k is in flight to 10.0.0.2:7000, a member of group b: MIGRATE it to a member of that group, or CLUSTER ABORTMOVE its slot"},
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
		{&replication.LogError{ID: "n1", Addr: "127.0.0.1:7101", Reason: replication.LogOtherGroup, GroupID: "aaaa", NodeGroupID: "bbbb", Member: true},
			"ERR refusing n1 at 127.0.0.1:7101: that node has the raft log of another group (its raft_group_id is bbbb, this group's is aaaa): it bootstrapped a log of its own or belongs to another group. " +
				"Start member n1 from its own data directory (it rejoins at any address), or RAFT.REMOVE n1 first, wipe that node's data directory and RAFT.JOIN it as a new member"},
		{fmt.Errorf("forward: %w", &replication.LogError{ID: "x", Addr: "127.0.0.1:7102", Reason: replication.LogOtherGroup, NodeGroupID: "bbbb"}),
			"ERR refusing x at 127.0.0.1:7102: that node has the raft log of another group (its raft_group_id is bbbb, this group has recorded none yet): it bootstrapped a log of its own or belongs to another group. Wipe that node's data directory and RAFT.JOIN it again"},
		{&replication.LogError{ID: "n2", Addr: "127.0.0.1:7103", Reason: replication.LogNoGroupID, GroupID: "aaaa", Index: 12, Member: true},
			"ERR refusing n2 at 127.0.0.1:7103: that node's raft log has no group id past index 12, where this group's log records raft_group_id aaaa: it is not this group's log, or a version before group ids snapshotted it. " +
				"Start member n2 at the raft address the group lists for it (it catches up there), or RAFT.REMOVE n2 first, wipe that node's data directory and RAFT.JOIN it as a new member"},
		{&replication.LogError{ID: "n1", Addr: "127.0.0.1:7105", Reason: replication.LogOwn, GroupID: "aaaa", Member: true},
			"ERR refusing n1 at 127.0.0.1:7105: that node bootstrapped a raft log of its own, which records no group id yet (this group's raft_group_id is aaaa): it is another group's log. " +
				"Start member n1 from its own data directory (it rejoins at any address), or RAFT.REMOVE n1 first, wipe that node's data directory and RAFT.JOIN it as a new member"},
		{&replication.LogError{ID: "n3", Addr: "127.0.0.1:7104", Reason: replication.LogEmpty, Member: true},
			"ERR refusing n3 at 127.0.0.1:7104: that node has no raft state (a new or wiped node), and a member's vote needs the group's log. " +
				"Start member n3 from its own data directory (it rejoins at any address), or RAFT.REMOVE n3 first, wipe that node's data directory and RAFT.JOIN it as a new member"},
		{shards.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		// Wrapped with context: the sentinel's wording alone.
		{fmt.Errorf("replication: apply: %w (leadership lost while processing command)", replication.ErrLeadershipLost), "TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied"},
		{fmt.Errorf("%w: 3 trailing bytes", replication.ErrBadPayload), "ERR invalid replication payload"},
		// Another node's reply, relayed verbatim (CR and LF made spaces).
		{&replication.RemoteError{Msg: "ERR replication: join: raft\r\nfailed"}, "ERR replication: join: raft  failed"},
		{fmt.Errorf("forward: %w", &replication.RemoteError{Msg: "odd"}), "odd"},
		{fmt.Errorf("forward: %w", &replication.PeerError{Text: "period: zero rate\r\nor period"}), "ERR period: zero rate  or period"},
		// The server and connection commands' refusals (errors.go's block).
		{errProtoVersion, "ERR Protocol version is not an integer or out of range"},
		{errClientName, "ERR Client names cannot contain spaces, newlines or special characters."},
		{clientlist.ErrKillID, "ERR client-id should be greater than 0"},
		{errNoSuchClient, "ERR No such client"},
		{clientlist.ErrListID, "ERR Invalid client ID"},
		{errNegative, "ERR value is out of range, must be positive"},
		{errHotkeysOff, "ERR hotkeys-capacity is 0: access frequency not tracked"},
		{errNoConfigFile, "ERR The server is running without a config file"},
		{errSlowlogCount, "ERR count should be greater than or equal to -1"},
		{refusal(refuseHelloOption, "foo"), "ERR Syntax error in HELLO option 'foo'"},
		{refusal(refuseClientOption, "lib"), "ERR Unrecognized option 'lib'"},
		{refusal(refuseClientInfo, "lib-name"), "ERR lib-name cannot contain spaces, newlines or special characters."},
		{&clientlist.TypeError{Given: "x"}, "ERR Unknown client type 'x'"},
		{refusal(refuseTypeName, "x"), "ERR unknown type name 'x'"},
		{refusal(refuseConfigRewrite, "open cellserver.conf: permission denied"), "ERR Rewriting config file: open cellserver.conf: permission denied"},
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
