package test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
)

// binary is the path of the cellserver binary built once for all tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cellserver-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "cellserver")
	build := exec.Command("go", "build", "-o", binary, "../cmd/cellserver")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build cellserver:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// handedOut holds every port freePort has returned in this test process.
// A port is closed again the moment it is found free, and a cluster test
// draws a dozen before any server binds one: without this record two
// members of one test could draw the same port (a birthday collision of
// 12 draws among 22,000 ports is ~0.3% a test, hundreds of tests a run).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a loopback TCP port that was free a moment ago and that
// no earlier call in this process returned, drawn below Linux's ephemeral
// range (32768 and up by default): a port the kernel hands out for ":0" is
// also where it puts the local end of outgoing connections, and the
// clusters these tests run make thousands, so such a port is often taken
// again before the server binds it.
func freePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		p := 10000 + rand.IntN(22000)
		if handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[p] = true
		return p
	}
	t.Fatalf("free port: no unused port found in 1000 draws from 10000-31999")
	return 0
}

// server is one running cellserver process.
type server struct {
	t      testing.TB
	Addr   string
	Port   int
	Dir    string
	args   []string
	cmd    *exec.Cmd
	output *testlog.Buffer
	done   chan struct{}
	err    error // the process's exit error, valid after done is closed
}

// newServer prepares a server on a free loopback port, with --dir in a
// fresh temporary directory; args follow those two and so can override
// them (a later flag wins). Nothing runs until start or launch. The process
// is killed at the end of the test if still running.
func newServer(t testing.TB, args ...string) *server {
	t.Helper()
	s := &server{t: t, Dir: t.TempDir()}
	s.Port = freePort(t)
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	s.args = append([]string{"--port", strconv.Itoa(s.Port), "--dir", s.Dir}, args...)
	t.Cleanup(func() { s.kill() })
	return s
}

// startServer starts the binary as newServer prepares it and waits until
// it answers PING.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	s := newServer(t, args...)
	s.start()
	return s
}

// start launches the process and waits until it answers PING.
func (s *server) start() {
	s.t.Helper()
	s.launch()
	s.waitReady()
}

// launch starts the process without waiting for it to serve (a TLS-only
// server has no plaintext port to poll).
func (s *server) launch() {
	s.t.Helper()
	s.output = &testlog.Buffer{}
	s.done = make(chan struct{})
	s.cmd = exec.Command(binary, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start cellserver: %v", err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) {
		s.err = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
}

// waitReady polls with PING until the server answers, and fails the test
// if the process exits first or 15 s pass.
func (s *server) waitReady() {
	s.t.Helper()
	ping := func() error {
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		_, err = c.Read(make([]byte, 64))
		return err
	}
	poll.Until(s.t, 15*time.Second, func() error {
		s.failIfExited()
		if err := ping(); err != nil {
			return fmt.Errorf("PING %s: %v\n%s", s.Addr, err, s.output)
		}
		return nil
	})
}

// failIfExited fails the test, with the process's output, if it has exited.
func (s *server) failIfExited() {
	s.t.Helper()
	select {
	case <-s.done:
		s.t.Fatalf("cellserver exited before serving: %v\n%s", s.err, s.output)
	default:
	}
}

// restart starts the same server again (same port, dir and flags).
func (s *server) restart() {
	s.t.Helper()
	s.start()
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.kill()
		s.t.Fatalf("cellserver did not exit within 30s of SIGTERM\n%s", s.output)
	}
	if s.err != nil {
		s.t.Fatalf("cellserver exit after SIGTERM: %v\n%s", s.err, s.output)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (s *server) kill() {
	if s.cmd == nil {
		return // never launched
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

// client returns a go-redis client with default options (RESP3, CLIENT
// SETINFO); protocol 2 asks for RESP2 instead.
func (s *server) client(t testing.TB, protocol int) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: s.Addr, Protocol: protocol}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	return c
}

// ctxT returns a context that ends with the test (or after 30 s).
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ints converts a limiter reply (a flat array of integers) to []int64.
func ints(t testing.TB, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %#v is not an array", v)
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("reply element %d = %#v, want an integer", i, e)
		}
		out[i] = n
	}
	return out
}

// parseInfo reads the field:value lines of an INFO or RAFT.INFO reply
// (section headers and blank lines are skipped).
func parseInfo(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// rawExchange sends raw bytes on a new connection and returns what the
// server answered before closing or going quiet (2 s).
func rawExchange(t testing.TB, addr string, payload []byte) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write(payload); err != nil {
		return ""
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(conn)
	return string(out)
}
