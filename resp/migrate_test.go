package resp

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
)

// exhausted reports whether key, a 1-per-minute GCRA limit with no burst,
// refuses now (its state says so), as CL.THROTTLE key 0 1 60 0 peeks.
func exhausted(t *testing.T, c *redis.Client, key string) bool {
	t.Helper()
	v, err := c.Do(context.Background(), "CL.THROTTLE", key, 0, 1, 60, 0).Int64Slice()
	if err != nil {
		t.Fatalf("CL.THROTTLE %s: %v", key, err)
	}
	return v[2] == 0 // remaining
}

// exhaust consumes key's only token.
func exhaust(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	if err := c.Do(context.Background(), "CL.THROTTLE", key, 0, 1, 60).Err(); err != nil {
		t.Fatal(err)
	}
	if !exhausted(t, c, key) {
		t.Fatalf("%s not exhausted after CL.THROTTLE", key)
	}
}

func TestDumpRestore(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := ts.client(t, proto, "")
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		exhaust(t, c, "src")
		payload, err := c.Dump(ctx, "src").Result()
		if err != nil || !strings.HasPrefix(payload, "\xceCELL") {
			t.Fatalf("RESP%d DUMP src = %q, %v; want a cellserver payload", proto, payload, err)
		}
		if v, err := c.Do(ctx, "DUMP", "missing").Result(); err != redis.Nil {
			t.Errorf("RESP%d DUMP missing = %v, %v; want nil", proto, v, err)
		}
		damaged := payload[:len(payload)-1] + string(payload[len(payload)-1]^1)
		for _, tc := range []struct {
			args []any
			want string // "OK" or the error
		}{
			{[]any{"RESTORE", "dst", 0, payload}, "OK"},
			{[]any{"RESTORE", "dst", 0, payload}, "BUSYKEY Target key name already exists."},
			{[]any{"RESTORE", "dst", 0, payload, "REPLACE", "ABSTTL", "IDLETIME", 5, "FREQ", 255}, "OK"},
			{[]any{"RESTORE", "x", 0, "\x00\x03bar\x0b\x00"}, "ERR DUMP payload is not a cellserver payload (Redis RDB payloads cannot be restored into cellserver)"},
			{[]any{"RESTORE", "x", 0, damaged}, "ERR DUMP payload version or checksum are wrong"},
			{[]any{"RESTORE", "x", 0, payload[:len(payload)-3]}, "ERR DUMP payload version or checksum are wrong"},
			{[]any{"RESTORE", "x", -1, payload}, "ERR Invalid TTL value, must be >= 0"},
			{[]any{"RESTORE", "x", "y", payload}, "ERR value is not an integer or out of range"},
			{[]any{"RESTORE", "x", 0, payload, "NOPE"}, "ERR syntax error"},
			{[]any{"RESTORE", "x", 0, payload, "IDLETIME"}, "ERR syntax error"},
			{[]any{"RESTORE", "x", 0, payload, "FREQ", 256}, "ERR Invalid FREQ value, must be >= 0 and <= 255"},
			{[]any{"RESTORE", "x", 0, payload, "IDLETIME", -1}, "ERR Invalid IDLETIME value, must be >= 0"},
			{[]any{"RESTORE", "x", 0}, "ERR wrong number of arguments for 'restore' command"},
		} {
			v, err := c.Do(ctx, tc.args...).Result()
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got, _ = v.(string)
			}
			if got != tc.want {
				t.Errorf("RESP%d %q = %q, want %q", proto, tc.args, got, tc.want)
			}
		}
		if !exhausted(t, c, "dst") {
			t.Errorf("RESP%d: restored key not exhausted, its source was", proto)
		}
		if n, err := c.Exists(ctx, "x").Result(); err != nil || n != 0 {
			t.Errorf("RESP%d EXISTS x = %d, %v after failed RESTOREs; want 0", proto, n, err)
		}
		ttl, err1 := c.PTTL(ctx, "src").Result()
		ttl2, err2 := c.PTTL(ctx, "dst").Result()
		if err1 != nil || err2 != nil || ttl != ttl2 {
			t.Errorf("RESP%d PTTL src, dst = %v %v, %v %v; want equal (the expiry travels with the state)", proto, ttl, err1, ttl2, err2)
		}
	}
}

