package resp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/latency"
	"github.com/cellserver/cellserver/internal/maxmemory"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/serverstats"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/internal/slowlog"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1024", 1024, true}, {"1k", 1000, true}, {"1kb", 1024, true},
		{"100mb", 100 << 20, true}, {"1GB", 1 << 30, true}, {"2g", 2e9, true}, {"5m", 5e6, true},
		{"-1", 0, false}, {"mb", 0, false}, {"1tb", 0, false}, {"99999999999999gb", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, err := setting.ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestSlowlog: SLOWLOG GET/LEN/RESET with Redis's semantics for the
// threshold (negative off, 0 everything) and the length.
func TestSlowlog(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RequirePass = "secret" })
	ctx := context.Background()
	c := ts.client(t, 2, "secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Default 10 ms: nothing this fast is logged.
	must(c.Do(ctx, "PING").Err())
	if n, _ := c.Do(ctx, "SLOWLOG", "LEN").Int64(); n != 0 {
		t.Fatalf("SLOWLOG LEN with the default threshold = %d, want 0", n)
	}
	must(c.Do(ctx, "CONFIG", "SET", "slowlog-log-slower-than", "0").Err())
	long := strings.Repeat("k", 200)
	must(c.Do(ctx, "CL.THROTTLE", long, "1", "10", "60").Err())
	must(c.Do(ctx, "AUTH", "secret").Err())
	args := []any{"ECHO"}
	for i := 0; i < 39; i++ {
		args = append(args, "a")
	}
	_ = c.Do(ctx, args...).Err() // arity error: rejected before running, not logged
	must(c.Do(ctx, "CONFIG", "SET", "slowlog-max-len", "3").Err())
	v, err := c.Do(ctx, "SLOWLOG", "GET").Slice()
	must(err)
	// Logged so far, oldest first: CONFIG SET, CL.THROTTLE, AUTH, CONFIG
	// SET slowlog-max-len (the ECHO was rejected); 3 kept, newest first.
	if len(v) != 3 {
		t.Fatalf("SLOWLOG GET returned %d entries, want 3: %v", len(v), v)
	}
	entry := func(i int) (id int64, args []string, addr string) {
		t.Helper()
		e := v[i].([]any)
		if len(e) != 6 {
			t.Fatalf("entry %d has %d fields, want 6", i, len(e))
		}
		for _, a := range e[3].([]any) {
			args = append(args, a.(string))
		}
		return e[0].(int64), args, e[4].(string)
	}
	id0, a0, _ := entry(0)
	id1, a1, _ := entry(1)
	id2, a2, addr := entry(2)
	if id0 != id1+1 || id1 != id2+1 {
		t.Errorf("ids %d, %d, %d: want consecutive, newest first", id0, id1, id2)
	}
	if strings.Join(a0, " ") != "CONFIG SET slowlog-max-len 3" {
		t.Errorf("newest entry args = %q", a0)
	}
	if strings.Join(a1, " ") != "AUTH (redacted)" {
		t.Errorf("AUTH entry args = %q, want the password redacted", a1)
	}
	wantKey := strings.Repeat("k", 128) + "... (72 more bytes)" // 200 - 128
	if len(a2) != 5 || a2[0] != "CL.THROTTLE" || a2[1] != wantKey {
		t.Errorf("CL.THROTTLE entry args = %q, want the key clipped to %q", a2, wantKey)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("client address = %q", addr)
	}
	if n, _ := c.Do(ctx, "SLOWLOG", "LEN").Int64(); n != 3 {
		t.Errorf("SLOWLOG LEN = %d, want 3", n)
	}
	if v, _ := c.Do(ctx, "SLOWLOG", "GET", "1").Slice(); len(v) != 1 {
		t.Errorf("SLOWLOG GET 1 returned %d entries", len(v))
	}
	if err := c.Do(ctx, "SLOWLOG", "GET", "-2").Err(); err == nil || err.Error() != "ERR count should be greater than or equal to -1" {
		t.Errorf("SLOWLOG GET -2: %v", err)
	}
	// Many arguments: 31 kept and a note of the rest (32 in all).
	many := []any{"CL.THROTTLEALL"}
	for i := 0; i < 10; i++ {
		many = append(many, "k"+strconv.Itoa(i), "1", "10", "60", "1")
	}
	must(c.Do(ctx, many...).Err())
	v, _ = c.Do(ctx, "SLOWLOG", "GET", "1").Slice()
	_, am, _ := func() (int64, []string, string) { return entry(0) }()
	if len(am) != 32 || am[31] != "... (20 more arguments)" { // 51 - 31
		t.Errorf("51-argument entry: %d args, last %q", len(am), am[len(am)-1])
	}
	must(c.Do(ctx, "CONFIG", "SET", "slowlog-log-slower-than", "-1").Err())
	must(c.Do(ctx, "SLOWLOG", "RESET").Err())
	must(c.Do(ctx, "PING").Err())
	if n, _ := c.Do(ctx, "SLOWLOG", "LEN").Int64(); n != 0 {
		t.Errorf("SLOWLOG LEN after RESET with logging off = %d, want 0", n)
	}
}

