package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// newRaftLogger returns the hclog logger raft, its transport, its snapshot
// store and the WAL log to: each call is passed on, structured, to log
// (lines named "raft: msg", raft's key/value pairs as attributes), at level
// and above. Messages raft logs on every healthy start and stop are demoted
// to debug (see raftLogLevel). Safe for concurrent use.
func newRaftLogger(log *slog.Logger, level hclog.Level) hclog.Logger {
	// The base logger writes nothing (every line goes through the sink); its
	// level answers raft's IsDebug-style checks.
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: level, Output: io.Discard})
	l.RegisterSink(raftSink{log: log, min: level})
	return l
}

// raftSink is the hclog sink behind newRaftLogger.
type raftSink struct {
	log *slog.Logger
	min hclog.Level
}

// Accept implements hclog.SinkAdapter.
func (s raftSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < s.min || level == hclog.Off {
		return
	}
	lv := raftLogLevel(level, msg, args)
	ctx := context.Background()
	if !s.log.Enabled(ctx, lv) {
		return
	}
	attrs := make([]any, 0, len(args))
	for i := 0; i+1 < len(args); i += 2 {
		key := fmt.Sprint(args[i])
		switch v := args[i+1].(type) {
		case error:
			attrs = append(attrs, slog.String(key, v.Error()))
		case hclog.Format:
			attrs = append(attrs, slog.String(key, fmt.Sprintf(v[0].(string), v[1:]...)))
		default:
			attrs = append(attrs, slog.Any(key, v))
		}
	}
	s.log.Log(ctx, lv, name+": "+msg, attrs...)
}

// raftLogLevel maps raft's level onto slog's. A few warnings and errors
// are what a healthy group says while it forms or stops, so they would
// teach operators to ignore WARN and ERROR; they become debug lines:
//   - "no known peers, aborting election": a node waiting to be added;
//   - "heartbeat timeout reached, starting election" with no last leader:
//     the first election of a fresh start;
//   - "failed to get previous log" (log not found) on a follower and
//     "appendEntries rejected, sending older logs" on the leader: the
//     normal catch-up of a follower that lacks entries;
//   - "failed to decode incoming command" with a closed connection: this
//     node closed its own transport (shutdown).
//
// Every other message keeps its level, including the same messages with
// other errors.
func raftLogLevel(level hclog.Level, msg string, args []any) slog.Level {
	if raftBenign(msg, args) {
		return slog.LevelDebug
	}
	switch {
	case level >= hclog.Error:
		return slog.LevelError
	case level == hclog.Warn:
		return slog.LevelWarn
	case level == hclog.Info:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

func raftBenign(msg string, args []any) bool {
	switch msg {
	case "no known peers, aborting election", "appendEntries rejected, sending older logs":
		return true
	case "heartbeat timeout reached, starting election":
		id, ok := raftArg(args, "last-leader-id")
		return ok && fmt.Sprint(id) == ""
	case "failed to get previous log":
		err, _ := raftArg(args, "error")
		e, ok := err.(error)
		return ok && errors.Is(e, raft.ErrLogNotFound)
	case "failed to decode incoming command":
		err, _ := raftArg(args, "error")
		e, ok := err.(error)
		return ok && errors.Is(e, net.ErrClosed)
	}
	return false
}

// raftArg returns the value of key among hclog's key/value pairs.
func raftArg(args []any, key string) (any, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return args[i+1], true
		}
	}
	return nil, false
}
