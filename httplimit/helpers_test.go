package httplimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
)

// t0 is the fake clock's starting instant: 2023-11-14T22:13:20Z, 20 s into
// a minute and 800 s into an hour.
const t0 = int64(1_700_000_000) * 1e9

// fakeClock is the clock of an in-process server: it stands still unless
// advanced, so that every reply is exact.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() int64              { return c.ns.Load() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Time is Now as a time.Time, for WithClock.
func (c *fakeClock) Time() time.Time { return time.Unix(0, c.ns.Load()) }

// cellserver is a real cellserver (resp.Server over a shards.Store) on a
// loopback port, in this process.
type cellserver struct {
	Addr  string
	Clock *fakeClock
	srv   *resp.Server
	done  chan error
}

// startCellserver starts a server whose clock stands at t0, on a free
// loopback port.
func startCellserver() (*cellserver, error) { return startCellserverAt("127.0.0.1:0") }

// startCellserverAt starts a server whose clock stands at t0 on addr.
func startCellserverAt(addr string) (*cellserver, error) {
	clock := &fakeClock{}
	clock.ns.Store(t0)
	store, err := shards.New(shards.Config{Shards: 16})
	if err != nil {
		return nil, err
	}
	cfg := resp.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Now = clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := resp.NewServer(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	cs := &cellserver{Addr: ln.Addr().String(), Clock: clock, srv: srv, done: make(chan error, 1)}
	go func() { cs.done <- srv.Serve(ln) }()
	return cs, nil
}

// Stop shuts the server down and waits for Serve to return.
func (cs *cellserver) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cs.srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-cs.done; !errors.Is(err, resp.ErrServerClosed) {
		return err
	}
	return nil
}

// startServer starts a cellserver stopped by t.Cleanup.
func startServer(t *testing.T) *cellserver { t.Helper(); return startServerAt(t, "127.0.0.1:0") }

// startServerAt starts a cellserver on addr, stopped by t.Cleanup.
func startServerAt(t *testing.T, addr string) *cellserver {
	t.Helper()
	cs, err := startCellserverAt(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return cs
}

// newClient returns a go-redis client of addr closed by t.Cleanup.
func newClient(t *testing.T, addr string, contextTimeout bool) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: contextTimeout, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// stallProxy is a TCP proxy to a real server that forwards requests at once
// but never delivers a reply: a server that has become too slow to answer.
type stallProxy struct {
	ln    net.Listener
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// startStallProxy proxies to target until t's cleanup.
func startStallProxy(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.accept(target)
	t.Cleanup(func() {
		close(p.stop)
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return ln.Addr().String()
}

func (p *stallProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *stallProxy) accept(target string) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		p.wg.Add(2)
		go func() { // requests go through
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
		}()
		go func() { // replies are swallowed
			defer p.wg.Done()
			_, _ = io.Copy(io.Discard, s)
			<-p.stop
		}()
	}
}
