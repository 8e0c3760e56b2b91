package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// startRedis starts redis-server on a free loopback port without persistence
// and returns its address; the test is skipped when redis-server is missing.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (apt-get install -y redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := dial(context.Background(), addr, "")
		if err == nil {
			_, err = do(c.w, &c.rr, "PING")
			c.nc.Close()
			if err == nil {
				return addr
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s not ready: %v\n%s", addr, err, log)
		}
		time.Sleep(20 * time.Millisecond) // polling interval against the deadline above
	}
}

func runJSON(t *testing.T, args ...string) jsonReport {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(append([]string{"-q", "-format", "json"}, args...), &out, &errOut); err != nil {
		t.Fatalf("run(%q): %v\n%s", args, err, errOut.String())
	}
	var rep jsonReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("run(%q) printed invalid JSON: %v\n%s", args, err, out.String())
	}
	return rep
}

func TestLoadAgainstRedis(t *testing.T) {
	addr := startRedis(t)
	rep := runJSON(t, "-addr", addr, "-preset", "set", "-c", "4", "-P", "8", "-d", "1s", "-warmup", "0s", "-rounds", "1")
	if len(rep.Points) != 1 {
		t.Fatalf("points = %d, want 1", len(rep.Points))
	}
	m := rep.Points[0].A.Median
	if !(m.Throughput > 0) || !(m.Requests > 0) {
		t.Errorf("throughput = %g req/s over %g requests, want > 0", m.Throughput, m.Requests)
	}
	if m.Errors != 0 {
		t.Errorf("errors = %g, want 0", m.Errors)
	}
	if !(m.P50 > 0 && m.P50 <= m.P99 && m.P99 <= m.P999 && m.P999 <= m.Max) {
		t.Errorf("latencies p50 %g ≤ p99 %g ≤ p99.9 %g ≤ max %g do not hold", m.P50, m.P99, m.P999, m.Max)
	}
	if m.Seconds < 1 {
		t.Errorf("round lasted %gs, want at least the 1s asked", m.Seconds)
	}
}

