package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// BenchmarkApplyLargestTransaction answers: how long does the state
// machine hold up the entries behind the largest transaction the RESP
// layer's defaults allow (transaction-max-commands 10000,
// transaction-max-bytes 1mb: 10,000 CL.THROTTLE on keys of about 88
// bytes), from decoding its entry to answering it? Each iteration applies
// the entry to a fresh store (every key new, the costlier case).
func BenchmarkApplyLargestTransaction(b *testing.B) {
	const n, keyLen = 10000, 88
	ops := make([]shards.Op, n)
	req := engine.Request{Kind: engine.KindGCRA, Burst: 10, Rate: 1, Period: int64(time.Minute), Quantity: 1}
	for i := range ops {
		k := fmt.Sprintf("{b}m%d:", i)
		k += string(make([]byte, keyLen-len(k)))
		ops[i] = shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(k)}, Reqs: []engine.Request{req}}
	}
	data := encodeOpsEntry(nil, int64(1_700_000_000)*int64(time.Second), ops)
	b.ReportMetric(float64(len(data)), "entry-bytes")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := shards.New(shards.Config{Shards: 32})
		if err != nil {
			b.Fatal(err)
		}
		f := NewFSM(st, nil, nil)
		b.StartTimer()
		f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data})
		b.StopTimer()
		if got := st.Len(f.LastTime()); got != n {
			b.Fatalf("%d keys after the entry, want %d", got, n)
		}
		b.StartTimer()
	}
}
