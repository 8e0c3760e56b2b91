package resp

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/shards"
)

// BenchmarkCountKey answers: what do the heavy-hitter and key-class hooks
// add to one limiter decision, with the summaries off and on, over 1000
// keys (all tracked) and 100,000 (the summaries' worst case: evictions),
// with the classes off (metrics-class-limit 0), on (the default: the
// prefix "k" has a class) and with three rules tried first (rules3)? The
// classes' tally is flushed every 16 decisions, as a pipeline of 16 is.
func BenchmarkCountKey(b *testing.B) {
	for _, hot := range []int{0, hotkeys.DefaultCapacity} {
		for _, nkeys := range []int{1000, 100000} {
			for _, classes := range []string{"off", "on", "rules3"} {
				b.Run(fmt.Sprintf("keys=%d/hotkeys=%d/classes=%s", nkeys, hot, classes), func(b *testing.B) {
					store, _ := shards.New(shards.Config{})
					cfg := DefaultConfig()
					cfg.Logger = discardLogger()
					cfg.HotkeysCapacity = hot
					switch classes {
					case "off":
						cfg.MetricsClassLimit = 0
					case "rules3":
						cfg.MetricsClasses, _ = keyclass.ParseRules("vip user:vip-* login login:* api *:api:*")
					}
					srv, err := NewServer(cfg, decide.NewLocal(store, func() int64 { return time.Now().UnixNano() }))
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
						c.acct.countKey(c, keys[i%nkeys], i%4 == 0)
						c.acct.countClass(c, keys[i%nkeys], i%4 == 0)
						if i%16 == 15 {
							c.acct.flushClasses(c) // as accounting a pipeline of 16 does
						}
					}
				})
			}
		}
	}
}
