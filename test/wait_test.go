package test

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// waitModes are the two ways a server serves plaintext clients: event loops
// (a waiting reply is woken by the server's timer heap) and a goroutine per
// connection (it waits on its goroutine).
var waitModes = []struct {
	name string
	args []string
}{
	{"event-loops", nil},
	{"goroutine-per-client", []string{"--io-event-loops", "no"}},
}

// waitCommands admit one request per step once their single unit is
// taken (the command without the key). The window limiters' turns are
// epoch-aligned (aligned): a fixed window of 100 ms admits one per window,
// a sliding window of 100 ms and limit 1 one per 200 ms (the unit of the
// window before weighs until that window's end), so the first turn after
// a head request anywhere in its window can come at once; headReply
// aligns the head on a turn.
var waitCommands = []struct {
	name    string
	args    []string
	step    time.Duration
	aligned bool
}{
	{"CL.THROTTLE", []string{"CL.THROTTLE", "", "0", "10", "1", "1"}, 100 * time.Millisecond, false},
	{"TB.TAKE", []string{"TB.TAKE", "", "1", "1", "100ms", "1"}, 100 * time.Millisecond, false},
	{"LB.ADD", []string{"LB.ADD", "", "1", "1", "100ms", "1"}, 100 * time.Millisecond, false},
	{"FW.INCR", []string{"FW.INCR", "", "1", "100ms", "1"}, 100 * time.Millisecond, true},
	{"SW.INCR", []string{"SW.INCR", "", "1", "100ms", "1"}, 200 * time.Millisecond, true},
	{"SL.ADD", []string{"SL.ADD", "", "1", "100ms", "1"}, 100 * time.Millisecond, false},
}

// headReply sends the head request of a line on key through c and returns
// its reply, allowed: for an aligned command, a request that takes the
// current window's unit and then one that waits for the next turn, so
// that the turns after the head's reply come one step apart from it.
func headReply(t *testing.T, c *rawClient, args []string, aligned bool, key string) timedReply {
	t.Helper()
	if aligned {
		c.send(withKey(args, key)...)
		if r := c.next(); r.err != "" || len(r.ints) < 5 {
			t.Fatalf("request before the head: %v %q", r.ints, r.err)
		}
		c.send(withKey(args, key, "WAIT", "2")...)
	} else {
		c.send(withKey(args, key)...)
	}
	r := c.next()
	if r.err != "" || len(r.ints) < 5 || r.ints[0] != 0 {
		t.Fatalf("head request: %v %q, want allowed", r.ints, r.err)
	}
	return r
}

// rawClient is one connection speaking RESP by hand, so that a test sees
// exactly when each reply arrives.
type rawClient struct {
	t       *testing.T
	conn    net.Conn
	replies chan timedReply
}

type timedReply struct {
	at    time.Time
	ints  []int64
	err   string
	fault error
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c := &rawClient{t: t, conn: conn, replies: make(chan timedReply, 16)}
	t.Cleanup(func() { conn.Close() })
	go c.read()
	return c
}

// read delivers every reply (an array of integers or an error) with the
// instant it arrived, until the connection ends.
func (c *rawClient) read() {
	defer close(c.replies)
	r := bufio.NewReader(c.conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		at := time.Now()
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "-"):
			c.replies <- timedReply{at: at, err: line[1:]}
		case strings.HasPrefix(line, "+"):
			c.replies <- timedReply{at: at, err: ""}
		case strings.HasPrefix(line, "*"):
			n, _ := strconv.Atoi(line[1:])
			rep := timedReply{at: at}
			for range n {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				v, err := strconv.ParseInt(strings.TrimRight(l, "\r\n")[1:], 10, 64)
				if err != nil {
					rep.fault = fmt.Errorf("reply element %q: %v", l, err)
				}
				rep.ints = append(rep.ints, v)
			}
			c.replies <- rep
		default:
			c.replies <- timedReply{at: at, fault: fmt.Errorf("unexpected reply line %q", line)}
		}
	}
}

