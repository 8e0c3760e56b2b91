package resp

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// A waiting request blocks its connection: its reply comes at its turn,
// and what the client pipelined behind it runs after it, in order, on an
// event loop and on a goroutine connection alike.
func TestWaitBlocksPipeline(t *testing.T) {
	transports(t, func(t *testing.T, loops int) {
		ts := startServer(t, func(c *Config) { c.EventLoops = loops })
		rc := ts.raw(t)
		rc.send(t, "PING\r\n") // the first batch: afterwards the connection is on its loop
		rc.line(t)
		start := time.Now()
		rc.send(t, "TB.TAKE w 1 1 200ms\r\nTB.TAKE w 1 1 200ms 1 WAIT 1s\r\nPING\r\nTB.TAKE w 1 1 200ms 1 WAIT 10ms\r\n")
		reply := func() []string {
			head := rc.line(t)
			if head[0] != '*' {
				return []string{head}
			}
			out := []string{head}
			for range 5 {
				out = append(out, rc.line(t))
			}
			return out
		}
		if r := reply(); r[1] != ":0" {
			t.Fatalf("first = %q, want allowed", r)
		}
		if e := time.Since(start); e > 150*time.Millisecond {
			t.Logf("first reply after %v (a loaded machine)", e)
		}
		if r := reply(); r[1] != ":0" || time.Since(start) < 150*time.Millisecond {
			t.Fatalf("second = %q after %v, want allowed at its turn, 200ms", r, time.Since(start))
		}
		if r := reply(); r[0] != "+PONG" {
			t.Fatalf("third = %q, want +PONG (after the waiting reply)", r)
		}
		if r := reply(); r[1] != ":1" {
			t.Fatalf("fourth = %q, want limited at once (its turn is 400ms away)", r)
		}
		// The waiting count is back to 0, also after a waiter leaves.
		gone := ts.raw(t)
		gone.send(t, "TB.TAKE w 1 1 200ms 1 WAIT 1s\r\n")
		waitingNow(t, ts, 1)
		gone.Close()
		waitingNow(t, ts, 0)
	})
}

// waitingNow polls until n requests wait on ts.
func waitingNow(t *testing.T, ts *testServer, n int64) {
	t.Helper()
	poll.Until(t, 5*time.Second, func() error {
		if got := ts.srv.waits.count.Load(); got != n {
			return fmt.Errorf("%d requests waiting, want %d", got, n)
		}
		return nil
	})
}
