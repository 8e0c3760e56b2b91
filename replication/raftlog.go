package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// newRaftLogger returns the hclog logger raft, its transport, its snapshot
// store and the WAL log to: each call is passed on to sink. Safe for
// concurrent use.
func newRaftLogger(sink *raftSink) hclog.Logger {
	// The base logger writes nothing (every line goes through the sink); its
	// level answers raft's IsDebug-style checks.
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: sink.min, Output: io.Discard})
	l.RegisterSink(sink)
	return l
}

const (
	// repeatReport is the most often a warning or error that raft repeats
	// is logged again: its first occurrence is logged in full, then one
	// line per repeatReport at most says how many more came.
	repeatReport = time.Minute
	// repeatQuiet is how long a repeated message must stay away for its
	// run to end (a last line gives the count left, and its next
	// occurrence is logged in full again). Longer than raft's longest
	// retry backoff (about 10 s), so that a peer that stays down is one
	// run.
	repeatQuiet = 30 * time.Second
	// maxRepeats bounds the runs tracked at once (a message is logged
	// in full, untracked, while that many are).
	maxRepeats = 256
)

// raftSink passes raft's log calls on to slog, structured (lines named
// "raft: msg", raft's key/value pairs as attributes), at its level min and
// above. Messages raft logs on every healthy start and stop are demoted to
// debug (raftLogLevel). A warning or error that repeats (the same logger
// name, message and peer, whatever its other attributes: raft retries a
// member it cannot reach several times a second) is logged once, then at
// most once per repeatReport as "msg (repeated N times in the last T)"
// with the attributes of its latest occurrence, and once more when it has
// stopped for repeatQuiet (flush, called periodically). Safe for
// concurrent use.
type raftSink struct {
	log *slog.Logger
	min hclog.Level
	now func() time.Time

	mu   sync.Mutex
	runs map[repeatKey]*repeatRun // guarded by mu
}

// repeatKey identifies a repeated message: the hclog logger's name, the
// message, and the peer it names ("" for none).
type repeatKey struct{ name, msg, peer string }

// repeatRun is one message's run of repeats.
type repeatRun struct {
	reported time.Time  // when the last line of the run was logged
	last     time.Time  // its latest occurrence
	count    int        // occurrences since reported, not logged
	level    slog.Level // of the latest occurrence
	attrs    []any      // of the latest occurrence
}

// newRaftSink returns a sink logging to log at level and above, reading
// time from now.
func newRaftSink(log *slog.Logger, level hclog.Level, now func() time.Time) *raftSink {
	return &raftSink{log: log, min: level, now: now, runs: map[repeatKey]*repeatRun{}}
}

// Accept implements hclog.SinkAdapter.
func (s *raftSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < s.min || level == hclog.Off {
		return
	}
	lv := raftLogLevel(level, msg, args)
	ctx := context.Background()
	if !s.log.Enabled(ctx, lv) {
		return
	}
	attrs := raftAttrs(args)
	if lv < slog.LevelWarn {
		s.log.Log(ctx, lv, name+": "+msg, attrs...)
		return
	}
	key := repeatKey{name: name, msg: msg, peer: raftPeer(args)}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[key]; r != nil {
		r.count++
		r.last, r.level, r.attrs = now, lv, attrs
		if now.Sub(r.reported) >= repeatReport {
			s.report(key, r, now, "")
		}
		return
	}
	if len(s.runs) >= maxRepeats {
		s.flushLocked(now)
	}
	if len(s.runs) < maxRepeats {
		s.runs[key] = &repeatRun{reported: now, last: now}
	}
	s.log.Log(ctx, lv, name+": "+msg, attrs...)
}

// flush ends the runs whose message has not come for repeatQuiet, with a
// last line for those that repeated since their last line, and reports
// the runs due a line. Call it periodically (once a second).
func (s *raftSink) flush() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(now)
}

func (s *raftSink) flushLocked(now time.Time) {
	for key, r := range s.runs {
		switch {
		case now.Sub(r.last) >= repeatQuiet:
			if r.count > 0 {
				s.report(key, r, r.last, ", then stopped")
			}
			delete(s.runs, key)
		case r.count > 0 && now.Sub(r.reported) >= repeatReport:
			s.report(key, r, now, "")
		}
	}
}

// report logs run r's line: how many times its message came since its
// last line (up to at), with the latest occurrence's attributes. s.mu is
// held.
func (s *raftSink) report(key repeatKey, r *repeatRun, at time.Time, suffix string) {
	times := "times"
	if r.count == 1 {
		times = "time"
	}
	msg := fmt.Sprintf("%s: %s (repeated %d %s in the last %s%s)", key.name, key.msg, r.count, times, at.Sub(r.reported).Round(time.Millisecond), suffix)
	s.log.Log(context.Background(), r.level, msg, r.attrs...)
	r.count, r.reported = 0, at
}

// flushRaftLog flushes raft's repeated log lines once a second until the
// node closes.
func (n *Node) flushRaftLog() {
	defer n.wg.Done()
	if n.raftLog == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			n.raftLog.flush()
			return
		case <-t.C:
			n.raftLog.flush()
		}
	}
}

// raftPeerKeys are the keys under which raft's messages name the peer they
// are about.
var raftPeerKeys = []string{"peer", "server-id", "candidate", "from", "address", "target"}

// raftPeer returns the peer raft's key/value pairs name ("" for none).
func raftPeer(args []any) string {
	for _, k := range raftPeerKeys {
		if v, ok := raftArg(args, k); ok {
			return fmt.Sprint(v)
		}
	}
	return ""
}

// raftAttrs turns raft's key/value pairs into slog attributes.
func raftAttrs(args []any) []any {
	attrs := make([]any, 0, len(args)/2)
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
	return attrs
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
