package resp

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// acquireLines reads one CC.ACQUIRE reply in RESP2 from rc: the limited
// field and the lease ("" for nil).
func acquireLines(t *testing.T, rc *rawConn) (limited string, lease string) {
	t.Helper()
	if h := rc.line(t); h != "*6" {
		t.Fatalf("reply header %q, want *6", h)
	}
	limited = rc.line(t)
	for range 4 {
		rc.line(t)
	}
	if l := rc.line(t); l != "$-1" {
		lease = rc.line(t)
	}
	return limited, lease
}

// Waiters in a concurrency key's line are answered in arrival order, one
// per release, on event loops and goroutine connections; a waiter without
// ID is given one; a lease's expiry admits the next waiter (it asks again
// at retry_after).
func TestLeaseWaitLine(t *testing.T) {
	transports(t, func(t *testing.T, loops int) {
		ts := startServer(t, func(c *Config) { c.EventLoops = loops })
		ts.store.SetGrantHook(GrantHook(ts.srv))
		holder := ts.raw(t)
		holder.send(t, "CC.ACQUIRE k 1 30s ID h\r\n")
		if l, id := acquireLines(t, holder); l != ":0" || id != "h" {
			t.Fatalf("holder: %s %q", l, id)
		}
		const n = 8
		ws := make([]*rawConn, n)
		for i := range ws {
			ws[i] = ts.raw(t)
			ws[i].send(t, fmt.Sprintf("CC.ACQUIRE k 1 30s ID w%d WAIT 5s\r\n", i))
			waitingNow(t, ts, int64(i+1))
		}
		prev := "h"
		for i := range ws {
			holder.send(t, "CC.RELEASE k "+prev+"\r\n")
			if r := holder.line(t); r != ":1" {
				t.Fatalf("CC.RELEASE %s = %s, want :1", prev, r)
			}
			l, id := acquireLines(t, ws[i])
			if want := fmt.Sprintf("w%d", i); l != ":0" || id != want {
				t.Fatalf("waiter %d: %s %q, want allowed with %s", i, l, id, want)
			}
			waitingNow(t, ts, int64(n-i-1))
			prev = id
		}
		// Expiry: a lease of 100ms held, a waiter without ID; the clock
		// moves past the ttl, and the waiter's asking again at its
		// retry_after admits it with an id its server made.
		holder.send(t, "CC.ACQUIRE e 1 100ms\r\n")
		acquireLines(t, holder)
		w := ts.raw(t)
		w.send(t, "CC.ACQUIRE e 1 30s WAIT 5s\r\n")
		waitingNow(t, ts, 1)
		ts.clock.ns.Add(int64(time.Second))
		if l, id := acquireLines(t, w); l != ":0" || !strings.HasPrefix(id, "w") {
			t.Fatalf("waiter after the expiry: %s %q, want allowed with a server-made id", l, id)
		}
	})
}
