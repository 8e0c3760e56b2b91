package resp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/cmdmeta"
	"github.com/cellserver/cellserver/shards"
)

// TestAuth checks the requirepass rules: before AUTH only AUTH, HELLO and
// QUIT run; wrong passwords get WRONGPASS; go-redis authenticates through
// HELLO 3 AUTH (RESP3) and AUTH (RESP2).
func TestAuth(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RequirePass = "s3cret" })
	ctx := context.Background()

	rc := ts.raw(t)
	steps := []struct{ in, want string }{
		{"PING\r\n", "-NOAUTH Authentication required."},
		{"CL.THROTTLE k 1 1 1\r\n", "-NOAUTH Authentication required."},
		{"NOSUCH\r\n", "-ERR unknown command 'NOSUCH', with args beginning with: "},
		{"HELLO 3\r\n", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"},
		{"AUTH wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH alice s3cret\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"PING\r\n", "-NOAUTH Authentication required."},
		{"AUTH s3cret\r\n", "+OK"},
		{"PING\r\n", "+PONG"},
		{"AUTH default s3cret\r\n", "+OK"},
	}
	for _, st := range steps {
		rc.send(t, st.in)
		if got := rc.line(t); got != st.want {
			t.Errorf("%q → %q, want %q", st.in, got, st.want)
		}
	}
	quit := ts.raw(t)
	quit.send(t, "QUIT\r\n")
	if got := quit.line(t); got != "+OK" {
		t.Errorf("QUIT before AUTH = %q, want +OK", got)
	}
	quit.expectClosed(t)

	for _, proto := range []int{3, 2} {
		good := ts.client(t, proto, "s3cret")
		if v, err := good.Do(ctx, "CL.THROTTLE", "user123", "15", "30", "60").Int64Slice(); err != nil || len(v) != 5 {
			t.Errorf("RESP%d with the password: %v, %v", proto, v, err)
		}
		bad := ts.client(t, proto, "wrong")
		if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("RESP%d with a wrong password: PING error = %v, want WRONGPASS", proto, err)
		}
		none := ts.client(t, proto, "")
		if err := none.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("RESP%d without a password: PING error = %v, want NOAUTH", proto, err)
		}
	}

	// Without requirepass, AUTH with a password alone is an error.
	open := startServer(t, nil)
	orc := open.raw(t)
	orc.send(t, "AUTH x\r\n")
	if got := orc.line(t); !strings.HasPrefix(got, "-ERR AUTH <password> called without any password configured") {
		t.Errorf("AUTH without requirepass = %q", got)
	}
}

// TestConcurrentBurst: 50 clients × 200 requests on one key with burst 999
// (limit 1000) and a clock standing still: exactly 1000 are allowed.
func TestConcurrentBurst(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	const clients, each = 50, 200
	var mu sync.Mutex
	allowed, errs := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		rdb := ts.client(t, 3-i%2, "") // half RESP3, half RESP2
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, e := 0, 0
			pipe := i%2 == 0 // half pipelined, half one by one
			if pipe {
				cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for j := 0; j < each; j++ {
						p.Do(ctx, "CL.THROTTLE", "shared", "999", "1", "3600")
					}
					return nil
				})
				for _, c := range cmds {
					v, err := c.(*redis.Cmd).Int64Slice()
					if err != nil {
						e++
					} else if v[0] == 0 {
						n++
					}
				}
			} else {
				for j := 0; j < each; j++ {
					v, err := rdb.Do(ctx, "CL.THROTTLE", "shared", "999", "1", "3600").Int64Slice()
					if err != nil {
						e++
					} else if v[0] == 0 {
						n++
					}
				}
			}
			mu.Lock()
			allowed += n
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	if errs != 0 || allowed != 1000 {
		t.Errorf("allowed = %d with %d errors, want exactly 1000 of %d with none", allowed, errs, clients*each)
	}
}

// TestStartStop starts and stops servers repeatedly in one process: every
// goroutine exits, Shutdown closes idle clients, and a port is reusable.
func TestStartStop(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		store, err := shards.New(shards.Config{Shards: 4})
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		cfg.Logger = discardLogger()
		srv, err := NewServer(cfg, decide.NewLocal(store, func() int64 { return time.Now().UnixNano() }))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		// An idle client and one in the middle of a command.
		idle, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		busy, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := busy.Write([]byte("PING\r\n*2\r\n$4\r\nECHO")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 7)
		_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := busy.Read(buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("PING = %q, %v", buf, err)
		}
		var stop error
		if i%2 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			stop = srv.Shutdown(ctx)
			cancel()
		} else {
			stop = srv.Close()
		}
		if stop != nil {
			t.Fatalf("stop %d: %v", i, stop)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve = %v, want ErrServerClosed", err)
		}
		for _, c := range []net.Conn{idle, busy} {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("client not closed by the stop: %v", err)
			}
			c.Close()
		}
	}
	// Goroutines of the servers are gone (poll: closed client goroutines of
	// the runtime may take a moment).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestShutdownCommand: SHUTDOWN closes the connection without a reply and
