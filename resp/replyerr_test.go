package resp

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/respclient"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// TestReplyErrorsDecoded: what this package words (appendErrorText) is what
// the RESP client decodes (respclient.DecodeError), so that a node reading
// another's refusal — a region link, MIGRATE's exchange with its target —
// acts on the same error the other node meant. A wording that drifts from
// the client's codes fails here.
func TestReplyErrorsDecoded(t *testing.T) {
	tests := []struct {
		err  error
		is   error
		data error // what errors.As finds, nil: nothing checked
	}{
		{&cluster.RedirectError{Slot: 3999, Addr: "127.0.0.1:6381"}, respclient.ErrMoved, &respclient.MovedError{Slot: 3999, Addr: "127.0.0.1:6381"}},
		{&cluster.RedirectError{Ask: true, Slot: 12, Addr: "[::1]:7001"}, respclient.ErrAsk, &respclient.AskError{Slot: 12, Addr: "[::1]:7001"}},
		{&region.SequenceError{Expected: 41, Seq: 44}, respclient.ErrOutOfSequence, &respclient.OutOfSequenceError{Expected: 41}},
		{cluster.ErrTryAgain, respclient.ErrTryAgain, nil},
		{shards.ErrMoving, respclient.ErrTryAgain, nil},
		{replication.ErrNotLeader, respclient.ErrTryAgain, nil},
		{fmt.Errorf("apply: %w", replication.ErrLeadershipLost), respclient.ErrTryAgain, nil},
		{replication.ErrNoLeader, respclient.ErrClusterDown, nil},
		{replication.ErrShutdown, respclient.ErrClusterDown, nil},
		{&replication.RemovedError{LeaderID: "n1", LeaderRespAddr: "127.0.0.1:1"}, respclient.ErrClusterDown, nil},
		{cluster.ErrSlotNotServed, respclient.ErrClusterDown, nil},
		{cluster.ErrSlotNotKnown, respclient.ErrClusterDown, nil},
		{shards.ErrWouldGrow, respclient.ErrOOM, nil},
		{shards.ErrBusyKey, respclient.ErrBusyKey, nil},
		{ErrNoAuth, respclient.ErrNoAuth, nil},
		{ErrHelloNoAuth, respclient.ErrNoAuth, nil},
		{ErrWrongPass, respclient.ErrWrongPass, nil},
		{shards.ErrWrongType, nil, nil},
		{cluster.ErrCrossSlot, nil, nil},
	}
	for _, tt := range tests {
		text := string(appendErrorText(nil, tt.err))
		got := respclient.DecodeError(text)
		if tt.is == nil {
			if got.Unwrap() != nil {
				t.Errorf("DecodeError(%q) wraps %v, want no typed error", text, got.Unwrap())
			}
			continue
		}
		if !errors.Is(got, tt.is) {
			t.Errorf("DecodeError(%q) = %v (code %q), want errors.Is %v", text, got.Unwrap(), got.Code, tt.is)
		}
		if tt.data == nil {
			continue
		}
		target := reflect.New(reflect.TypeOf(tt.data))
		if !errors.As(got, target.Interface()) || !reflect.DeepEqual(target.Elem().Interface(), tt.data) {
			t.Errorf("DecodeError(%q) = %#v, want %#v", text, got.Unwrap(), tt.data)
		}
	}
}
