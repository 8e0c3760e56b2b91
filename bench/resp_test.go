package main

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func newReader(s string, size int) *replyReader {
	return &replyReader{r: bufio.NewReaderSize(strings.NewReader(s), size)}
}

// sentinel follows every reply in the tests below, so a reader that consumes
// too much or too little of a reply is caught by the next read.
const sentinel = "+NEXT\r\n"

func TestSkipAndValue(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		isErr   bool
		errMsg  string
		value   any
		noValue bool // a RESP3 type that value() does not decode
	}{
		{name: "simple", in: "+OK\r\n", value: "OK"},
		{name: "empty simple", in: "+\r\n", value: ""},
		{name: "integer", in: ":-42\r\n", value: int64(-42)},
		{name: "error", in: "-ERR wrong number of arguments\r\n", isErr: true, errMsg: "ERR wrong number of arguments", value: replyError("ERR wrong number of arguments")},
		{name: "wrongtype", in: "-WRONGTYPE Operation against a key\r\n", isErr: true, errMsg: "WRONGTYPE Operation against a key", value: replyError("WRONGTYPE Operation against a key")},
		{name: "bulk", in: "$5\r\nhello\r\n", value: "hello"},
		{name: "empty bulk", in: "$0\r\n\r\n", value: ""},
		// A bulk string may hold CRLF and a '-': it is data, not a new reply.
		{name: "bulk with CRLF", in: "$8\r\n-a\r\n+b\r\n\r\n", value: "-a\r\n+b\r\n"},
		{name: "nil bulk", in: "$-1\r\n", value: nil},
		{name: "nil array", in: "*-1\r\n", value: nil},
		{name: "empty array", in: "*0\r\n", value: []any{}},
		{name: "throttle reply", in: "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n", value: []any{int64(0), int64(16), int64(15), int64(-1), int64(2)}},
		{
			name: "nested with nil and error inside",
			in:   "*3\r\n*2\r\n:1\r\n$-1\r\n-ERR inner\r\n*1\r\n*0\r\n",
			// An error inside an array is part of the reply, not an error reply.
			value: []any{[]any{int64(1), nil}, replyError("ERR inner"), []any{[]any{}}},
		},
		{name: "throttleall", in: "*2\r\n*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n*5\r\n:1\r\n:2\r\n:0\r\n:3\r\n:4\r\n", value: []any{
			[]any{int64(0), int64(16), int64(15), int64(-1), int64(2)},
			[]any{int64(1), int64(2), int64(0), int64(3), int64(4)},
		}},
		{name: "resp3 null", in: "_\r\n", value: nil},
		{name: "resp3 map", in: "%2\r\n+a\r\n:1\r\n+b\r\n*2\r\n:1\r\n:2\r\n", noValue: true},
		{name: "resp3 set double bool bignum", in: "~3\r\n,1.5\r\n#t\r\n(123456789012345678901234567890\r\n", noValue: true},
		{name: "resp3 verbatim", in: "=8\r\ntxt:abcd\r\n", noValue: true},
		{name: "resp3 blob error", in: "!9\r\nERR blob!\r\n", isErr: true, errMsg: "ERR blob!", noValue: true},
		{name: "resp3 attribute then reply", in: "|1\r\n+ttl\r\n:3\r\n:7\r\n", noValue: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := newReader(tt.in+sentinel, 16)
			isErr, msg, err := rr.skip()
			if err != nil {
				t.Fatalf("skip(%q) error: %v", tt.in, err)
			}
			if isErr != tt.isErr || string(msg) != tt.errMsg {
				t.Errorf("skip(%q) = (%v, %q), want (%v, %q)", tt.in, isErr, msg, tt.isErr, tt.errMsg)
			}
			if v, err := rr.value(); err != nil || v != "NEXT" {
				t.Errorf("after skip(%q): next reply = %v, %v; want NEXT (reply not consumed exactly)", tt.in, v, err)
			}
			if tt.noValue {
				return
			}
			rr = newReader(tt.in+sentinel, 16)
			v, err := rr.value()
			if err != nil {
				t.Fatalf("value(%q) error: %v", tt.in, err)
			}
			if !reflect.DeepEqual(v, tt.value) {
				t.Errorf("value(%q) = %#v, want %#v", tt.in, v, tt.value)
			}
			if v, err := rr.value(); err != nil || v != "NEXT" {
				t.Errorf("after value(%q): next reply = %v, %v; want NEXT", tt.in, v, err)
			}
		})
	}
}

func TestSkipLongLine(t *testing.T) {
	// A line longer than the reader's buffer (16 bytes) is read whole.
	text := "ERR " + strings.Repeat("x", 100)
	rr := newReader("-"+text+"\r\n"+sentinel, 16)
	isErr, msg, err := rr.skip()
	if err != nil || !isErr || string(msg) != text {
		t.Fatalf("skip(long error) = (%v, %q, %v), want (true, %q)", isErr, msg, err, text)
	}
	if v, err := rr.value(); err != nil || v != "NEXT" {
		t.Errorf("after long line: next reply = %v, %v; want NEXT", v, err)
	}
	rr = newReader("+"+text+"\r\n"+sentinel, 16)
	if v, err := rr.value(); err != nil || v != text {
		t.Errorf("value(long simple string) = %q, %v; want %q", v, err, text)
	}
}

func TestSkipBadInput(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"truncated bulk", "$10\r\nabc", io.ErrUnexpectedEOF},
		{"truncated array", "*3\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"empty input", "", io.ErrUnexpectedEOF},
		{"unknown type", "?what\r\n", errProtocol},
		{"bad length", "$1x\r\nab\r\n", errProtocol},
		{"bare LF", "+OK\n", errProtocol},
		{"too deep", strings.Repeat("*1\r\n", maxDepth+2) + ":1\r\n", errProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := newReader(tt.in, 4096).skip()
			if !errors.Is(err, tt.want) {
				t.Errorf("skip(%q) error = %v, want %v", tt.in, err, tt.want)
			}
			_, err = newReader(tt.in, 4096).value()
			if !errors.Is(err, tt.want) {
				t.Errorf("value(%q) error = %v, want %v", tt.in, err, tt.want)
			}
		})
	}
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"16", 16, true}, {"-1", -1, true}, {"+7", 7, true},
		{"9223372036854775807", 0, false}, // beyond the 2^62 guard: no reply is that long
		{"", 0, false}, {"-", 0, false}, {"1.5", 0, false},
	}
	for _, tt := range tests {
		got, err := parseInt([]byte(tt.in))
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("parseInt(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestSkipDoesNotAllocate(t *testing.T) {
	in := strings.Repeat("*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n$3\r\nabc\r\n-ERR x\r\n", 100)
	sr := strings.NewReader(in)
	rr := &replyReader{r: bufio.NewReaderSize(sr, 4096)}
	allocs := testing.AllocsPerRun(50, func() {
		sr.Reset(in)
		rr.r.Reset(sr)
		for range 300 {
			if _, _, err := rr.skip(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("skip allocates %.1f times per 300 replies, want 0", allocs)
	}
}
