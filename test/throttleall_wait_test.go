package test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// allCall is CL.THROTTLEALL on the keys prefix+"a" and prefix+"b" (one
// hash slot when the prefix is a hash tag): a admits one request per
// 100 ms, b one per 200 ms, then the trailing arguments.
func allCall(prefix string, more ...any) []any {
	args := []any{"CL.THROTTLEALL", prefix + "a", 0, 10, 1, 1, prefix + "b", 0, 5, 1, 1}
	return append(args, more...)
}

// allReply is a CL.THROTTLEALL reply and the instant it arrived.
type allReply struct {
	at      time.Time
	limited []int64 // each limit's limited field
	err     error
}

// doAll sends args on its own connection and reports the reply on a
// channel, so that a test sees when each waiter is answered.
func doAll(t *testing.T, c *redis.Client, args []any) <-chan allReply {
	out := make(chan allReply, 1)
	go func() {
		v, err := c.Do(ctxT(t), args...).Result()
		r := allReply{at: time.Now(), err: err}
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				if lim, ok := e.([]any); ok && len(lim) == 5 {
					n, _ := lim[0].(int64)
					r.limited = append(r.limited, n)
				}
			}
		}
		out <- r
	}()
	return out
}

// recv returns the reply of doAll, failing the test after 10 s.
func recv(t *testing.T, ch <-chan allReply) allReply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("no CL.THROTTLEALL reply within 10s")
	}
	return allReply{}
}

func allowedAll(r allReply) bool {
	return r.err == nil && len(r.limited) == 2 && r.limited[0] == 0 && r.limited[1] == 0
}

// throttleAllInLine runs the line of CL.THROTTLEALL … WAIT on a server
// (standalone, or a group's follower whose requests go to its leader):
// three waiters are answered in arrival order at their turns, 200 ms apart
// (the later key, b, sets each turn, both keys reserved at it); a call with
// WAIT 100ms is refused at once consuming nothing; and a plain request on
// a, the faster key, is refused while the waiters hold its turns.
func throttleAllInLine(t *testing.T, s *server, prefix string) {
	newClient := func() *redis.Client {
		return noRetryClient(t, s.Addr)
	}
	head := recv(t, doAll(t, newClient(), allCall(prefix)))
	if !allowedAll(head) {
		t.Fatalf("head call = %v %v, want both allowed", head.limited, head.err)
	}
	var waiters []<-chan allReply
	for i := range 2 {
		waiters = append(waiters, doAll(t, newClient(), allCall(prefix, "WAIT", "2")))
		waitBlocked(t, s, i+1)
	}
	sent := time.Now()
	refused := recv(t, doAll(t, newClient(), allCall(prefix, "WAIT", "100ms")))
	if refused.err != nil || len(refused.limited) != 2 || refused.limited[1] != 1 {
		t.Fatalf("call with WAIT 100ms = %v %v, want b limited", refused.limited, refused.err)
	}
	if d := refused.at.Sub(sent); d > 300*time.Millisecond { // the next turn is 600 ms away
		t.Errorf("call with WAIT 100ms answered after %v, want at once", d)
	}
	waiters = append(waiters, doAll(t, newClient(), allCall(prefix, "WAIT", "2")))
	waitBlocked(t, s, 3)
	// a alone would be free 100 ms after the head; the waiters hold it.
	plain, err := newClient().Do(ctxT(t), "CL.THROTTLE", prefix+"a", 0, 10, 1, 1).Result()
	if err != nil {
		t.Fatalf("plain CL.THROTTLE on a: %v", err)
	}
	if r := ints(t, plain); r[0] != 1 {
		t.Errorf("plain CL.THROTTLE on a while the waiters hold it = %v, want limited", r)
	}
	at := []time.Time{head.at}
	for i, w := range waiters {
		r := recv(t, w)
		if !allowedAll(r) {
			t.Fatalf("waiter %d = %v %v, want both allowed", i+1, r.limited, r.err)
		}
		at = append(at, r.at)
	}
	// Turns at +200, +400, +600 ms: the refused call consumed nothing.
	checkTurns(t, "", at, 200*time.Millisecond)
}

// checkTurns checks that the replies at[1:] came in order at their turns,
// i × step after the head's reply at[0]: never more than 60 ms early (the
// head's own reply may come a little after its decision), at most 400 ms
// late (a loaded machine). Each is measured from the head, so one late
// reply does not make the next look early.
func checkTurns(t *testing.T, label string, at []time.Time, step time.Duration) {
	t.Helper()
	for i := 1; i < len(at); i++ {
		turn := time.Duration(i) * step
		d := at[i].Sub(at[0])
		if d < turn-60*time.Millisecond || d > turn+400*time.Millisecond || !at[i].After(at[i-1]) {
			t.Errorf("%sreply %d came %v after the head, want in arrival order at its turn %v (gaps: %v)", label, i+1, d.Round(time.Millisecond), turn, gaps(at))
		}
	}
}

// CL.THROTTLEALL … WAIT on a standalone server, served by event loops and
// by a goroutine per client.
func TestThrottleAllWait(t *testing.T) {
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			s := startServer(t, append([]string{"--save", ""}, mode.args...)...)
			throttleAllInLine(t, s, "{line}")
			// WAIT inside MULTI is refused, as for the other limiters.
			c := dialRaw(t, s.Addr)
			c.send("MULTI")
			c.next()
			c.send("CL.THROTTLEALL", "m", "0", "1", "1", "1", "WAIT", "1")
			if r := c.next(); r.err != "ERR WAIT is not allowed inside MULTI: a transaction is answered at once, as one step" {
				t.Errorf("CL.THROTTLEALL … WAIT inside MULTI = %q", r.err)
			}
		})
	}
}

// In a 3-node group, a follower's waiters are forwarded to the leader (one
// log entry each) and answered by the follower at their turns, in order.
func TestThrottleAllWaitGroupFollower(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	throttleAllInLine(t, nodes[(l+1)%3].server, "{group}")
}
