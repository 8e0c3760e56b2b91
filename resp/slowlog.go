package resp

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/engine"
)

// Slow log limits, as Redis's (SLOWLOG_ENTRY_MAX_ARGC, SLOWLOG_ENTRY_MAX_STRING).
const (
	slowlogMaxArgs   = 32
	slowlogMaxString = 128
	// DefaultSlowlogSlowerThan is Redis's slowlog-log-slower-than (µs).
	DefaultSlowlogSlowerThan = 10000
	// DefaultSlowlogMaxLen is Redis's slowlog-max-len.
	DefaultSlowlogMaxLen = 128
)

// slowEntry is one SLOWLOG GET entry.
type slowEntry struct {
	id   int64
	at   int64 // Unix seconds
	usec int64
	args [][]byte
	addr string
	name string
}

// slowlog is the server's log of slow commands: a ring of the newest
// entries. The hot path reads the threshold only; the lock is taken when a
// command is slow enough to be logged.
type slowlog struct {
	slowerThan atomic.Int64 // µs; negative: off
	maxLen     atomic.Int64

	mu      sync.Mutex
	entries []slowEntry // ring, oldest at head when full
	head    int
	nextID  int64
}

// slow reports whether a call of ns nanoseconds is to be logged.
func (l *slowlog) slow(ns int64) bool {
	t := l.slowerThan.Load()
	return t >= 0 && ns/1e3 >= t
}

// add logs a call (args are copied, clipped as Redis clips them).
func (l *slowlog) add(c *Conn, cmd *Command, args [][]byte, ns int64) {
	e := slowEntry{at: c.srv.now() / 1e9, usec: ns / 1e3, addr: c.addr}
	c.mu.Lock()
	e.name = c.name
	c.mu.Unlock()
	n := min(len(args), slowlogMaxArgs)
	e.args = make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		a := args[i]
		switch {
		case i == slowlogMaxArgs-1 && len(args) > slowlogMaxArgs:
			a = []byte("... (" + strconv.Itoa(len(args)-slowlogMaxArgs+1) + " more arguments)")
		case i > 0 && redacted(cmd, args, i):
			a = []byte("(redacted)")
		case len(a) > slowlogMaxString:
			a = append(append([]byte(nil), a[:slowlogMaxString]...), "... ("+strconv.Itoa(len(a)-slowlogMaxString)+" more bytes)"...)
		default:
			a = append([]byte(nil), a...)
		}
		e.args = append(e.args, a)
	}
	max := int(l.maxLen.Load())
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
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

// trim keeps the newest max entries, in order.
func (l *slowlog) trim(max int) {
	all := l.newest(-1)
	all = all[:min(len(all), max)]
	l.entries = l.entries[:0]
	for i := len(all) - 1; i >= 0; i-- {
		l.entries = append(l.entries, all[i])
	}
	l.head = 0
}

// newest returns up to n entries, newest first (n < 0: all). The caller
// holds mu.
func (l *slowlog) newest(n int) []slowEntry {
	if n < 0 || n > len(l.entries) {
		n = len(l.entries)
	}
	out := make([]slowEntry, 0, n)
	for k := 0; k < n; k++ {
		i := (l.head - 1 - k + 2*len(l.entries)) % len(l.entries)
		out = append(out, l.entries[i])
	}
	return out
}

func (l *slowlog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(len(l.entries), int(max(l.maxLen.Load(), 0)))
}

func (l *slowlog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries, l.head = nil, 0
}

// redacted reports whether argument i of a command carries a secret that
// the slow log must not keep (AUTH's password, HELLO's AUTH, CONFIG SET
// requirepass), as Redis redacts them.
func redacted(cmd *Command, args [][]byte, i int) bool {
	switch cmd.fullName {
	case "auth":
		return true
	case "hello":
		for j := 1; j < i; j++ {
			if equalFoldString(args[j], "auth") && i <= j+2 {
				return true
			}
		}
	case "config|set":
		return i >= 3 && i%2 == 1 && equalFoldString(args[i-1], "requirepass")
	}
	return false
}

func slowlogGetHandler(c *Conn, args [][]byte) error {
	n := int64(10)
	if len(args) == 3 {
		v, err := engine.ParseInt(args[2])
		if err != nil {
			return err
		}
		if v < -1 {
			return &textError{"ERR count should be greater than or equal to -1"}
		}
		n = v
	}
	l := &c.srv.slowlog
	kept := max(l.maxLen.Load(), 0) // a lowered slowlog-max-len applies at once
	if n < 0 || n > kept {
		n = kept
	}
	l.mu.Lock()
	entries := l.newest(int(n))
	l.mu.Unlock()
	c.WriteArray(len(entries))
	for _, e := range entries {
		c.WriteArray(6)
		c.WriteInt(e.id)
		c.WriteInt(e.at)
		c.WriteInt(e.usec)
		c.WriteArray(len(e.args))
		for _, a := range e.args {
			c.WriteBulk(a)
		}
		c.WriteBulkString(e.addr)
		c.WriteBulkString(e.name)
	}
	return nil
}

func slowlogLenHandler(c *Conn, _ [][]byte) error {
	c.WriteInt(int64(c.srv.slowlog.len()))
	return nil
}

func slowlogResetHandler(c *Conn, _ [][]byte) error {
	c.srv.slowlog.reset()
	c.WriteOK()
	return nil
}
