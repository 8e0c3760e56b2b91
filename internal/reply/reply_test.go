package reply

import "testing"

func TestConstructors(t *testing.T) {
	n := Map(Bulk("a"), Int(uint64(7)), Bulk("b"), SimpleSet([]string{"x", "y"}), Bulk("c"), Null())
	if n.Kind != KindMap || len(n.Elems) != 6 {
		t.Fatalf("Map = %+v, want a map of three pairs", n)
	}
	if e := n.Elems[1]; e.Kind != KindInt || e.Int != 7 {
		t.Errorf("Int(7) = %+v", e)
	}
	set := n.Elems[3]
	if set.Kind != KindSet || len(set.Elems) != 2 || set.Elems[1].Kind != KindSimple || set.Elems[1].Str != "y" {
		t.Errorf("SimpleSet = %+v, want a set of simple strings x, y", set)
	}
	if n.Elems[5].Kind != KindNull {
		t.Errorf("Null = %+v", n.Elems[5])
	}
}
