package resp

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/cluster"
)

// reply reads one whole reply and renders it compactly: +simple, -error,
// :int, $bulk, nil, [elements, ...] (RESP3 maps as [k, v, ...]).
func (rc *rawConn) reply(t *testing.T) string {
	t.Helper()
	l := rc.line(t)
	switch l[0] {
	case '*', '%', '~', '>':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "nil"
		}
		if l[0] == '%' {
			n *= 2
		}
		parts := make([]string, n)
		for i := range parts {
			parts[i] = rc.reply(t)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case '$':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "nil"
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, b); err != nil {
			t.Fatalf("read bulk: %v", err)
		}
		return "$" + string(b[:n])
	case '_':
		return "nil"
	}
	return l
}

const (
	execAbort = "-EXECABORT Transaction discarded because of previous errors."
	allowed1  = "[:0,:1,:0,:-1,:60]" // CL.THROTTLE k 0 1 60 on a fresh key
	limited1  = "[:1,:1,:0,:60,:60]" // the same, once more
)

func TestTransactions(t *testing.T) {
	thr := func(k string, rest ...string) string {
		return cmd(append([]string{"CL.THROTTLE", k, "0", "1", "60"}, rest...)...)
	}
	for _, tc := range []struct {
		name  string
		in    string   // one batch
		want  []string // its replies
		after []string // then these commands (space separated) ...
		then  []string // ... answer these
	}{
		{"allowed then limited", cmd("MULTI") + thr("tx") + thr("tx") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "[" + allowed1 + "," + limited1 + "]"},
			[]string{"CL.THROTTLE tx 0 1 60"}, []string{limited1}},
		{"arity aborts", cmd("MULTI") + thr("tx") + cmd("CL.THROTTLE", "tx") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "-ERR wrong number of arguments for 'cl.throttle' command", execAbort},
			[]string{"EXISTS tx"}, []string{":0"}},
		{"unknown aborts", cmd("MULTI") + thr("tx") + cmd("NOSUCH", "x") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' ", execAbort},
			[]string{"EXISTS tx"}, []string{":0"}},
		{"unknown subcommand aborts", cmd("MULTI") + thr("tx") + cmd("CONFIG", "NOSUCH") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "-ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.", execAbort},
			[]string{"EXISTS tx"}, []string{":0"}},
		{"not allowed aborts", cmd("MULTI") + thr("tx") + cmd("SHUTDOWN") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "-ERR Command not allowed inside a transaction", execAbort},
			[]string{"EXISTS tx", "PING"}, []string{":0", "+PONG"}},
		{"discard", cmd("MULTI") + thr("tx") + cmd("DISCARD"),
			[]string{"+OK", "+QUEUED", "+OK"},
			[]string{"EXISTS tx", "EXEC"}, []string{":0", "-ERR EXEC without MULTI"}},
		{"nested", cmd("MULTI") + cmd("MULTI") + thr("tx") + cmd("EXEC"),
			[]string{"+OK", "-ERR MULTI calls can not be nested", "+QUEUED", "[" + allowed1 + "]"}, nil, nil},
		{"exec without multi", cmd("EXEC") + cmd("DISCARD"),
			[]string{"-ERR EXEC without MULTI", "-ERR DISCARD without MULTI"}, nil, nil},
		{"empty", cmd("MULTI") + cmd("EXEC"), []string{"+OK", "[]"}, nil, nil},
		{"watch", cmd("WATCH", "tx") + cmd("MULTI") + cmd("WATCH", "tx") + thr("tx") + cmd("UNWATCH") + cmd("EXEC"),
			[]string{"-ERR WATCH is not supported: a transaction's writes are applied as one atomic step; use CL.THROTTLEALL or one transaction instead of check-and-set",
				"+OK", "-ERR WATCH inside MULTI is not allowed", "+QUEUED", "+QUEUED", "[" + allowed1 + ",+OK]"}, nil, nil},
		{"runtime error in its slot", cmd("MULTI") + thr("tx") + cmd("CL.THROTTLE", "tx", "x", "1", "60") + thr("tx") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "[" + allowed1 + ",-ERR value is not an integer or out of range," + limited1 + "]"}, nil, nil},
		{"reads in order", cmd("MULTI") + cmd("EXISTS", "tx") + cmd("PING") + thr("tx") + cmd("DEL", "tx") + thr("tx") + cmd("EXISTS", "tx") + cmd("GET", "nokey") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED",
				"[:0,+PONG," + allowed1 + ",:1," + allowed1 + ",:1,nil]"}, nil, nil},
		{"read between writes aborts", cmd("MULTI") + thr("tx") + cmd("TTL", "tx") + thr("tx") + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED",
				"-ERR a transaction cannot read the keyspace between two writes (its writes are applied as one step): put reads before the first write or after the last", execAbort},
			[]string{"EXISTS tx"}, []string{":0"}},
		{"quit inside", cmd("MULTI") + thr("tx") + cmd("QUIT"), []string{"+OK", "+QUEUED", "+OK"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, nil)
			rc := ts.raw(t)
			rc.send(t, tc.in)
			for i, want := range tc.want {
				if got := rc.reply(t); got != want {
					t.Fatalf("reply %d = %s, want %s", i, got, want)
				}
			}
			rc2 := ts.raw(t)
			for i, c := range tc.after {
				rc2.send(t, cmd(strings.Fields(c)...))
				if got := rc2.reply(t); got != tc.then[i] {
					t.Fatalf("%s = %s, want %s", c, got, tc.then[i])
				}
			}
			if tc.name == "quit inside" {
				rc.expectClosed(t)
				rc2.send(t, cmd("EXISTS", "tx"))
				if got := rc2.reply(t); got != ":0" {
					t.Fatalf("after QUIT inside MULTI: EXISTS = %s, want :0", got)
				}
			}
		})
	}
}

