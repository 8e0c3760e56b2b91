package replication

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestRaftLogLevel: the messages raft logs on every healthy start and stop
// become debug lines; the same messages with other causes, and every other
// message, keep their level.
func TestRaftLogLevel(t *testing.T) {
	closed := &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}
	tests := []struct {
		level hclog.Level
		msg   string
		args  []any
		want  slog.Level
	}{
		{hclog.Warn, "no known peers, aborting election", nil, slog.LevelDebug},
		{hclog.Warn, "heartbeat timeout reached, starting election", []any{"last-leader-addr", "", "last-leader-id", ""}, slog.LevelDebug},
		{hclog.Warn, "heartbeat timeout reached, starting election", []any{"last-leader-addr", "10.0.0.1:8000", "last-leader-id", "n2"}, slog.LevelWarn},
		{hclog.Warn, "failed to get previous log", []any{"previous-index", 5, "last-index", 0, "error", raft.ErrLogNotFound}, slog.LevelDebug},
		{hclog.Warn, "failed to get previous log", []any{"previous-index", 5, "last-index", 0, "error", errors.New("disk I/O error")}, slog.LevelWarn},
		{hclog.Warn, "appendEntries rejected, sending older logs", []any{"peer", "n2", "next", 1}, slog.LevelDebug},
		{hclog.Error, "failed to decode incoming command", []any{"error", closed}, slog.LevelDebug},
		{hclog.Error, "failed to decode incoming command", []any{"error", errors.New("msgpack decode error")}, slog.LevelError},
		{hclog.Error, "failed to appendEntries to", []any{"error", closed}, slog.LevelError},
		{hclog.Warn, "failed to contact", nil, slog.LevelWarn},
		{hclog.Info, "entering leader state", nil, slog.LevelInfo},
		{hclog.Debug, "lost leadership because received a requestVote with a newer term", nil, slog.LevelDebug},
		{hclog.Trace, "x", nil, slog.LevelDebug},
	}
	for _, tc := range tests {
		if got := raftLogLevel(tc.level, tc.msg, tc.args); got != tc.want {
			t.Errorf("raftLogLevel(%v, %q, %v) = %v, want %v", tc.level, tc.msg, tc.args, got, tc.want)
		}
	}
}

// TestRaftLogger: raft's calls reach slog as one structured line each,
// named, with raft's key/value pairs as attributes, filtered by both
// levels.
func TestRaftLogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l := newRaftLogger(newRaftSink(log, hclog.Info, time.Now))
	l.Named("net").Error("failed to accept connection", "error", errors.New("boom"), "n", 3)
	l.Debug("below raft's level")
	l.Warn("no known peers, aborting election") // demoted below slog's level
	l.Info("entering follower state", "follower", fmt.Sprint("n1"))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
	}
	for i, want := range []string{`level=ERROR msg="raft.net: failed to accept connection" error=boom n=3`, `level=INFO msg="raft: entering follower state" follower=n1`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i+1, lines[i], want)
		}
	}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestRaftRepeats: a warning or error raft repeats about one peer (every
// heartbeat to a dead member) is logged once, then once per repeatReport
// with the count, and once more when it stops; another peer, another
// message and info lines are not held back, and a message that comes
// back after the quiet period is logged in full again.
func TestRaftRepeats(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := newRaftSink(log, hclog.Debug, clk.now)
	l := newRaftLogger(s)
	refused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	lines := func() []string {
		out := strings.TrimSpace(buf.String())
		buf.Reset()
		if out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}
	heartbeat := func(peer string, backoff time.Duration) {
		l.Error("failed to heartbeat to", "peer", peer, "backoff time", backoff, "error", refused)
	}
	type step struct {
		name string
		do   func()
		want []string // substrings of the lines logged, in order
	}
	steps := []step{
		{"first failure is logged in full", func() { heartbeat("10.0.0.2:8000", 10*time.Millisecond) },
			[]string{`level=ERROR msg="raft: failed to heartbeat to" peer=10.0.0.2:8000 "backoff time"=10ms error="dial tcp`}},
		{"repeats within repeatReport are held", func() {
			for i := 0; i < 199; i++ {
				clk.advance(250 * time.Millisecond)
				heartbeat("10.0.0.2:8000", 250*time.Millisecond)
			}
		}, nil},
		{"another peer, another message, info are not held", func() {
			heartbeat("10.0.0.3:8000", 10*time.Millisecond)
			l.Warn("failed to contact", "server-id", "n2", "time", time.Second)
			l.Info("entering leader state", "leader", "n1")
		}, []string{`peer=10.0.0.3:8000`, `level=WARN msg="raft: failed to contact" server-id=n2`, `level=INFO msg="raft: entering leader state"`}},
		{"flush before repeatReport logs nothing", func() { clk.advance(10 * time.Second); s.flush() }, nil},
		{"a repeat once repeatReport has passed reports the count", func() {
			clk.advance(250 * time.Millisecond)
			heartbeat("10.0.0.2:8000", 250*time.Millisecond)
		}, []string{`level=ERROR msg="raft: failed to heartbeat to (repeated 200 times in the last 1m0s)" peer=10.0.0.2:8000 "backoff time"=250ms`}},
		{"flush reports a run due a line", func() {
			for i := 0; i < 3; i++ {
				clk.advance(19 * time.Second)
				heartbeat("10.0.0.2:8000", 250*time.Millisecond)
			}
			clk.advance(3 * time.Second)
			s.flush()
		}, []string{`msg="raft: failed to heartbeat to (repeated 3 times in the last 1m0s)"`}},
		{"the peer is back: after repeatQuiet the run ends", func() {
			clk.advance(5 * time.Second)
			heartbeat("10.0.0.2:8000", 250*time.Millisecond)
			clk.advance(repeatQuiet)
			s.flush()
		}, []string{`msg="raft: failed to heartbeat to (repeated 1 time in the last 5s, then stopped)"`}},
		{"after the run ended the message is logged in full again", func() { heartbeat("10.0.0.2:8000", 10*time.Millisecond) },
			[]string{`level=ERROR msg="raft: failed to heartbeat to" peer=10.0.0.2:8000`}},
	}
	for _, st := range steps {
		st.do()
		got := lines()
		if len(got) != len(st.want) {
			t.Fatalf("%s: %d lines, want %d:\n%s", st.name, len(got), len(st.want), strings.Join(got, "\n"))
		}
		for i, w := range st.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: line %d = %q, want it to contain %q", st.name, i+1, got[i], w)
			}
		}
	}
}

// TestRaftRepeatsBounded: however many peers and messages repeat, the
// runs tracked stay bounded and every first occurrence is still logged.
func TestRaftRepeatsBounded(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := newRaftSink(log, hclog.Debug, clk.now)
	l := newRaftLogger(s)
	const peers = 3 * maxRepeats
	for i := 0; i < peers; i++ {
		l.Error("failed to appendEntries to", "peer", fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256))
	}
	if n := len(s.runs); n > maxRepeats {
		t.Errorf("%d runs tracked, want at most %d", n, maxRepeats)
	}
	if got := strings.Count(buf.String(), "\n"); got != peers {
		t.Errorf("%d lines for %d peers' first failures, want one each", got, peers)
	}
}
