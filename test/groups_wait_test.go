package test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitOwnGroup checks WAIT in a cluster of groups without a cluster
// client, for the key's owning group g and another group o: a waiting
// request sent to o is redirected at once (MOVED to g), consuming
// nothing; sent to g's follower and leader, waiters join one line and are
// answered in arrival order at their turns, each by the node it was sent
// to; a CL.THROTTLEALL … WAIT through the follower waits alike.
func waitOwnGroup(t *testing.T, g, o *group, key string) {
	t.Helper()
	slot := strconv.Itoa(keySlot(key))
	throttle := func(more ...string) []string {
		return append([]string{"CL.THROTTLE", key, "0", "5", "1", "1"}, more...) // one per 200 ms
	}
	l := g.leader(t)
	f := g.others(l)[0]
	addrs := map[string]bool{}
	for _, nd := range g.nodes {
		addrs[nd.Addr] = true
	}
	moved := func(args ...string) {
		t.Helper()
		c := dialRaw(t, o.nodes[0].Addr)
		sent := time.Now()
		c.send(args...)
		r := c.next()
		parts := strings.Fields(r.err)
		if len(parts) != 3 || parts[0] != "MOVED" || parts[1] != slot || !addrs[parts[2]] {
			t.Fatalf("group %s: %s sent to group %s = %v %q, want MOVED %s to a node of group %s", g.name, args[0], o.name, r.ints, r.err, slot, g.name)
		}
		if d := r.at.Sub(sent); d > time.Second {
			t.Errorf("group %s: the redirect came after %v, want at once", g.name, d)
		}
	}
	moved(throttle("WAIT", "2")...)
	moved("CL.THROTTLEALL", key, "0", "5", "1", "1", "WAIT", "2")

	head := dialRaw(t, f.Addr)
	head.send(throttle()...)
	first := head.next()
	if first.err != "" || len(first.ints) != 5 || first.ints[0] != 0 {
		t.Fatalf("group %s: head through the follower = %v %q, want allowed (the redirected requests consumed nothing)", g.name, first.ints, first.err)
	}
	var waiters []*rawClient
	for i, nd := range []*clusterNode{f, l, f} {
		c := dialRaw(t, nd.Addr)
		c.send(throttle("WAIT", "3")...)
		want := 1
		if nd == f {
			want = 1 + i/2
		}
		waitBlocked(t, nd.server, want)
		waiters = append(waiters, c)
	}
	at := []time.Time{first.at}
	for i, c := range waiters {
		r := c.next()
		if r.err != "" || len(r.ints) != 5 || r.ints[0] != 0 {
			t.Fatalf("group %s: waiter %d = %v %q, want allowed", g.name, i+1, r.ints, r.err)
		}
		at = append(at, r.at)
	}
	checkTurns(t, "group "+g.name+": ", at, 200*time.Millisecond)
	throttleAllInLine(t, f.server, "{"+key+"}")
}
