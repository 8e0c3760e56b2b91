package test

import (
	"testing"
	"time"
)

// WAIT across two regions (docs/regions.md, "Waiting (WAIT) across
// regions"): a global key waits in its home's line, whichever region the
// request enters by, and the region the client is connected to holds the
// reply; a shadowed global key never waits; an async key waits in its own
// region's line, decided there alone, and a split key in its region's
// line against its share; a CL.THROTTLEALL of global keys waits at the
// home as one call.
func TestRegionsWait(t *testing.T) {
	const policy = "g:* global r1 hs:* global r1 os:* global r1 as:* async sp:* split"
	rs := startRegionSetEach(t, []string{"r1", "r2"}, 10*time.Millisecond, policy, map[string][]string{
		"r1": {"--limit-shadow", "hs:*"}, // shadowed at the home
		"r2": {"--limit-shadow", "os:*"}, // shadowed where the request enters
	})
	r1, r2 := rs.srv["r1"], rs.srv["r2"]
	// One request per 200 ms.
	throttle := func(key string, more ...string) []string {
		return append([]string{"CL.THROTTLE", key, "0", "5", "1", "1"}, more...)
	}
	allowed := func(t *testing.T, who string, r timedReply) {
		t.Helper()
		if r.err != "" || len(r.ints) != 5 || r.ints[0] != 0 {
			t.Fatalf("%s = %v %q, want allowed", who, r.ints, r.err)
		}
	}

	t.Run("global key: the home's line, held where the client is", func(t *testing.T) {
		head := dialRaw(t, r2.Addr)
		head.send(throttle("g:line")...)
		first := head.next()
		allowed(t, "head through r2", first)
		// Arrival order at the home: r2, r1, r2. Each waits where its
		// client is connected: r1 holds none of r2's.
		a, b, c := dialRaw(t, r2.Addr), dialRaw(t, r1.Addr), dialRaw(t, r2.Addr)
		a.send(throttle("g:line", "WAIT", "3")...)
		waitBlocked(t, r2, 1)
		if n := blockedClients(t, r1); n != 0 {
			t.Errorf("the home holds %d waiting replies for a client of r2, want 0", n)
		}
		b.send(throttle("g:line", "WAIT", "3")...)
		waitBlocked(t, r1, 1)
		c.send(throttle("g:line", "WAIT", "3")...)
		waitBlocked(t, r2, 2)
		// The next turn is 800 ms away: refused at once, consuming nothing.
		d := dialRaw(t, r2.Addr)
		sent := time.Now()
		d.send(throttle("g:line", "WAIT", "100ms")...)
		if r := d.next(); len(r.ints) != 5 || r.ints[0] != 1 || r.at.Sub(sent) > 300*time.Millisecond {
			t.Fatalf("WAIT 100ms through r2 = %v %q after %v, want limited at once", r.ints, r.err, r.at.Sub(sent))
		}
		at := []time.Time{first.at}
		for i, w := range []*rawClient{a, b, c} {
			r := w.next()
			allowed(t, "waiter "+string(rune('1'+i)), r)
			at = append(at, r.at)
		}
		checkTurns(t, "", at, 200*time.Millisecond)
	})

	t.Run("shadowed global key never waits", func(t *testing.T) {
		for _, key := range []string{"hs:x", "os:x"} {
			// One request per second.
			c := dialRaw(t, r2.Addr)
			c.send("CL.THROTTLE", key, "0", "1", "1")
			allowed(t, key+" head", c.next())
			sent := time.Now()
			c.send("CL.THROTTLE", key, "0", "1", "1", "1", "WAIT", "5")
			r := c.next()
			allowed(t, key+" with WAIT", r)
			if d := r.at.Sub(sent); d > 500*time.Millisecond {
				t.Errorf("%s: a shadowed refusal with WAIT answered after %v, want at once (its turn was 1s away)", key, d)
			}
		}
	})

	t.Run("async key waits in its own region's line", func(t *testing.T) {
		head := dialRaw(t, r2.Addr)
		head.send(throttle("as:line")...)
		first := head.next()
		allowed(t, "head through r2", first)
		w := dialRaw(t, r2.Addr)
		w.send(throttle("as:line", "WAIT", "3")...)
		waitBlocked(t, r2, 1)
		if n := blockedClients(t, r1); n != 0 {
			t.Errorf("r1 holds %d waiting replies for an async key of r2, want 0", n)
		}
		r := w.next()
		allowed(t, "waiter through r2", r)
		checkTurns(t, "async key: ", []time.Time{first.at, r.at}, 200*time.Millisecond)
	})

	t.Run("split key waits in its region's line, against its share", func(t *testing.T) {
		// Two per second, one each: r2's turns come a second apart, and
		// r2's waiter takes nothing of r1's share.
		head := dialRaw(t, r2.Addr)
		head.send("CL.THROTTLE", "sp:line", "1", "2", "1")
		first := head.next()
		allowed(t, "head through r2", first)
		if first.ints[1] != 1 {
			t.Fatalf("head through r2 reports limit %d, want its share 1", first.ints[1])
		}
		w := dialRaw(t, r2.Addr)
		w.send("CL.THROTTLE", "sp:line", "1", "2", "1", "1", "WAIT", "3")
		waitBlocked(t, r2, 1)
		other := dialRaw(t, r1.Addr)
		other.send("CL.THROTTLE", "sp:line", "1", "2", "1")
		allowed(t, "r1's own share while r2's waiter waits", other.next())
		r := w.next()
		allowed(t, "waiter through r2", r)
		checkTurns(t, "split key: ", []time.Time{first.at, r.at}, time.Second)
	})

	t.Run("CL.THROTTLEALL of global keys", func(t *testing.T) {
		throttleAllInLine(t, r2, "g:all:")
	})
}
