package resp

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cellserver/cellserver/shards"
)

// BenchmarkCountKey answers: what does the heavy-hitter hook add to one
// limiter command, with the summaries off and on, over 1000 keys (all
// tracked) and 100,000 (the summaries' worst case: evictions)?
func BenchmarkCountKey(b *testing.B) {
	for _, hot := range []int{0, DefaultHotkeysCapacity} {
		for _, nkeys := range []int{1000, 100000} {
			b.Run(fmt.Sprintf("keys=%d/hotkeys=%d", nkeys, hot), func(b *testing.B) {
				store, _ := shards.New(shards.Config{})
				cfg := DefaultConfig()
				cfg.Logger = discardLogger()
				cfg.HotkeysCapacity = hot
				srv, err := NewServer(cfg, NewLocal(store, func() int64 { return time.Now().UnixNano() }))
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
				c.cur = srv.table.byName["cl.throttle"]
				keys := make([][]byte, nkeys)
				for i := range keys {
					keys[i] = []byte("k:" + strconv.Itoa(i))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c.countKey(keys[i%nkeys], i%4 == 0)
				}
			})
		}
	}
}
