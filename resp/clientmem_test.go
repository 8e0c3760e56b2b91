package resp

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/txqueue"
)

// TestMaxmemoryClientsSetting: CONFIG SET maxmemory-clients takes every
// form live, the bound in force (INFO maxmemory_clients) follows
// maxmemory, and bad values are refused with what to write instead.
func TestMaxmemoryClientsSetting(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	for _, tc := range []struct {
		set     []string // CONFIG SET pairs
		get     string   // CONFIG GET maxmemory-clients after
		inForce int64    // INFO maxmemory_clients after
	}{
		{nil, "auto", 1 << 30},
		{[]string{"maxmemory", "20mb"}, "auto", 16 << 20},
		{[]string{"maxmemory-clients", "50%"}, "50%", 10 << 20},
		{[]string{"maxmemory", "40mb"}, "50%", 20 << 20},
		{[]string{"maxmemory", "0"}, "50%", 0},
		{[]string{"maxmemory-clients", "64mb"}, "67108864", 64 << 20},
		{[]string{"maxmemory-clients", "1kb"}, "1024", clientmem.MinLimit},
		{[]string{"maxmemory-clients", "0"}, "0", 0},
		{[]string{"maxmemory-clients", "auto"}, "auto", 1 << 30},
	} {
		if tc.set != nil {
			args := append([]any{"CONFIG", "SET"}, strSlice(tc.set)...)
			if err := c.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("CONFIG SET %v: %v", tc.set, err)
			}
		}
		if got, err := c.ConfigGet(ctx, "maxmemory-clients").Result(); err != nil || got["maxmemory-clients"] != tc.get {
			t.Errorf("after %v: CONFIG GET maxmemory-clients = %v, %v; want %s", tc.set, got, err, tc.get)
		}
		if got := infoInt(t, c, "memory", "maxmemory_clients"); got != tc.inForce {
			t.Errorf("after %v: maxmemory_clients = %d, want %d", tc.set, got, tc.inForce)
		}
	}
	for _, bad := range []struct{ value, reason string }{
		{"101%", "a percentage of maxmemory must be from 1% to 100%"},
		{"-5", "argument must be 0, auto, a memory size (e.g. 64mb) or a percentage of maxmemory (e.g. 10%)"},
		{"many", "argument must be 0, auto, a memory size (e.g. 64mb) or a percentage of maxmemory (e.g. 10%)"},
	} {
		want := "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - " + bad.reason
		if err := c.ConfigSet(ctx, "maxmemory-clients", bad.value).Err(); err == nil || err.Error() != want {
			t.Errorf("CONFIG SET maxmemory-clients %s = %v, want %q", bad.value, err, want)
		}
	}
}

func strSlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// infoInt reads one integer field of an INFO section.
func infoInt(t *testing.T, c *redis.Client, section, field string) int64 {
	t.Helper()
	text, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %s", field, line)
			}
			return n
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, text)
	return 0
}

// clientField reads an integer field (tot-mem, multi-mem) of rc's CLIENT
// LIST line.
func clientField(t *testing.T, ts *testServer, rc *rawConn, field string) int64 {
	t.Helper()
	for _, f := range strings.Fields(clientLine(t, ts, rc)) {
		if v, ok := strings.CutPrefix(f, field+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("CLIENT LIST %s", f)
			}
			return n
		}
	}
	t.Fatalf("CLIENT LIST line has no %s", field)
	return 0
}