// send writes one command.
func (c *rawClient) send(args ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.conn.Write([]byte(b.String())); err != nil {
		c.t.Fatalf("send %q: %v", args, err)
	}
}

// next returns the next reply, failing the test after a generous timeout.
func (c *rawClient) next() timedReply {
	c.t.Helper()
	select {
	case r, ok := <-c.replies:
		if !ok {
			c.t.Fatalf("connection closed before a reply")
		}
		if r.fault != nil {
			c.t.Fatal(r.fault)
		}
		return r
	case <-time.After(10 * time.Second):
		c.t.Fatalf("no reply within 10s")
	}
	return timedReply{}
}

// infoClients holds one INFO connection per server, so that polling the
// waiting requests costs one round trip.
var infoClients sync.Map // *server → *redis.Client

// blockedClients returns INFO's blocked_clients: the requests waiting now.
func blockedClients(t *testing.T, s *server) int {
	t.Helper()
	ic, ok := infoClients.Load(s)
	if !ok {
		c := s.client(t, 2)
		t.Cleanup(func() { infoClients.Delete(s) })
		ic = c
		infoClients.Store(s, c)
	}
	info, err := ic.(*redis.Client).Info(ctxT(t), "clients").Result()
	if err != nil {
		t.Fatalf("INFO clients: %v", err)
	}
	n, err := strconv.Atoi(parseInfo(info)["blocked_clients"])
	if err != nil {
		t.Fatalf("INFO clients: blocked_clients: %v in %q", err, info)
	}
	return n
}

// waitBlocked polls until n requests wait on s.
func waitBlocked(t *testing.T, s *server, n int) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		if got := blockedClients(t, s); got != n {
			return fmt.Errorf("blocked_clients = %d, want %d", got, n)
		}
		return nil
	})
}

// withKey returns the command with key and the trailing arguments.
func withKey(cmd []string, key string, more ...string) []string {
	out := append([]string(nil), cmd...)
	out[1] = key
	return append(out, more...)
}

// Six clients on a key admitting one request per 100 ms (a sliding
// window: 200 ms), each with WAIT 2: all are allowed, their replies one
// step apart (±60 ms) in the order the requests arrived; a seventh with
// WAIT 50ms is refused at once and consumes nothing (the next waiter's
// turn is one step after the sixth's).
func TestWaitInLine(t *testing.T) {
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			s := startServer(t, append([]string{"--save", ""}, mode.args...)...)
			for _, cmd := range waitCommands {
				t.Run(cmd.name, func(t *testing.T) {
					key := "line:" + cmd.name
					clients := make([]*rawClient, 6)
					for i := range clients {
						clients[i] = dialRaw(t, s.Addr)
					}
					// In arrival order: each request is in line before
					// the next is sent. The first is the head.
					first := headReply(t, clients[0], cmd.args, cmd.aligned, key)
					for i, c := range clients[1:] {
						c.send(withKey(cmd.args, key, "WAIT", "2")...)
						waitBlocked(t, s, i+1)
					}
					seventh, eighth := dialRaw(t, s.Addr), dialRaw(t, s.Addr)
					seventh.send(withKey(cmd.args, key, "WAIT", "50ms")...)
					refused := seventh.next()
					if len(refused.ints) < 4 || refused.ints[0] != 1 || refused.ints[3] <= 0 {
						t.Fatalf("seventh with WAIT 50ms = %v %q, want limited with retry_after > 0", refused.ints, refused.err)
					}
					// An eighth waiter takes the turn after the sixth's:
					// the seventh consumed nothing.
					eighth.send(withKey(cmd.args, key, "WAIT", "2")...)
					waitBlocked(t, s, 6)

					at := []time.Time{first.at}
					for i, c := range append(clients[1:], eighth) {
						r := c.next()
						if r.err != "" || len(r.ints) < 5 || r.ints[0] != 0 {
							t.Fatalf("client %d: %v %q, want allowed", i+2, r.ints, r.err)
						}
						at = append(at, r.at)
					}
					for i := 1; i < len(at); i++ {
						gap := at[i].Sub(at[i-1])
						if gap < cmd.step-60*time.Millisecond || gap > cmd.step+60*time.Millisecond {
							t.Errorf("reply %d came %v after reply %d, want %v ±60ms (all: %v)", i+1, gap, i, cmd.step, gaps(at))
						}
					}
				})
			}
		})
	}
}

