package violations

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimited(t *testing.T) {
	const sec = int64(time.Second)
	t0 := int64(1767225600) * sec
	tests := []struct {
		name       string
		on         bool
		rate       int64
		at         []int64 // instants of limited decisions
		wantLines  int
		wantSupp   uint64
		wantInLast string // text the last line holds
	}{
		{"off", false, 10, []int64{t0, t0}, 0, 0, ""},
		{"under the rate", true, 10, []int64{t0, t0 + 1, t0 + 2}, 3, 0, "key=k "},
		{"over the rate, same second", true, 2, []int64{t0, t0 + 1, t0 + 2, t0 + 3}, 2, 2, ""},
		{"next second reports suppressed", true, 1, []int64{t0, t0 + 1, t0 + 2, t0 + sec}, 2, 2, "suppressed=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(slog.New(slog.NewTextHandler(&buf, nil)), "n1")
			l.SetEnabled(tc.on)
			l.SetRate(tc.rate)
			for _, at := range tc.at {
				l.Limited(at, []byte("k"), "cl.throttle", "")
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if buf.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.wantLines {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), tc.wantLines, buf.String())
			}
			if st := l.Stats(); st.Logged != uint64(tc.wantLines) || st.Suppressed != tc.wantSupp {
				t.Errorf("Stats = %+v, want %d logged, %d suppressed", st, tc.wantLines, tc.wantSupp)
			}
			if tc.wantInLast != "" {
				last := lines[len(lines)-1]
				for _, w := range []string{tc.wantInLast, "command=cl.throttle", "node=n1", "at=2026-01-01T00:00:0"} {
					if !strings.Contains(last, w) {
						t.Errorf("last line %q lacks %q", last, w)
					}
				}
			}
		})
	}
}

func TestShowKey(t *testing.T) {
	long := bytes.Repeat([]byte("a"), 200)
	if got := showKey(long); !strings.HasSuffix(got, "…(200 bytes)") || len(got) > 150 {
		t.Errorf("showKey(200 bytes) = %q", got)
	}
	if got := showKey([]byte("a\x00b")); got != "a\x00b" {
		t.Errorf("showKey(binary) = %q", got)
	}
}