func TestRequestBudgetAndCompare(t *testing.T) {
	addr := startRedis(t)
	// 1000 requests over 3 connections at pipeline 16: the last pipelines are
	// cut short so the count is exact. A and B interleave: 2 rounds each, A
	// on keys "a0", B on keys "b0" of the same server.
	rep := runJSON(t, "-addr", addr, "-compare", addr, "-cmd", "INCR {key}", "-keys", "1", "-key-prefix", "a", "-compare-key-prefix", "b",
		"-c", "3", "-P", "16", "-n", "1000", "-warmup", "0s", "-rounds", "2")
	p := rep.Points[0]
	if p.B == nil || p.Ratio == nil {
		t.Fatalf("comparison missing: %+v", p)
	}
	for _, s := range []Series{p.A, *p.B} {
		if len(s.Rounds) != 2 {
			t.Fatalf("%s: %d rounds, want 2", s.Label, len(s.Rounds))
		}
		for i, r := range s.Rounds {
			if r.Requests != 1000 || r.Errors != 0 {
				t.Errorf("%s round %d: %g requests, %g errors; want 1000, 0", s.Label, i+1, r.Requests, r.Errors)
			}
		}
	}
	// Every request incremented its side's single key: 2 rounds × 1000.
	c, err := dial(context.Background(), addr, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
	for _, key := range []string{"a0", "b0"} {
		v, err := do(c.w, &c.rr, "GET", key)
		if err != nil || v != "2000" {
			t.Errorf("GET %s = %v, %v; want 2000", key, v, err)
		}
	}
}

func TestErrorRepliesAreCounted(t *testing.T) {
	addr := startRedis(t)
	var out bytes.Buffer
	err := run([]string{"-q", "-format", "csv", "-addr", addr, "-cmd", "NOSUCHCOMMAND {key}", "-n", "100", "-c", "2", "-warmup", "0s", "-rounds", "1"}, &out, &bytes.Buffer{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("100 error replies")) {
		t.Errorf("run with an unknown command: error %v, want 100 error replies reported", err)
	}
	if !bytes.Contains(out.Bytes(), []byte(",A,median,")) {
		t.Errorf("the report is still printed before the error; got:\n%s", out.String())
	}
}

func TestLuaGCRA(t *testing.T) {
	addr := startRedis(t)
	cfg := DefaultConfig()
	tg := &target{Addr: addr, Cmd: presets()["lua-gcra"]}
	if err := prepare(context.Background(), &cfg, tg); err != nil {
		t.Fatal(err)
	}
	c, err := dial(context.Background(), addr, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
	digest := loadedDigest(t, c)
	if !bytes.Contains(tg.tmpl.appendCommand(nil, []byte("k")), []byte(digest)) {
		t.Errorf("the lua-gcra command does not carry the digest %s", digest)
	}
	call := func(args ...string) any {
		t.Helper()
		v, err := do(c.w, &c.rr, append([]string{"EVALSHA", digest, "1"}, args...)...)
		if err != nil {
			return err.Error()
		}
		return v
	}
	ints := func(xs ...int64) []any {
		out := make([]any, len(xs))
		for i, x := range xs {
			out[i] = x
		}
		return out
	}
	// max_burst 15, 30 per 60 s: T = 2 s, tolerance τ = 2 s × 16 = 32 s,
	// limit 16. The calls run within milliseconds, so "now" barely moves and
	// the whole-second rounding (truncate, +1 from 1 ms) gives these figures.
	// Fresh key: TAT = now + 2 s → remaining (32-2)/2 = 15, reset 2 s.
	if got, want := call("user123", "15", "30", "60"), ints(0, 16, 15, -1, 2); !reflect.DeepEqual(got, want) {
		t.Errorf("first call = %v, want %v", got, want)
	}
	// 15 more: the 16th leaves TAT = now + 32 s, remaining 0, reset 32 s.
	var got any
	for range 15 {
		got = call("user123", "15", "30", "60")
	}
	if want := ints(0, 16, 0, -1, 32); !reflect.DeepEqual(got, want) {
		t.Errorf("16th call = %v, want %v", got, want)
	}
	// 17th: limited; it may pass once one interval (2 s) has drained.
	if got, want := call("user123", "15", "30", "60"), ints(1, 16, 0, 2, 32); !reflect.DeepEqual(got, want) {
		t.Errorf("17th call = %v, want %v", got, want)
	}
	// A peek (quantity 0) of the exhausted key is allowed and consumes nothing.
	if got, want := call("user123", "15", "30", "60", "0"), ints(0, 16, 0, -1, 32); !reflect.DeepEqual(got, want) {
		t.Errorf("peek = %v, want %v", got, want)
	}
	// More than the whole limit can never pass: retry_after -1.
	if got, want := call("other", "15", "30", "60", "17"), ints(1, 16, 16, -1, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("quantity 17 on a fresh key = %v, want %v", got, want)
	}
	// The key expires with its TAT: PTTL is 32 s minus the elapsed time.
	pttl, err := do(c.w, &c.rr, "PTTL", "user123")
	if n, ok := pttl.(int64); err != nil || !ok || n < 31000 || n > 32000 {
		t.Errorf("PTTL user123 = %v, %v; want about 32000 ms", pttl, err)
	}
	for _, bad := range [][]string{{"k", "15", "0", "60"}, {"k", "-1", "30", "60"}, {"k", "x", "30", "60"}, {"k", "15", "30"}} {
		if got, ok := call(bad...).(string); !ok || len(got) < 3 || got[:3] != "ERR" {
			t.Errorf("EVALSHA %v = %v, want an ERR reply", bad, call(bad...))
		}
	}
}

// loadedDigest loads the built-in script again (SCRIPT LOAD is idempotent) to
// learn its digest.
func loadedDigest(t *testing.T, c *conn) string {
	t.Helper()
	v, err := do(c.w, &c.rr, "SCRIPT", "LOAD", gcraScript)
	if err != nil {
		t.Fatal(err)
	}
	return v.(string)
}
