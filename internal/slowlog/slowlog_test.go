package slowlog

import (
	"bytes"
	"strings"
	"testing"
)

// TestRing checks the ring: newest first, a lowered length applying at
// once, ids going on across a reset.
func TestRing(t *testing.T) {
	var l Log
	l.SetMaxLen(3)
	none := func(int) bool { return false }
	for i := 0; i < 5; i++ {
		l.Add(Entry{Usec: int64(i)}, [][]byte{[]byte("x")}, none)
	}
	got := l.Newest(-1)
	if len(got) != 3 || got[0].ID != 4 || got[2].ID != 2 || l.Len() != 3 {
		t.Fatalf("Newest(-1) = %+v, Len %d; want ids 4, 3, 2", got, l.Len())
	}
	l.SetMaxLen(2)
	if got := l.Newest(10); len(got) != 2 || got[0].ID != 4 || l.Len() != 2 {
		t.Fatalf("after SetMaxLen(2): %+v, Len %d; want ids 4, 3", got, l.Len())
	}
	l.Add(Entry{}, [][]byte{[]byte("x")}, none)
	if got := l.Newest(-1); len(got) != 2 || got[0].ID != 5 || got[1].ID != 4 {
		t.Fatalf("after a shrinking Add: %+v; want ids 5, 4", got)
	}
	l.Reset()
	l.Add(Entry{}, [][]byte{[]byte("x")}, none)
	if got := l.Newest(-1); len(got) != 1 || got[0].ID != 6 {
		t.Fatalf("after Reset: %+v; want id 6 alone", got)
	}
	l.SetMaxLen(0)
	l.Add(Entry{}, [][]byte{[]byte("x")}, none)
	if l.Len() != 0 {
		t.Fatalf("Len with max 0 = %d", l.Len())
	}
}

// TestClip checks Redis's clipping of arguments and the redaction.
func TestClip(t *testing.T) {
	var l Log
	l.SetMaxLen(1)
	args := make([][]byte, 40)
	for i := range args {
		args[i] = []byte("a")
	}
	args[1] = bytes.Repeat([]byte("b"), 200)
	args[2] = []byte("secret")
	l.Add(Entry{}, args, func(i int) bool { return i == 2 })
	e := l.Newest(1)[0]
	if len(e.Args) != MaxArgs {
		t.Fatalf("%d args kept, want %d", len(e.Args), MaxArgs)
	}
	if want := strings.Repeat("b", 128) + "... (72 more bytes)"; string(e.Args[1]) != want {
		t.Errorf("long argument = %q", e.Args[1])
	}
	if string(e.Args[2]) != "(redacted)" {
		t.Errorf("redacted argument = %q", e.Args[2])
	}
	if string(e.Args[MaxArgs-1]) != "... (9 more arguments)" {
		t.Errorf("last argument = %q", e.Args[MaxArgs-1])
	}
	if !(&Log{}).Slow(0) {
		t.Error("threshold 0 does not log every call")
	}
	l.SetSlowerThan(-1)
	if l.Slow(1e12) {
		t.Error("threshold -1 logs")
	}
}