// migrateTo runs MIGRATE on c to ts with the given arguments after the
// timeout, and returns the reply or the error's text.
func migrateTo(t *testing.T, c *redis.Client, dst *testServer, key string, extra ...any) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(dst.addr)
	args := append([]any{"MIGRATE", host, port, key, 0, 5000}, extra...)
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		return err.Error()
	}
	s, _ := v.(string)
	return s
}

func TestMigrate(t *testing.T) {
	src, dst := startServer(t, nil), startServer(t, nil)
	locked := startServer(t, func(c *Config) { c.RequirePass = "s3cret" })
	ctx := context.Background()
	cs, cd := src.client(t, 2, ""), dst.client(t, 2, "")
	cl := locked.client(t, 2, "s3cret")

	// A key exhausted before the move is exhausted after it, and gone here.
	exhaust(t, cs, "k")
	if got := migrateTo(t, cs, dst, "k"); got != "OK" {
		t.Fatalf("MIGRATE k = %q, want OK", got)
	}
	if n, _ := cs.Exists(ctx, "k").Result(); n != 0 {
		t.Errorf("source EXISTS k = %d after MIGRATE, want 0", n)
	}
	if !exhausted(t, cd, "k") {
		t.Error("target's k not exhausted after the move")
	}

	for _, tc := range []struct {
		name  string
		setup func()
		key   string
		extra []any
		to    *testServer
		want  string
		moved []string // keys that must have left the source
		kept  []string // keys that must still be on the source
	}{
		{name: "nokey", key: "missing", to: dst, want: "NOKEY"},
		{name: "keys", setup: func() { exhaust(t, cs, "a"); exhaust(t, cs, "b") }, key: "", extra: []any{"KEYS", "a", "b", "nope", "a"}, to: dst, want: "OK", moved: []string{"a", "b"}},
		{name: "keys none", key: "", extra: []any{"KEYS", "x", "y"}, to: dst, want: "NOKEY"},
		{name: "keys empty", key: "", extra: []any{"KEYS"}, to: dst, want: "NOKEY"},
		{name: "no keys", key: "", to: dst, want: "NOKEY"},
		{name: "busy", setup: func() { exhaust(t, cs, "k") }, key: "k", to: dst,
			want: "ERR Target instance replied with error: BUSYKEY Target key name already exists.", kept: []string{"k"}},
		{name: "replace", key: "k", extra: []any{"REPLACE"}, to: dst, want: "OK", moved: []string{"k"}},
		{name: "bad auth", setup: func() { exhaust(t, cs, "p") }, key: "p", extra: []any{"AUTH", "wrong"}, to: locked,
			want: "ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.", kept: []string{"p"}},
		{name: "no auth", key: "p", to: locked, want: "ERR Target instance replied with error: NOAUTH Authentication required.", kept: []string{"p"}},
		{name: "auth2", key: "p", extra: []any{"AUTH2", "default", "s3cret"}, to: locked, want: "OK", moved: []string{"p"}},
		{name: "copy", setup: func() { exhaust(t, cs, "c") }, key: "c", extra: []any{"COPY", "AUTH", "s3cret"}, to: locked, want: "OK", kept: []string{"c"}},
		{name: "keys arg", key: "c", extra: []any{"KEYS", "c"}, to: dst, want: "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string", kept: []string{"c"}},
		{name: "syntax", key: "c", extra: []any{"NOPE"}, to: dst, want: "ERR syntax error", kept: []string{"c"}},
		{name: "after copy", key: "c", to: dst, want: "OK", moved: []string{"c"}},
	} {
		if tc.setup != nil {
			tc.setup()
		}
		if got := migrateTo(t, cs, tc.to, tc.key, tc.extra...); got != tc.want {
			t.Errorf("%s: MIGRATE = %q, want %q", tc.name, got, tc.want)
		}
		target := cd
		if tc.to == locked {
			target = cl
		}
		for _, k := range tc.moved {
			if n, _ := cs.Exists(ctx, k).Result(); n != 0 {
				t.Errorf("%s: source still has %s", tc.name, k)
			}
			if !exhausted(t, target, k) {
				t.Errorf("%s: target's %s not exhausted", tc.name, k)
			}
		}
		for _, k := range tc.kept {
			if !exhausted(t, cs, k) {
				t.Errorf("%s: source's %s gone or not exhausted", tc.name, k)
			}
		}
	}
	if !exhausted(t, cl, "c") {
		t.Error("COPY: target's c not exhausted")
	}

	// Unreachable target: nothing moves.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	exhaust(t, cs, "u")
	host, port, _ := net.SplitHostPort(addr)
	if err := cs.Do(ctx, "MIGRATE", host, port, "u", 0, 1000).Err(); err == nil || err.Error() != "IOERR error or timeout connecting to the client" {
		t.Errorf("MIGRATE to a closed port: %v, want IOERR error or timeout connecting to the client", err)
	}
	if !exhausted(t, cs, "u") {
		t.Error("key gone after a failed MIGRATE")
	}
}

