package acllog

import "testing"

// TestGrouping checks that a failure within a minute of an entry of the
// same client and user is counted in it and moves it first, and that a
// different address, or a later failure, makes a new entry.
func TestGrouping(t *testing.T) {
	var l Log
	f := Entry{Reason: "auth", Context: "toplevel", Object: "AUTH", Username: "default", Addr: "192.0.2.1"}
	l.Add(f, 1000)
	other := f
	other.Addr = "192.0.2.2"
	l.Add(other, 2000)
	f.ClientInfo = "id=7"
	l.Add(f, 3000) // grouped with the first, which becomes the newest
	got := l.Newest(10)
	if len(got) != 2 || got[0].Addr != "192.0.2.1" || got[0].Count != 2 || got[0].Updated != 3000 || got[0].Created != 1000 || got[0].ClientInfo != "id=7" {
		t.Fatalf("after grouping: %+v", got)
	}
	l.Add(f, 3000+groupMillis) // too late to group
	if got := l.Newest(10); len(got) != 3 || got[0].Count != 1 || got[0].ID != 2 {
		t.Fatalf("after a minute: %+v", got)
	}
	for i := 0; i < MaxLen+5; i++ {
		g := f
		g.Username = string(rune('a'+i%26)) + string(rune('a'+i/26))
		l.Add(g, 100000)
	}
	if n := len(l.Newest(1000)); n != MaxLen {
		t.Errorf("%d entries kept, want %d", n, MaxLen)
	}
	l.Reset()
	if n := len(l.Newest(10)); n != 0 {
		t.Errorf("%d entries after Reset", n)
	}
}
