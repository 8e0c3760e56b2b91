package replication

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/shards"
)

// What does the state machine add to each decision, beyond the keyspace's
// own work? An entry of 400 CL.THROTTLE ops on 100,000 random keys (the
// size group commit packs at 50 connections × pipeline 16) is applied over
// and over: "fsm" decodes and applies it as a replica does (results handed
// to the deliver hook as on the leader), "store" runs the same ops straight
// on a store, as a standalone server does. The difference per decision is
// the replication's apply overhead; allocs/op must stay 0.
func BenchmarkApplyEntry(b *testing.B) {
	const perEntry, keys = 400, 100000
	r := rand.New(rand.NewPCG(1, 2))
	ops := make([]shards.Op, perEntry)
	for i := range ops {
		ops[i] = throttle(fmt.Sprintf("key:%d", r.IntN(keys)), 15, 30, 60, 1)
	}
	now := int64(1_700_000_000) * int64(time.Second)
	b.Run("fsm", func(b *testing.B) {
		st, err := shards.New(shards.Config{})
		if err != nil {
			b.Fatal(err)
		}
		delivered := 0
		f := NewFSM(st, func(_ []byte, res []shards.Result, _ error) bool {
			delivered += len(res)
			return true
		}, nil)
		data := encodeOpsEntry(nil, now, ops)
		ext := encodeEntryID(1, 1)
		l := &raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext}
		logs := []*raft.Log{l}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l.Index = uint64(i + 1)
			f.ApplyBatch(logs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perEntry), "ns/decision")
		if delivered != b.N*perEntry {
			b.Fatalf("delivered %d results, want %d", delivered, b.N*perEntry)
		}
	})
	b.Run("store", func(b *testing.B) {
		st, err := shards.New(shards.Config{})
		if err != nil {
			b.Fatal(err)
		}
		res := make([]shards.Result, perEntry)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for j := range ops {
				st.Exec(&ops[j], now, &res[j])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perEntry), "ns/decision")
	})
}