func gaps(at []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(at); i++ {
		out = append(out, at[i].Sub(at[i-1]).Round(time.Millisecond))
	}
	return out
}

// A client that disconnects while waiting keeps its place consumed: the key
// never admits more than its limit, and a later waiter takes the turn after
// every reservation, the departed ones' included.
func TestWaitDisconnect(t *testing.T) {
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			s := startServer(t, append([]string{"--save", ""}, mode.args...)...)
			for _, cmd := range waitCommands {
				t.Run(cmd.name, func(t *testing.T) {
					key := "gone:" + cmd.name
					first := headReply(t, dialRaw(t, s.Addr), cmd.args, cmd.aligned, key)
					// Four wait, with turns one to four steps on; two of
					// them leave at once.
					var waiters []*rawClient
					for i := range 4 {
						c := dialRaw(t, s.Addr)
						c.send(withKey(cmd.args, key, "WAIT", "2")...)
						waitBlocked(t, s, i+1)
						waiters = append(waiters, c)
					}
					waiters[1].conn.Close()
					waiters[2].conn.Close()
					waitBlocked(t, s, 2)
					last := dialRaw(t, s.Addr)
					last.send(withKey(cmd.args, key, "WAIT", "2")...)
					waitBlocked(t, s, 3)
					// Until the last waiter's turn, nothing else is
					// admitted: the departed clients' turns stay taken.
					probe := s.client(t, 2)
					done := make(chan timedReply, 1)
					go func() {
						select {
						case r, ok := <-last.replies:
							if ok {
								done <- r
							}
						case <-time.After(10 * time.Second):
						}
						close(done)
					}()
					probes := 0
				loop:
					for {
						select {
						case r, ok := <-done:
							if !ok || r.err != "" || len(r.ints) < 5 || r.ints[0] != 0 {
								t.Fatalf("last waiter = %v %q (ok %v), want allowed", r.ints, r.err, ok)
							}
							if d := r.at.Sub(first.at); d < 5*cmd.step-60*time.Millisecond || d > 5*cmd.step+300*time.Millisecond {
								t.Errorf("last waiter answered %v after the first request, want about %v (its turn after four reservations)", d, 5*cmd.step)
							}
							break loop
						default:
						}
						args := make([]any, 0, 6)
						for _, a := range withKey(cmd.args, key) {
							args = append(args, a)
						}
						v, err := probe.Do(ctxT(t), args...).Result()
						if err != nil {
							t.Fatalf("probe: %v", err)
						}
						if r := ints(t, v); r[0] == 0 && blockedClients(t, s) > 0 {
							t.Fatalf("a request without WAIT was admitted while waiters still hold turns: %v", r)
						}
						probes++
						time.Sleep(10 * time.Millisecond) // pacing the probes, not synchronisation
					}
					if probes == 0 {
						t.Fatalf("no probe ran")
					}
					for _, i := range []int{0, 3} {
						if r := waiters[i].next(); r.ints[0] != 0 {
							t.Errorf("waiter %d = %v, want allowed", i+1, r.ints)
						}
					}
				})
			}
		})
	}
}

