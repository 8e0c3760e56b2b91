package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/shards"
)

// TestApplyAllocatesNothing: applying an entry of CL.THROTTLE ops on keys
// the store already holds allocates nothing, through Apply and through
// ApplyBatch (raft's path), with the results handed to the deliver hook
// as on the leader. Every allocation here is one per decision or per entry
// on every replica.
func TestApplyAllocatesNothing(t *testing.T) {
	ops := make([]shards.Op, 64)
	for i := range ops {
		ops[i] = throttle(fmt.Sprintf("key:%d", i), 15, 30, 60, 1)
	}
	now := int64(1_700_000_000) * int64(time.Second)
	data := encodeOpsEntry(nil, now, ops)
	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "Apply", true: "ApplyBatch"}[batch]
		t.Run(name, func(t *testing.T) {
			delivered := 0
			f := newTestFSM(t, func(_ []byte, res []shards.Result, err error) bool {
				if err != nil {
					t.Errorf("deliver: %v", err)
				}
				delivered += len(res)
				return true
			})
			l := &raft.Log{Type: raft.LogCommand, Data: data, Extensions: encodeEntryID(1, 1)}
			logs := []*raft.Log{l}
			idx := uint64(0)
			next := func() {
				idx++
				l.Index = idx
				if batch {
					f.ApplyBatch(logs)
				} else {
					f.Apply(l)
				}
			}
			next() // the keys are created once
			allocs := testing.AllocsPerRun(50, next)
			if allocs != 0 {
				t.Errorf("%s of a %d-op entry allocated %v times, want 0", name, len(ops), allocs)
			}
			if want := int(idx) * len(ops); delivered != want {
				t.Errorf("delivered %d results, want %d", delivered, want)
			}
		})
	}
}
