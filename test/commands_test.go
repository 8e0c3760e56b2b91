package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// TestLimiterCommands runs every limiter command of the contract through
// go-redis with RESP3 (the default) and RESP2, on fresh keys, and checks the
// replies a client would compute from the contract by hand.
func TestLimiterCommands(t *testing.T) {
	s := startServer(t)
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := s.client(t, proto)
			ctx := ctxT(t)
			p := fmt.Sprintf("p%d:", proto)
			tests := []struct {
				args []any
				want []int64
			}{
				// GCRA: limit 16, one used → 15 left; T = 60s/30 = 2s, so the key is fresh again in 2s.
				{[]any{"CL.THROTTLE", p + "gcra", 15, 30, 60}, []int64{0, 16, 15, -1, 2}},
				// quantity 0 peeks: nothing consumed, reset still 2s.
				{[]any{"CL.THROTTLE", p + "gcra", 15, 30, 60, 0}, []int64{0, 16, 15, -1, 2}},
				// more than the whole limit: limited, can never succeed.
				{[]any{"CL.THROTTLE", p + "gcra", 15, 30, 60, 17}, []int64{1, 16, 15, -1, 2}},
				// token bucket of 10 refilling 1/s: take 3 → 7 left; full again in 3s = 3000 ms.
				{[]any{"TB.TAKE", p + "tb", 10, 1, "1s", 3}, []int64{0, 10, 7, -1, 3000}},
				// leaky bucket of 40 leaking 2/s: first request is admitted, waits 0; empty in 500 ms.
				{[]any{"LB.ADD", p + "lb", 40, 2, "1s"}, []int64{0, 40, 39, -1, 500, 0}},
				// sliding log limit 5 per minute: 2 used → 3 left; the entry leaves the window in 60000 ms.
				{[]any{"SL.ADD", p + "sl", 5, "1m", 2}, []int64{0, 5, 3, -1, 60000}},
			}
			for _, tc := range tests {
				v, err := c.Do(ctx, tc.args...).Result()
				if err != nil {
					t.Fatalf("%v: %v", tc.args, err)
				}
				if got := ints(t, v); !slices.Equal(got, tc.want) {
					t.Errorf("%v = %v, want %v", tc.args, got, tc.want)
				}
			}
			// count above the limit is never possible; the entry of 2 leaves
			// the window 60 s after it was admitted, a few ms ago.
			if got := ints(t, c.Do(ctx, "SL.ADD", p+"sl", 5, "1m", 6).Val()); len(got) != 5 || !slices.Equal(got[:4], []int64{1, 5, 3, -1}) || got[4] < 55000 || got[4] > 60000 {
				t.Errorf("SL.ADD count 6 = %v, want [1 5 3 -1 ~60000]", got)
			}
			// Window limiters reply with times that depend on where now falls
			// in the epoch-aligned window: check the fields that don't, and the
			// range of those that do.
			for _, cmd := range []string{"FW.INCR", "SW.INCR"} {
				v, err := c.Do(ctx, cmd, p+cmd, 10, "1h", 4).Result()
				if err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
				got := ints(t, v)
				if len(got) != 5 || got[0] != 0 || got[1] != 10 || got[2] != 6 || got[3] != -1 {
					t.Errorf("%s = %v, want [0 10 6 -1 reset]", cmd, got)
				}
				maxReset := int64(3600_000)
				if cmd == "SW.INCR" {
					maxReset = 2 * 3600_000 // both windows must slide out
				}
				if got[4] <= 0 || got[4] > maxReset {
					t.Errorf("%s reset_after = %d ms, want in (0, %d]", cmd, got[4], maxReset)
				}
			}
			// CL.THROTTLEALL: one array per key, in order.
			v, err := c.Do(ctx, "CL.THROTTLEALL", p+"all:a", 1, 1, 1, 1, p+"all:b", 0, 1, 10, 1).Result()
			if err != nil {
				t.Fatalf("CL.THROTTLEALL: %v", err)
			}
			arr := v.([]any)
			if len(arr) != 2 {
				t.Fatalf("CL.THROTTLEALL = %v, want 2 arrays", v)
			}
			// a: limit 2, T = 1s → 1 left, fresh in 1s. b: limit 1, T = 10s → 0 left, fresh in 10s.
			if got := ints(t, arr[0]); !slices.Equal(got, []int64{0, 2, 1, -1, 1}) {
				t.Errorf("CL.THROTTLEALL[a] = %v, want [0 2 1 -1 1]", got)
			}
			if got := ints(t, arr[1]); !slices.Equal(got, []int64{0, 1, 0, -1, 10}) {
				t.Errorf("CL.THROTTLEALL[b] = %v, want [0 1 0 -1 10]", got)
			}
			// b is now exhausted, so the next call refuses and consumes nothing from a.
			v, err = c.Do(ctx, "CL.THROTTLEALL", p+"all:a", 1, 1, 1, 1, p+"all:b", 0, 1, 10, 1).Result()
			if err != nil {
				t.Fatalf("CL.THROTTLEALL: %v", err)
			}
			arr, ok := v.([]any)
			if !ok || len(arr) != 2 {
				t.Fatalf("refused CL.THROTTLEALL = %v, want 2 arrays", v)
			}
			// a reports what a peek would: limit 2, 1 left, its TAT at most 1 s ahead.
			if got := ints(t, arr[0]); len(got) != 5 || !slices.Equal(got[:4], []int64{0, 2, 1, -1}) || got[4] < 0 || got[4] > 1 {
				t.Errorf("refused CL.THROTTLEALL[a] = %v, want a peek [0 2 1 -1 0..1]", got)
			}
			// b: limited, retry when its TAT (at most 10 s ahead) has passed.
			if got := ints(t, arr[1]); len(got) != 5 || !slices.Equal(got[:3], []int64{1, 1, 0}) || got[3] <= 0 || got[3] > 10 || got[4] <= 0 || got[4] > 10 {
				t.Errorf("refused CL.THROTTLEALL[b] = %v, want [1 1 0 1..10 1..10]", got)
			}
		})
	}
}

