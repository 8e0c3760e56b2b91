package cluster

import (
	"testing"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// TestGroupOfKey: a key's group is its slot's owner, with the importing group
// while the owner migrates the slot; no group for a slot nobody owns; an
// unsharded routing routes every key to Self.
func TestGroupOfKey(t *testing.T) {
	moving, owned, unowned := []byte("{a}1"), []byte("{b}1"), []byte("{c}1")
	sm, so, su := hashslot.Of(moving), hashslot.Of(owned), hashslot.Of(unowned)
	if sm == so || sm == su || so == su {
		t.Fatalf("test keys share a slot: %d %d %d", sm, so, su)
	}
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{sm, sm}}, Migrating: map[int]string{sm: "b"}},
		{Name: "b", Slots: [][2]int{{so, so}}, Importing: map[int]string{sm: "a"}},
	})
	tests := []struct {
		key             []byte
		owner, importer string
		ok              bool
	}{
		{moving, "a", "b", true},
		{owned, "b", "", true},
		{unowned, "", "", false},
	}
	for _, tt := range tests {
		if o, i, ok := r.GroupOfKey(tt.key); o != tt.owner || i != tt.importer || ok != tt.ok {
			t.Errorf("GroupOfKey(%q) = %q, %q, %v; want %q, %q, %v", tt.key, o, i, ok, tt.owner, tt.importer, tt.ok)
		}
	}
	one := NewRouting(0, "a1", []GroupView{{Name: "a"}})
	if o, i, ok := one.GroupOfKey(unowned); o != "a" || i != "" || !ok {
		t.Errorf("unsharded GroupOfKey(%q) = %q, %q, %v; want \"a\", \"\", true", unowned, o, i, ok)
	}
}
