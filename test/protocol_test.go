package test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisCLI: the first contact a newcomer has, and redis-cli reading
// commands from standard input and in --pipe mode.
func TestRedisCLI(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	s := startServer(t)
	port := strconv.Itoa(s.Port)
	out, err := exec.Command("redis-cli", "-p", port, "CL.THROTTLE", "user:1", "15", "30", "60").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli: %v\n%s", err, out)
	}
	if got, want := strings.Fields(string(out)), []string{"0", "16", "15", "-1", "2"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("redis-cli CL.THROTTLE user:1 15 30 60 = %q, want %q", got, want)
	}

	// Commands typed one per line, as in an interactive session.
	cmd := exec.Command("redis-cli", "-p", port)
	cmd.Stdin = strings.NewReader("PING\nCL.THROTTLE user:2 0 1 60\nCL.THROTTLE user:2 0 1 60\nTYPE user:2\nCL.THROTTLE user:2 x 1 60\n")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli stdin: %v\n%s", err, out)
	}
	// redis-cli prints a blank line after an error reply; compare the lines
	// that carry something.
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	// CL.THROTTLE user:2 0 1 60: limit 1, T = 60 s. The first call takes
	// it (0 1 0 -1 60: fresh again in 60 s); the second is limited until the
	// TAT has passed (1 1 0 60 60); a non-integer burst is an error.
	want := "PONG|0|1|0|-1|60|1|1|0|60|60|gcra|ERR value is not an integer or out of range"
	if strings.Join(lines, "|") != want {
		t.Errorf("redis-cli session:\n%s\nwant:\n%s", out, want)
	}

	// Mass insertion with --pipe: raw RESP on stdin.
	var in bytes.Buffer
	const n = 1000
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("pipe:%d", i)
		fmt.Fprintf(&in, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$1\r\n5\r\n$1\r\n1\r\n$2\r\n60\r\n", len(key), key)
	}
	cmd = exec.Command("redis-cli", "-p", port, "--pipe")
	cmd.Stdin = &in
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --pipe: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("errors: 0, replies: %d", n)) {
		t.Errorf("redis-cli --pipe output %q, want errors: 0, replies: %d", out, n)
	}
	c := s.client(t, 3)
	if got, err := c.DBSize(context.Background()).Result(); err != nil || got != n+2 {
		t.Errorf("DBSIZE after --pipe = %d, %v; want %d", got, err, n+2)
	}
}

// TestRedisBenchmark: redis-benchmark with an arbitrary command runs to
// completion with no errors.
func TestRedisBenchmark(t *testing.T) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		t.Skip("redis-benchmark not installed (scripts/test.sh installs it)")
	}
	s := startServer(t)
	out, err := exec.Command("redis-benchmark", "-p", strconv.Itoa(s.Port), "-n", "100000", "-r", "1000",
		"-c", "50", "-P", "16", "-q", "CL.THROTTLE", "k:__rand_int__", "15", "30", "60").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "requests per second") || strings.Contains(strings.ToLower(string(out)), "error") {
		t.Errorf("redis-benchmark output:\n%s", out)
	}
	c := s.client(t, 2)
	// 1000 random keys, each hit ~100 times: the keyspace holds at most 1000 keys.
	if n, err := c.DBSize(context.Background()).Result(); err != nil || n == 0 || n > 1000 {
		t.Errorf("DBSIZE after redis-benchmark = %d, %v; want 1..1000", n, err)
	}
}

// TestLongPipeline sends 10,000 commands in one pipeline; replies come back in
// order.
func TestLongPipeline(t *testing.T) {
	s := startServer(t)
	c := s.client(t, 3)
	ctx := ctxT(t)
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, 10000)
	for i := range cmds {
		// Key i gets burst i%7: the reply's limit tells which command it answers.
		cmds[i] = pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("pl:%d", i), i%7, 1, 60)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if limit := v[1].(int64); limit != int64(i%7+1) {
			t.Fatalf("reply %d has limit %d, want %d: replies out of order", i, limit, i%7+1)
		}
	}
}

// TestBinarySafeKeys: keys with CR LF, NUL, invalid UTF-8, and a 64 KiB key.
func TestBinarySafeKeys(t *testing.T) {
	s := startServer(t)
	c := s.client(t, 2)
	ctx := ctxT(t)
	keys := []string{"a\r\nb", "nul\x00byte", "\xff\xfe\x80", strings.Repeat("k", 64<<10)}
	for _, k := range keys {
		for i, wantRemaining := range []int64{1, 0} {
			v, err := c.Do(ctx, "CL.THROTTLE", k, 1, 1, 60).Slice()
			if err != nil {
				t.Fatalf("key of %d bytes: %v", len(k), err)
			}
			if v[2].(int64) != wantRemaining {
				t.Errorf("key of %d bytes, call %d: remaining %v, want %d", len(k), i, v[2], wantRemaining)
			}
		}
		if typ, err := c.Type(ctx, k).Result(); err != nil || typ != "gcra" {
			t.Errorf("TYPE of %d-byte key = %q, %v", len(k), typ, err)
		}
	}
	got, err := c.Keys(ctx, "*").Result()
	if err != nil || len(got) != len(keys) {
		t.Fatalf("KEYS * = %d keys, %v; want %d", len(got), err, len(keys))
	}
	seen := map[string]bool{}
	for _, k := range got {
		seen[k] = true
	}
	for _, k := range keys {
		if !seen[k] {
			t.Errorf("KEYS * lacks the %d-byte key %q", len(k), k[:min(len(k), 16)])
		}
	}
}

// TestMalformedProtocol: bad bulk lengths, a huge multibulk count, garbage
// and a connection closed mid-command get an error or a closed connection,
// never a crash; the server keeps serving others.
func TestMalformedProtocol(t *testing.T) {
	s := startServer(t)
	c := s.client(t, 2)
	ctx := ctxT(t)
	cases := []struct {
		name    string
		payload string
	}{
		{"bad bulk length", "*2\r\n$4\r\nPING\r\n$-7\r\nxx\r\n"},
		{"non-numeric bulk length", "*1\r\n$abc\r\nPING\r\n"},
		{"multibulk count 2^31", "*2147483648\r\n$4\r\nPING\r\n"},
		{"huge bulk length", "*1\r\n$99999999999\r\n"},
		{"garbage", "\x00\x01\x02\xff\xfe*$*$\r\n\r\n"},
		{"unterminated", "*3\r\n$11\r\nCL.THROTTLE\r\n$1\r\nk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := rawExchange(t, s.Addr, []byte(tc.payload))
			if out != "" && !strings.HasPrefix(out, "-") {
				t.Errorf("reply %q, want an error reply or a closed connection", out)
			}
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatalf("server stopped serving after %s: %v", tc.name, err)
			}
		})
	}
}

// TestManyConnections: 1,000 concurrent connections each get an answer.
func TestManyConnections(t *testing.T) {
	s := startServer(t)
	const n = 1000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			key := "conn:" + strconv.Itoa(i)
			fmt.Fprintf(c, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n", len(key), key)
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			r := bufio.NewReader(c)
			line, err := r.ReadString('\n')
			if err != nil || line != "*5\r\n" {
				errs <- fmt.Errorf("conn %d: reply %q, %v", i, line, err)
			}
		}(i, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cl := s.client(t, 2)
	if got, err := cl.DBSize(context.Background()).Result(); err != nil || got != n {
		t.Errorf("DBSIZE = %d, %v; want %d", got, err, n)
	}
}