// TestKeyCommands checks the key commands over go-redis.
func TestKeyCommands(t *testing.T) {
	s := startServer(t)
	c := s.client(t, 3)
	ctx := ctxT(t)
	must := func(args ...any) any {
		t.Helper()
		v, err := c.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	must("CL.THROTTLE", "k:gcra", 10, 1, 100)
	must("TB.TAKE", "k:tb", 10, 1, "1m")
	must("FW.INCR", "k:fw", 10, "1h")
	if got := must("TYPE", "k:gcra"); got != "gcra" {
		t.Errorf("TYPE k:gcra = %v, want gcra", got)
	}
	if got := must("TYPE", "k:tb"); got != "token-bucket" {
		t.Errorf("TYPE k:tb = %v, want token-bucket", got)
	}
	if got := must("TYPE", "missing"); got != "none" {
		t.Errorf("TYPE missing = %v, want none", got)
	}
	if got := must("EXISTS", "k:gcra", "k:tb", "missing", "k:gcra"); got != int64(3) {
		t.Errorf("EXISTS = %v, want 3", got)
	}
	if got := must("DBSIZE"); got != int64(3) {
		t.Errorf("DBSIZE = %v, want 3", got)
	}
	// T = 100s/1 = 100s: one used, so the TAT is 100s ahead.
	if ttl := must("TTL", "k:gcra").(int64); ttl < 99 || ttl > 100 {
		t.Errorf("TTL k:gcra = %d, want 99..100", ttl)
	}
	if pttl := must("PTTL", "k:gcra").(int64); pttl < 99_000 || pttl > 100_000 {
		t.Errorf("PTTL k:gcra = %d, want 99000..100000", pttl)
	}
	if got := must("TTL", "missing"); got != int64(-2) {
		t.Errorf("TTL missing = %v, want -2", got)
	}
	tat, err := c.Get(ctx, "k:gcra").Int64()
	if err != nil {
		t.Fatalf("GET k:gcra: %v", err)
	}
	if now := time.Now().UnixNano(); tat < now+90e9 || tat > now+101e9 {
		t.Errorf("GET k:gcra = %d, want a TAT about 100s after %d", tat, now)
	}
	if err := c.Get(ctx, "k:tb").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Errorf("GET k:tb err = %v, want WRONGTYPE", err)
	}
	if err := c.Get(ctx, "missing").Err(); err != redis.Nil {
		t.Errorf("GET missing err = %v, want nil reply", err)
	}
	if err := c.Do(ctx, "TB.TAKE", "k:gcra", 10, 1, "1m").Err(); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
		t.Errorf("TB.TAKE on a gcra key: %v, want WRONGTYPE", err)
	}
	keys, err := c.Keys(ctx, "k:*").Result()
	if err != nil || len(keys) != 3 {
		t.Errorf("KEYS k:* = %v, %v; want 3 keys", keys, err)
	}
	var scanned []string
	iter := c.Scan(ctx, 0, "k:*", 1).Iterator()
	for iter.Next(ctx) {
		scanned = append(scanned, iter.Val())
	}
	if err := iter.Err(); err != nil || len(scanned) != 3 {
		t.Errorf("SCAN MATCH k:* = %v, %v; want 3 keys", scanned, err)
	}
	typed, _, err := c.ScanType(ctx, 0, "*", 100, "token-bucket").Result()
	if err != nil || len(typed) != 1 || typed[0] != "k:tb" {
		t.Errorf("SCAN TYPE token-bucket = %v, %v; want [k:tb]", typed, err)
	}
	if got := must("DEL", "k:gcra", "missing"); got != int64(1) {
		t.Errorf("DEL = %v, want 1", got)
	}
	// After DEL the limiter starts fresh.
	if got := ints(t, must("CL.THROTTLE", "k:gcra", 10, 1, 100)); got[2] != 10 {
		t.Errorf("CL.THROTTLE after DEL = %v, want remaining 10", got)
	}
	must("FLUSHALL")
	if got := must("DBSIZE"); got != int64(0) {
		t.Errorf("DBSIZE after FLUSHALL = %v, want 0", got)
	}
}

