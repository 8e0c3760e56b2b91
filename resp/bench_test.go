package resp

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/shards"
)

// batchReader replays its batches forever, one per Read, as a client
// sending pipelines of a fixed depth would.
type batchReader struct {
	batches [][]byte
	i       int
}

func (r *batchReader) Read(p []byte) (int, error) {
	n := copy(p, r.batches[r.i])
	r.i = (r.i + 1) % len(r.batches)
	return n, nil
}

// BenchmarkPipeline answers: what does the server itself spend per
// CL.THROTTLE (parse, dispatch, store, reply encoding), without the network,
// in pipelines of 1 and 16 — and does the hot path allocate? The keys cycle
// over 1000 names so the store reaches a steady state. Each runs with the
// heavy-hitter summaries off (hotkeys=0) and at their default capacity,
// over 1000 keys (all tracked) and over 100,000 (nearly every request
// replaces a tracked key: the summaries' worst case). The key classes
// run with their default (classes=on: one prefix class, "k") unless
// classes=off (metrics-class-limit 0) or classes=rules3 (three
// metrics-class rules, none matching, tried before the prefix).
func BenchmarkPipeline(b *testing.B) {
	for _, bc := range []struct {
		depth, keys, hot int
		classes          string
	}{
		{1, 1000, 0, "off"}, {1, 1000, hotkeys.DefaultCapacity, "off"}, {16, 1000, 0, "off"}, {16, 1000, hotkeys.DefaultCapacity, "off"},
		{16, 100000, 0, "off"}, {16, 100000, hotkeys.DefaultCapacity, "off"},
		{1, 1000, hotkeys.DefaultCapacity, "on"}, {16, 1000, hotkeys.DefaultCapacity, "on"},
		{1, 1000, hotkeys.DefaultCapacity, "rules3"}, {16, 1000, hotkeys.DefaultCapacity, "rules3"},
	} {
		depth := bc.depth
		b.Run(fmt.Sprintf("P%d/keys=%d/hotkeys=%d/classes=%s", depth, bc.keys, bc.hot, bc.classes), func(b *testing.B) {
			store, _ := shards.New(shards.Config{})
			cfg := DefaultConfig()
			cfg.Logger = discardLogger()
			cfg.HotkeysCapacity = bc.hot
			switch bc.classes {
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
			srv.prepare() // seal the table, size the statistics
			srv.mu.Unlock()
			defer srv.Close()
			var batches [][]byte
			for i := 0; i < bc.keys; i += depth {
				var in bytes.Buffer
				for j := i; j < i+depth; j++ {
					key := fmt.Sprintf("k:%06d", j)
					fmt.Fprintf(&in, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(key), key)
				}
				batches = append(batches, in.Bytes())
			}
			client, server := net.Pipe()
			defer client.Close()
			defer server.Close()
			c := newConn(srv, server)
			c.rd = newReader(&batchReader{batches: batches}, 512<<20, defaultMaxArgs)
			b.ReportAllocs()
			b.ResetTimer()
			// One b.N unit is one command.
			for done := 0; done < b.N; {
				cmds, err := c.rd.next()
				if err != nil {
					b.Fatal(err)
				}
				c.execBatch(cmds)
				c.out = c.out[:0]
				done += len(cmds)
			}
		})
	}
}

// BenchmarkRoundTrip answers: what does one CL.THROTTLE cost end to end over
// loopback TCP, one request at a time on one connection, on an event loop
// and on a goroutine per connection — and does either allocate? Allocations
// are counted process-wide; the client here does not allocate.
func BenchmarkRoundTrip(b *testing.B) {
	for _, loops := range []int{1, 0} {
		b.Run(fmt.Sprintf("loops=%d", loops), func(b *testing.B) {
			store, _ := shards.New(shards.Config{})
			cfg := DefaultConfig()
			cfg.Logger = discardLogger()
			cfg.EventLoops = loops
			srv, err := NewServer(cfg, decide.NewLocal(store, func() int64 { return time.Now().UnixNano() }))
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Close()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			req := []byte("*5\r\n$11\r\nCL.THROTTLE\r\n$3\r\nk:1\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n")
			r := bufio.NewReader(nc)
			roundTrip := func() {
				if _, err := nc.Write(req); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < 6; i++ { // *5, then five integers
					if _, err := r.ReadSlice('\n'); err != nil {
						b.Fatal(err)
					}
				}
			}
			roundTrip() // connect, warm up
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				roundTrip()
			}
		})
	}
}
