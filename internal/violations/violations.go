// Package violations writes the violations log: one line per limited
// decision ("who, what, when": key, command, class, node), sampled so that
// a flood of refusals cannot flood the log: at most Rate lines a second,
// and the first line after a second that dropped some says how many
// ("suppressed"). It is off until turned on (violations-log), and both
// settings change live. A Log is safe for concurrent use; while off, a
// limited decision costs one atomic load. Log.Settings are CONFIG GET/SET
// violations-log and violations-log-rate.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package violations

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultRate is the default of violations-log-rate: lines per second.
const DefaultRate = 10

// maxKeyLen is how much of a key a line shows (longer keys are cut, and
// say so).
const maxKeyLen = 128

// Log is the violations log of one node.
type Log struct {
	log  *slog.Logger
	node string

	on   atomic.Bool
	rate atomic.Int64 // lines per second, at least 1

	mu         sync.Mutex
	second     int64 // the Unix second lines are counted in
	lines      int64 // lines written in second
	suppressed int64 // decisions not logged since the last line

	logged  atomic.Uint64 // lines written
	dropped atomic.Uint64 // decisions not logged (rate)
}

// New returns a Log, off, writing to log (nil: discarded) as node (the
// node's id or address, shown on every line).
func New(log *slog.Logger, node string) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Log{log: log, node: node}
	l.rate.Store(DefaultRate)
	return l
}

// SetEnabled turns the log on or off.
func (l *Log) SetEnabled(on bool) { l.on.Store(on) }

// Enabled reports whether the log is on.
func (l *Log) Enabled() bool { return l.on.Load() }

// SetRate sets the most lines a second (at least 1).
func (l *Log) SetRate(n int64) { l.rate.Store(max(n, 1)) }

// Rate returns the most lines a second.
func (l *Log) Rate() int64 { return l.rate.Load() }

// Limited records a limited decision on key by command (class: the key's
// metrics class, "" when none) at now (Unix ns): a line when the log is on
// and this second's lines are not all used, a suppressed count otherwise.
func (l *Log) Limited(now int64, key []byte, command, class string) {
	if !l.on.Load() {
		return
	}
	sec := now / int64(time.Second)
	l.mu.Lock()
	if sec != l.second {
		l.second, l.lines = sec, 0
	}
	if l.lines >= l.rate.Load() {
		l.suppressed++
		l.mu.Unlock()
		l.dropped.Add(1)
		return
	}
	l.lines++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	l.logged.Add(1)
	attrs := []any{"key", showKey(key), "command", command, "node", l.node, "at", time.Unix(0, now).UTC().Format(time.RFC3339Nano)}
	if class != "" {
		attrs = append(attrs, "class", class)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.log.Info("rate limit violation", attrs...)
}

// showKey cuts key at maxKeyLen bytes (the handler quotes what needs it).
func showKey(key []byte) string {
	if len(key) <= maxKeyLen {
		return string(key)
	}
	return string(key[:maxKeyLen]) + "…(" + strconv.Itoa(len(key)) + " bytes)"
}

// Stats are the log's counters since it was made.
type Stats struct {
	Logged     uint64 // lines written
	Suppressed uint64 // limited decisions not written (over the rate)
}

// Stats returns the counters.
func (l *Log) Stats() Stats { return Stats{Logged: l.logged.Load(), Suppressed: l.dropped.Load()} }
