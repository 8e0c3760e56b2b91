package acllog

import "sync"

// Limits, as Redis's.
const (
	// MaxLen is how many entries are kept (Redis's acllog-max-len
	// default).
	MaxLen = 128
	// groupMillis: a failure within this many milliseconds of an entry's
	// last update, with the same reason, context, object, user and client
	// address, is counted in that entry (Redis groups within 60 s).
	groupMillis = 60_000
	// scan is how many of the newest entries are searched for one to
	// group with (Redis searches 10).
	scan = 10
)

// Entry is one ACL LOG entry.
type Entry struct {
	Count      int64
	Reason     string // "auth"
	Context    string // "toplevel"
	Object     string // "AUTH"
	Username   string
	Addr       string // the client's address key, for grouping
	ClientInfo string // the client's CLIENT LIST line at the last failure
	ID         int64
	Created    int64 // Unix ms
	Updated    int64 // Unix ms
}

// Log is a log of refused authentications, newest first. Its methods are
// safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	entries []*Entry // newest first, at most MaxLen
	nextID  int64
}

// Add logs a failure at now (Unix ms) described by f (Reason, Context,
// Object, Username, Addr, ClientInfo), or counts it in a recent entry of
// the same Addr, Username, Reason, Context and Object.
func (l *Log) Add(f Entry, now int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < scan; i++ {
		e := l.entries[i]
		if e.Reason == f.Reason && e.Context == f.Context && e.Object == f.Object && e.Username == f.Username &&
			e.Addr == f.Addr && now-e.Updated < groupMillis {
			e.Count++
			e.Updated = now
			e.ClientInfo = f.ClientInfo
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			return
		}
	}
	e := f
	e.Count, e.ID, e.Created, e.Updated = 1, l.nextID, now, now
	l.nextID++
	if len(l.entries) < MaxLen {
		l.entries = append(l.entries, nil)
	}
	copy(l.entries[1:], l.entries)
	l.entries[0] = &e
}

// Newest returns copies of up to n entries, newest first.
func (l *Log) Newest(n int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.entries))
	out := make([]Entry, n)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

// Reset empties the log (ACL LOG RESET); entry ids go on.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}