// WAIT inside MULTI is refused at queue time and the transaction aborts,
// for every limiter command; max-waiting bounds the waiting requests.
func TestWaitRefusals(t *testing.T) {
	s := startServer(t, "--save", "", "--max-waiting", "1")
	c := dialRaw(t, s.Addr)
	for _, cmd := range waitCommands {
		c.send("MULTI")
		c.next()
		c.send(withKey(cmd.args, "m:"+cmd.name, "WAIT", "1")...)
		if r := c.next(); !strings.Contains(r.err, "WAIT is not allowed inside MULTI") {
			t.Errorf("%s with WAIT inside MULTI = %v %q, want the MULTI refusal", cmd.name, r.ints, r.err)
		}
		c.send("EXEC")
		if r := c.next(); !strings.HasPrefix(r.err, "EXECABORT") {
			t.Errorf("%s: EXEC = %q, want EXECABORT", cmd.name, r.err)
		}
	}
	c.send("FW.INCR", "f", "5", "1s", "1", "WAIT", "1s")
	if r := c.next(); r.err != "" || len(r.ints) != 5 || r.ints[0] != 0 {
		t.Errorf("FW.INCR with WAIT on a fresh key = %v %q, want allowed at once", r.ints, r.err)
	}
	c.send("CL.THROTTLE", "m", "0", "10", "1", "1", "WAIT", "-1")
	if r := c.next(); r.err != "ERR WAIT -1 is out of range: must be 0..1d" {
		t.Errorf("WAIT -1 = %q", r.err)
	}
	// max-waiting 1: one waits, the next waiter is refused, consuming
	// nothing; a request without WAIT is unaffected.
	c.send("CL.THROTTLE", "mw", "0", "10", "1", "1")
	c.next()
	w := dialRaw(t, s.Addr)
	w.send("CL.THROTTLE", "mw", "0", "10", "1", "1", "WAIT", "2")
	waitBlocked(t, s, 1)
	c.send("CL.THROTTLE", "mw", "0", "10", "1", "1", "WAIT", "2")
	if r := c.next(); !strings.Contains(r.err, "max-waiting") {
		t.Errorf("past max-waiting = %v %q, want the max-waiting refusal", r.ints, r.err)
	}
	if r := w.next(); r.ints[0] != 0 {
		t.Errorf("the waiter = %v, want allowed", r.ints)
	}
	// A shadowed refusal (limit-shadow) is answered allowed at once and
	// never waits.
	if r, err := s.client(t, 2).ConfigSet(ctxT(t), "limit-shadow", "sh:*").Result(); err != nil {
		t.Fatalf("CONFIG SET limit-shadow = %v, %v", r, err)
	}
	c.send("CL.THROTTLE", "sh:1", "0", "1", "1")
	c.next()
	sent := time.Now()
	c.send("CL.THROTTLE", "sh:1", "0", "1", "1", "1", "WAIT", "5")
	if r := c.next(); r.err != "" || r.ints[0] != 0 || r.at.Sub(sent) > 500*time.Millisecond {
		t.Errorf("shadowed refusal with WAIT = %v %q after %v, want allowed at once (its turn would have been 1s away)", r.ints, r.err, r.at.Sub(sent))
	}
}

// In a cluster of groups, a waiting request is redirected like any other
// and waits in the line of the group that owns its key, for a bucket as
// for the window limiters (their turns epoch-aligned, so possibly sooner).
func TestWaitClusterOfGroups(t *testing.T) {
	groups := startGroups(t, 2)
	cc := newClusterClient(t, groups, nil)
	ctx := ctxT(t)
	for _, cmd := range []struct {
		name string
		args []any // after the key
		min  time.Duration
	}{
		{"CL.THROTTLE", []any{0, 5, 1, 1}, 100 * time.Millisecond}, // turn 200 ms after the head
		{"SL.ADD", []any{1, "200ms", 1}, 100 * time.Millisecond},   // turn 200 ms after the head
		{"FW.INCR", []any{1, "200ms", 1}, 0},                       // the next window's start
		{"SW.INCR", []any{1, "200ms", 1}, 0},                       // the start of the window after
	} {
		for _, g := range groups {
			key := keysIn(g, "wq:"+cmd.name, 1)[0]
			do := func(more ...any) ([]int64, error) {
				return cc.Do(ctx, append(append([]any{cmd.name, key}, cmd.args...), more...)...).Int64Slice()
			}
			if r, err := do(); err != nil || r[0] != 0 {
				t.Fatalf("%s group %s: head request = %v, %v; want allowed", cmd.name, g.name, r, err)
			}
			start := time.Now()
			r, err := do("WAIT", "2")
			if err != nil || r[0] != 0 {
				t.Fatalf("%s group %s: waiter = %v, %v; want allowed", cmd.name, g.name, r, err)
			}
			if d := time.Since(start); d < cmd.min || d > 2*time.Second {
				t.Errorf("%s group %s: the waiter was answered after %v, want at its turn (at least %v after the head)", cmd.name, g.name, d, cmd.min)
			}
			if r, err := do("WAIT", "10ms"); err != nil || r[0] != 1 {
				t.Errorf("%s group %s: WAIT 10ms right after = %v, %v; want limited at once", cmd.name, g.name, r, err)
			}
		}
	}
	// Without a cluster client: MOVED from the other group, one line
	// through the owning group's follower and leader (groups_wait_test.go).
	for i, g := range groups {
		waitOwnGroup(t, g, groups[1-i], keysIn(g, "wf", 1)[0])
	}
}

