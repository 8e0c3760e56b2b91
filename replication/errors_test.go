package replication

import (
	"errors"
	"testing"
)

// A RAFT.JOIN error reply, worded by the wire layer (resp's TestErrorWording
// pins the same texts), maps back to the sentinel it names.
func TestErrorFromReply(t *testing.T) {
	tests := []struct {
		reply string
		want  error
	}{
		{"CLUSTERDOWN The cluster is down: no leader", ErrNoLeader},
		{"TRYAGAIN This node is not the leader", ErrNotLeader},
		{"TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied", ErrLeadershipLost},
		{"CLUSTERDOWN This node is shutting down", ErrShutdown},
		{"ERR invalid replication payload", ErrBadPayload},
		{"ERR no such cluster member", ErrUnknownNode},
	}
	for _, tt := range tests {
		if got := errorFromReply(tt.reply); !errors.Is(got, tt.want) {
			t.Errorf("errorFromReply(%q) = %v, want %v", tt.reply, got, tt.want)
		}
	}
	var re *RemoteError
	if got := errorFromReply("ERR something else"); !errors.As(got, &re) || re.Msg != "ERR something else" {
		t.Errorf("errorFromReply(other) = %#v, want a *RemoteError with the text", got)
	}
}