// signals the owner; SHUTDOWN SAVE without persistence is an error.
func TestShutdownCommand(t *testing.T) {
	ts := startServer(t, nil)
	rc := ts.raw(t)
	rc.send(t, "SHUTDOWN SAVE\r\n")
	if got := rc.line(t); !strings.HasPrefix(got, "-ERR persistence is off") {
		t.Errorf("SHUTDOWN SAVE = %q", got)
	}
	rc.send(t, "SHUTDOWN NOSAVE\r\n")
	rc.expectClosed(t)
	select {
	case <-ts.srv.ShutdownRequested():
	case <-time.After(5 * time.Second):
		t.Fatal("ShutdownRequested not closed")
	}
}

// TestRegistration: a name registered twice panics, and so does a
// registration after the server started.
func TestRegistration(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	store, _ := shards.New(shards.Config{Shards: 1})
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Now = clock.Now
	cfg.Logger = discardLogger()
	srv, err := NewServer(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	mustPanic("duplicate PING", func() {
		srv.Handle(&Command{Command: cmdmeta.Command{Name: "PING", Arity: 1, Summary: "dup"}, Handler: func(*Conn, [][]byte) error { return nil }})
	})

	srv.Handle(&Command{Command: cmdmeta.Command{Name: "x.hello", Arity: 2, Summary: "greets", Group: "server"}, Flags: FlagFast,
		Handler: func(c *Conn, args [][]byte) error { c.WriteBulkString("hello " + string(args[1])); return nil }})
	ts := serveTest(t, srv, store, clock)
	rc := ts.raw(t)
	rc.send(t, "X.HELLO you\r\n")
	if l := rc.line(t); l != "$9" || rc.line(t) != "hello you" {
		t.Errorf("extra command reply header %q", l)
	}
	mustPanic("Handle after Serve", func() {
		ts.srv.Handle(&Command{Command: cmdmeta.Command{Name: "late", Arity: 1, Summary: "late"}, Handler: func(*Conn, [][]byte) error { return nil }})
	})
}

// TestDocsUpToDate fails when docs/commands.md differs from what the
// command table generates; regenerate with `go generate ./resp`.
func TestDocsUpToDate(t *testing.T) {
	got, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatalf("read docs/commands.md: %v (generate it with `go generate ./resp`)", err)
	}
	if want := CommandsMarkdown(); string(got) != string(want) {
		t.Errorf("docs/commands.md is out of date with the command table: run `go generate ./resp`")
	}
	// Every limiter's section names its reply fields and errors.
	for _, name := range []string{"CL.THROTTLE", "CL.THROTTLEALL", "TB.TAKE", "LB.ADD", "FW.INCR", "SW.INCR", "SL.ADD"} {
		if !strings.Contains(string(got), "### "+name+"\n") {
			t.Errorf("docs/commands.md lacks a section for %s", name)
		}
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*", "bac", false},
		{"*c", "abc", true}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"[abc]x", "bx", true}, {"[abc]x", "dx", false}, {"[^abc]x", "dx", true}, {"[^abc]x", "ax", false},
		{"[a-c]x", "bx", true}, {"[c-a]x", "bx", true}, {"[a-c]x", "dx", false},
		{`\*x`, "*x", true}, {`\*x`, "ax", false}, {"h*llo*", "heeellooo", true},
		{"*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 100), false}, // no exponential blow-up
		{"user:*:[0-9]", "user:42:7", true},
	}
	for _, tt := range tests {
		if got := globMatch([]byte(tt.p), []byte(tt.s)); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.want)
		}
	}
}

func TestBinarySafeKeys(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	rdb := ts.client(t, 3, "")
	keys := []string{"a\r\nb", "nul\x00key", "\xff\xfe invalid utf8", strings.Repeat("k", 64<<10)}
	for _, k := range keys {
		v, err := rdb.Do(ctx, "CL.THROTTLE", k, "15", "30", "60").Int64Slice()
		if err != nil || fmt.Sprint(v) != "[0 16 15 -1 2]" {
			t.Errorf("CL.THROTTLE %q = %v, %v", k[:min(len(k), 20)], v, err)
		}
		if typ, err := rdb.Type(ctx, k).Result(); err != nil || typ != "gcra" {
			t.Errorf("TYPE %q = %q, %v", k[:min(len(k), 20)], typ, err)
		}
	}
	got, err := rdb.Keys(ctx, "*").Result()
	if err != nil || len(got) != len(keys) {
		t.Errorf("KEYS * = %d keys, %v; want %d", len(got), err, len(keys))
	}
}

// TestEventLoopsFor pins the default loop count against the CPUs the
// process may use (the measured choice in docs/performance.md).
func TestEventLoopsFor(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{
		{1, 1}, {2, 1}, {3, 1}, {4, 4}, {8, 8}, {16, 16}, {0, 1},
	} {
		if got := eventLoopsFor(tc.procs); got != tc.want {
			t.Errorf("eventLoopsFor(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
}
