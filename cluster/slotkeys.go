package cluster

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
)

// SlotKeys calls fn once for every distinct live key of slot in store at
// now (CLUSTER COUNTKEYSINSLOT, GETKEYSINSLOT), by scanning the whole
// keyspace (O(N) in the number of keys), then for every key of the slot
// in the moving set (keys MIGRATE is moving out are still this group's
// until the move completes). It stops when fn returns false. The caller
// reads now after its read barrier.
func SlotKeys(store *shards.Store, slot int, now int64, fn func(key []byte) bool) {
	seen := map[string]bool{} // a scan may report a key twice
	var found [][]byte
	keep := func(key []byte) {
		if hashslot.Of(key) == slot && !seen[string(key)] {
			seen[string(key)] = true
			found = append(found, append([]byte(nil), key...))
		}
	}
	emit := func() bool {
		for _, k := range found {
			if !fn(k) {
				return false
			}
		}
		found = found[:0]
		return true
	}
	for cur := uint64(0); ; {
		cur = store.Scan(cur, 1000, now, func(key []byte, _ engine.Kind) { keep(key) })
		if !emit() {
			return
		}
		if cur == 0 {
			break
		}
	}
	store.MovingKeys(func(key []byte, _ engine.State) bool { keep(key); return true })
	emit()
}
