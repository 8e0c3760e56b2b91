package replication

import "testing"

func TestEntryID(t *testing.T) {
	tests := []struct {
		origin, seq uint64
	}{{1, 0}, {0xdeadbeefcafef00d, 1}, {^uint64(0), ^uint64(0)}}
	for _, tt := range tests {
		o, s, ok := decodeEntryID(encodeEntryID(tt.origin, tt.seq))
		if !ok || o != tt.origin || s != tt.seq {
			t.Errorf("decodeEntryID(encodeEntryID(%d, %d)) = %d, %d, %v", tt.origin, tt.seq, o, s, ok)
		}
	}
	for _, b := range [][]byte{nil, {}, make([]byte, 15), make([]byte, 17)} {
		if _, _, ok := decodeEntryID(b); ok {
			t.Errorf("decodeEntryID(%d bytes) ok, want not an id", len(b))
		}
	}
}

// An applied entry is answered by the node whose origin it carries, and
// only for a sequence number it still waits on: never by another node's
// entry with the same sequence number.
func TestDeliverAppliedMatchesOrigin(t *testing.T) {
	n := &Node{origin: 7, own: map[uint64]*flight{}}
	p := &pending{done: make(chan struct{})}
	n.own[3] = &flight{batch: []*pending{p}, seq: 3}
	if n.deliverApplied(encodeEntryID(9, 3), nil, nil) {
		t.Fatal("an entry of origin 9 was taken by the node of origin 7")
	}
	if n.deliverApplied(nil, nil, nil) {
		t.Fatal("an entry without an id was taken")
	}
	if !n.deliverApplied(encodeEntryID(7, 3), nil, nil) {
		t.Fatal("the node's own entry was not taken")
	}
	if n.deliverApplied(encodeEntryID(7, 3), nil, nil) {
		t.Fatal("an entry was answered twice")
	}
	select {
	case <-p.done:
	default:
		t.Fatal("the caller was not answered")
	}
}
