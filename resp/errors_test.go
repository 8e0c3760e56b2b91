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
		{shards.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		// Wrapped with context: the sentinel's wording alone.
		{fmt.Errorf("replication: apply: %w (leadership lost while processing command)", replication.ErrLeadershipLost), "TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied"},
		{fmt.Errorf("%w: 3 trailing bytes", replication.ErrBadPayload), "ERR invalid replication payload"},
		// Another node's reply, relayed verbatim (CR and LF made spaces).
		{&replication.RemoteError{Msg: "ERR replication: join: raft\r\nfailed"}, "ERR replication: join: raft  failed"},
		{fmt.Errorf("forward: %w", &replication.RemoteError{Msg: "odd"}), "odd"},
		// Anything else: ERR and the text.
		{errors.New("bad rate"), "ERR bad rate"},
	}
	for _, tt := range tests {
		if got := string(appendErrorText(nil, tt.err)); got != tt.want {
			t.Errorf("appendErrorText(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
