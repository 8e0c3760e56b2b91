package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/outlimit"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

const oomText = "OOM command not allowed when used memory > 'maxmemory'."

// fullSlidingLog adds entries to an SL.ADD key at distinct instants (the
// fake clock advances 1 ms each) until its log's array is full, read from
// MEMORY USAGE: the next entry at a new instant must enlarge it. It returns
// the entries held.
func fullSlidingLog(t *testing.T, ts *testServer, c *redis.Client, key string) int {
	t.Helper()
	ctx := context.Background()
	fixed := int64(27 + len(key) + 64) // record, slot and parameter reference, name, side-table entry
	for n := 1; n <= 1000; n++ {
		ts.clock.ns.Add(int64(time.Millisecond))
		if v, err := c.Do(ctx, "SL.ADD", key, "1000", "1h").Int64Slice(); err != nil || v[0] != 0 {
			t.Fatalf("SL.ADD %s entry %d = %v, %v", key, n, v, err)
		}
		used, err := c.Do(ctx, "MEMORY", "USAGE", key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if capacity := (used - fixed) / 16; int64(n) == capacity && n >= 8 {
			return n
		}
	}
	t.Fatal("the log's array never filled up")
	return 0
}

// TestNoEvictionRefusesGrowth: over maxmemory under noeviction, an SL.ADD
// that would enlarge an existing log answers OOM and MEMORY USAGE does not
// move, while decisions that keep a key's size still answer: CL.THROTTLE
// and TB.TAKE on existing keys, an SL.ADD merged into the newest entry, an
// SL.ADD denied because the limit is reached, reads and deletes.
func TestNoEvictionRefusesGrowth(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MemoryCheckInterval = 5 * time.Millisecond })
	ctx := context.Background()
	c := ts.client(t, 2, "")
	for _, cmd := range [][]any{{"CL.THROTTLE", "gcra", "5", "10", "60"}, {"TB.TAKE", "bucket", "10", "1", "1s"}} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n := fullSlidingLog(t, ts, c, "log")
	before, _ := c.Do(ctx, "MEMORY", "USAGE", "log").Int64()

	if err := c.Do(ctx, "CONFIG", "SET", "maxmemory", "1", "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	tries := 0
	waitFor(t, "OOM on a new key", func() bool {
		tries++
		err := c.Do(ctx, "CL.THROTTLE", "new:"+strconv.Itoa(tries), "5", "10", "60").Err()
		return err != nil && err.Error() == oomText
	})

	// The newest entry is at the current instant: a request now merges.
	if v, err := c.Do(ctx, "SL.ADD", "log", "1000", "1h").Int64Slice(); err != nil || v[0] != 0 {
		t.Errorf("SL.ADD merged into the newest entry = %v, %v; want allowed", v, err)
	}
	ts.clock.ns.Add(int64(time.Millisecond))
	for _, tc := range []struct {
		name string
		cmd  []any
		want string // error text; "" for an answer
	}{
		{"SL.ADD new entry", []any{"SL.ADD", "log", "1000", "1h"}, oomText},
		{"SL.ADD over its limit", []any{"SL.ADD", "log", strconv.Itoa(n), "1h"}, ""},
		{"SL.ADD peek", []any{"SL.ADD", "log", "1000", "1h", "0"}, ""},
		{"CL.THROTTLE existing", []any{"CL.THROTTLE", "gcra", "5", "10", "60"}, ""},
		{"TB.TAKE existing", []any{"TB.TAKE", "bucket", "10", "1", "1s"}, ""},
		{"CL.THROTTLE new", []any{"CL.THROTTLE", "other", "5", "10", "60"}, oomText},
		{"CL.THROTTLEALL with a new key", []any{"CL.THROTTLEALL", "gcra", "5", "10", "60", "1", "other", "5", "10", "60", "1"}, oomText},
		{"TTL", []any{"TTL", "log"}, ""},
	} {
		err := c.Do(ctx, tc.cmd...).Err()
		if got := errText(err); got != tc.want {
			t.Errorf("%s: error %q, want %q", tc.name, got, tc.want)
		}
	}
	if v, err := c.Do(ctx, "SL.ADD", "log", strconv.Itoa(n), "1h").Int64Slice(); err != nil || v[0] != 1 {
		t.Errorf("SL.ADD at its limit = %v, %v; want limited", v, err)
	}
	if after, _ := c.Do(ctx, "MEMORY", "USAGE", "log").Int64(); after != before {
		t.Errorf("MEMORY USAGE log = %d over maxmemory, was %d", after, before)
	}
	if v, err := c.Do(ctx, "DEL", "gcra").Int64(); err != nil || v != 1 {
		t.Errorf("DEL over maxmemory = %v, %v", v, err)
	}
	if err := c.Do(ctx, "CONFIG", "SET", "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "logs grow again", func() bool { return c.Do(ctx, "SL.ADD", "log", "1000", "1h").Err() == nil })
	if after, _ := c.Do(ctx, "MEMORY", "USAGE", "log").Int64(); after <= before {
		t.Errorf("MEMORY USAGE log = %d after a new entry under no limit, want above %d", after, before)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestMemoryUsage: MEMORY USAGE counts a sliding log's entries, is nil for
// a missing key, and a GCRA key costs its record and name only.
func TestMemoryUsage(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	c := ts.client(t, 2, "")
	if err := c.Do(ctx, "MEMORY", "USAGE", "missing").Err(); err != redis.Nil {
		t.Errorf("MEMORY USAGE missing = %v, want nil", err)
	}
	if err := c.Do(ctx, "CL.THROTTLE", "g", "5", "10", "60").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Do(ctx, "MEMORY", "USAGE", "g", "SAMPLES", "5").Int64(); err != nil || v != 27+1 {
		t.Errorf("MEMORY USAGE g = %v, %v; want 28", v, err)
	}
	if err := c.Do(ctx, "MEMORY", "USAGE", "g", "BOGUS", "5").Err(); errText(err) != "ERR syntax error" {
		t.Errorf("MEMORY USAGE g BOGUS 5 = %v", err)
	}
	var prev int64
	for i := 1; i <= 300; i++ {
		ts.clock.ns.Add(int64(time.Millisecond))
		if err := c.Do(ctx, "SL.ADD", "log", "1000", "1h").Err(); err != nil {
			t.Fatal(err)
		}
		v, err := c.Do(ctx, "MEMORY", "USAGE", "log").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if v < prev || v < int64(27+3+64+16*i) {
			t.Fatalf("MEMORY USAGE log after %d entries = %d (before: %d); want at least %d and never less", i, v, prev, 27+3+64+16*i)
		}
		prev = v
	}
	if used := ts.store.UsedBytes(); used != prev+28 {
		t.Errorf("UsedBytes = %d, want the keys' MEMORY USAGE sum %d", used, prev+28)
	}
}

// fillKeys makes n GCRA keys "key:NNNNNN" through one pipeline.
func fillKeys(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("key:%06d", i), "5", "10", "3600")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// sendKeysPipeline writes n "KEYS *" commands on a raw connection without
// reading anything, from its own goroutine (the writes block once the
// server stops reading); the returned channel yields the write's error.
func sendKeysPipeline(rc *rawConn, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		cmd := []byte("*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n")
		buf := bytes.Repeat(cmd, n)
		_ = rc.SetWriteDeadline(time.Now().Add(60 * time.Second))
		_, err := rc.Write(buf)
		done <- err
	}()
	return done
}

// clientOmem returns the omem field of the CLIENT LIST line of the client
// whose address is addr (-1 when it is not listed).
func clientOmem(t *testing.T, c *redis.Client, addr string) int64 {
	t.Helper()
	list, err := c.Do(context.Background(), "CLIENT", "LIST").Text()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " addr="+addr+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "omem="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return -1
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestOutputBackPressure: on a goroutine connection, a client that
// pipelines 2000 KEYS * (about 30 MB of replies) without reading is
// back-pressured: the bytes the server holds for it (CLIENT LIST omem)
// stay about one batch's replies, the server's heap does not grow by the
// replies, the client stays connected under the default limits and, once
// it reads, gets every reply. (An event loop never blocks on one client:
// TestOutputLoopHardLimit.)
func TestOutputBackPressure(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.EventLoops = 0 })
	c := ts.client(t, 2, "")
	const keys, cmds = 1000, 2000
	fillKeys(t, c, keys)
	replyLen := 0
	for i := 0; i < keys; i++ {
		replyLen += len("$10\r\nkey:000000\r\n")
	}
	heap0 := heapInUse()
	rc := ts.raw(t)
	_ = rc.SetDeadline(time.Time{})
	sent := sendKeysPipeline(rc, cmds)
	// The server blocks writing to the client: omem is what it holds.
	var omem int64
	poll.Until(t, 20*time.Second, func() error {
		if omem = clientOmem(t, c, rc.LocalAddr().String()); omem <= 0 {
			return fmt.Errorf("omem = %d: the server is not blocked on the client yet", omem)
		}
		return nil
	})
	if bound := int64(flushAt + 2*replyLen); omem > bound {
		t.Errorf("omem = %d while back-pressured, want at most %d (one batch's replies)", omem, bound)
	}
	if grown := int64(heapInUse()) - int64(heap0); grown > 16<<20 {
		t.Errorf("heap grew by %d bytes while the client did not read (%d bytes of replies)", grown, cmds*replyLen)
	}
	if n := ts.srv.Stats().OutputBufferClosed; n != 0 {
		t.Errorf("OutputBufferClosed = %d under the default limits, want 0", n)
	}
	// The client reads: every reply arrives whole.
	_ = rc.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := 0; i < cmds; i++ {
		if l := rc.line(t); l != "*"+strconv.Itoa(keys) {
			t.Fatalf("reply %d header = %q", i, l)
		}
		for k := 0; k < 2*keys; k++ {
			rc.line(t)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("pipeline write: %v", err)
	}
}

// TestOutputBufferLimit: CONFIG SET client-output-buffer-limit; a reply
// larger than the hard limit closes the client before it is built whole,
// and a client that leaves more than the soft limit unread for longer than
// the soft seconds is closed; both count in INFO stats.
func TestOutputBufferLimit(t *testing.T) {
	ctx := context.Background()
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	if v, err := c.ConfigGet(ctx, "client-output-buffer-limit").Result(); err != nil || v["client-output-buffer-limit"] != "normal 67108864 16777216 60 slave 268435456 67108864 60 pubsub 33554432 8388608 60" {
		t.Errorf("CONFIG GET client-output-buffer-limit = %v, %v", v, err)
	}
	fillKeys(t, c, 10000) // KEYS * answers about 180 kB

	disconnections := func() string {
		info, err := c.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "client_output_buffer_limit_disconnections:"); ok {
				return v
			}
		}
		return "missing"
	}
	for _, tc := range []struct {
		name, limit string
		cmds        int
		want        string // disconnections after
	}{
		{"hard", "normal 100kb 0 0", 1, "1"},
		{"soft", "normal 0 64kb 1", 400, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.ConfigSet(ctx, "client-output-buffer-limit", tc.limit).Err(); err != nil {
				t.Fatal(err)
			}
			rc := ts.raw(t)
			_ = rc.SetDeadline(time.Time{})
			start := time.Now()
			sendKeysPipeline(rc, tc.cmds)
			if tc.name == "hard" {
				rc.expectClosed(t)
			} else {
				// Do not read: the server's writes block with more than
				// the soft limit pending, until the second runs out.
				poll.Until(t, 10*time.Second, func() error {
					if clientOmem(t, c, rc.LocalAddr().String()) < 0 {
						return errors.New("client not listed yet")
					}
					return nil
				})
				poll.Until(t, 30*time.Second, func() error {
					if clientOmem(t, c, rc.LocalAddr().String()) >= 0 {
						return errors.New("client still connected")
					}
					return nil
				})
				if d := time.Since(start); d < time.Second {
					t.Errorf("closed after %v, before the soft limit's second", d)
				}
			}
			if got := disconnections(); got != tc.want {
				t.Errorf("client_output_buffer_limit_disconnections = %s, want %s", got, tc.want)
			}
			ts.ping(t)
		})
	}
	for _, bad := range []string{"normal 1mb", "bogus 1 1 1", "normal x 1 1", "normal 1 1 -1"} {
		if err := c.ConfigSet(ctx, "client-output-buffer-limit", bad).Err(); err == nil {
			t.Errorf("CONFIG SET client-output-buffer-limit %q accepted", bad)
		}
	}
	if err := c.ConfigSet(ctx, "client-output-buffer-limit", "pubsub 1mb 1mb 1 replica 2mb 1mb 5").Err(); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.ConfigGet(ctx, "client-output-buffer-limit").Result(); v["client-output-buffer-limit"] != "normal 0 65536 1 slave 2097152 1048576 5 pubsub 1048576 1048576 1" {
		t.Errorf("after setting two classes: %q", v["client-output-buffer-limit"])
	}
}

