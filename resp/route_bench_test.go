package resp

import (
	"net"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/shards"
)

// BenchmarkRoute answers: what does the cluster routing check add to a
// CL.THROTTLE (its key's slot and owner), on a standalone server, in an
// unsharded group, and in a sharded cluster where this group owns the key
// — and does it allocate?
func BenchmarkRoute(b *testing.B) {
	sharded := newFakeCluster(0, "a1", []cluster.GroupView{
		{Name: "a", Reachable: true, Slots: [][2]int{{0, 16383}}, Members: []cluster.GroupMember{member("a", "a1", 7001, true)}},
		{Name: "b", Reachable: true, Members: []cluster.GroupMember{member("b", "b1", 7011, true)}},
	})
	unsharded := newFakeCluster(0, "a1", []cluster.GroupView{
		{Name: "a", Reachable: true, Members: []cluster.GroupMember{member("a", "a1", 7001, true)}},
	})
	for _, bc := range []struct {
		name string
		cl   Cluster
	}{{"standalone", nil}, {"unsharded", unsharded}, {"sharded", sharded}} {
		b.Run(bc.name, func(b *testing.B) {
			store, _ := shards.New(shards.Config{})
			cfg := DefaultConfig()
			cfg.Logger = discardLogger()
			if bc.cl != nil {
				cfg.Cluster = bc.cl
			}
			srv, err := NewServer(cfg, decide.NewLocal(store, func() int64 { return t0 }))
			if err != nil {
				b.Fatal(err)
			}
			srv.mu.Lock()
			srv.prepare()
			srv.mu.Unlock()
			defer srv.Close()
			client, server := net.Pipe()
			defer client.Close()
			defer server.Close()
			c := newConn(srv, server)
			args := [][]byte{[]byte("CL.THROTTLE"), []byte("user:12345"), []byte("15"), []byte("30"), []byte("60")}
			cmd, err := srv.table.resolve(args)
			if err != nil {
				b.Fatal(err)
			}
			var op shards.Op
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.routeCommand(cmd, args, false, &op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