// A key left in flight (a MIGRATE that stopped midway) answers TRYAGAIN,
// and the next MIGRATE naming it completes the move: when the target
// already has the key (BUSYKEY: the earlier RESTORE landed, and the key
// may have been used there since), the target's state is kept.
func TestMigrateInFlight(t *testing.T) {
	src, dst := startServer(t, nil), startServer(t, nil)
	ctx := context.Background()
	cs, cd := src.client(t, 2, ""), dst.client(t, 2, "")
	exhaust(t, cs, "f")
	if err := cd.Do(ctx, "CL.THROTTLE", "f", 9, 1, 60).Err(); err != nil { // f landed there and was used
		t.Fatal(err)
	}
	var res shards.Result
	src.store.Exec(&shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{[]byte("f")}}, src.clock.Now(), &res)
	if res.Err != nil || res.N != 1 {
		t.Fatalf("OpMoveOut f: %+v", res)
	}
	if err := cs.Do(ctx, "CL.THROTTLE", "f", 0, 1, 60).Err(); err == nil || err.Error() != "TRYAGAIN Key is being migrated, retry" {
		t.Errorf("CL.THROTTLE of a key in flight: %v, want TRYAGAIN Key is being migrated, retry", err)
	}
	if v, err := cs.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", 0).Result(); err == nil {
		t.Errorf("CLUSTER on a standalone server = %v", v)
	}
	if got := migrateTo(t, cs, dst, "f"); got != "OK" {
		t.Fatalf("MIGRATE f = %q, want OK", got)
	}
	if _, moving := src.store.Moving([]byte("f")); moving {
		t.Error("f still in the source's moving set")
	}
	if v, err := cd.Do(ctx, "CL.THROTTLE", "f", 9, 1, 60, 0).Int64Slice(); err != nil || v[2] != 9 {
		t.Errorf("target's f after the second MIGRATE = %v, %v; want its own state kept (9 left)", v, err)
	}
	// Without a key there, the key in flight is restored as it left.
	exhaust(t, cs, "g")
	src.store.Exec(&shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{[]byte("g")}}, src.clock.Now(), &res)
	if got := migrateTo(t, cs, dst, "g"); got != "OK" {
		t.Fatalf("MIGRATE g = %q, want OK", got)
	}
	if !exhausted(t, cd, "g") {
		t.Error("target's g not the moved (exhausted) state")
	}
}