// TestTransactionRESP3 runs a transaction after HELLO 3.
func TestTransactionRESP3(t *testing.T) {
	ts := startServer(t, nil)
	rc := ts.raw(t)
	rc.send(t, cmd("HELLO", "3"))
	rc.reply(t)
	rc.send(t, cmd("MULTI")+cmd("GET", "none")+cmd("CL.THROTTLE", "tx", "0", "1", "60")+cmd("CL.THROTTLE", "tx", "0", "1", "60")+cmd("EXEC"))
	want := []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "[nil," + allowed1 + "," + limited1 + "]"}
	for i, w := range want {
		if got := rc.reply(t); got != w {
			t.Fatalf("reply %d = %s, want %s", i, got, w)
		}
	}
}

// TestTransactionClosedMidway: a connection that closes inside MULTI runs
// nothing of its queue.
func TestTransactionClosedMidway(t *testing.T) {
	ts := startServer(t, nil)
	rc := ts.raw(t)
	rc.send(t, cmd("MULTI")+cmd("CL.THROTTLE", "tx", "0", "1", "60"))
	for _, w := range []string{"+OK", "+QUEUED"} {
		if got := rc.reply(t); got != w {
			t.Fatalf("got %s, want %s", got, w)
		}
	}
	rc.Close()
	rc2 := ts.raw(t)
	rc2.send(t, cmd("CL.THROTTLE", "tx", "0", "1", "60"))
	if got := rc2.reply(t); got != allowed1 {
		t.Fatalf("after a closed transaction: %s, want the fresh key's %s", got, allowed1)
	}
}

// TestTransactionAuth: MULTI needs authentication like any command; AUTH
// queued inside runs at EXEC.
func TestTransactionAuth(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.RequirePass = "pw" })
	rc := ts.raw(t)
	rc.send(t, cmd("MULTI")+cmd("CL.THROTTLE", "tx", "0", "1", "60")+cmd("EXEC")+
		cmd("AUTH", "pw")+cmd("MULTI")+cmd("AUTH", "bad")+cmd("CL.THROTTLE", "tx", "0", "1", "60")+cmd("EXEC"))
	want := []string{"-NOAUTH Authentication required.", "-NOAUTH Authentication required.", "-NOAUTH Authentication required.",
		"+OK", "+OK", "+QUEUED", "+QUEUED", "[-WRONGPASS invalid username-password pair or user is disabled.," + allowed1 + "]"}
	for i, w := range want {
		if got := rc.reply(t); got != w {
			t.Fatalf("reply %d = %s, want %s", i, got, w)
		}
	}
}

