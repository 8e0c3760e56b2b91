package respclient

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestReplyErrors reads real error replies off the wire (the wording of
// cellserver and of Redis) and checks the typed error each decodes into:
// its code, the sentinel errors.Is finds (and those it must not), and the
// data errors.As finds.
func TestReplyErrors(t *testing.T) {
	all := []error{ErrMoved, ErrAsk, ErrTryAgain, ErrClusterDown, ErrLoading, ErrOOM, ErrNoAuth,
		ErrWrongPass, ErrReadOnly, ErrBusyKey, ErrOutOfSequence}
	tests := []struct {
		line string
		code string
		is   error // nil: none of all
		data error // the struct errors.As finds; nil: none
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", "MOVED", ErrMoved, &MovedError{Slot: 3999, Addr: "127.0.0.1:6381"}},
		{"-MOVED 0 [::1]:7000\r\n", "MOVED", ErrMoved, &MovedError{Slot: 0, Addr: "[::1]:7000"}},
		{"-ASK 16383 10.0.0.2:6379\r\n", "ASK", ErrAsk, &AskError{Slot: 16383, Addr: "10.0.0.2:6379"}},
		{"-MOVED 3999\r\n", "MOVED", ErrMoved, nil},
		{"-MOVED\r\n", "MOVED", ErrMoved, nil},
		{"-MOVED x 127.0.0.1:6381\r\n", "MOVED", ErrMoved, nil},
		{"-ASK -1 127.0.0.1:6381\r\n", "ASK", ErrAsk, nil},
		{"-TRYAGAIN Multiple keys request during rehashing of slot\r\n", "TRYAGAIN", ErrTryAgain, nil},
		{"-TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied\r\n", "TRYAGAIN", ErrTryAgain, nil},
		{"-CLUSTERDOWN The cluster is down: no leader\r\n", "CLUSTERDOWN", ErrClusterDown, nil},
		{"-CLUSTERDOWN Hash slot not served\r\n", "CLUSTERDOWN", ErrClusterDown, nil},
		{"-LOADING Redis is loading the dataset in memory\r\n", "LOADING", ErrLoading, nil},
		{"-OOM command not allowed when used memory > 'maxmemory'.\r\n", "OOM", ErrOOM, nil},
		{"-NOAUTH Authentication required.\r\n", "NOAUTH", ErrNoAuth, nil},
		{"-WRONGPASS invalid username-password pair or user is disabled.\r\n", "WRONGPASS", ErrWrongPass, nil},
		{"-READONLY You can't write against a read only replica.\r\n", "READONLY", ErrReadOnly, nil},
		{"-BUSYKEY Target key name already exists.\r\n", "BUSYKEY", ErrBusyKey, nil},
		{"-OUTOFSEQ 7 batch 9 is out of sequence: its lane expects batch 7 (nothing applied; send the lane's batches again from there)\r\n",
			"OUTOFSEQ", ErrOutOfSequence, &OutOfSequenceError{Expected: 7}},
		{"-OUTOFSEQ\r\n", "OUTOFSEQ", ErrOutOfSequence, nil},
		{"-OUTOFSEQ later\r\n", "OUTOFSEQ", ErrOutOfSequence, nil},
		{"-ERR unknown command 'FOO', with args beginning with: \r\n", "ERR", nil, nil},
		{"-ERR MOVED is not an error code after ERR\r\n", "ERR", nil, nil},
		{"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "WRONGTYPE", nil, nil},
		{"-TRYAGAINLATER not a code of ours\r\n", "TRYAGAINLATER", nil, nil},
		{"-moved 1 127.0.0.1:1\r\n", "moved", nil, nil},
		{"-\r\n", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.line[1:min(len(tt.line)-2, 20)], func(t *testing.T) {
			addr := fakeServer(t, replying(tt.line))
			c, err := Dial(context.Background(), addr, Config{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			v, err := c.Do([]byte("GET"), []byte("k"))
			if err != nil || v.Kind != Error {
				t.Fatalf("Do = %+v, %v; want an error reply", v, err)
			}
			got := v.Err()
			var re *ReplyError
			if !errors.As(got, &re) || re.Code != tt.code || re.Msg != tt.line[1:len(tt.line)-2] || got.Error() != re.Msg {
				t.Fatalf("Err() = %#v; want a *ReplyError with code %q and the reply's text", got, tt.code)
			}
			for _, s := range all {
				if want := s == tt.is; errors.Is(got, s) != want {
					t.Errorf("errors.Is(%q, %v) = %v, want %v", re.Msg, s, !want, want)
				}
			}
			var (
				moved *MovedError
				ask   *AskError
				gap   *OutOfSequenceError
				found error
			)
			switch {
			case errors.As(got, &moved):
				found = moved
			case errors.As(got, &ask):
				found = ask
			case errors.As(got, &gap):
				found = gap
			}
			if !reflect.DeepEqual(found, tt.data) {
				t.Errorf("errors.As(%q) found %#v, want %#v", re.Msg, found, tt.data)
			}
		})
	}
}

// TestNoErrorReply: a reply that is not an error has no error, whatever its
// text.
func TestNoErrorReply(t *testing.T) {
	for _, v := range []Value{{Kind: Simple, Str: "MOVED 1 127.0.0.1:1"}, {Kind: Bulk, Str: "TRYAGAIN"}, {Kind: Integer}, {Kind: Null}} {
		if err := v.Err(); err != nil {
			t.Errorf("%+v.Err() = %v, want nil", v, err)
		}
	}
}

// TestFollow: MOVED is followed to the node it names, up to the bound;
// ASK, other errors, a MOVED without an address and a failure to ask are
// not followed further.
func TestFollow(t *testing.T) {
	moved := func(addr string) Value { return Value{Kind: Error, Str: "MOVED 12 " + addr} }
	ok := Value{Kind: Simple, Str: "OK"}
	dialErr := errors.New("connection refused")
	tests := []struct {
		name    string
		first   Value
		replies map[string]Value // by address; absent: do fails
		want    Value
		wantErr error
		asked   []string
	}{
		{"not an error", ok, nil, ok, nil, nil},
		{"other error", Value{Kind: Error, Str: "ERR no"}, nil, Value{Kind: Error, Str: "ERR no"}, nil, nil},
		{"ask", Value{Kind: Error, Str: "ASK 12 b:1"}, nil, Value{Kind: Error, Str: "ASK 12 b:1"}, nil, nil},
		{"moved without address", Value{Kind: Error, Str: "MOVED 12"}, nil, Value{Kind: Error, Str: "MOVED 12"}, nil, nil},
		{"one hop", moved("b:1"), map[string]Value{"b:1": ok}, ok, nil, []string{"b:1"}},
		{"two hops", moved("b:1"), map[string]Value{"b:1": moved("c:1"), "c:1": ok}, ok, nil, []string{"b:1", "c:1"}},
		{"hop then tryagain", moved("b:1"), map[string]Value{"b:1": {Kind: Error, Str: "TRYAGAIN x"}},
			Value{Kind: Error, Str: "TRYAGAIN x"}, nil, []string{"b:1"}},
		{"unreachable", moved("b:1"), map[string]Value{}, Value{}, dialErr, []string{"b:1"}},
		{"loop", moved("b:1"), map[string]Value{"b:1": moved("c:1"), "c:1": moved("b:1")}, Value{}, ErrTooManyRedirects,
			[]string{"b:1", "c:1", "b:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			got, err := Follow(tt.first, 3, func(addr string) (Value, error) {
				asked = append(asked, addr)
				v, ok := tt.replies[addr]
				if !ok {
					return Value{}, dialErr
				}
				return v, nil
			})
			if !errors.Is(err, tt.wantErr) || !reflect.DeepEqual(got, tt.want) || !reflect.DeepEqual(asked, tt.asked) {
				t.Errorf("Follow(%+v) = %+v, %v after asking %q; want %+v, %v after asking %q", tt.first, got, err, asked, tt.want, tt.wantErr, tt.asked)
			}
		})
	}
}