// TestErrors checks error replies in Redis's wording and that the connection
// stays usable after each.
func TestErrors(t *testing.T) {
	s := startServer(t)
	c := s.client(t, 2)
	ctx := ctxT(t)
	tests := []struct {
		args   []any
		prefix string
	}{
		{[]any{"CL.THROTTLE", "k", 15, 30}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]any{"CL.THROTTLE", "k", "x", 30, 60}, "ERR value is not an integer or out of range"},
		{[]any{"CL.THROTTLE", "k", 15, 0, 60}, "ERR"},
		{[]any{"CL.THROTTLE", "k", -1, 30, 60}, "ERR"},
		{[]any{"CL.THROTTLE", "k", 15, 30, "99999999999999999999"}, "ERR"},
		{[]any{"TB.TAKE", "k2", 10, 1, "1s", -1}, "ERR"},
		{[]any{"FW.INCR", "k3", 10, "5x"}, "ERR"},
		{[]any{"SL.ADD", "k4", 100000000, "1s"}, "ERR"},
		{[]any{"NOSUCHCOMMAND"}, "ERR unknown command"},
		{[]any{"SELECT", 1}, "ERR"},
	}
	for _, tc := range tests {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), tc.prefix) {
			t.Errorf("%v: err = %v, want prefix %q", tc.args, err, tc.prefix)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("connection unusable after %v: %v", tc.args, err)
		}
	}
	// Nothing of the above created a key.
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after errors = %d, %v; want 0", n, err)
	}
}

