package authguard

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestAuthGuardSchedule: the waits an address earns, their queueing across
// parallel attempts, forgetting, success and the bound on addresses, on a
// fake clock.
func TestAuthGuardSchedule(t *testing.T) {
	delays := []struct {
		fails int
		want  time.Duration
	}{
		{0, 0}, {FreeFailures - 1, 0}, {FreeFailures, DelayMin}, {FreeFailures + 1, 2 * DelayMin},
		{FreeFailures + 6, 64 * DelayMin}, {FreeFailures + 7, DelayMax}, {1000, DelayMax},
	}
	for _, d := range delays {
		if got := Delay(d.fails); got != d.want {
			t.Errorf("Delay(%d) = %v, want %v", d.fails, got, d.want)
		}
	}

	now := time.Unix(1000, 0)
	g := New()
	g.now = func() time.Time { return now }
	for i := 0; i < ConnFailures; i++ {
		g.Fail("192.0.2.1")
	}
	// Parallel attempts from the address wait one after another, until
	// the schedule is QueueMax ahead.
	var waits []time.Duration
	for {
		w, ok := g.Schedule("192.0.2.1")
		if !ok {
			break
		}
		waits = append(waits, w)
	}
	if want := int(QueueMax / DelayMax); len(waits) != want || waits[0] != DelayMax || waits[len(waits)-1] != QueueMax {
		t.Errorf("parallel waits = %v, want %d of them from %v to %v", waits, want, DelayMax, QueueMax)
	}
	if w, ok := g.Schedule("192.0.2.2"); !ok || w != 0 {
		t.Errorf("another address waits %v (ok %v), want 0", w, ok)
	}
	now = now.Add(Forget + time.Second)
	if w, ok := g.Schedule("192.0.2.1"); !ok || w != 0 || g.Tracked() != 0 {
		t.Errorf("after Forget: wait %v, ok %v, tracked %d; want 0, true, 0", w, ok, g.Tracked())
	}
	for i := 0; i < FreeFailures; i++ {
		g.Fail("192.0.2.1")
	}
	g.Succeed("192.0.2.1")
	if w, _ := g.Schedule("192.0.2.1"); w != 0 {
		t.Errorf("after success: wait %v, want 0", w)
	}
	// At most one log line per address per LogEvery.
	var logged []bool
	for _, step := range []time.Duration{0, LogEvery / 2, LogEvery / 2, 0} {
		now = now.Add(step)
		_, log := g.Fail("192.0.2.3")
		logged = append(logged, log)
	}
	if fmt.Sprint(logged) != "[true false true false]" {
		t.Errorf("failures at 0, +½s, +½s, +0 logged %v, want [true false true false]", logged)
	}
	for i := 0; i <= MaxAddrs; i++ {
		now = now.Add(time.Millisecond)
		g.Fail("10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
	}
	if g.Tracked() != MaxAddrs {
		t.Errorf("tracked %d addresses, want at most %d", g.Tracked(), MaxAddrs)
	}
	if _, known := g.addrs["10.0.0.0"]; known {
		t.Error("the address with the oldest failure is still tracked beyond MaxAddrs")
	}
}

func TestAddrKey(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 2}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 3}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::1"), Port: 4}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 5}, "::1"},
		{&net.UnixAddr{Name: "", Net: "unix"}, "unix"},
	}
	for _, tt := range tests {
		if got := AddrKey(tt.addr); got != tt.want {
			t.Errorf("AddrKey(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestAttempt: one attempt's course under the guard — free failures, the
// connection closed after ConnFailures in a row, the wait run (or refused
// when the caller cannot wait), a success forgetting the address.
func TestAttempt(t *testing.T) {
	now := time.Unix(1000, 0)
	g := New()
	g.now = func() time.Time { return now }
	var waited []time.Duration
	wait := func(d time.Duration) bool { waited = append(waited, d); return true }
	wrong := func() bool { return false }
	fails := 0
	for i := 1; i <= ConnFailures; i++ {
		out := g.Attempt("192.0.2.1", &fails, wait, wrong)
		if out.OK || out.Throttled || out.Fails != i || out.Close != (i == ConnFailures) {
			t.Fatalf("failure %d: %+v, want Fails %d and Close only at %d", i, out, i, ConnFailures)
		}
	}
	if len(waited) != ConnFailures-FreeFailures || waited[0] != DelayMin {
		t.Errorf("waits %v, want %d from %v", waited, ConnFailures-FreeFailures, DelayMin)
	}
	if g.Disconnects() != 1 || g.Failures() != ConnFailures {
		t.Errorf("Disconnects %d, Failures %d; want 1, %d", g.Disconnects(), g.Failures(), ConnFailures)
	}
	// A caller that cannot wait is refused unchecked and closed.
	checked := false
	out := g.Attempt("192.0.2.1", &fails, nil, func() bool { checked = true; return true })
	if !out.Throttled || out.Full || !out.Close || checked {
		t.Errorf("no wait possible: %+v (checked %v), want throttled and closed, unchecked", out, checked)
	}
	// A wait cut short: throttled, not counted as a disconnect by the guard.
	out = g.Attempt("192.0.2.1", &fails, func(time.Duration) bool { return false }, wrong)
	if !out.Throttled || !out.Close || g.Disconnects() != 2 {
		t.Errorf("wait cut short: %+v, Disconnects %d; want throttled, closed, 2", out, g.Disconnects())
	}
	// Right: the address is forgotten and the connection's count reset.
	out = g.Attempt("192.0.2.1", &fails, wait, func() bool { return true })
	if !out.OK || fails != 0 || g.Tracked() != 0 {
		t.Errorf("success: %+v, connection fails %d, tracked %d; want OK, 0, 0", out, fails, g.Tracked())
	}
	// A full schedule refuses at once.
	for range 100 {
		g.Fail("192.0.2.9")
	}
	for {
		if _, ok := g.Schedule("192.0.2.9"); !ok {
			break
		}
	}
	if out := g.Attempt("192.0.2.9", &fails, wait, wrong); !out.Throttled || !out.Full || !out.Close {
		t.Errorf("full schedule: %+v, want throttled (Full) and closed", out)
	}
}