// TestLatencyStats: INFO latencystats has Redis 7's line per command called,
// and INFO commandstats its usec_per_call.
func TestLatencyStats(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	c := ts.client(t, 2, "")
	for i := 0; i < 20; i++ {
		if err := c.Do(ctx, "CL.THROTTLE", "k", "5", "10", "60").Err(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := c.Info(ctx, "latencystats", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(l, "latency_percentiles_usec_cl.throttle:") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no latency line for cl.throttle in\n%s", info)
	}
	var p50, p99, p999 float64
	if _, err := fmt.Sscanf(strings.TrimPrefix(line, "latency_percentiles_usec_cl.throttle:"), "p50=%f,p99=%f,p99.9=%f", &p50, &p99, &p999); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	if !(p50 > 0 && p50 <= p99 && p99 <= p999) {
		t.Errorf("percentiles %v %v %v: want 0 < p50 <= p99 <= p99.9", p50, p99, p999)
	}
	if !strings.Contains(info, "cmdstat_cl.throttle:calls=20,") || !strings.Contains(info, "usec_per_call=") {
		t.Errorf("commandstats lacks cl.throttle's 20 calls:\n%s", info)
	}
	def, _ := c.Info(ctx).Result()
	if strings.Contains(def, "Latencystats") {
		t.Error("default INFO includes latencystats; Redis leaves it out")
	}
	st := ts.srv.Stats()
	var found bool
	for _, cs := range st.Commands {
		if cs.Name == "cl.throttle" {
			found = true
			if cs.Calls != 20 || cs.Allowed+cs.Limited != 20 || cs.Latency.Count != 20 || !cs.Limiter {
				t.Errorf("Stats cl.throttle = %+v, want 20 calls, 20 decisions, 20 in the histogram", cs)
			}
		}
	}
	if !found {
		t.Error("Stats lacks cl.throttle")
	}
}

// TestQueryBufferLimit: a client whose unparsed input passes
// client-query-buffer-limit is closed; others carry on.
func TestQueryBufferLimit(t *testing.T) {
	ts := startServer(t, nil)
	admin := ts.raw(t)
	admin.send(t, "CONFIG SET client-query-buffer-limit 1mb\r\n")
	if got := admin.line(t); got != "+OK" {
		t.Fatalf("CONFIG SET = %q", got)
	}
	tests := []struct{ name, head string }{
		{"one huge argument", "*2\r\n$4\r\nECHO\r\n$5000000\r\n"},
		{"many arguments", "*1000000\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := ts.raw(t)
			rc.send(t, tt.head)
			chunk := strings.Repeat("x", 64<<10)
			if tt.name == "many arguments" {
				chunk = strings.Repeat("$1\r\nx\r\n", 64<<10/7)
			}
			// Send up to 3 MiB; the server must close before the end.
			var werr error
			for sent := 0; sent < 3<<20 && werr == nil; sent += len(chunk) {
				_, werr = rc.Write([]byte(chunk))
			}
			rc.expectClosed(t)
			ts.ping(t)
		})
	}
	if n := ts.srv.Stats().QueryBufferClosed; n != 2 {
		t.Errorf("QueryBufferClosed = %d, want 2", n)
	}
	// Under the limit, a 600 KB argument is fine.
	rc := ts.raw(t)
	big := strings.Repeat("z", 600_000)
	rc.send(t, "*2\r\n$4\r\nECHO\r\n$600000\r\n"+big+"\r\n")
	if got := rc.line(t); got != "$600000" {
		t.Fatalf("ECHO of 600 KB: header %q", got)
	}
}

// TestUnauthenticatedLimits: before AUTH, Redis 7's tighter limits apply
// (10 arguments, 16 KiB each); a pipelined AUTH lifts them for what follows.
func TestUnauthenticatedLimits(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RequirePass = "pw" })
	tests := []struct{ in, want string }{
		{"*11\r\n", "-ERR Protocol error: unauthenticated multibulk length"},
		{"*2\r\n$4\r\nAUTH\r\n$20000\r\n", "-ERR Protocol error: unauthenticated bulk length"},
	}
	for _, tt := range tests {
		rc := ts.raw(t)
		rc.send(t, tt.in)
		if got := rc.line(t); got != tt.want {
			t.Errorf("%q: reply %q, want %q", tt.in, got, tt.want)
		}
		rc.expectClosed(t)
	}
	rc := ts.raw(t)
	var b strings.Builder
	b.WriteString("*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n")
	b.WriteString("*2\r\n$4\r\nECHO\r\n$20000\r\n" + strings.Repeat("e", 20000) + "\r\n")
	rc.send(t, b.String())
	if got := rc.line(t); got != "+OK" {
		t.Fatalf("AUTH = %q", got)
	}
	if got := rc.line(t); got != "$20000" {
		t.Fatalf("ECHO of 20000 bytes after AUTH: %q", got)
	}
}

