package resp

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/shards"
)

// t0 is the fake clock's starting instant: 2023-11-14T22:13:20Z, 20 s into
// a minute (so fixed windows of 1m have 40 s left).
const t0 = int64(1_700_000_000) * 1e9

// goroutineConns runs the package's tests with a goroutine per connection
// instead of the default event loops (scripts/test.sh runs both).
var goroutineConns = flag.Bool("goroutine-conns", false, "serve test clients on a goroutine each instead of event loops")

// fakeClock is the clock shared by the server and its backend. It stands
// still at t0, so that every limiter reply is exact.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t0)
	return c
}

func (c *fakeClock) Now() int64 { return c.ns.Load() }

// testServer is a server on a loopback port, stopped by t.Cleanup.
type testServer struct {
	srv   *Server
	addr  string
	clock *fakeClock
	store *shards.Store
}

// startServer starts a server with the fake clock; mutate adjusts the
// configuration first.
func startServer(t *testing.T, mutate func(*Config)) *testServer {
	t.Helper()
	return startServerWith(t, func(c *Config, _ *shards.Store, _ *fakeClock) {
		if mutate != nil {
			mutate(c)
		}
	})
}

// testBase returns what most test servers start from: a loopback
// configuration on a fake clock, discarding logs (goroutine connections
// with -goroutine-conns), and an empty store of 16 shards.
func testBase(t *testing.T) (Config, *shards.Store, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	store, err := shards.New(shards.Config{Shards: 16})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Now = clock.Now
	cfg.Logger = discardLogger()
	if *goroutineConns {
		cfg.EventLoops = 0
	}
	return cfg, store, clock
}

// startServerWith is startServer for configurations that need the store or
// the clock (a Persister).
func startServerWith(t *testing.T, mutate func(*Config, *shards.Store, *fakeClock)) *testServer {
	t.Helper()
	cfg, store, clock := testBase(t)
	mutate(&cfg, store, clock)
	srv, err := NewServer(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	return serveTest(t, srv, store, clock)
}

// serveTest serves srv, built on store and clock, on a loopback port until
// t's cleanup shuts it down.
func serveTest(t *testing.T, srv *Server, store *shards.Store, clock *fakeClock) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &testServer{srv: srv, addr: ln.Addr().String(), clock: clock, store: store}
}

// client returns a go-redis client speaking proto (2 or 3), closed by
// t.Cleanup.
func (ts *testServer) client(t *testing.T, proto int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: ts.addr, Protocol: proto, Password: password, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a plain TCP connection for protocol-level tests.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func (ts *testServer) raw(t *testing.T) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{Conn: nc, r: bufio.NewReader(nc)}
}

func (rc *rawConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := rc.Write([]byte(s)); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

// line reads one reply line (without CRLF).
func (rc *rawConn) line(t *testing.T) string {
	t.Helper()
	l, err := rc.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read reply: %v (got %q)", err, l)
	}
	if len(l) < 2 || l[len(l)-2] != '\r' {
		t.Fatalf("reply line %q does not end in CRLF", l)
	}
	return l[:len(l)-2]
}

// expectClosed waits for the server to close the connection.
func (rc *rawConn) expectClosed(t *testing.T) {
	t.Helper()
	_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := rc.r.ReadByte()
	if err == nil {
		t.Fatalf("connection still open: read %q", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection not closed within 5s")
	}
}

// ping checks that the server still answers a new client.
func (ts *testServer) ping(t *testing.T) {
	t.Helper()
	rc := ts.raw(t)
	rc.send(t, "PING\r\n")
	if got := rc.line(t); got != "+PONG" {
		t.Fatalf("PING = %q, want +PONG", got)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