// A target that takes the RESTORE and closes without answering leaves the
// move's outcome unknown: the key stays in flight (it may be on the
// target), and a later MIGRATE completes the move.
func TestMigrateTargetSilent(t *testing.T) {
	src, dst := startServer(t, nil), startServer(t, nil)
	ctx := context.Background()
	cs, cd := src.client(t, 2, ""), dst.client(t, 2, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 4096)
		_, _ = nc.Read(buf) // the RESTORE arrives, no reply leaves
		nc.Close()
	}()
	exhaust(t, cs, "s")
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if err := cs.Do(ctx, "MIGRATE", host, port, "s", 0, 5000).Err(); err == nil || !strings.HasPrefix(err.Error(), "IOERR error or timeout reading to target instance; 1 key(s) are in flight") {
		t.Fatalf("MIGRATE to a silent target: %v, want IOERR ... 1 key(s) are in flight", err)
	}
	if _, moving := src.store.Moving([]byte("s")); !moving {
		t.Fatal("s not in flight after a move of unknown outcome")
	}
	if err := cs.Do(ctx, "CL.THROTTLE", "s", 0, 1, 60).Err(); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
		t.Errorf("CL.THROTTLE s in flight: %v, want TRYAGAIN", err)
	}
	if got := migrateTo(t, cs, dst, "s"); got != "OK" {
		t.Fatalf("MIGRATE s again = %q, want OK", got)
	}
	if _, moving := src.store.Moving([]byte("s")); moving || !exhausted(t, cd, "s") {
		t.Error("s not moved by the second MIGRATE")
	}
}

// Between two groups: the source sends ASKING before each RESTORE, so the
// target group, importing the slot, takes the key (its op marked Asking).
func TestMigrateBetweenGroups(t *testing.T) {
	key := "{mig}k"
	slot := hashslot.Of([]byte(key))
	groups := func() []cluster.GroupView {
		return []cluster.GroupView{
			{Name: "a", Reachable: true, Slots: [][2]int{{0, 16383}}, Migrating: map[int]string{slot: "b"},
				Members: []cluster.GroupMember{member("a", "a1", 7001, true)}},
			{Name: "b", Reachable: true, Importing: map[int]string{slot: "a"},
				Members: []cluster.GroupMember{member("b", "b1", 7011, true)}},
		}
	}
	src, _ := startRouted(t, newFakeCluster(0, "a1", groups()), nil)
	dst, dstBackend := startRouted(t, newFakeCluster(1, "b1", groups()), nil)
	ctx := context.Background()
	cs, cd := src.client(t, 2, ""), dst.client(t, 2, "")
	exhaust(t, cs, key)
	if err := cd.Do(ctx, "CL.THROTTLE", key, 0, 1, 60).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("target before the move: %v, want MOVED", err)
	}
	if got := migrateTo(t, cs, dst, "", "KEYS", key); got != "OK" {
		t.Fatalf("MIGRATE = %q, want OK", got)
	}
	if !dstBackend.askedFor(key) {
		t.Error("the target's RESTORE did not run as an ASKING op")
	}
	if v, err := cs.Do(ctx, "GET", key).Result(); err == nil || !strings.HasPrefix(err.Error(), "ASK "+strconv.Itoa(slot)+" 127.0.0.1:7011") {
		t.Errorf("source GET after the move = %v, %v; want ASK %d 127.0.0.1:7011", v, err, slot)
	}
	if n := dst.store.Exists([][]byte{[]byte(key)}, dst.clock.Now()); n != 1 {
		t.Errorf("target store has %d of the key, want 1", n)
	}
}