// TestQueryTimeout: a client that starts a command and never finishes it is
// closed after client-query-timeout; an idle client is not (timeout 0).
func TestQueryTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.QueryTimeout = 300 * time.Millisecond })
	idle := ts.raw(t)
	slow := ts.raw(t)
	start := time.Now()
	slow.send(t, "*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nke")
	slow.expectClosed(t)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("slow sender closed after %v, before the 300ms timeout", d)
	}
	// The idle client is still served.
	idle.send(t, "PING\r\n")
	if got := idle.line(t); got != "+PONG" {
		t.Fatalf("idle client PING = %q", got)
	}
	if n := ts.srv.Stats().QueryTimeoutClosed; n != 1 {
		t.Errorf("QueryTimeoutClosed = %d, want 1", n)
	}
	// A slow but steady sender finishing in time is fine: a pause well
	// under the timeout (on a server whose timeout leaves room for a
	// loaded machine's scheduling delays).
	ts2 := startServer(t, func(c *Config) { c.QueryTimeout = 5 * time.Second })
	rc := ts2.raw(t)
	rc.send(t, "*1\r\n$4\r\nPI")
	time.Sleep(100 * time.Millisecond) // the client's pause, deliberately
	rc.send(t, "NG\r\n")
	if got := rc.line(t); got != "+PONG" {
		t.Fatalf("PING sent in two parts = %q", got)
	}
}

// waitFor polls cond until it holds or 5 s pass (a thin wrapper of
// poll.Until for boolean conditions).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("still waiting for %s", what)
		}
		return nil
	})
}

