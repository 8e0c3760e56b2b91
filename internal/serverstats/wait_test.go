package serverstats

import (
	"strings"
	"testing"
)

func TestWaitCounters(t *testing.T) {
	var w WaitCounters
	w.Init()
	if got := string(w.AppendInfo(nil)); !strings.Contains(got, "wait_late_p50_usec:0\r\n") {
		t.Fatalf("empty AppendInfo = %q, want p50 0", got)
	}
	// 3 waits of 2 ms written 200 µs late, one of 20 s written 2 s late.
	for range 3 {
		w.Observe(2e6, 200e3)
	}
	w.Observe(20e9, 2e9)
	st := w.Snapshot(7)
	if st.Waiting != 7 || st.Waited != 4 || st.WaitedSeconds != 20.006 {
		t.Errorf("Snapshot = %+v, want 7 waiting, 4 waited, 20.006 s", st)
	}
	if len(st.Counts) != len(st.Bounds)+1 || st.Counts[1] != 3 || st.Counts[len(st.Counts)-1] != 1 {
		t.Errorf("Snapshot counts %v over bounds %v, want 3 in (1 ms, 5 ms] and 1 past the last", st.Counts, st.Bounds)
	}
	info := string(w.AppendInfo(nil))
	for _, want := range []string{
		"waited_requests:4\r\n", "waited_usec:20006000\r\n",
		"wait_late_p50_usec:250\r\n", "wait_late_p99_usec:-1\r\n", "wait_late_max_usec:2000000\r\n",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("AppendInfo = %q, want %q", info, want)
		}
	}
}

func TestServerCounters(t *testing.T) {
	st := ServerCounters{Closed: make([]Counters, 2)}
	conn := make([]Counters, 2)
	conn[1].Calls.Add(3)
	conn[1].Failed.Add(1)
	st.Absorb(conn)
	st.Absorb(conn)
	if c, f := st.Closed[1].Calls.Load(), st.Closed[1].Failed.Load(); c != 6 || f != 2 {
		t.Errorf("Closed[1] after two Absorbs = %d calls, %d failed, want 6, 2", c, f)
	}
	st.Connections.Add(5)
	st.ProtectedDenied.Add(1)
	st.Reset()
	if st.Connections.Load() != 0 || st.ProtectedDenied.Load() != 0 {
		t.Error("Reset left counters non-zero")
	}
	if st.Closed[1].Calls.Load() != 6 {
		t.Error("Reset cleared Closed, which the server resets with the live connections")
	}
}
