package test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
)

// launchUnderUlimit starts s's process through sh with the open files
// limit (soft and hard) lowered to n, and waits until it answers PING.
func (s *server) launchUnderUlimit(n int) {
	s.t.Helper()
	s.output = &testlog.Buffer{}
	s.done = make(chan struct{})
	s.cmd = exec.Command("sh", append([]string{"-c", "ulimit -n " + strconv.Itoa(n) + ` && exec "$0" "$@"`, binary}, s.args...)...)
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

// A server asked for more clients than its open files limit allows lowers
// maxclients to fit (with Redis's warning), refuses CONFIG SET maxclients
// beyond it, and answers clients past the limit with the maxclients error
// rather than leaving them hanging.
func TestMaxClientsOverFileLimit(t *testing.T) {
	const ulimit, fit = 256, 256 - 32
	s := newServer(t, "--maxclients", "30000")
	s.launchUnderUlimit(ulimit)
	ctx := ctxT(t)
	c := s.client(t, 2)
	if v, err := c.ConfigGet(ctx, "maxclients").Result(); err != nil || v["maxclients"] != strconv.Itoa(fit) {
		t.Fatalf("CONFIG GET maxclients = %v, %v; want %d\n%s", v, err, fit, s.output)
	}
	for _, part := range []string{"You requested maxclients of 30000 requiring at least 30032 max file descriptors", "maxclients has been reduced to " + strconv.Itoa(fit)} {
		if !strings.Contains(s.output.String(), part) {
			t.Errorf("log lacks %q:\n%s", part, s.output)
		}
	}
	err := c.ConfigSet(ctx, "maxclients", "1000").Err()
	if err == nil || !strings.Contains(err.Error(), "not able to handle the specified number of clients, try with "+strconv.Itoa(fit)) {
		t.Errorf("CONFIG SET maxclients 1000 = %v, want the operating system's refusal", err)
	}
	if err := c.ConfigSet(ctx, "maxclients", "100").Err(); err != nil {
		t.Errorf("CONFIG SET maxclients 100 = %v", err)
	}
	if err := c.ConfigSet(ctx, "maxclients", strconv.Itoa(fit)).Err(); err != nil {
		t.Errorf("CONFIG SET maxclients %d = %v", fit, err)
	}

	// More clients than fit: every one is answered, PONG or the error.
	var pong, full int
	for i := 0; i < fit+20; i++ {
		nc, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatalf("client %d: dial: %v", i, err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			t.Fatalf("client %d: write: %v", i, err)
		}
		line, err := bufio.NewReader(nc).ReadString('\n')
		switch {
		case line == "+PONG\r\n":
			pong++
		case line == "-ERR max number of clients reached\r\n":
			full++
		default:
			t.Fatalf("client %d (after %d PONG, %d refused): %q, %v", i, pong, full, line, err)
		}
	}
	if pong > fit || full < 20 {
		t.Errorf("%d clients answered PONG and %d were refused; want at most %d and at least 20", pong, full, fit)
	}
}

// In a cluster, noeviction's refusal to grow a key is decided in the
// keyspace from a flag carried in the replicated op: an SL.ADD that would
// enlarge a full log answers OOM whether sent to the leader or to a
// follower, CL.THROTTLE on an existing key still answers, and every node
// keeps the same log.
func TestClusterNoEvictionRefusesGrowth(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	ctx := ctxT(t)
	leader := noRetryClient(t, nodes[l].Addr)
	follower := noRetryClient(t, nodes[(l+1)%3].Addr)
	if _, err := throttle(ctx, leader, "gcra", "5", "10", "60"); err != nil {
		t.Fatal(err)
	}
	// Fill the log until its array is full (MEMORY USAGE counts the
	// array's capacity, 16 bytes an entry).
	const key = "log"
	fixed := int64(26 + len(key) + 64)
	var used int64
	for n := 1; ; n++ {
		if n > 1000 {
			t.Fatal("the log's array never filled up")
		}
		if err := leader.Do(ctx, "SL.ADD", key, "1000", "1h").Err(); err != nil {
			t.Fatal(err)
		}
		u, err := leader.Do(ctx, "MEMORY", "USAGE", key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if used = u; (u-fixed)/16 == int64(n) && n >= 8 {
			break
		}
	}
	for _, nd := range nodes {
		if err := noRetryClient(t, nd.Addr).ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	const oom = "OOM command not allowed when used memory > 'maxmemory'."
	for _, c := range []*redis.Client{leader, follower} {
		tries := 0
		poll.Until(t, 10*time.Second, func() error {
			tries++
			_, err := throttle(ctx, c, "new:"+strconv.Itoa(tries), "5", "10", "60")
			if err == nil || err.Error() != oom {
				return fmt.Errorf("a new key answered %v", err)
			}
			return nil
		})
	}
	for name, c := range map[string]*redis.Client{"leader": leader, "follower": follower} {
		if err := c.Do(ctx, "SL.ADD", key, "1000", "1h").Err(); err == nil || err.Error() != oom {
			t.Errorf("SL.ADD growing the log via the %s = %v, want OOM", name, err)
		}
		if _, err := throttle(ctx, c, "gcra", "5", "10", "60"); err != nil {
			t.Errorf("CL.THROTTLE on an existing key via the %s = %v", name, err)
		}
	}
	// Every node holds the same log, of the size it had.
	poll.Until(t, 10*time.Second, func() error {
		for _, nd := range nodes {
			c := redis.NewClient(&redis.Options{Addr: nd.Addr, MaxRetries: -1})
			u, err := c.Do(context.Background(), "MEMORY", "USAGE", key).Int64()
			c.Close()
			if err != nil || u != used {
				return fmt.Errorf("%s: MEMORY USAGE %s = %d, %v; want %d", nd.id, key, u, err, used)
			}
		}
		return nil
	})
}
