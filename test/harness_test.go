package test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a process's output safely while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is one running cellserver process.
type server struct {
	t      testing.TB
	Addr   string
	Port   int
	Dir    string
	args   []string
	cmd    *exec.Cmd
	output *lockedBuffer
	done   chan struct{}
	err    error // the process's exit error, valid after done is closed
}

// startServer starts the binary on a free loopback port, with --dir in a
// fresh temporary directory unless args set one, and waits until it answers
// PING. The process is killed at the end of the test if still running.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	s := &server{t: t, Dir: t.TempDir()}
	s.Port = freePort(t)
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	s.args = append([]string{"--port", strconv.Itoa(s.Port), "--dir", s.Dir}, args...)
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.output = &lockedBuffer{}
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
	s.waitReady()
}

// waitReady polls with PING until the server answers or a deadline passes.
func (s *server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			s.t.Fatalf("cellserver exited before serving: %v\n%s", s.err, s.output)
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, rerr := c.Read(buf)
			c.Close()
			if err == nil && rerr == nil && n > 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
	s.t.Fatalf("cellserver did not answer PING on %s within 15s\n%s", s.Addr, s.output)
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
