package main

import (
	"testing"
	"time"
)

// TestRateLog: one line per interval; the next allowed line carries the
// count of those refused meanwhile.
func TestRateLog(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newRateLog(time.Second, func() time.Time { return now })
	steps := []struct {
		advance    time.Duration
		ok         bool
		suppressed int64
	}{
		{0, true, 0},
		{100 * time.Millisecond, false, 0},
		{500 * time.Millisecond, false, 0},
		{399 * time.Millisecond, false, 0},
		{time.Millisecond, true, 3},
		{time.Second, true, 0},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		ok, n := l.allow()
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d: allow() = %v, %d; want %v, %d", i, ok, n, s.ok, s.suppressed)
		}
	}
}
