package test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// BenchmarkLeasePairs answers: how many CC.ACQUIRE + CC.RELEASE pairs a
// second does the real binary sustain, standalone and as a 3-node Raft
// group (every command a replicated write through the leader), with 16
// clients per core each doing one pair at a time (no pipelining)? Each
// pair takes a lease under its own ID on one of 1000 keys and releases it;
// both replies are checked. Run with a fixed count, since each run starts
// its servers. The baseline is the same loop with two CL.THROTTLE per
// pair, on the same server (the cost of a lease against today's hot path):
//
//	go test -run '^$' -bench BenchmarkLeasePairs -benchtime 20000x ./test/
func BenchmarkLeasePairs(b *testing.B) {
	for _, cmds := range []string{"cc", "gcra-baseline"} {
		b.Run("standalone/"+cmds, func(b *testing.B) {
			s := startServer(b, "--save", "")
			leasePairs(b, s.Addr, cmds == "cc")
		})
		b.Run("group3/"+cmds, func(b *testing.B) {
			leasePairs(b, benchGroup(b, 3), cmds == "cc")
		})
	}
}

// leasePairs runs b.N pairs against addr and reports pairs/s: an acquire
// and a release, or (lease false) two CL.THROTTLE.
func leasePairs(b *testing.B, addr string, lease bool) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 256, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	b.Cleanup(func() { c.Close() })
	var seq atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			n := seq.Add(1)
			key, id := "cc:bench:"+strconv.FormatInt(n%1000, 10), strconv.FormatInt(n, 36)
			if !lease {
				key = "gcra:bench:" + strconv.FormatInt(n%1000, 10)
				for range 2 {
					if v, err := c.Do(ctx, "CL.THROTTLE", key, 1000000, 1000000, 1).Slice(); err != nil || v[0] != int64(0) {
						b.Errorf("CL.THROTTLE %s = %v, %v; want allowed", key, v, err)
						return
					}
				}
				continue
			}
			v, err := c.Do(ctx, "CC.ACQUIRE", key, 1<<40, "30s", "ID", id).Slice()
			if err != nil || len(v) != 6 || v[0] != int64(0) {
				b.Errorf("CC.ACQUIRE %s ... ID %s = %v, %v; want allowed", key, id, v, err)
				return
			}
			if r, err := c.Do(ctx, "CC.RELEASE", key, id).Int64(); err != nil || r != 1 {
				b.Errorf("CC.RELEASE %s %s = %d, %v; want 1", key, id, r, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// benchGroup starts an n-node group as startCluster does (which takes a
// *testing.T) and returns its leader's address.
func benchGroup(b *testing.B, n int) string {
	b.Helper()
	var nodes []*clusterNode
	start := func(id, join string) {
		args := []string{"--node-id", id, "--raft-addr", "127.0.0.1:" + strconv.Itoa(freePort(b))}
		if join == "" {
			args = append(args, "--bootstrap", "yes")
		} else {
			args = append(args, "--join", join)
		}
		nodes = append(nodes, &clusterNode{server: startServer(b, args...), id: id})
	}
	start("n1", "")
	poll.Until(b, 15*time.Second, func() error {
		if raftInfo(nodes[0])["raft_ready"] != "1" {
			return fmt.Errorf("n1 not leader yet")
		}
		return nil
	})
	for i := 2; i <= n; i++ {
		start("n"+strconv.Itoa(i), nodes[0].Addr)
	}
	var leader string
	poll.Until(b, 30*time.Second, func() error {
		for _, nd := range nodes {
			if inf := raftInfo(nd); inf["raft_members"] != strconv.Itoa(n) {
				return fmt.Errorf("%s: %s members, want %d", nd.id, inf["raft_members"], n)
			}
		}
		if l := leaderOf(nodes); l >= 0 {
			leader = nodes[l].Addr
			return nil
		}
		return fmt.Errorf("no ready leader")
	})
	return leader
}