// TestServerCommands checks the server and connection commands that client
// libraries probe at connection time.
func TestServerCommands(t *testing.T) {
	s := startServer(t)
	c := s.client(t, 3)
	ctx := ctxT(t)
	if got, err := c.Echo(ctx, "hi").Result(); err != nil || got != "hi" {
		t.Errorf("ECHO hi = %q, %v; want hi", got, err)
	}
	if err := c.Do(ctx, "SELECT", 0).Err(); err != nil {
		t.Errorf("SELECT 0 = %v, want OK", err)
	}
	if _, err := c.Time(ctx).Result(); err != nil {
		t.Errorf("TIME = %v, want the server time", err)
	}
	info, err := c.Info(ctx).Result()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	for _, section := range []string{"# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"} {
		if !strings.Contains(info, section) {
			t.Errorf("INFO lacks %q, want every section", section)
		}
	}
	c.Do(ctx, "CL.THROTTLE", "info:k", 1, 1, 1)
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil || !strings.Contains(stats, "cmdstat_cl.throttle:calls=1") {
		t.Errorf("INFO commandstats = %q, %v; want cmdstat_cl.throttle:calls=1", stats, err)
	}
	if n, err := c.Do(ctx, "COMMAND", "COUNT").Int64(); err != nil || n < 30 {
		t.Errorf("COMMAND COUNT = %d, %v; want at least 30", n, err)
	}
	docs, err := c.Do(ctx, "COMMAND", "DOCS", "cl.throttle").Result()
	if err != nil || docs == nil {
		t.Errorf("COMMAND DOCS cl.throttle = %v, %v; want its documentation", docs, err)
	}
	cfg, err := c.ConfigGet(ctx, "port").Result()
	if err != nil || cfg["port"] != fmt.Sprint(s.Port) {
		t.Errorf("CONFIG GET port = %v, %v; want %d", cfg, err, s.Port)
	}
	if err := c.Do(ctx, "CLIENT", "SETNAME", "e2e").Err(); err != nil {
		t.Errorf("CLIENT SETNAME e2e = %v, want OK", err)
	}
	if name, err := c.Do(ctx, "CLIENT", "GETNAME").Text(); err != nil || name != "e2e" {
		t.Errorf("CLIENT GETNAME = %q, %v; want e2e", name, err)
	}
	if list, err := c.ClientList(ctx).Result(); err != nil || !strings.Contains(list, "name=e2e") {
		t.Errorf("CLIENT LIST = %q, %v; want name=e2e in it", list, err)
	}
	if role, err := c.Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
		t.Errorf("ROLE = %v, %v; want [master ...]", role, err)
	}
}

// TestAuth checks --requirepass: NOAUTH before AUTH, except AUTH, HELLO and
// QUIT; a wrong password refused; the right one accepted.
func TestAuth(t *testing.T) {
	s := startServer(t, "--requirepass", "s3cret")
	ctx := ctxT(t)
	anon := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2})
	defer anon.Close()
	if err := anon.Do(ctx, "CL.THROTTLE", "k", 1, 1, 1).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("before AUTH: err = %v, want NOAUTH", err)
	}
	wrong := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "nope"})
	defer wrong.Close()
	if err := wrong.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("wrong password: err = %v, want WRONGPASS", err)
	}
	good := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "s3cret"})
	defer good.Close()
	if err := good.Do(ctx, "CL.THROTTLE", "k", 1, 1, 1).Err(); err != nil {
		t.Errorf("CL.THROTTLE after AUTH = %v, want a reply", err)
	}
}

// TestOneKeyUnderContention: 50 clients × 200 requests on one key with burst
// 999 (limit 1000) and a rate so slow nothing refills: exactly 1000 allowed.
func TestOneKeyUnderContention(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1})
			defer c.Close()
			for i := 0; i < 200; i++ {
				v, err := c.Do(ctx, "CL.THROTTLE", "hot", 999, 1, 3600).Slice()
				if err != nil {
					errs <- err
					return
				}
				if v[0].(int64) == 0 {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("client error: %v", err)
	}
	if got := allowed.Load(); got != 1000 {
		t.Errorf("allowed = %d, want exactly 1000", got)
	}
}

