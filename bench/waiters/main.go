// Command waiters measures requests waiting in line (WAIT): it opens
// -clients connections to a cellserver, spread over -keys keys that admit
// one request per -interval, sends each one CL.THROTTLE … WAIT, and
// reports
//
//   - the server's memory per waiting request: INFO memory's
//     used_memory_rss and used_memory (the Go heap) with every connection
//     open and idle, then with every request waiting, the difference over
//     the number waiting;
//   - how late each reply was written after its turn, as the server counts
//     it (INFO stats wait_late_p50_usec, wait_late_p99_usec: the upper
//     bound of the histogram bucket holding the percentile; and
//     wait_late_max_usec). A client cannot tell a request's turn from its
//     reply, and on a loaded machine its own scheduling would swamp the
//     figure.
//
// The server must allow the connections (maxclients, the file descriptor
// limit) and max-waiting must hold the waiters; the keys' lines must fit in
// max-wait and -wait (clients/keys × interval below both), and be long
// enough that the line is still full when the last request is sent.
//
// Usage:
//
//	cellserver --port 6379 --save "" --maxclients 12000 --max-wait 60s &
//	(cd bench && go run ./waiters -addr 127.0.0.1:6379 -clients 10000 -keys 100 -interval 200ms -wait 60s)
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "waiters:", err)
		os.Exit(1)
	}
}

type config struct {
	addr     string
	clients  int
	keys     int
	interval time.Duration
	wait     time.Duration
}

func run(args []string, out io.Writer) error {
	// 1. Configuration.
	var cfg config
	fs := flag.NewFlagSet("waiters", flag.ContinueOnError)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:6379", "server address")
	fs.IntVar(&cfg.clients, "clients", 10000, "connections, one waiting request each")
	fs.IntVar(&cfg.keys, "keys", 100, "keys the requests are spread over")
	fs.DurationVar(&cfg.interval, "interval", 50*time.Millisecond, "time between two admissions on a key (whole divisor of a second)")
	fs.DurationVar(&cfg.wait, "wait", 10*time.Second, "each request's WAIT")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.clients < cfg.keys || cfg.keys < 1 || cfg.interval <= 0 || time.Second%cfg.interval != 0 {
		return errors.New("need clients >= keys >= 1 and an interval dividing a second")
	}
	perSecond := int64(time.Second / cfg.interval)

	// 2. Open every connection, then read the idle server's memory.
	ctl, err := net.Dial("tcp", cfg.addr)
	if err != nil {
		return err
	}
	defer ctl.Close()
	ctlr := bufio.NewReader(ctl)
	conns := make([]net.Conn, cfg.clients)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", cfg.addr); err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		defer conns[i].Close()
	}
	// A peek first (CL.THROTTLE with quantity 0: it stores nothing): a
	// connection's first command runs on a goroutine of its own and the
	// later ones on an event loop, and its first limiter command sizes its
	// scratch buffers, as a real client's would have.
	readers := make([]*bufio.Reader, len(conns))
	for i, c := range conns {
		if _, err := c.Write(resp("CL.THROTTLE", "waiters:warm", "0", "1", "1", "0")); err != nil {
			return err
		}
		readers[i] = bufio.NewReader(c)
		for range 6 { // *5 and five integers
			if _, err := readers[i].ReadString('\n'); err != nil {
				return fmt.Errorf("connection %d: peek: %v", i+1, err)
			}
		}
	}
	idle, err := memory(ctl, ctlr)
	if err != nil {
		return err
	}

	// 3. Send every request; each connection's reader records its reply's
	// arrival.
	arrived := make([]time.Time, cfg.clients)
	allowed := make([]bool, cfg.clients)
	var wg sync.WaitGroup
	wait := strconv.FormatInt(cfg.wait.Milliseconds(), 10) + "ms"
	for i, c := range conns {
		key := "waiters:" + strconv.Itoa(i%cfg.keys)
		cmd := resp("CL.THROTTLE", key, "0", strconv.FormatInt(perSecond, 10), "1", "1", "WAIT", wait)
		if _, err := c.Write(cmd); err != nil {
			return fmt.Errorf("send %d: %w", i+1, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(cfg.wait + 30*time.Second))
			r := readers[i]
			line, err := r.ReadString('\n')
			arrived[i] = time.Now()
			if err == nil && strings.HasPrefix(line, "*5") {
				line, err = r.ReadString('\n')
				allowed[i] = err == nil && line == ":0\r\n"
			}
		}()
	}
	// The memory with the line at its longest: once every request is in
	// (or the earliest have already had their turn: the count stops
	// growing).
	waiting := cfg.clients - cfg.keys
	var full memStats
	var blocked, last int64 = 0, -1
	deadline := time.Now().Add(cfg.wait)
	for {
		if blocked, err = infoInt(ctl, ctlr, "clients", "blocked_clients"); err != nil {
			return err
		}
		if blocked >= int64(waiting) || blocked > 0 && blocked <= last {
			if full, err = memory(ctl, ctlr); err != nil {
				return err
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d requests waiting after %v", blocked, waiting, cfg.wait)
		}
		last = blocked
		time.Sleep(20 * time.Millisecond) // polling pace
	}
	wg.Wait()

	// 4. Report.
	for i := range allowed {
		if !allowed[i] {
			return fmt.Errorf("client %d got no allowed reply", i+1)
		}
	}
	var late [3]int64
	for i, f := range []string{"wait_late_p50_usec", "wait_late_p99_usec", "wait_late_max_usec"} {
		if late[i], err = infoInt(ctl, ctlr, "stats", f); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "clients %d, keys %d, interval %v: %d requests waited\n", cfg.clients, cfg.keys, cfg.interval, waiting)
	fmt.Fprintf(out, "server memory, idle connections: rss %d B, heap %d B\n", idle.rss, idle.heap)
	fmt.Fprintf(out, "server memory, requests waiting: rss %d B, heap %d B\n", full.rss, full.heap)
	fmt.Fprintf(out, "per waiting request (%d waiting then): rss %+d B, heap %+d B\n", blocked, (full.rss-idle.rss)/blocked, (full.heap-idle.heap)/blocked)
	fmt.Fprintf(out, "reply written after its turn (INFO stats, server side): p50 <= %d us, p99 <= %d us, max %d us\n", late[0], late[1], late[2])
	return nil
}

type memStats struct{ rss, heap int64 }

func memory(c net.Conn, r *bufio.Reader) (memStats, error) {
	rss, err := infoInt(c, r, "memory", "used_memory_rss")
	if err != nil {
		return memStats{}, err
	}
	heap, err := infoInt(c, r, "memory", "used_memory")
	return memStats{rss, heap}, err
}

// infoInt asks INFO section and returns field's value.
func infoInt(c net.Conn, r *bufio.Reader, section, field string) (int64, error) {
	if _, err := c.Write(resp("INFO", section)); err != nil {
		return 0, err
	}
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO %s: %q %v", section, head, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return 0, err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO %s has no %s", section, field)
}

func resp(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}