// What the target answers decides where the key is: OK moved it; a
// refusal leaves it here; a TRYAGAIN or CLUSTERDOWN (it may have been
// applied), garbage, a cut, a trickle or nothing leave it in flight, and
// MIGRATE's reply says so.
func TestMigrateTargetReplies(t *testing.T) {
	tests := []struct {
		name     string
		reply    string        // written after the command arrives
		trickle  time.Duration // between bytes of reply
		inFlight bool
		here     bool
		wantErr  string // prefix of MIGRATE's error ("": OK)
	}{
		{"ok", "+OK\r\n", 0, false, false, ""},
		{"busykey", "-BUSYKEY Target key name already exists.\r\n", 0, false, true, "ERR Target instance replied with error: BUSYKEY"},
		{"leadership lost", "-TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied\r\n", 0, true, false,
			"ERR Target instance replied with error: TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied; 1 key(s) are in flight"},
		{"no leader", "-CLUSTERDOWN The cluster is down: no leader\r\n", 0, true, false, "ERR Target instance replied with error: CLUSTERDOWN"},
		{"garbage", "HTTP/1.1 400 Bad Request\r\n\r\n", 0, true, false, "IOERR error or timeout reading to target instance; 1 key(s) are in flight"},
		{"cut", "+O", 0, true, false, "IOERR error or timeout reading to target instance; 1 key(s) are in flight"},
		{"integer", ":1\r\n", 0, true, false, "IOERR error or timeout reading to target instance; 1 key(s) are in flight"},
		{"trickle", "+OK\r\n", 400 * time.Millisecond, true, false, "IOERR error or timeout reading to target instance; 1 key(s) are in flight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startServer(t, nil)
			cs := src.client(t, 2, "")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				_, _ = nc.Read(make([]byte, 4096))
				for i := range tt.reply {
					if tt.trickle > 0 {
						time.Sleep(tt.trickle)
					}
					if _, err := nc.Write([]byte{tt.reply[i]}); err != nil {
						return
					}
				}
				_, _ = nc.Read(make([]byte, 1)) // until MIGRATE closes
			}()
			exhaust(t, cs, "k")
			host, port, _ := net.SplitHostPort(ln.Addr().String())
			err = cs.Do(context.Background(), "MIGRATE", host, port, "k", 0, 1000).Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("MIGRATE = %v, want OK", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Errorf("MIGRATE = %v, want %q…", err, tt.wantErr)
			}
			if _, moving := src.store.Moving([]byte("k")); moving != tt.inFlight {
				t.Errorf("key in flight = %v, want %v", moving, tt.inFlight)
			}
			if tt.inFlight {
				if err := cs.Do(context.Background(), "CL.THROTTLE", "k", 0, 1, 60).Err(); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
					t.Errorf("CL.THROTTLE of the key in flight = %v, want TRYAGAIN", err)
				}
			} else if here := exhausted(t, cs, "k"); here != tt.here {
				t.Errorf("key here and exhausted = %v, want %v", here, tt.here)
			}
		})
	}
}