// TestMaxMemoryNoEviction: over maxmemory, commands that would create a key
// answer OOM (fail closed); existing keys keep working; under it again,
// new keys work.
func TestMaxMemoryNoEviction(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MemoryCheckInterval = 5 * time.Millisecond })
	ctx := context.Background()
	c := ts.client(t, 2, "")
	if err := c.Do(ctx, "CL.THROTTLE", "old", "5", "10", "60").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "CONFIG", "SET", "maxmemory", "1", "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	const oom = "OOM command not allowed when used memory > 'maxmemory'."
	// Keys created before the first check are fine; each try uses a new key.
	tries := 0
	waitFor(t, "OOM on a new key", func() bool {
		tries++
		err := c.Do(ctx, "TB.TAKE", "new:"+strconv.Itoa(tries), "10", "1", "1s").Err()
		return err != nil && err.Error() == oom
	})
	if err := c.Do(ctx, "CL.THROTTLEALL", "old", "5", "10", "60", "1", "new2", "5", "10", "60", "1").Err(); err == nil || err.Error() != oom {
		t.Errorf("CL.THROTTLEALL naming a new key: %v, want %s", err, oom)
	}
	if v, err := c.Do(ctx, "CL.THROTTLE", "old", "5", "10", "60").Int64Slice(); err != nil || v[0] != 0 {
		t.Errorf("existing key over maxmemory: %v, %v; want allowed", v, err)
	}
	if n, _ := c.Exists(ctx, "new:"+strconv.Itoa(tries), "new2").Result(); n != 0 {
		t.Errorf("refused keys exist: %d", n)
	}
	if info, _ := c.Info(ctx, "memory").Result(); !strings.Contains(info, "maxmemory:1\r\n") || !strings.Contains(info, "maxmemory_policy:noeviction") {
		t.Errorf("INFO memory:\n%s", info)
	}
	if err := c.Do(ctx, "CONFIG", "SET", "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "new keys accepted again", func() bool { return c.Do(ctx, "TB.TAKE", "new", "10", "1", "1s").Err() == nil })
}

// TestMaxMemoryVolatileTTL: over maxmemory, keys nearest to expiry are
// deleted until the keyspace fits (fail open for those keys).
func TestMaxMemoryVolatileTTL(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MemoryCheckInterval = 5 * time.Millisecond
		c.MemoryPolicy = maxmemory.VolatileTTL
	})
	ctx := context.Background()
	c := ts.client(t, 2, "")
	// 300 keys expiring in 2 s and 300 in 24 h (fixed windows: the key
	// lives until its window ends; the fake clock is 20 s into a minute).
	pipe := c.Pipeline()
	for i := 0; i < 300; i++ {
		pipe.Do(ctx, "SL.ADD", fmt.Sprintf("short:%03d", i), "10", "2s")
		pipe.Do(ctx, "SL.ADD", fmt.Sprintf("long:%03d", i), "10", "24h")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	used := ts.store.UsedBytes()
	limit := used * 3 / 4
	if err := c.Do(ctx, "CONFIG", "SET", "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "eviction under the limit", func() bool { return ts.store.UsedBytes() <= limit })
	st := ts.srv.Stats()
	if st.EvictedKeys == 0 || st.OOM {
		t.Errorf("Stats: evicted %d, OOM %v; want evictions and no OOM", st.EvictedKeys, st.OOM)
	}
	var short, long int
	for i := 0; i < 300; i++ {
		if n, _ := c.Exists(ctx, fmt.Sprintf("short:%03d", i)).Result(); n == 1 {
			short++
		}
		if n, _ := c.Exists(ctx, fmt.Sprintf("long:%03d", i)).Result(); n == 1 {
			long++
		}
	}
	// A quarter of the memory is about 150 keys: sampling 5 records per
	// eviction, nearly all come from the short group.
	if long < 280 || short > 250 {
		t.Errorf("survivors: %d short, %d long of 300 each; want the short-lived evicted first", short, long)
	}
	if info, _ := c.Info(ctx, "stats").Result(); !strings.Contains(info, "evicted_keys:"+strconv.FormatInt(st.EvictedKeys, 10)) {
		t.Errorf("INFO stats evicted_keys differs from Stats (%d):\n%s", st.EvictedKeys, info)
	}
}

// TestOpsSettings: CONFIG GET shows the new settings and CONFIG SET checks
// and applies them.
func TestOpsSettings(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	c := ts.client(t, 2, "")
	get := func(name string) string {
		t.Helper()
		v, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v[name]
	}
	defaults := map[string]string{
		"slowlog-log-slower-than":   "10000",
		"slowlog-max-len":           "128",
		"maxmemory":                 "0",
		"maxmemory-policy":          "noeviction",
		"client-query-buffer-limit": strconv.Itoa(1 << 30),
		"client-query-timeout":      "60",
		"proto-max-bulk-len":        strconv.Itoa(512 << 20),
	}
	for k, want := range defaults {
		if got := get(k); got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", k, got, want)
		}
	}
	sets := []struct{ name, value, want string }{
		{"maxmemory", "100mb", strconv.Itoa(100 << 20)},
		{"maxmemory-policy", "VOLATILE-TTL", "volatile-ttl"},
		{"client-query-buffer-limit", "2mb", strconv.Itoa(2 << 20)},
		{"proto-max-bulk-len", "1mb", strconv.Itoa(1 << 20)},
		{"slowlog-log-slower-than", "-1", "-1"},
		{"slowlog-max-len", "5", "5"},
		{"client-query-timeout", "0", "0"},
	}
	for _, s := range sets {
		if err := c.ConfigSet(ctx, s.name, s.value).Err(); err != nil {
			t.Errorf("CONFIG SET %s %s: %v", s.name, s.value, err)
		}
		if got := get(s.name); got != s.want {
			t.Errorf("after CONFIG SET %s %s: GET = %q, want %q", s.name, s.value, got, s.want)
		}
	}
	bad := []struct{ name, value string }{
		{"maxmemory", "lots"}, {"maxmemory-policy", "allkeys-lru"}, {"client-query-buffer-limit", "1kb"},
		{"proto-max-bulk-len", "10"}, {"slowlog-max-len", "-1"}, {"slowlog-log-slower-than", "x"},
	}
	for _, b := range bad {
		err := c.ConfigSet(ctx, b.name, b.value).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR CONFIG SET failed (possibly related to argument '"+b.name+"')") {
			t.Errorf("CONFIG SET %s %s: %v, want a CONFIG SET failure", b.name, b.value, err)
		}
	}
	// The lowered bulk limit applies to the next command.
	rc := ts.raw(t)
	rc.send(t, "*2\r\n$4\r\nECHO\r\n$2000000\r\n")
	if got := rc.line(t); got != "-ERR Protocol error: invalid bulk length" {
		t.Errorf("2 MB argument with proto-max-bulk-len 1mb: %q", got)
	}
}

