package replication

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cellserver/cellserver/shards"
)

// How many CL.THROTTLE decisions per second does a 3-node cluster commit
// through the leader, with fsync on, when many connections each send
// pipelines of 16? The same body against a lone shards.Store is the
// reference (no replication at all).
func BenchmarkWrite(b *testing.B) {
	b.Run("cluster3", func(b *testing.B) {
		c := newBenchCluster(b)
		l := c.WaitForLeader(10 * time.Second)
		benchWrites(b, c.nodes[l].node.Write)
		inf := c.nodes[l].node.Info()
		b.ReportMetric(float64(inf.CommitLatency.Microseconds()), "µs/commit")
		if inf.Entries > 0 {
			b.ReportMetric(float64(inf.Ops)/float64(inf.Entries), "ops/entry")
		}
	})
	b.Run("store", func(b *testing.B) {
		st, _ := shards.New(shards.Config{})
		benchWrites(b, func(_ context.Context, ops []shards.Op, res []shards.Result) error {
			now := time.Now().UnixNano()
			for i := range ops {
				st.Exec(&ops[i], now, &res[i])
			}
			return nil
		})
	})
}

func benchWrites(b *testing.B, write func(context.Context, []shards.Op, []shards.Result) error) {
	const pipeline = 16
	b.ReportAllocs()
	b.SetParallelism(25) // 50 writers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		ops := make([]shards.Op, pipeline)
		res := make([]shards.Result, pipeline)
		for pb.Next() {
			for i := range ops {
				ops[i] = throttle(fmt.Sprintf("user:%d", r.IntN(100000)), 15, 30, 60, 1)
			}
			if err := write(context.Background(), ops, res); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*pipeline)/b.Elapsed().Seconds(), "decisions/s")
}

// newBenchCluster starts 3 nodes with the default timeouts.
func newBenchCluster(b *testing.B) *testCluster {
	b.Helper()
	c := &testCluster{t: b}
	b.Cleanup(c.closeAll)
	for i := 0; i < 3; i++ {
		c.addNode()
		if i == 0 {
			c.WaitForLeader(10 * time.Second)
		}
	}
	c.waitMembers(3, 15*time.Second)
	return c
}
