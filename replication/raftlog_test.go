package replication

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

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
	l := newRaftLogger(log, hclog.Info)
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
