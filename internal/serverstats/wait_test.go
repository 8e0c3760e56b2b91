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