// TestTransactionQueueBounded: the queued commands count against
// client-query-buffer-limit; past it the queue is dropped and EXEC aborts.
func TestTransactionQueueBounded(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.QueryBufferLimit = 1 << 20; c.TxMaxBytes = 16 << 20 })
	rc := ts.raw(t)
	rc.send(t, cmd("MULTI"))
	if got := rc.reply(t); got != "+OK" {
		t.Fatal(got)
	}
	big := strings.Repeat("x", 100<<10)
	refused := -1
	for i := 0; i < 20 && refused < 0; i++ {
		rc.send(t, cmd("ECHO", big))
		switch got := rc.reply(t); got {
		case "+QUEUED":
		case "-ERR transaction discarded: more than 1048576 bytes queued (client-query-buffer-limit); split it into smaller transactions or raise the setting":
			refused = i
		default:
			t.Fatalf("ECHO %d: %.80s", i, got)
		}
	}
	if refused < 9 || refused > 10 {
		t.Fatalf("refused at command %d, want the 10th or 11th (1 MiB of 100 KiB arguments)", refused)
	}
	// The queue was let go of at once.
	if line := clientLine(t, ts, rc); !strings.Contains(line, " flags=x ") || !strings.Contains(line, " multi=0 ") || !strings.Contains(line, " multi-mem=0 ") {
		t.Fatalf("CLIENT LIST after the refusal: %s", line)
	}
	rc.send(t, cmd("EXEC"))
	if got := rc.reply(t); got != execAbort {
		t.Fatalf("EXEC = %s, want EXECABORT", got)
	}
}

// TestTransactionAtomicStandalone: no other client's write lands between
// a transaction's writes. Pipelined pairs of throttles on a and b race
// with transactions of the same pair: every transaction sees both keys at
// the same count.
func TestTransactionAtomicStandalone(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	const rounds = 300
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ts.client(t, 2, "")
			for i := 0; i < rounds; i++ {
				_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.Do(ctx, "CL.THROTTLE", "{t}a", 1000000, 1, 3600)
					p.Do(ctx, "CL.THROTTLE", "{t}b", 1000000, 1, 3600)
					return nil
				})
			}
		}()
	}
	c := ts.client(t, 2, "")
	for i := 0; i < rounds; i++ {
		var a, b *redis.Cmd
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			a = p.Do(ctx, "CL.THROTTLE", "{t}a", 1000000, 1, 3600)
			b = p.Do(ctx, "CL.THROTTLE", "{t}b", 1000000, 1, 3600)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ra, rb := fmt.Sprint(a.Val()), fmt.Sprint(b.Val())
		if ra != rb {
			t.Fatalf("transaction %d saw a=%s b=%s: another write landed between its writes", i, ra, rb)
		}
	}
	wg.Wait()
}

// TestTransactionClusterRouting: in a sharded cluster, each queued
// command's own keys are checked at queue time (MOVED, CROSSSLOT abort the
// transaction) and all keys of the transaction at EXEC (CROSSSLOT).
func TestTransactionClusterRouting(t *testing.T) {
	fc := twoGroups() // a (here) owns 0-8191, migrating 100 to b; b the rest
	fc.groups[0].Importing = map[int]string{9000: "b"}
	fc.rebuild()
	mine, mine2 := keyOfSlot(t, 5), keyOfSlot(t, 6)
	theirs := "foo" // 12182
	mig, imp := keyOfSlot(t, 100), keyOfSlot(t, 9000)
	here, gone := "{"+mig+"}here", "{"+mig+"}gone"
	ts, be := startRouted(t, fc, nil)
	pre := ts.raw(t)
	pre.send(t, cmd("CL.THROTTLE", here, "0", "1", "60"))
	if got := pre.reply(t); got != allowed1 {
		t.Fatal(got)
	}
	thr := func(k string) string { return cmd("CL.THROTTLE", k, "0", "1", "60") }
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"one slot", cmd("MULTI") + thr(mine) + cmd("GET", mine) + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "[" + allowed1 + ",$"}},
		{"crossslot across commands", cmd("MULTI") + thr(mine) + thr(mine2) + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "-CROSSSLOT Keys in request don't hash to the same slot"}},
		{"moved at queue time", cmd("MULTI") + thr(theirs) + cmd("EXEC"),
			[]string{"+OK", "-MOVED 12182 127.0.0.1:7011", execAbort}},
		{"crossslot in one command", cmd("MULTI") + cmd("EXISTS", mine, theirs) + cmd("EXEC"),
			[]string{"+OK", "-CROSSSLOT Keys in request don't hash to the same slot", execAbort}},
		{"migrating, keys gone", cmd("MULTI") + thr(gone) + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "-ASK 100 127.0.0.1:7011"}},
		{"migrating, keys split", cmd("MULTI") + thr(here) + thr(gone) + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "-TRYAGAIN Multiple keys request during rehashing of slot"}},
		{"migrating, keys here", cmd("MULTI") + thr(here) + cmd("EXISTS", here) + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "[" + limited1 + ",:1]"}},
		{"importing without asking", cmd("MULTI") + thr(imp) + cmd("EXEC"),
			[]string{"+OK", "-MOVED 9000 127.0.0.1:7011", execAbort}},
		{"importing, asking queued", cmd("MULTI") + cmd("ASKING") + thr(imp) + cmd("EXEC"),
			[]string{"+OK", "+QUEUED", "+QUEUED", "[+OK," + allowed1 + "]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.raw(t)
			rc.send(t, tc.in)
			for i, want := range tc.want {
				got := rc.reply(t)
				if want == "$" || strings.HasSuffix(want, ",$") {
					if !strings.HasPrefix(got, strings.TrimSuffix(want, "$")) {
						t.Fatalf("reply %d = %s, want %s…", i, got, want)
					}
					continue
				}
				if got != want {
					t.Fatalf("reply %d = %s, want %s", i, got, want)
				}
			}
		})
	}
	// Nothing of the refused transactions ran.
	for _, k := range []string{mine2, gone} {
		if n := ts.store.Exists([][]byte{[]byte(k)}, ts.clock.Now()); n != 0 {
			t.Fatalf("%s exists: a discarded transaction ran", k)
		}
	}
	if !be.askedFor(imp) {
		t.Fatal("the write queued after ASKING was not sent as an ASKING op")
	}
}

