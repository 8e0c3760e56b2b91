package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestShouldTrim: a release follows at least 16 MiB of allocation that is
// also at least 1/16 of the heap.
func TestShouldTrim(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		allocated, heap uint64
		want            bool
	}{
		{0, 0, false},
		{16*mib - 1, 0, false},       // below the floor
		{16 * mib, 0, true},          // the floor itself
		{16 * mib, 256 * mib, true},  // 256/16 = 16: exactly 1/16 of the heap
		{16 * mib, 257 * mib, false}, // 257/16 > 16: less than 1/16
		{64 * mib, 400 * mib, true},  // 400/16 = 25 <= 64
	}
	for _, tt := range tests {
		if got := shouldTrim(tt.allocated, tt.heap); got != tt.want {
			t.Errorf("shouldTrim(%d, %d) = %v, want %v", tt.allocated, tt.heap, got, tt.want)
		}
	}
}

// TestPprof: the profiling listener answers the pprof index, and stop
// closes it.
func TestPprof(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, stop, err := startPprof("127.0.0.1:0", logger)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr + "/debug/pprof/"
	resp, err := http.Get(url)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("GET %s = %d %.80q, want 200 with the profile index", url, resp.StatusCode, body)
	}
	stop()
	if _, err := http.Get(url); err == nil {
		t.Errorf("GET %s after stop succeeded, want a refused connection", url)
	}
}
