package replication

import (
	"errors"
	"testing"
)

// A RAFT.JOIN error reply is relayed as a *RemoteError carrying its text.
func TestErrorFromReply(t *testing.T) {
	var re *RemoteError
	if got := errorFromReply("ERR something else"); !errors.As(got, &re) || re.Msg != "ERR something else" {
		t.Errorf("errorFromReply(other) = %#v, want a *RemoteError with the text", got)
	}
}