// TestTransactionSlotChanges: queued CLUSTER slot changes are one
// ChangeSlots call, each answered in its place.
func TestTransactionSlotChanges(t *testing.T) {
	fc := twoGroups()
	ts := startServer(t, func(c *Config) { c.Cluster = fc })
	b1 := cluster.NodeID("b", "b1")
	rc := ts.raw(t)
	// What redis-cli --cluster fix sends to give a slot an owner, then
	// more: refusals answer in their place.
	rc.send(t, cmd("MULTI")+cmd("CLUSTER", "DELSLOTS", "100")+cmd("CLUSTER", "ADDSLOTS", "100")+cmd("CLUSTER", "DELSLOTS", "9000")+
		cmd("CLUSTER", "SETSLOT", "100", "STABLE")+cmd("CLUSTER", "BUMPEPOCH")+cmd("CLUSTER", "SETSLOT", "101", "NODE", "nosuch")+cmd("CLUSTER", "SETSLOT", "102", "MIGRATING", b1)+cmd("EXEC"))
	want := []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED",
		"[+OK,+OK,-ERR Slot 9000 is already unassigned,+OK,+STILL 3,-ERR I don't know about node nosuch,+OK]"}
	for i, w := range want {
		if got := rc.reply(t); got != w {
			t.Fatalf("reply %d = %s, want %s", i, got, w)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.lists) != 1 || len(fc.lists[0]) != 6 {
		t.Fatalf("ChangeSlots calls: %v, want one of 6 changes", fc.lists)
	}
	if g := fc.owner[100]; g != 0 {
		t.Fatalf("slot 100 owned by group %d after DELSLOTS+ADDSLOTS, want 0", g)
	}
}

// clientLine returns the CLIENT LIST line of rc's connection, asked over
// another connection.
func clientLine(t *testing.T, ts *testServer, rc *rawConn) string {
	t.Helper()
	other := ts.raw(t)
	other.send(t, cmd("CLIENT", "LIST"))
	list := other.reply(t)
	local := rc.LocalAddr().String()
	for _, l := range strings.Split(strings.TrimPrefix(list, "$"), "\n") {
		if strings.Contains(l, " addr="+local+" ") {
			return l
		}
	}
	t.Fatalf("no CLIENT LIST line for %s in %q", local, list)
	return ""
}

// TestTransactionClientList: CLIENT LIST shows a client inside MULTI (flag
// x, multi=<queued>, multi-mem) as Redis does.
func TestTransactionClientList(t *testing.T) {
	ts := startServer(t, nil)
	rc := ts.raw(t)
	has := func(want ...string) {
		t.Helper()
		line := clientLine(t, ts, rc)
		for _, w := range want {
			if !strings.Contains(line, " "+w+" ") {
				t.Fatalf("CLIENT LIST line %q lacks %q", line, w)
			}
		}
	}
	has("flags=N", "multi=-1", "multi-mem=0")
	rc.send(t, cmd("MULTI")+cmd("PING")+cmd("ECHO", "abc"))
	for range 3 {
		rc.reply(t)
	}
	// PING: 64 + 4 + 24; ECHO abc: 64 + 4 + 24 + 3 + 24.
	has("flags=x", "multi=2", "multi-mem=211")
	rc.send(t, cmd("EXEC"))
	if got := rc.reply(t); got != "[+PONG,$abc]" {
		t.Fatalf("EXEC = %s", got)
	}
	has("flags=N", "multi=-1", "multi-mem=0")
}
