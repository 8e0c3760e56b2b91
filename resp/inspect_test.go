package resp

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testlog"
)

// TestInspect: CL.INSPECT answers each kind's algorithm, the parameters of
// the last request, the peek's limit and remaining, reset and TTL in ms,
// and changes nothing (a second INSPECT and PTTL answer the same).
func TestInspect(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	tests := []struct {
		name string
		cmd  []any
		want []any // the flat RESP2 reply
	}{
		{"gcra", []any{"CL.THROTTLE", "g", 4, 10, 60, 3}, []any{
			"algorithm", "gcra", "params", "known", "burst", int64(4), "rate", int64(10), "period_ms", int64(60000), "interval", int64(0),
			"limit", int64(5), "remaining", int64(2), "reset_ms", int64(18000), "ttl_ms", int64(18000), "override", nil, "shadow", nil}},
		{"token bucket", []any{"TB.TAKE", "tb", 10, 1, "1s", 4, "INTERVAL"}, []any{
			"algorithm", "token-bucket", "params", "known", "burst", int64(10), "rate", int64(1), "period_ms", int64(1000), "interval", int64(1),
			"limit", int64(10), "remaining", int64(6), "reset_ms", int64(4000), "ttl_ms", int64(4000), "override", nil, "shadow", nil}},
		{"fixed window", []any{"FW.INCR", "fw", 5, "1m", 2}, []any{
			"algorithm", "fixed-window", "params", "known", "burst", int64(5), "rate", int64(0), "period_ms", int64(60000), "interval", int64(0),
			"limit", int64(5), "remaining", int64(3), "reset_ms", int64(40000), "ttl_ms", int64(40000), "override", nil, "shadow", nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Do(ctx, tc.cmd...).Err(); err != nil {
				t.Fatal(err)
			}
			key := tc.cmd[1].(string)
			before, _ := c.PTTL(ctx, key).Result()
			for range 2 {
				got, err := c.Do(ctx, "CL.INSPECT", key).Slice()
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("CL.INSPECT %s = %v, want %v", key, got, tc.want)
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Fatalf("CL.INSPECT %s field %d = %v, want %v (reply %v)", key, i, got[i], tc.want[i], got)
					}
				}
			}
			if after, _ := c.PTTL(ctx, key).Result(); after != before {
				t.Errorf("PTTL %v → %v across CL.INSPECT, want unchanged", before, after)
			}
		})
	}
	if v, err := c.Do(ctx, "CL.INSPECT", "missing").Result(); err == nil || v != nil {
		t.Errorf("CL.INSPECT missing = %v, %v; want nil", v, err)
	}
}