// scriptedTarget listens on loopback and answers its n-th connection with
// replies[min(n, len-1)] once the request arrives ("" reads until the
// connection closes, answering nothing). It returns its port, and the
// requests it got, one per connection.
func scriptedTarget(t *testing.T, replies []string) (int, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var got []string
	go func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			reply := replies[min(n, len(replies)-1)]
			go func() {
				defer nc.Close()
				buf := make([]byte, 4096)
				m, _ := nc.Read(buf)
				mu.Lock()
				got = append(got, string(buf[:m]))
				mu.Unlock()
				if reply != "" {
					_, _ = nc.Write([]byte(reply))
				}
				_, _ = io.Copy(io.Discard, nc) // until MIGRATE closes
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}

// MIGRATE to a member of the group importing the slot: a RESTORE the member
// answered with "could not tell" (leadership changed, no leader) is sent
// again, without REPLACE, to the same member, and keys that could not be
// sent (the member refuses connections) go to the group's next member,
// within one more timeout; BUSYKEY then means the first one landed. A
// refusal is not retried, nor is a RESTORE whose reply never came (it may
// still land). MIGRATE's reply says where the key is.
func TestMigrateResendsWithinImportingGroup(t *testing.T) {
	const (
		ok       = "+OK\r\n+OK\r\n" // ASKING, RESTORE
		tryagain = "+OK\r\n-TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied\r\n"
		busy     = "+OK\r\n-BUSYKEY Target key name already exists.\r\n"
		refuse   = "+OK\r\n-ERR no such thing\r\n"
		silent   = ""
	)
	tests := []struct {
		name            string
		first, second   []string // the replies of b's two members, per connection (nil: refuses connections)
		wantErr         string   // prefix of MIGRATE's error ("": OK)
		inFlight, here  bool
		firstN, secondN int // connections each member got (-1: at least 2)
	}{
		{"leadership lost then ok", []string{tryagain, ok}, []string{ok}, "", false, false, 2, 0},
		{"leadership lost then busykey", []string{tryagain, busy}, []string{ok}, "", false, false, 2, 0},
		{"unreachable then the next member", nil, []string{ok}, "", false, false, 0, 1},
		{"silent", []string{silent}, []string{ok}, "IOERR error or timeout reading to target instance; 1 key(s) are in flight", true, false, 1, 0},
		{"refused", []string{refuse}, []string{ok}, "ERR Target instance replied with error: ERR no such thing", false, true, 1, 0},
		{"leadership lost throughout", []string{tryagain}, []string{ok}, "ERR Target instance replied with error: TRYAGAIN Leadership changed", true, false, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "{resend}k"
			slot := hashslot.Of([]byte(key))
			p1, got1 := closedPort(t), func() []string { return nil }
			if tt.first != nil {
				p1, got1 = scriptedTarget(t, tt.first)
			}
			p2, got2 := scriptedTarget(t, tt.second)
			groups := []cluster.GroupView{
				{Name: "a", Reachable: true, Slots: [][2]int{{0, 16383}}, Migrating: map[int]string{slot: "b"},
					Members: []cluster.GroupMember{member("a", "a1", 7001, true)}},
				{Name: "b", Reachable: true, Importing: map[int]string{slot: "a"},
					Members: []cluster.GroupMember{member("b", "b1", p1, true), member("b", "b2", p2, false)}},
			}
			src, _ := startRouted(t, newFakeCluster(0, "a1", groups), nil)
			cs := src.client(t, 2, "")
			exhaust(t, cs, key)
			err := cs.Do(context.Background(), "MIGRATE", "127.0.0.1", p1, "", 0, 1000, "REPLACE", "KEYS", key).Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("MIGRATE = %v, want OK", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Errorf("MIGRATE = %v, want %q…", err, tt.wantErr)
			}
			if tt.inFlight && (err == nil || !strings.Contains(err.Error(), "1 key(s) are in flight")) {
				t.Errorf("MIGRATE = %v, want it to say the key is in flight", err)
			}
			if _, moving := src.store.Moving([]byte(key)); moving != tt.inFlight {
				t.Errorf("key in flight = %v, want %v", moving, tt.inFlight)
			}
			if !tt.inFlight {
				if here := exhausted(t, cs, key); here != tt.here {
					t.Errorf("key here and exhausted = %v, want %v", here, tt.here)
				}
			}
			r1, r2 := got1(), got2()
			if n := len(r1); (tt.firstN >= 0 && n != tt.firstN) || (tt.firstN < 0 && n < 2) {
				t.Errorf("b1 got %d connections, want %d (-1: at least 2)", n, tt.firstN)
			}
			if len(r2) != tt.secondN {
				t.Errorf("b2 got %d connections, want %d", len(r2), tt.secondN)
			}
			for _, req := range append(r1, r2...) {
				if !strings.Contains(req, "ASKING") || !strings.Contains(req, "RESTORE") {
					t.Errorf("request %q: want ASKING and RESTORE", req)
				}
				if strings.Contains(strings.ToUpper(req), "REPLACE") {
					t.Errorf("request %q: RESTORE with REPLACE to the importing group (its copy can only have come from here)", req)
				}
			}
		})
	}
}
