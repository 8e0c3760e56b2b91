package resp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// step is one command and its expected reply. Steps run in order on one
// connection, so later steps see earlier ones' effects. The fake clock
// stands still at t0 throughout.
type step struct {
	args []any
	want any    // reply in both protocols (int64, string, []any, nil for the nil reply)
	err  string // expected error text, instead of want
	// check, when set, replaces want for replies whose shape differs by
	// protocol (maps) or which vary (ids).
	check func(t *testing.T, proto int, v any)
}

func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// fromFlatOrMap turns a RESP3 map or a RESP2 flat array into a Go map.
func fromFlatOrMap(t *testing.T, v any) map[string]any {
	t.Helper()
	out := map[string]any{}
	switch x := v.(type) {
	case map[any]any:
		for k, val := range x {
			out[fmt.Sprint(k)] = val
		}
	case []any:
		if len(x)%2 != 0 {
			t.Fatalf("flat map of odd length %d: %v", len(x), x)
		}
		for i := 0; i < len(x); i += 2 {
			out[fmt.Sprint(x[i])] = x[i+1]
		}
	default:
		t.Fatalf("reply %T %v is not a map", v, v)
	}
	return out
}

func commandSteps() []step {
	return []step{
		// redis-cell's documented example on a fresh key: T = 60s/30 = 2s,
		// limit 16, TAT = now+2s → remaining (32s−2s)/2s = 15, reset 2s.
		{args: []any{"CL.THROTTLE", "user123", "15", "30", "60"}, want: ints(0, 16, 15, -1, 2)},
		// Same instant again: TAT now+4s → remaining (32−4)/2 = 14, reset 4s.
		{args: []any{"cl.throttle", "user123", "15", "30", "60"}, want: ints(0, 16, 14, -1, 4)},
		// Peek (quantity 0) consumes nothing.
		{args: []any{"CL.THROTTLE", "user123", "15", "30", "60", "0"}, want: ints(0, 16, 14, -1, 4)},
		{args: []any{"GET", "user123"}, want: fmt.Sprint(t0 + 4e9)},
		{args: []any{"TYPE", "user123"}, want: "gcra"},
		{args: []any{"PTTL", "user123"}, want: int64(4000)},
		{args: []any{"TTL", "user123"}, want: int64(4)},
		{args: []any{"TTL", "missing"}, want: int64(-2)},
		{args: []any{"PTTL", "missing"}, want: int64(-2)},
		{args: []any{"TYPE", "missing"}, want: "none"},
		{args: []any{"GET", "missing"}, want: nil},
		// A request above the whole limit: limited, retry_after -1, and
		// nothing stored (the key stays missing).
		{args: []any{"CL.THROTTLE", "big", "1", "1", "1", "3"}, want: ints(1, 2, 2, -1, 0)},
		// Token bucket of 10 refilling 1/s: one taken, full again in 1 s.
		{args: []any{"TB.TAKE", "tb", "10", "1", "1s"}, want: ints(0, 10, 9, -1, 1000)},
		// Nine more: empty; 10 missing × 1 s each = 10 s to full.
		{args: []any{"TB.TAKE", "tb", "10", "1", "1s", "9"}, want: ints(0, 10, 0, -1, 10000)},
		// Leaky bucket: empty before, so wait 0; drained in 1 s.
		{args: []any{"LB.ADD", "lb", "10", "1", "1s"}, want: ints(0, 10, 9, -1, 1000, 0)},
		// Second request queues behind the first: wait 1 s.
		{args: []any{"LB.ADD", "lb", "10", "1", "1s"}, want: ints(0, 10, 8, -1, 2000, 1000)},
		// Fixed window of 1m, 20 s in: 40 s to its end.
		{args: []any{"FW.INCR", "fw", "10", "1m"}, want: ints(0, 10, 9, -1, 40000)},
		// Sliding window: both counts gone 40 s + 60 s from now.
		{args: []any{"SW.INCR", "sw", "10", "1M"}, want: ints(0, 10, 9, -1, 100000)},
		{args: []any{"SL.ADD", "sl", "10", "60000ms"}, want: ints(0, 10, 9, -1, 60000)},
		// a: T=1s, limit 2, q 1 → remaining 1, reset 1; b: T=1s, limit 3,
		// q 2 → remaining 1, reset 2.
		{args: []any{"CL.THROTTLEALL", "a", "1", "1", "1", "1", "b", "2", "2", "2", "2"},
			want: []any{ints(0, 2, 1, -1, 1), ints(0, 3, 1, -1, 2)}},
		// b has 1 left: asking 2 refuses, a reports a peek, nothing consumed.
		{args: []any{"CL.THROTTLEALL", "a", "1", "1", "1", "1", "b", "2", "2", "2", "2"},
			want: []any{ints(0, 2, 1, -1, 1), ints(1, 3, 1, 1, 2)}},
		{args: []any{"CL.THROTTLEALL", "a", "1", "1", "1"}, err: "ERR wrong number of arguments for 'cl.throttleall' command"},
		{args: []any{"CL.THROTTLEALL", "a", "1", "1", "1", "-1"}, err: "ERR limit 1: quantity -1 is out of range: must be 0..1099511627776"},

		// Limiter errors.
		{args: []any{"CL.THROTTLE", "x"}, err: "ERR wrong number of arguments for 'cl.throttle' command"},
		{args: []any{"CL.THROTTLE", "x", "1", "1", "1", "1", "1"}, err: "ERR wrong number of arguments for 'cl.throttle' command"},
		{args: []any{"CL.THROTTLE", "x", "a", "1", "1"}, err: "ERR value is not an integer or out of range"},
		{args: []any{"CL.THROTTLE", "x", "1", "1", "99999999999999999999999"}, err: "ERR period 99999999999999999999999 is out of range: must be 1..316224000 seconds"},
		{args: []any{"CL.THROTTLE", "x", "-1", "1", "1"}, err: "ERR max_burst -1 is out of range: must be 0..1099511627776"},
		{args: []any{"CL.THROTTLE", "x", "1", "0", "1"}, err: "ERR count_per_period 0 is out of range: must be 1..1099511627776"},
		{args: []any{"CL.THROTTLE", "tb", "1", "1", "1"}, err: "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{args: []any{"TB.TAKE", "x", "10", "1", "1s", "1", "bogus"}, err: "ERR syntax error"},
		{args: []any{"TB.TAKE", "x", "10", "1", "1s", "-1"}, err: "ERR tokens -1 is out of range: must be 0..1099511627776"},
		{args: []any{"FW.INCR", "x", "10", "5parsecs"}, err: `ERR window "5parsecs" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		// The errors docs/commands.md documents, as it words them.
		{args: []any{"CL.THROTTLE", "x", "1", "1", "0"}, err: "ERR period 0 is out of range: must be 1..316224000 seconds"},
		{args: []any{"SW.INCR", "x", "10", "1.5s"}, err: `ERR window "1.5s" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{args: []any{"SL.ADD", "x", "10", "1w"}, err: `ERR window "1w" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{args: []any{"TB.TAKE", "x", "10", "1", "1us"}, err: `ERR refill_period "1us" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{args: []any{"LB.ADD", "x", "10", "1", " 1s"}, err: `ERR leak_period " 1s" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{args: []any{"FW.INCR", "x", "0", "1s"}, err: "ERR limit 0 is out of range: must be 1..1099511627776"},
		{args: []any{"SL.ADD", "x", "100001", "1m"}, err: "ERR limit 100001 is out of range: must be 1..100000 (sl-max-limit)"},
		{args: []any{"LB.ADD", "x", "1", "1", "1s", "1", "1"}, err: "ERR wrong number of arguments for 'lb.add' command"},
		{args: []any{"TYPE", "x"}, want: "none"}, // errors changed nothing

		// Keys.
		{args: []any{"EXISTS", "user123", "tb", "nope", "user123"}, want: int64(3)},
		{args: []any{"DBSIZE"}, want: int64(8)}, // user123 tb lb fw sw sl a b
		{args: []any{"KEYS", "[tl]b"}, check: sortedStrings("lb", "tb")},
		{args: []any{"KEYS", "s?"}, check: sortedStrings("sl", "sw")},
		{args: []any{"SCAN", "0", "COUNT", "1000", "TYPE", "gcra"}, check: scanResult("a", "b", "user123")},
		{args: []any{"SCAN", "0", "MATCH", "user*", "COUNT", "1000"}, check: scanResult("user123")},
		{args: []any{"SCAN", "x"}, err: "ERR invalid cursor"},
		{args: []any{"SCAN", "0", "COUNT", "0"}, err: "ERR syntax error"},
		{args: []any{"SCAN", "0", "TYPE", "string"}, err: "ERR unknown type name 'string'"},
		{args: []any{"DEL", "user123", "tb", "nope"}, want: int64(2)},
		{args: []any{"EXISTS", "user123"}, want: int64(0)},
		{args: []any{"GET", "lb"}, err: "WRONGTYPE Operation against a key holding the wrong kind of value"},

		// Connection.
		{args: []any{"PING"}, want: "PONG"},
		{args: []any{"ping", "hello"}, want: "hello"},
		{args: []any{"ECHO", "a\r\nb"}, want: "a\r\nb"},
		{args: []any{"SELECT", "0"}, want: "OK"},
		{args: []any{"SELECT", "1"}, err: "ERR DB index is out of range"},
		{args: []any{"SELECT", "x"}, err: "ERR value is not an integer or out of range"},
		{args: []any{"CLIENT", "SETNAME", "worker-1"}, want: "OK"},
		{args: []any{"CLIENT", "GETNAME"}, want: "worker-1"},
		{args: []any{"CLIENT", "SETNAME", "bad name"}, err: "ERR Client names cannot contain spaces, newlines or special characters."},
		{args: []any{"CLIENT", "SETINFO", "LIB-NAME", "mylib"}, want: "OK"},
		{args: []any{"CLIENT", "SETINFO", "COLOR", "red"}, err: "ERR Unrecognized option 'COLOR'"},
		{args: []any{"CLIENT", "ID"}, check: func(t *testing.T, _ int, v any) {
			if id, ok := v.(int64); !ok || id < 1 {
				t.Errorf("CLIENT ID = %v, want a positive integer", v)
			}
		}},
		{args: []any{"CLIENT", "INFO"}, check: containsAll("name=worker-1", "lib-name=mylib", "cmd=client|info")},
		{args: []any{"CLIENT", "LIST"}, check: containsAll("name=worker-1", "user=default")},
		{args: []any{"CLIENT", "BOGUS"}, err: "ERR unknown subcommand 'BOGUS'. Try CLIENT HELP."},
		{args: []any{"CLIENT"}, err: "ERR wrong number of arguments for 'client' command"},
		{args: []any{"CLIENT", "SETNAME"}, err: "ERR wrong number of arguments for 'client|setname' command"},
		{args: []any{"CLIENT", "HELP"}, check: func(t *testing.T, _ int, v any) {
			if l, ok := v.([]any); !ok || len(l) < 3 {
				t.Errorf("CLIENT HELP = %v, want lines", v)
			}
		}},
		{args: []any{"FOO", "bar", "baz"}, err: "ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' "},
		{args: []any{"HELLO", "4"}, err: "NOPROTO unsupported protocol version"},

		// Server.
		{args: []any{"TIME"}, want: []any{"1700000000", "0"}},
		{args: []any{"LASTSAVE"}, want: int64(1_700_000_000)},
		{args: []any{"SAVE"}, err: "ERR persistence is off"},
		{args: []any{"BGSAVE"}, err: "ERR persistence is off"},
		{args: []any{"ROLE"}, want: []any{"master", int64(0), []any{}}},
		{args: []any{"CONFIG", "GET", "maxclients"}, check: mapWith(map[string]any{"maxclients": "10000"})},
		{args: []any{"CONFIG", "GET", "save"}, check: mapWith(map[string]any{"save": ""})},
		{args: []any{"CONFIG", "GET", "appendonly"}, check: mapWith(map[string]any{"appendonly": "no"})},
		{args: []any{"CONFIG", "SET", "maxclients", "500", "timeout", "300"}, want: "OK"},
		{args: []any{"CONFIG", "GET", "m*clients", "timeout"}, check: mapWith(map[string]any{"maxclients": "500", "maxmemory-clients": "auto", "timeout": "300"})},
		{args: []any{"CONFIG", "SET", "timeout", "soon"}, err: "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"},
		{args: []any{"CONFIG", "SET", "port", "1"}, err: "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"},
		{args: []any{"CONFIG", "SET", "nope", "1"}, err: "ERR Unknown option or number of arguments for CONFIG SET - 'nope'"},
		{args: []any{"CONFIG", "SET", "timeout"}, err: "ERR wrong number of arguments for 'config|set' command"},
		{args: []any{"CONFIG", "SET", "timeout", "0"}, want: "OK"},
		{args: []any{"COMMAND", "COUNT"}, check: func(t *testing.T, _ int, v any) {
			if n, ok := v.(int64); !ok || n < 30 {
				t.Errorf("COMMAND COUNT = %v, want at least 30", v)
			}
		}},
		{args: []any{"COMMAND", "INFO", "cl.throttle", "nope"}, check: func(t *testing.T, _ int, v any) {
			l, ok := v.([]any)
			if !ok || len(l) != 2 || l[1] != nil {
				t.Fatalf("COMMAND INFO = %v, want [entry nil]", v)
			}
			e := l[0].([]any)
			if len(e) != 10 || e[0] != "cl.throttle" || e[1] != int64(-5) || e[3] != int64(1) || e[4] != int64(1) || e[5] != int64(1) {
				t.Errorf("COMMAND INFO cl.throttle = %v", e)
			}
		}},
		{args: []any{"COMMAND", "DOCS", "cl.throttle"}, check: func(t *testing.T, _ int, v any) {
			docs := fromFlatOrMap(t, fromFlatOrMap(t, v)["cl.throttle"])
			if docs["group"] != "ratelimit" || docs["complexity"] != "O(1)" {
				t.Errorf("COMMAND DOCS cl.throttle = %v", docs)
			}
			if args, ok := docs["arguments"].([]any); !ok || len(args) != 6 {
				t.Errorf("COMMAND DOCS cl.throttle arguments = %v, want 6", docs["arguments"])
			}
		}},
		{args: []any{"INFO", "keyspace"}, check: func(t *testing.T, i int, v any) {
			containsAll("# Keyspace\r\n", "db0:keys=6,expires=6,avg_ttl=")(t, i, v)
			if s, _ := v.(string); strings.Contains(s, "avg_ttl=0\r\n") || strings.Contains(s, "avg_ttl=-") {
				t.Errorf("INFO keyspace = %q, want a positive avg_ttl (every key has a TTL)", s)
			}
		}},
		{args: []any{"INFO", "commandstats"}, check: containsAll("cmdstat_cl.throttle:calls=", "rejected_calls=1,failed_calls=7,allowed=3,limited=1")},
		{args: []any{"INFO"}, check: containsAll("# Server\r\n", "redis_version:", "# Clients\r\n", "# Memory\r\n", "# Persistence\r\nloading:0\r\n", "# Stats\r\n", "limiter_allowed:", "# Replication\r\nrole:master\r\n", "# Keyspace\r\n")},
		{args: []any{"FLUSHALL", "bogus"}, err: "ERR syntax error"},
		{args: []any{"FLUSHALL", "ASYNC"}, want: "OK"},
		{args: []any{"DBSIZE"}, want: int64(0)},
	}
}

func sortedStrings(want ...string) func(t *testing.T, _ int, v any) {
	return func(t *testing.T, _ int, v any) {
		t.Helper()
		l, ok := v.([]any)
		if !ok {
			t.Fatalf("reply %v is not an array", v)
		}
		var got []string
		for _, x := range l {
			got = append(got, fmt.Sprint(x))
		}
		sortStrings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func scanResult(want ...string) func(t *testing.T, proto int, v any) {
	return func(t *testing.T, proto int, v any) {
		t.Helper()
		l, ok := v.([]any)
		if !ok || len(l) != 2 || l[0] != "0" {
			t.Fatalf("SCAN = %v, want [0 keys] (16 shards × 1000 covers everything)", v)
		}
		sortedStrings(want...)(t, proto, l[1])
	}
}

func containsAll(subs ...string) func(t *testing.T, _ int, v any) {
	return func(t *testing.T, _ int, v any) {
		t.Helper()
		s, ok := v.(string)
		if !ok {
			t.Fatalf("reply %T %v is not a string", v, v)
		}
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				t.Errorf("reply %q lacks %q", s, sub)
			}
		}
	}
}

func mapWith(want map[string]any) func(t *testing.T, proto int, v any) {
	return func(t *testing.T, proto int, v any) {
		t.Helper()
		if proto == 3 {
			if _, ok := v.(map[any]any); !ok {
				t.Errorf("RESP3 reply %T is not a map", v)
			}
		}
		if got := fromFlatOrMap(t, v); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}

// TestCommands runs every command and its errors in RESP3 (go-redis's
// default, with its HELLO and CLIENT SETINFO handshake) and in RESP2.
func TestCommands(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ts := startServer(t, nil)
			rdb := ts.client(t, proto, "")
			ctx := context.Background()
			// One connection, so CLIENT SETNAME persists across steps.
			conn := rdb.Conn()
			t.Cleanup(func() { conn.Close() })
			for i, st := range commandSteps() {
				v, err := conn.Do(ctx, st.args...).Result()
				name := fmt.Sprintf("step %d %v", i, st.args)
				switch {
				case st.err != "":
					if err == nil || !strings.HasPrefix(err.Error(), st.err) {
						t.Errorf("%s: error = %v (reply %v), want %q", name, err, v, st.err)
					}
				case errors.Is(err, redis.Nil):
					if st.want != nil || st.check != nil {
						t.Errorf("%s = nil, want %v", name, st.want)
					}
				case err != nil:
					t.Errorf("%s: unexpected error %v", name, err)
				case st.check != nil:
					t.Run(name, func(t *testing.T) { st.check(t, proto, v) })
				case !reflect.DeepEqual(v, st.want):
					t.Errorf("%s = %#v, want %#v", name, v, st.want)
				}
			}
		})
	}
}

// TestHello checks HELLO's map in both protocols and that the connection
// switches protocol.
func TestHello(t *testing.T) {
	ts := startServer(t, nil)
	rc := ts.raw(t)
	rc.send(t, "HELLO 3\r\n")
	if got := rc.line(t); got != "%7" {
		t.Fatalf("HELLO 3 header = %q, want %%7", got)
	}
	fields := map[string]string{}
	for i := 0; i < 7; i++ {
		k := rc.line(t)
		_ = k
		key := rc.line(t)
		v := rc.line(t)
		if strings.HasPrefix(v, "$") {
			v = rc.line(t)
		}
		fields[key] = v
	}
	if fields["proto"] != ":3" || fields["mode"] != "standalone" || fields["role"] != "master" || fields["server"] != "cellserver" {
		t.Errorf("HELLO 3 fields = %v", fields)
	}
	rc.send(t, "GET nothing\r\n")
	if got := rc.line(t); got != "_" {
		t.Errorf("RESP3 nil = %q, want _", got)
	}
	rc.send(t, "HELLO 2\r\n")
	if got := rc.line(t); got != "*14" {
		t.Fatalf("HELLO 2 header = %q, want *14", got)
	}
	for i := 0; i < 14; i++ {
		if l := rc.line(t); strings.HasPrefix(l, "$") {
			rc.line(t)
		} else if l == "*0" {
			continue
		}
	}
	rc.send(t, "GET nothing\r\n")
	if got := rc.line(t); got != "$-1" {
		t.Errorf("RESP2 nil = %q, want $-1", got)
	}
}

// TestGoRedisProbes runs the calls client libraries make at start-up and
// parses their replies with go-redis's own parsers.
func TestGoRedisProbes(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ts := startServer(t, nil)
			rdb := ts.client(t, proto, "")
			ctx := context.Background()
			cmds, err := rdb.Command(ctx).Result()
			if err != nil {
				t.Fatalf("COMMAND: %v", err)
			}
			if c := cmds["cl.throttle"]; c == nil || c.Arity != -5 || c.FirstKeyPos != 1 {
				t.Errorf("COMMAND cl.throttle = %+v", c)
			}
			if c := cmds["get"]; c == nil || !c.ReadOnly {
				t.Errorf("COMMAND get = %+v, want readonly", c)
			}
			info, err := rdb.ClientInfo(ctx).Result()
			if err != nil {
				t.Fatalf("CLIENT INFO: %v", err)
			}
			if info.LibName != "go-redis" && !strings.HasPrefix(info.LibName, "go-redis") {
				t.Errorf("CLIENT INFO lib-name = %q, want go-redis (sent by CLIENT SETINFO at connect)", info.LibName)
			}
			if _, err := rdb.ConfigGet(ctx, "*").Result(); err != nil {
				t.Errorf("CONFIG GET *: %v", err)
			}
			if _, err := rdb.Info(ctx).Result(); err != nil {
				t.Errorf("INFO: %v", err)
			}
			if _, err := rdb.Time(ctx).Result(); err != nil {
				t.Errorf("TIME: %v", err)
			}
			if _, err := rdb.Do(ctx, "COMMAND", "DOCS").Result(); err != nil {
				t.Errorf("COMMAND DOCS: %v", err)
			}
		})
	}
}