// TestOverrideAndShadow: the same requests before and after CONFIG SET
// limit-override and limit-shadow, replies and counters as documented.
func TestOverrideAndShadow(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	throttle := func(key string) []int64 {
		t.Helper()
		v, err := c.Do(ctx, "CL.THROTTLE", key, 0, 1, 60).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Before: burst 0 → the second request is limited.
	throttle("vip:1")
	if r := throttle("vip:1"); r[0] != 1 {
		t.Fatalf("second CL.THROTTLE vip:1 before override = %v, want limited", r)
	}
	if err := c.ConfigSet(ctx, "limit-override", "vip:* 9 1 60").Err(); err != nil {
		t.Fatal(err)
	}
	if got := c.ConfigGet(ctx, "limit-override").Val()["limit-override"]; got != "vip:* 9 1 60" {
		t.Errorf("CONFIG GET limit-override = %q", got)
	}
	// After: the caller's 0 1 60 becomes 9 1 60 (limit 10).
	if r := throttle("vip:1"); r[0] != 0 || r[1] != 10 {
		t.Fatalf("CL.THROTTLE vip:1 after override = %v, want allowed with limit 10", r)
	}
	if r := throttle("other"); r[1] != 1 {
		t.Fatalf("CL.THROTTLE other = %v, want the caller's limit 1", r)
	}
	insp, _ := c.Do(ctx, "CL.INSPECT", "vip:1").Slice()
	if insp[5] != int64(9) || insp[21] != "vip:* 9 1 60" {
		t.Errorf("CL.INSPECT vip:1 = %v, want burst 9 and override vip:* 9 1 60", insp)
	}

	// Shadow: a request that would be limited answers allowed, retry -1,
	// and the state is what the refusal leaves.
	if err := c.ConfigSet(ctx, "limit-shadow", "try:*").Err(); err != nil {
		t.Fatal(err)
	}
	throttle("try:1")
	pttl := c.PTTL(ctx, "try:1").Val()
	for range 3 {
		if r := throttle("try:1"); r[0] != 0 || r[3] != -1 || r[2] != 0 {
			t.Fatalf("shadowed CL.THROTTLE try:1 = %v, want allowed, remaining 0, retry -1", r)
		}
	}
	if got := c.PTTL(ctx, "try:1").Val(); got != pttl {
		t.Errorf("PTTL try:1 %v → %v: a shadowed refusal consumed", pttl, got)
	}
	info := c.Info(ctx, "stats").Val()
	for _, want := range []string{"shadow_limited:3\r\n", "shadow_requests:4\r\n", "limit_overridden_requests:1\r\n", "limit_overrides:1\r\n", "limit_shadows:1\r\n", "limited_cl.throttle:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO stats lacks %q:\n%s", want, info)
		}
	}
	insp, _ = c.Do(ctx, "CL.INSPECT", "try:1").Slice()
	if insp[23] != "try:*" {
		t.Errorf("CL.INSPECT try:1 shadow = %v, want try:*", insp[23])
	}

	// An override invalid for a kind fails the request, changing nothing.
	if err := c.ConfigSet(ctx, "limit-override", "w:* 0 1 60").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "FW.INCR", "w:1", 5, 60).Err(); err == nil || !strings.Contains(err.Error(), "limit-override w:*") {
		t.Errorf("FW.INCR under a limit-0 override = %v, want an error naming the rule", err)
	}
	// Bad values are refused and change nothing.
	for _, bad := range []string{"vip:* 1 1", "vip:* 1 0 60", "vip:* x 1 60"} {
		if err := c.ConfigSet(ctx, "limit-override", bad).Err(); err == nil {
			t.Errorf("CONFIG SET limit-override %q accepted", bad)
		}
	}
	if got := c.ConfigGet(ctx, "limit-override").Val()["limit-override"]; got != "w:* 0 1 60" {
		t.Errorf("limit-override after refused sets = %q", got)
	}
	if err := c.ConfigSet(ctx, "limit-override", "").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestViolationsLog: off by default; on, each limited decision is a line
// with key, command and node, at most violations-log-rate a second.
func TestViolationsLog(t *testing.T) {
	var buf testlog.Buffer
	ts := startServer(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	c := ts.client(t, 2, "")
	ctx := context.Background()
	limit := func(n int) {
		for range n {
			c.Do(ctx, "CL.THROTTLE", "abuser", 0, 1, 60)
		}
	}
	limit(3)
	if strings.Contains(buf.String(), "violation") {
		t.Fatalf("violations logged while off:\n%s", buf.String())
	}
	if err := c.ConfigSet(ctx, "violations-log", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "violations-log-rate", "2").Err(); err != nil {
		t.Fatal(err)
	}
	limit(5) // the clock stands still: one second
	if n := strings.Count(buf.String(), "rate limit violation"); n != 2 {
		t.Fatalf("%d lines, want 2 (violations-log-rate):\n%s", n, buf.String())
	}
	ts.clock.ns.Add(int64(time.Second))
	limit(1)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"key=abuser", "command=cl.throttle", "node=127.0.0.1:0", "suppressed=3"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q lacks %q", last, want)
		}
	}
	info := c.Info(ctx, "stats").Val()
	if !strings.Contains(info, "violations_logged:3\r\n") || !strings.Contains(info, "violations_suppressed:3\r\n") {
		t.Errorf("INFO stats: %s", info)
	}
}
