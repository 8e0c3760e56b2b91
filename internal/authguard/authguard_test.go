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