// TestClientMemoryAccounting: what a client makes the server hold — a
// queued transaction, a large command arriving, replies it does not read
// — counts in its CLIENT LIST tot-mem and in INFO mem_clients_normal, and
// stops counting once let go of.
func TestClientMemoryAccounting(t *testing.T) {
	ts := startServer(t, nil)
	admin := ts.client(t, 2, "")
	const item = 100 << 10
	big := strings.Repeat("x", item)
	var sent chan error // the unread replies' commands, sent aside
	for _, tc := range []struct {
		name string
		// hold makes rc hold memory and returns the least it must count.
		hold func(t *testing.T, rc *rawConn) int64
		// release lets it go.
		release func(t *testing.T, rc *rawConn)
	}{
		{
			name: "transaction queue",
			hold: func(t *testing.T, rc *rawConn) int64 {
				rc.send(t, cmd("MULTI"))
				rc.reply(t)
				// 8 of 100 KiB: under transaction-max-bytes' default (1mb).
				for range 8 {
					rc.send(t, cmd("ECHO", big))
					if got := rc.reply(t); got != "+QUEUED" {
						t.Fatalf("ECHO = %.40s", got)
					}
				}
				return clientField(t, ts, rc, "multi-mem")
			},
			release: func(t *testing.T, rc *rawConn) {
				rc.send(t, cmd("DISCARD"))
				rc.reply(t)
			},
		},
		{
			name: "query buffer",
			hold: func(t *testing.T, rc *rawConn) int64 {
				// Half of a 4 MiB argument: the reader holds it whole.
				write(t, rc, "*2\r\n$4\r\nECHO\r\n$4194304\r\n"+strings.Repeat("y", 2<<20))
				return 2 << 20
			},
			release: func(t *testing.T, rc *rawConn) {
				write(t, rc, strings.Repeat("y", 2<<20)+"\r\n")
				if got := rc.reply(t); len(got) != 1+4<<20 {
					t.Fatalf("ECHO reply of %d bytes", len(got))
				}
			},
		},
		{
			name: "replies not read",
			hold: func(t *testing.T, rc *rawConn) int64 {
				// 16 MiB of replies, more than the socket buffers take:
				// the server holds what they do not (a goroutine
				// connection, back-pressured, at least one flush's worth;
				// it then reads no more, so the commands are sent aside).
				sent = make(chan error, 1)
				go func() {
					_, err := rc.Write([]byte(strings.Repeat(cmd("ECHO", big), 160)))
					sent <- err
				}()
				return flushAt
			},
			release: func(t *testing.T, rc *rawConn) {
				for range 160 {
					_ = rc.SetReadDeadline(time.Now().Add(10 * time.Second))
					if got := rc.reply(t); len(got) != 1+item {
						t.Fatalf("ECHO reply of %d bytes", len(got))
					}
				}
				if err := <-sent; err != nil {
					t.Fatalf("sending the ECHO commands: %v", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.raw(t)
			rc.send(t, cmd("PING"))
			rc.reply(t)
			base := clientField(t, ts, rc, "tot-mem")
			least := tc.hold(t, rc)
			var held int64
			poll.Until(t, 10*time.Second, func() error {
				held = clientField(t, ts, rc, "tot-mem")
				if held < base+least {
					return fmt.Errorf("tot-mem = %d, want at least %d + %d", held, base, least)
				}
				if total := infoInt(t, admin, "memory", "mem_clients_normal"); total < held {
					return fmt.Errorf("mem_clients_normal = %d, less than the client's tot-mem %d", total, held)
				}
				return nil
			})
			tc.release(t, rc)
			poll.Until(t, 10*time.Second, func() error {
				// The reply buffer is kept for reuse up to 1 MiB: here
				// it held about one 100 KiB reply.
				if now := clientField(t, ts, rc, "tot-mem"); now > base+2*item {
					return fmt.Errorf("tot-mem = %d after letting go (held %d, base %d)", now, held, base)
				}
				return nil
			})
		})
	}
	// Closed clients count no more.
	poll.Until(t, 10*time.Second, func() error {
		if total := infoInt(t, admin, "memory", "mem_clients_normal"); total > 4*flushAt {
			return fmt.Errorf("mem_clients_normal = %d with only the admin client left", total)
		}
		return nil
	})
}

// write sends b on rc without quoting it in a failure (it may be large).
func write(t *testing.T, rc *rawConn, b string) {
	t.Helper()
	if _, err := rc.Write([]byte(b)); err != nil {
		t.Fatalf("write %d bytes: %v", len(b), err)
	}
}

// queueUntil queues ECHO commands of size bytes inside rc's transaction
// until its multi-mem reaches at least n; it reports false if the
// connection was closed meanwhile.
func queueUntil(t *testing.T, rc *rawConn, n, size int) bool {
	t.Helper()
	arg := strings.Repeat("z", size)
	per := int64(txqueue.EntryOverhead + 4 + 24 + size + 24)
	for held := int64(0); held < int64(n); held += per {
		if _, err := rc.Write([]byte(cmd("ECHO", arg))); err != nil {
			return false
		}
		l, err := rc.r.ReadString('\n')
		if err != nil {
			return false
		}
		if l != "+QUEUED\r\n" {
			t.Fatalf("ECHO = %q", l)
		}
	}
	return true
}

// multi starts a transaction on a new connection.
func multi(t *testing.T, ts *testServer) *rawConn {
	t.Helper()
	rc := ts.raw(t)
	rc.send(t, cmd("MULTI"))
	if got := rc.reply(t); got != "+OK" {
		t.Fatalf("MULTI = %s", got)
	}
	return rc
}

// TestClientEviction: past maxmemory-clients the client using the most
// memory is closed, not the others; a client with CLIENT NO-EVICT on is
// never closed, so the next largest goes instead; lowering the limit
// evicts at once; each eviction counts in INFO and Stats.
func TestClientEviction(t *testing.T) {
	ts := startServer(t, nil)
	admin := ts.client(t, 2, "")
	ctx := context.Background()
	if err := admin.ConfigSet(ctx, "maxmemory-clients", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	evicted := func(want int64) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			if got := infoInt(t, admin, "stats", "evicted_clients"); got != want {
				return fmt.Errorf("evicted_clients = %d, want %d", got, want)
			}
			return nil
		})
		if got := ts.srv.Stats().EvictedClients; got != want {
			t.Fatalf("Stats().EvictedClients = %d, want %d", got, want)
		}
	}

	// Two clients queue; the larger passes the limit and is closed.
	small := multi(t, ts)
	if !queueUntil(t, small, 300<<10, 10<<10) {
		t.Fatal("the small client was closed")
	}
	large := multi(t, ts)
	if queueUntil(t, large, 4<<20, 10<<10) {
		t.Fatal("the large client queued 4 MiB under maxmemory-clients 1mb")
	}
	large.expectClosed(t)
	evicted(1)
	small.send(t, cmd("PING"))
	if got := small.reply(t); got != "+QUEUED" {
		t.Fatalf("the small client after the eviction: %s", got)
	}

	// A client with CLIENT NO-EVICT on is passed over: the small one,
	// now the largest that may go, is closed instead.
	kept := ts.raw(t)
	kept.send(t, cmd("CLIENT", "NO-EVICT", "on")+cmd("MULTI"))
	if got := kept.reply(t) + kept.reply(t); got != "+OK+OK" {
		t.Fatalf("CLIENT NO-EVICT on, MULTI = %s", got)
	}
	if !queueUntil(t, kept, 900<<10, 10<<10) {
		t.Fatal("the client with CLIENT NO-EVICT on was closed")
	}
	small.expectClosed(t)
	evicted(2)
	if line := clientLine(t, ts, kept); !strings.Contains(line, " flags=xe ") {
		t.Fatalf("CLIENT LIST of the client with NO-EVICT on: %s", line)
	}
	kept.send(t, cmd("DISCARD")+cmd("CLIENT", "NO-EVICT", "off"))
	if got := kept.reply(t) + kept.reply(t); got != "+OK+OK" {
		t.Fatalf("DISCARD, CLIENT NO-EVICT off = %s", got)
	}
	kept.send(t, cmd("CLIENT", "NO-EVICT", "maybe"))
	if got := kept.reply(t); got != "-ERR syntax error" {
		t.Fatalf("CLIENT NO-EVICT maybe = %s", got)
	}

	// Lowering the limit below what a client holds closes it at once.
	holder := multi(t, ts)
	if !queueUntil(t, holder, 600<<10, 10<<10) {
		t.Fatal("the holder was closed under 1mb")
	}
	if err := admin.ConfigSet(ctx, "maxmemory-clients", "256kb").Err(); err != nil {
		t.Fatal(err)
	}
	holder.expectClosed(t)
	evicted(3)
	ts.ping(t)
}

// BenchmarkTrackMem answers: what does a connection pay to publish its
// memory — at every flush, where it has not changed (a pipeline of limiter
// commands), and at every queued command, where it has (one atomic add to
// the server's total) — and does it allocate?
func BenchmarkTrackMem(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Logger = discardLogger()
	srv, err := NewServer(cfg, decide.NewLocal(nil, func() int64 { return 0 }))
	if err != nil {
		b.Fatal(err)
	}
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	c := newConn(srv, server)
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.cmem.trackMem(c)
		}
	})
	b.Run("changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.tx.Bytes++
			c.cmem.trackMem(c)
		}
	})
}
