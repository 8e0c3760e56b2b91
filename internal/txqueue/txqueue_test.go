package txqueue

import (
	"errors"
	"testing"
)

var roomy = Bounds{Commands: 100, ArgBytes: 1 << 20, Memory: 1 << 20}

func TestAddCopiesArguments(t *testing.T) {
	var q Queue[string]
	args := [][]byte{[]byte("cl.throttle"), []byte("k")}
	if err := q.Add("cl.throttle", args, true, Write, roomy); err != nil {
		t.Fatal(err)
	}
	args[1][0] = 'x' // the read buffer is reused by the next batch
	e := q.Entries[0]
	if string(e.Args[1]) != "k" || !e.Asking || e.Cmd != "cl.throttle" {
		t.Errorf("entry = %q %q asking %v, want cl.throttle [cl.throttle k] asking true", e.Cmd, e.Args, e.Asking)
	}
	size, argBytes := Size(args)
	if q.Bytes != size || q.ArgBytes != argBytes || argBytes != 12 || size != EntryOverhead+12+48 {
		t.Errorf("Bytes, ArgBytes = %d, %d; want %d, %d", q.Bytes, q.ArgBytes, size, argBytes)
	}
}

func TestAddBounds(t *testing.T) {
	arg := [][]byte{make([]byte, 100)}
	size, _ := Size(arg)
	for _, tc := range []struct {
		b       Bounds
		setting string
	}{
		{Bounds{Commands: 2, ArgBytes: 1 << 20, Memory: 1 << 20}, "transaction-max-commands"},
		{Bounds{Commands: 100, ArgBytes: 250, Memory: 1 << 20}, "transaction-max-bytes"},
		{Bounds{Commands: 100, ArgBytes: 1 << 20, Memory: 3*size - 1}, "client-query-buffer-limit"},
	} {
		var q Queue[int]
		for i := range 2 {
			if err := q.Add(i, arg, false, None, tc.b); err != nil {
				t.Fatalf("%s: command %d refused: %v", tc.setting, i, err)
			}
		}
		var le *LimitError
		if err := q.Add(2, arg, false, None, tc.b); !errors.As(err, &le) || le.Setting != tc.setting {
			t.Fatalf("third Add = %v, want a LimitError of %s", err, tc.setting)
		}
		if !q.Over || !q.Failed || q.Entries != nil || q.Bytes != 0 {
			t.Errorf("%s: after the refusal Over %v Failed %v entries %d bytes %d; want the queue let go of", tc.setting, q.Over, q.Failed, len(q.Entries), q.Bytes)
		}
		if err := q.Add(3, arg, false, None, tc.b); err != nil || len(q.Entries) != 0 {
			t.Errorf("%s: Add once over = %v with %d entries, want nil and none kept", tc.setting, err, len(q.Entries))
		}
	}
}

func TestAddOrderRule(t *testing.T) {
	for _, tc := range []struct {
		seq  []Access
		want error // of the last Add
	}{
		{[]Access{Write, Keyspace, Write}, ErrReadBetween},
		{[]Access{Keyspace, Write, Write, Keyspace}, nil},
		{[]Access{Write, None, Write}, nil},
	} {
		var q Queue[int]
		var err error
		for i, a := range tc.seq {
			err = q.Add(i, nil, false, a, roomy)
		}
		if err != tc.want || q.Failed != (tc.want != nil) {
			t.Errorf("%v: last Add = %v (Failed %v), want %v", tc.seq, err, q.Failed, tc.want)
		}
	}
}

func TestReplyEstimateAndCheck(t *testing.T) {
	var q Queue[int]
	_ = q.Add(3, [][]byte{[]byte("del"), []byte("a"), []byte("b"), []byte("c")}, false, Write, roomy)
	_ = q.Add(-1, [][]byte{[]byte("echo"), []byte("hello")}, false, None, roomy)
	got := q.ReplyEstimate(func(e *Entry[int]) int { return e.Cmd })
	want := int64(16 + 3*DecisionReplyMax + ReplyLineMax + 9)
	if got != want {
		t.Errorf("ReplyEstimate = %d, want %d", got, want)
	}
	var re *ReplyError
	if err := CheckReply(got, 10, got+9); !errors.As(err, &re) || re.Estimate != got {
		t.Errorf("CheckReply over the hard limit = %v, want a ReplyError", err)
	}
	if err := CheckReply(got, 10, got+10); err != nil {
		t.Errorf("CheckReply at the hard limit = %v, want nil", err)
	}
	if err := CheckReply(got, 10, 0); err != nil {
		t.Errorf("CheckReply with no limit = %v, want nil", err)
	}
}

func TestReset(t *testing.T) {
	q := Queue[int]{On: true}
	_ = q.Add(1, [][]byte{[]byte("x")}, false, Write, roomy)
	q.Reset()
	if q.On || len(q.Entries) != 0 || q.Bytes != 0 || q.ArgBytes != 0 {
		t.Errorf("after Reset: %+v, want an empty queue", q)
	}
	// The order rule starts over too.
	_ = q.Add(1, nil, false, Keyspace, roomy)
	if err := q.Add(2, nil, false, Write, roomy); err != nil {
		t.Errorf("write after Reset = %v, want nil", err)
	}
}