// TestEveryServerCommand runs each server and connection command of the
// contract once over RESP3 and RESP2 and checks the reply's shape.
func TestEveryServerCommand(t *testing.T) {
	s := startServer(t, "--requirepass", "pw")
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			ctx := ctxT(t)
			c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: proto, Password: "pw"})
			defer c.Close()
			check := func(what string, ok bool, v any, err error, want string) {
				t.Helper()
				if err != nil || !ok {
					t.Errorf("%s = %#v, %v; want %s", what, v, err, want)
				}
			}
			v, err := c.Do(ctx, "PING", "hello").Text()
			check("PING hello", v == "hello", v, err, "hello")
			v, err = c.Do(ctx, "AUTH", "default", "pw").Text()
			check("AUTH default pw", v == "OK", v, err, "OK")
			v, err = c.Do(ctx, "AUTH", "pw").Text()
			check("AUTH pw", v == "OK", v, err, "OK")
			id, err := c.Do(ctx, "CLIENT", "ID").Int64()
			check("CLIENT ID", id > 0, id, err, "a positive id")
			v, err = c.Do(ctx, "CLIENT", "SETINFO", "LIB-NAME", "e2e").Text()
			check("CLIENT SETINFO", v == "OK", v, err, "OK")
			v, err = c.Do(ctx, "CLIENT", "INFO").Text()
			check("CLIENT INFO", strings.Contains(v, fmt.Sprintf("id=%d ", id)) && strings.Contains(v, "lib-name=e2e"), v, err, "its id and lib-name=e2e")
			// HELLO answers Redis's seven fields: a map in RESP3, a flat
			// array of field, value in RESP2.
			hello, err := c.Do(ctx, "HELLO", proto).Result()
			fields := map[any]any{}
			switch h := hello.(type) {
			case map[any]any: // RESP3
				fields = h
			case []any: // RESP2
				for i := 0; i+1 < len(h); i += 2 {
					fields[h[i]] = h[i+1]
				}
			}
			ok := fields["proto"] == int64(proto) && fields["role"] == "master" && fields["mode"] == "standalone"
			for _, f := range []string{"server", "version", "id", "modules"} {
				ok = ok && fields[f] != nil
			}
			check(fmt.Sprintf("HELLO %d", proto), ok, hello, err, "server, version, proto, id, mode, role, modules")
			info, err := c.Do(ctx, "COMMAND", "INFO", "cl.throttle", "get").Slice()
			check("COMMAND INFO", len(info) == 2 && info[0] != nil, info, err, "2 entries, the first non-nil")
			all, err := c.Do(ctx, "COMMAND").Slice()
			check("COMMAND", len(all) >= 30, len(all), err, "at least 30 commands")
			v, err = c.Do(ctx, "CONFIG", "SET", "timeout", "300").Text()
			check("CONFIG SET timeout", v == "OK", v, err, "OK")
			cfg, err := c.ConfigGet(ctx, "timeout").Result()
			check("CONFIG GET timeout", cfg["timeout"] == "300", cfg, err, "timeout 300")
			secs, err := c.Do(ctx, "LASTSAVE").Int64()
			check("LASTSAVE", secs > 0, secs, err, "a positive Unix time")
			for _, section := range []string{"persistence", "replication", "keyspace", "clients", "memory", "stats", "server"} {
				text, err := c.Info(ctx, section).Result()
				check("INFO "+section, strings.Contains(strings.ToLower(text), "# "+section), text, err, "its # header")
			}
			v, err = c.Do(ctx, "FLUSHDB", "ASYNC").Text()
			check("FLUSHDB ASYNC", v == "OK", v, err, "OK")
			v, err = c.Do(ctx, "FLUSHALL", "SYNC").Text()
			check("FLUSHALL SYNC", v == "OK", v, err, "OK")
			v, err = c.Do(ctx, "SAVE").Text()
			check("SAVE", v == "OK", v, err, "OK")
			v, err = c.Do(ctx, "BGSAVE").Text()
			check("BGSAVE", strings.Contains(v, "Background saving started"), v, err, "Background saving started")
			// Wait until the background save is over (a SAVE meanwhile is
			// refused, as in Redis).
			poll.Until(t, 20*time.Second, func() error {
				text, err := c.Info(ctx, "persistence").Result()
				if err != nil {
					t.Fatalf("INFO persistence: %v", err)
				}
				if v := parseInfo(text)["rdb_bgsave_in_progress"]; v != "0" {
					return fmt.Errorf("rdb_bgsave_in_progress = %q, want 0", v)
				}
				return nil
			})
		})
	}
	// QUIT answers OK and closes.
	out := rawExchange(t, s.Addr, []byte("QUIT\r\n"))
	if out != "+OK\r\n" {
		t.Errorf("QUIT = %q, want +OK and a close", out)
	}
	// SHUTDOWN NOSAVE stops the server with status 0; like Redis it closes
	// the connection instead of replying.
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, Password: "pw", MaxRetries: -1})
	defer c.Close()
	c.Do(context.Background(), "SHUTDOWN", "NOSAVE")
	select {
	case <-s.done:
		if s.err != nil {
			t.Errorf("exit after SHUTDOWN: %v", s.err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("server still running 20s after SHUTDOWN")
	}
}
