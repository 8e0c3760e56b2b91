package shards

import (
	"fmt"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// Keys whose hashes share a table position, with equal or different top
// bits (the slot's tag), are all found, and removing some keeps the others
// reachable (backward-shift deletion moves tagged slots intact).
func TestSlotTags(t *testing.T) {
	var sh shard
	sh.init()
	hashes := []uint32{
		0x01000005, 0x02000005, 0x01000005, 0xff000005, // same position, tags 1, 2, 1, 255
		0x01000006, 0x00000005, 0xffffff05, // a neighbour; tag 0; a full index field
	}
	st := engine.State{Kind: engine.KindGCRA, ExpireAt: 1 << 40, A: 1 << 40}
	for i, h := range hashes {
		if err := sh.insert(h, []byte(fmt.Sprintf("k%d", i)), &st); err != nil {
			t.Fatal(err)
		}
	}
	check := func(gone map[int]bool) {
		t.Helper()
		for i, h := range hashes {
			_, idx := sh.find(h, []byte(fmt.Sprintf("k%d", i)))
			if found := idx >= 0; found == gone[i] {
				t.Errorf("find(%#x, k%d) found=%v, want %v", h, i, found, !gone[i])
			}
			if idx >= 0 && string(sh.key(&sh.recs[idx])) != fmt.Sprintf("k%d", i) {
				t.Errorf("find(%#x, k%d) = record of %q", h, i, sh.key(&sh.recs[idx]))
			}
		}
		// A key that is absent, with a tag and position already in use.
		if _, idx := sh.find(0x01000005, []byte("nope")); idx >= 0 {
			t.Error("found a key never inserted")
		}
	}
	check(nil)
	for _, i := range []int{0, 3} {
		pos, idx := sh.find(hashes[i], []byte(fmt.Sprintf("k%d", i)))
		sh.removeAt(pos, idx)
	}
	check(map[int]bool{0: true, 3: true})
	sh.rehash(len(sh.table) * 4)
	check(map[int]bool{0: true, 3: true})
}

func TestSlotEncoding(t *testing.T) {
	for _, tc := range []struct {
		h   uint32
		idx int
	}{{0, 0}, {0xffffffff, maxRecs - 1}, {0xab123456, 12345}} {
		v := slot(tc.h, tc.idx)
		if v == 0 || slotRec(v) != tc.idx || v&^slotIdxMask != tc.h&^slotIdxMask {
			t.Errorf("slot(%#x, %d) = %#x: record %d, tag %#x", tc.h, tc.idx, v, slotRec(v), v&^slotIdxMask)
		}
	}
}