// emfileListener fails its first n Accept calls with EMFILE, as a process
// out of file descriptors sees, and counts the calls.
type emfileListener struct {
	net.Listener
	fail  int
	calls atomic.Int64
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.calls.Add(1) <= int64(l.fail) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptOutOfDescriptors: while accept fails with EMFILE the server
// backs off instead of spinning, keeps serving, and accepts the waiting
// client once descriptors are available again.
func TestAcceptOutOfDescriptors(t *testing.T) {
	store, err := shards.New(shards.Config{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = discardLogger()
	srv, err := NewServer(cfg, decide.NewLocal(store, time.Now().UnixNano))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &emfileListener{Listener: inner, fail: 6}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- srv.Serve(ln) }()
	ts := &testServer{srv: srv, addr: inner.Addr().String(), store: store}
	ts.ping(t) // waits in the backlog through the failures, then is served
	// 6 failures, the success, and the call waiting for the next client.
	if d, n := time.Since(start), ln.calls.Load(); n < 7 || n > 8 || d < 150*time.Millisecond {
		t.Errorf("%d accept calls in %v; want 6 failures backed off (5 ms doubling: at least 155 ms), one success and one waiting", n, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve = %v, want ErrServerClosed", err)
	}
}

// TestOutputLoopHardLimit: on an event loop, the replies of a client that
// pipelines without reading are kept (the loop goes on serving others) up
// to the hard limit, then the client is closed; the heap grows by about the
// limit, not by every reply.
func TestOutputLoopHardLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.EventLoops = 1
		c.OutputLimits.Normal = outlimit.Limit{Hard: 2 << 20}
	})
	c := ts.client(t, 2, "")
	const keys, cmds = 1000, 2000 // about 34 MB of replies
	fillKeys(t, c, keys)
	heap0 := heapInUse()
	rc := ts.raw(t)
	_ = rc.SetDeadline(time.Time{})
	sendKeysPipeline(rc, cmds)
	poll.Until(t, 30*time.Second, func() error {
		if n := ts.srv.Stats().OutputBufferClosed; n != 1 {
			return fmt.Errorf("OutputBufferClosed = %d, want 1", n)
		}
		return nil
	})
	if grown := int64(heapInUse()) - int64(heap0); grown > 16<<20 {
		t.Errorf("heap grew by %d bytes with a 2 MB hard limit", grown)
	}
	ts.ping(t)
}
