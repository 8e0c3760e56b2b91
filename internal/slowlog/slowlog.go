package slowlog

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// Limits, as Redis's (SLOWLOG_ENTRY_MAX_ARGC, SLOWLOG_ENTRY_MAX_STRING).
const (
	MaxArgs   = 32
	MaxString = 128
	// DefaultSlowerThan is Redis's slowlog-log-slower-than (µs).
	DefaultSlowerThan = 10000
	// DefaultMaxLen is Redis's slowlog-max-len.
	DefaultMaxLen = 128
)

// Entry is one SLOWLOG GET entry.
type Entry struct {
	ID   int64
	At   int64 // Unix seconds
	Usec int64
	Args [][]byte
	Addr string
	Name string
}

// Log is a log of slow commands: a ring of the newest entries. The hot
// path reads the threshold only; the lock is taken when a command is slow
// enough to be logged. The zero Log logs every call (threshold 0) and
// keeps none (length 0).
type Log struct {
	slowerThan atomic.Int64 // µs; negative: off
	maxLen     atomic.Int64

	mu      sync.Mutex
	entries []Entry // ring, oldest at head when full
	head    int
	nextID  int64
}

// SetSlowerThan sets slowlog-log-slower-than (µs; negative: off, 0: every call).
func (l *Log) SetSlowerThan(us int64) { l.slowerThan.Store(us) }

// SlowerThan returns slowlog-log-slower-than.
func (l *Log) SlowerThan() int64 { return l.slowerThan.Load() }

// SetMaxLen sets slowlog-max-len; a lowered length applies at once to what
// Newest and Len return, and the ring shrinks at the next Add.
func (l *Log) SetMaxLen(n int64) { l.maxLen.Store(n) }

// MaxLen returns slowlog-max-len.
func (l *Log) MaxLen() int64 { return l.maxLen.Load() }

// Slow reports whether a call of ns nanoseconds is to be logged.
func (l *Log) Slow(ns int64) bool {
	t := l.slowerThan.Load()
	return t >= 0 && ns/1e3 >= t
}

// Add logs a call: e's ID and Args are set here, from args (copied,
// clipped as Redis clips them; an argument i > 0 for which redact returns
// true is logged as "(redacted)").
func (l *Log) Add(e Entry, args [][]byte, redact func(i int) bool) {
	n := min(len(args), MaxArgs)
	e.Args = make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		a := args[i]
		switch {
		case i == MaxArgs-1 && len(args) > MaxArgs:
			a = []byte("... (" + strconv.Itoa(len(args)-MaxArgs+1) + " more arguments)")
		case i > 0 && redact(i):
			a = []byte("(redacted)")
		case len(a) > MaxString:
			a = append(append([]byte(nil), a[:MaxString]...), "... ("+strconv.Itoa(len(a)-MaxString)+" more bytes)"...)
		default:
			a = append([]byte(nil), a...)
		}
		e.Args = append(e.Args, a)
	}
	max := int(l.maxLen.Load())
	l.mu.Lock()
	defer l.mu.Unlock()
	e.ID = l.nextID
	l.nextID++
	if max <= 0 {
		l.entries, l.head = nil, 0
		return
	}
	if len(l.entries) > max {
		l.trim(max)
	}
	if len(l.entries) < max {
		l.entries = append(l.entries, e)
		return
	}
	l.entries[l.head] = e
	l.head = (l.head + 1) % len(l.entries)
}

// trim keeps the newest max entries, in order. The caller holds mu.
func (l *Log) trim(max int) {
	all := l.newest(-1)
	all = all[:min(len(all), max)]
	l.entries = l.entries[:0]
	for i := len(all) - 1; i >= 0; i-- {
		l.entries = append(l.entries, all[i])
	}
	l.head = 0
}

// Newest returns up to n entries, newest first (n < 0: all kept), never
// more than slowlog-max-len.
func (l *Log) Newest(n int64) []Entry {
	kept := max(l.maxLen.Load(), 0)
	if n < 0 || n > kept {
		n = kept
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.newest(int(n))
}

// newest returns up to n entries, newest first (n < 0: all). The caller
// holds mu.
func (l *Log) newest(n int) []Entry {
	if n < 0 || n > len(l.entries) {
		n = len(l.entries)
	}
	out := make([]Entry, 0, n)
	for k := 0; k < n; k++ {
		i := (l.head - 1 - k + 2*len(l.entries)) % len(l.entries)
		out = append(out, l.entries[i])
	}
	return out
}

// Len is the number of entries SLOWLOG GET -1 would return.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(len(l.entries), int(max(l.maxLen.Load(), 0)))
}

// Reset empties the log (SLOWLOG RESET); entry ids go on.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries, l.head = nil, 0
}
