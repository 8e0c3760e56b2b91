package test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// residentBound is what issue 27 (case 4) holds the process to while
// clients queue transactions under maxmemory 20mb.
const residentBound = 128 << 20

// Issue 27, case 4: under --maxmemory 20mb, 20 clients each queue a
// 100,000-command MULTI and never EXEC (the process reached 414-530 MiB
// resident). Client memory is now bounded by maxmemory-clients (default:
// half of maxmemory, at least 16mb): the process stays under 128 MiB
// resident throughout, the clients using the most memory are
// disconnected, each counted in INFO (evicted_clients) and in metrics,
// and a normal client still works afterwards.
// Both ways of serving clients are checked: event loops (the default)
// and a goroutine per client. The transaction caps are raised past the
// case's 100,000 commands: under their defaults (10,000 commands, 1mb) each
// queue is refused long before, and it is maxmemory-clients that is tested
// here.
func TestClientMemoryBoundedByMaxmemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the resident size from /proc (Linux)")
	}
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"event-loops", nil},
		{"goroutine-per-client", []string{"--io-event-loops", "no"}},
	} {
		t.Run(mode.name, func(t *testing.T) { testClientMemoryBound(t, mode.args...) })
	}
}

func testClientMemoryBound(t *testing.T, args ...string) {
	mport := freePort(t)
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	s := startServer(t, append([]string{"--maxmemory", "20mb", "--save", "", "--metrics-addr", maddr,
		"--transaction-max-commands", "100000", "--transaction-max-bytes", "256mb"}, args...)...)
	pid := s.cmd.Process.Pid

	const clients, queued = 20, 100_000
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		conns    []net.Conn
		closedBy atomic.Int64 // clients whose connection the server closed
		sent     atomic.Int64 // commands written, all clients
		stopping atomic.Bool  // the test closes the connections itself
	)
	closeAll := func() {
		stopping.Store(true)
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
	}
	t.Cleanup(closeAll)
	writers := make(chan struct{}, clients)
	for w := range clients {
		nc, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		conns = append(conns, nc)
		mu.Unlock()
		// The replies (+OK, +QUEUED...) are read and dropped, as a
		// pipelining client does; the server closing the connection ends
		// the read.
		wg.Go(func() {
			_, err := io.Copy(io.Discard, nc)
			if !stopping.Load() && (err == nil || !errors.Is(err, net.ErrClosed)) {
				closedBy.Add(1)
			}
		})
		wg.Go(func() {
			defer func() { writers <- struct{}{} }()
			if _, err := nc.Write([]byte("*1\r\n$5\r\nMULTI\r\n")); err != nil {
				return
			}
			const chunk = 1000
			var b []byte
			for i := 0; i < queued; i += chunk {
				b = b[:0]
				for k := i; k < i+chunk; k++ {
					key := "q:" + strconv.Itoa(w) + ":" + strconv.Itoa(k)
					b = fmt.Appendf(b, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n10\r\n$1\r\n1\r\n$2\r\n60\r\n", len(key), key)
				}
				if _, err := nc.Write(b); err != nil {
					return // closed by the server (or by the test)
				}
				sent.Add(chunk)
			}
		})
	}

	// Sample the resident size until every writer is done, and a little
	// after (the queues are still held then).
	var peak int64
	sample := func() {
		rss := procRSS(t, pid)
		peak = max(peak, rss)
		if rss > residentBound {
			closeAll()
			t.Fatalf("resident size %.1f MiB > %d MiB after %d queued commands\n%s",
				float64(rss)/(1<<20), residentBound>>20, sent.Load(), s.output)
		}
	}
	deadline := time.After(3 * time.Minute)
	for done := 0; done < clients; {
		select {
		case <-writers:
			done++
		case <-time.After(10 * time.Millisecond):
			sample()
		case <-deadline:
			closeAll()
			t.Fatalf("the clients did not finish sending within 3 minutes (%d commands sent)", sent.Load())
		}
	}
	for range 50 {
		time.Sleep(10 * time.Millisecond) // sampling interval, not synchronisation
		sample()
	}

	// Every client the server closed was evicted for its memory, and
	// counted as such.
	ctx := ctxT(t)
	c := s.client(t, 2)
	var info map[string]string
	poll.Until(t, 20*time.Second, func() error {
		text, err := c.Info(ctx, "stats", "memory").Result()
		if err != nil {
			return err
		}
		info = parseInfo(text)
		if ev := info["evicted_clients"]; ev == "" || ev == "0" || ev != strconv.FormatInt(closedBy.Load(), 10) {
			return fmt.Errorf("evicted_clients %q, clients closed by the server %d", ev, closedBy.Load())
		}
		return nil
	})
	evicted, _ := strconv.ParseInt(info["evicted_clients"], 10, 64)
	memClients, _ := strconv.ParseInt(info["mem_clients_normal"], 10, 64)
	limit, _ := strconv.ParseInt(info["maxmemory_clients"], 10, 64)
	t.Logf("maxmemory 20mb: peak resident %.1f MiB (bound %d MiB); %d of %d clients evicted; mem_clients_normal %d, maxmemory_clients %d",
		float64(peak)/(1<<20), residentBound>>20, evicted, clients, memClients, limit)
	if limit <= 0 || memClients > limit {
		t.Errorf("mem_clients_normal %d with maxmemory_clients %d: want a bound, and the clients within it", memClients, limit)
	}
	if !strings.Contains(s.output.String(), "evicting client") || !strings.Contains(s.output.String(), "maxmemory-clients") {
		t.Errorf("no eviction logged with its reason:\n%s", s.output)
	}
	mf := scrapeMetrics(t, maddr)
	if got := counterOf(mf, "cellserver_clients_closed_total", "reason", "maxmemory_clients"); got != float64(evicted) {
		t.Errorf("cellserver_clients_closed_total{reason=maxmemory_clients} = %v, want %d", got, evicted)
	}

	// A normal client still works.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after the evictions: %v", err)
	}
	if _, err := c.Do(ctx, "CL.THROTTLE", "after", "10", "1", "60").Result(); err != nil {
		t.Fatalf("CL.THROTTLE after the evictions: %v", err)
	}
	closeAll()
	wg.Wait()
}