// In a 3-node group the reservation is the replicated write: waiters
// connected to a follower (their requests forwarded to the leader) keep
// their turns when the leader is killed with -9, and the new leader counts
// every reservation: a request arriving after the failover waits behind
// all of them.
func TestWaitGroupFailover(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	f := nodes[(l+1)%3]
	ctx := ctxT(t)
	// One request per 2 s: the head now, then turns at +2, +4 and +6 s.
	key := "wait:group"
	fc := noRetryClient(t, f.Addr)
	head, err := throttle(ctx, fc, key, 0, 1, 2)
	if err != nil || head[0] != 0 {
		t.Fatalf("head request = %v, %v; want allowed", head, err)
	}
	headAt := time.Now()
	var waiters []*rawClient
	for i := range 3 {
		c := dialRaw(t, f.Addr)
		c.send("CL.THROTTLE", key, "0", "1", "2", "1", "WAIT", "10")
		waitBlocked(t, f.server, i+1)
		waiters = append(waiters, c)
	}
	nodes[l].kill()
	for i, c := range waiters {
		r := c.next()
		if r.err != "" || r.ints[0] != 0 {
			t.Fatalf("waiter %d = %v %q, want allowed after the failover", i+1, r.ints, r.err)
		}
		if d := r.at.Sub(headAt); d < time.Duration(2*(i+1))*time.Second-300*time.Millisecond {
			t.Errorf("waiter %d answered %v after the head, before its turn at +%ds", i+1, d, 2*(i+1))
		}
	}
	// The new leader holds all three reservations: a plain request is
	// refused, and a new waiter's turn follows the third's (+8 s).
	var survivor *clusterNode
	poll.Until(t, 20*time.Second, func() error {
		if i := leaderOf(nodes); i >= 0 && i != l {
			survivor = nodes[i]
			return nil
		}
		return fmt.Errorf("no new leader yet")
	})
	if time.Since(headAt) > 7*time.Second {
		t.Skipf("the failover took %v: past the last turn, nothing left to check", time.Since(headAt))
	}
	sc := noRetryClient(t, survivor.Addr)
	if r, err := throttle(ctx, sc, key, 0, 1, 2); err != nil || r[0] != 1 {
		t.Fatalf("plain request after the failover = %v, %v; want limited (the reservations survive)", r, err)
	}
	last := dialRaw(t, survivor.Addr)
	last.send("CL.THROTTLE", key, "0", "1", "2", "1", "WAIT", "10")
	r := last.next()
	if r.err != "" || r.ints[0] != 0 {
		t.Fatalf("waiter after the failover = %v %q, want allowed", r.ints, r.err)
	}
	if d := r.at.Sub(headAt); d < 7700*time.Millisecond {
		t.Errorf("waiter after the failover answered %v after the head, want at its turn +8s (behind the three reservations)", d)
	}
}
