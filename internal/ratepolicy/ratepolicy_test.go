package ratepolicy

import (
	"testing"
	"time"
)

func TestItems(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  Item
		want Item
	}{
		// CL.THROTTLE user:1 15 30 60: 16 at once, 30 a minute: 16 per 32 s.
		{"GCRA 15 30 60", Bucket(16, 30, time.Minute), Item{16, 32}},
		// rls: requests_per_unit 60, unit minute (burst 60 by default).
		{"rls 60/minute", Bucket(60, 60, time.Minute), Item{60, 60}},
		// rls: requests_per_unit 60, unit minute, burst 10.
		{"rls 60/minute burst 10", Bucket(10, 60, time.Minute), Item{10, 10}},
		{"rounds up", Bucket(2, 3, time.Second), Item{2, 1}},
		{"rounds up past one", Bucket(4, 3, time.Second), Item{4, 2}},
		{"at least 1 s", Bucket(1, 1000, time.Millisecond), Item{1, 1}},
		{"a ban", Bucket(1, 0, time.Hour), Item{0, 3600}},
		{"clamped", Bucket(1<<40, 1, 3660*24*time.Hour), Item{1 << 40, MaxInteger}},
		{"interval 10 by 4 per 4s", Interval(10, 4, 4*time.Second), Item{10, 12}},
		{"interval exact", Interval(8, 4, 4*time.Second), Item{8, 8}},
		{"window 1500 ms", Window(50, 1500*time.Millisecond), Item{50, 2}},
		{"window hour", Window(5000, time.Hour), Item{5000, 3600}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}