// TestIncrementalParse: a multibulk command arriving a few bytes at a time
// parses to the same arguments (the reader resumes where it stopped).
func TestIncrementalParse(t *testing.T) {
	var b strings.Builder
	var want []string
	b.WriteString("*300\r\n")
	for i := 0; i < 300; i++ {
		a := strings.Repeat(strconv.Itoa(i%10), i%17)
		want = append(want, a)
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	b.WriteString("*1\r\n$4\r\nPING\r\n")
	for _, chunk := range []int{1, 3, 7, 64, 1 << 20} {
		got, err := readAll(b.String(), chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if len(got) != 2 || strings.Join(got[0], ",") != strings.Join(want, ",") || got[1][0] != "PING" {
			t.Fatalf("chunk %d: parsed %d commands, first with %d args", chunk, len(got), len(got[0]))
		}
	}
}

// BenchmarkObserve answers: what does recording a command's latency (the
// histogram and the slow log's threshold check) add per command, against
// the per-connection call counter the server always kept? Run in parallel,
// as connections do.
func BenchmarkObserve(b *testing.B) {
	b.Run("counter-baseline", func(b *testing.B) {
		var st serverstats.Counters
		b.RunParallel(func(pb *testing.PB) {
			var local serverstats.Counters // one per connection, as in Conn
			for pb.Next() {
				local.Calls.Add(1)
				local.Nanos.Add(1234)
			}
			st.Calls.Add(local.Calls.Load())
		})
	})
	b.Run("latency+slowlog", func(b *testing.B) {
		l := latency.New(4)
		var sl slowlog.Log
		sl.SetSlowerThan(slowlog.DefaultSlowerThan)
		var ids atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			id := ids.Add(1)
			var local serverstats.Counters
			ns := int64(1234)
			for pb.Next() {
				local.Calls.Add(1)
				local.Nanos.Add(ns)
				l.Observe(1, id, ns)
				if sl.Slow(ns) {
					b.Fatal("logged a fast command")
				}
			}
		})
	})
}
