package resp

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

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
// over 1000 names so the store reaches a steady state.
func BenchmarkPipeline(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("P%d", depth), func(b *testing.B) {
			store, _ := shards.New(shards.Config{})
			cfg := DefaultConfig()
			cfg.Logger = discardLogger()
			srv, err := NewServer(cfg, NewLocal(store, func() int64 { return time.Now().UnixNano() }))
			if err != nil {
				b.Fatal(err)
			}
			srv.mu.Lock()
			srv.prepare() // seal the table, size the statistics
			srv.mu.Unlock()
			defer srv.Close()
			var batches [][]byte
			for i := 0; i < 1000; i += depth {
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
			c.rd = newReader(&batchReader{batches: batches}, defaultMaxBulkLen, defaultMaxArgs)
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
