package test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// pythonWithRedis returns a Python interpreter that can import redis-py
// (Debian's python3-redis, which scripts/test.sh installs), or skips.
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(py, "-c", "import redis").Run(); err == nil {
			return py
		}
	}
	t.Skip("no python3 with redis-py (scripts/test.sh installs python3-redis)")
	return ""
}

// TestRedisPy drives the server with redis-py, the README's Python client,
// over RESP2: limiter replies arrive as lists of ints, key commands as usual.
func TestRedisPy(t *testing.T) {
	py := pythonWithRedis(t)
	s := startServer(t)
	script := `
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
# A bucket of 2 refilling 1 token per 10 s.
for _ in range(3):
    print(*r.execute_command("TB.TAKE", "py:1", 2, 1, "10s", 1))
print(*r.execute_command("CL.THROTTLE", "py:2", 15, 30, 60))
print(r.ping(), r.dbsize(), r.type("py:2").decode(), r.exists("py:1", "py:2", "nope"))
pipe = r.pipeline(transaction=False)
for i in range(100):
    pipe.execute_command("FW.INCR", "py:fw", 50, "1h")
replies = pipe.execute()
print(sum(1 for rep in replies if rep[0] == 0), sum(1 for rep in replies if rep[0] == 1))
`
	out, err := exec.Command(py, "-c", script, strconv.Itoa(s.Port)).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{
		// limited limit remaining retry_ms reset_ms: each take empties the
		// bucket by one token, refilled in 10 s.
		"0 2 1 -1 10000",
		"0 2 0 -1 20000",
		// Empty: the next token arrives in 10 s; full in 20 s.
		"1 2 0 10000 20000",
		"0 16 15 -1 2",
		"True 2 gcra 2", // ping, two keys, TYPE, EXISTS counts the two that exist
		// A fixed window of 50: the first 50 of 100 are allowed.
		"50 50",
	}
	if len(lines) != len(want) {
		t.Fatalf("redis-py printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i := range want {
		if i < 3 {
			// The bucket's times shrink by the few ms the script takes;
			// compare the fields that don't and bound the others.
			got, exp := strings.Fields(lines[i]), strings.Fields(want[i])
			if strings.Join(got[:3], " ") != strings.Join(exp[:3], " ") || !closeMillis(got[3], exp[3]) || !closeMillis(got[4], exp[4]) {
				t.Errorf("line %d = %q, want %q (times up to 2 s lower)", i, lines[i], want[i])
			}
			continue
		}
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
}

// closeMillis reports whether two decimal millisecond figures are equal, or
// both non-negative and got is at most 2 s below want (the time the script
// took between its calls, on a slow machine).
func closeMillis(got, want string) bool {
	g, err1 := strconv.Atoi(got)
	w, err2 := strconv.Atoi(want)
	if err1 != nil || err2 != nil {
		return false
	}
	if g == w {
		return true
	}
	return g >= 0 && w >= 0 && g <= w && w-g <= 2000
}

// TestIORedis drives the server with ioredis (Node.js), installed by
// scripts/test.sh into test/node from its package-lock.json.
func TestIORedis(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	if _, err := exec.Command(node, "-e", `require.resolve("ioredis", {paths: ["node"]})`).CombinedOutput(); err != nil {
		t.Skip("ioredis not installed in test/node (scripts/test.sh runs npm ci there)")
	}
	s := startServer(t)
	out, err := exec.Command(node, "node/check.js", strconv.Itoa(s.Port)).CombinedOutput()
	if err != nil {
		t.Fatalf("ioredis: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{
		"0 16 15 -1 2",     // CL.THROTTLE on a fresh key, as redis-cell
		"0 40 39 -1 500 0", // LB.ADD: empty bucket, drains one in 500 ms, no wait
		"gcra 2 2",         // TYPE, EXISTS of two keys and a missing one, DBSIZE
		"10 90",            // a sliding log of 10 per hour: 10 of 100 pipelined allowed
		"WRONGTYPE Operation against a key holding the wrong kind of value",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ioredis printed:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}
