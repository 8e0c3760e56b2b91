package resp

import (
	"strings"
	"sync"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/authguard"
)

// ACL LOG limits.
const (
	// aclLogMaxLen is how many ACL LOG entries are kept (Redis's
	// acllog-max-len default).
	aclLogMaxLen = 128
	// aclLogGroupMillis: a failure within this many milliseconds of an
	// entry's last update, with the same reason, context, object, user and
	// client address, is counted in that entry (Redis groups within 60 s).
	aclLogGroupMillis = 60_000
	// aclLogScan is how many of the newest entries are searched for one to
	// group with (Redis searches 10).
	aclLogScan = 10
)

// aclEntry is one ACL LOG entry.
type aclEntry struct {
	count      int64
	reason     string // "auth"
	context    string // "toplevel"
	object     string // "AUTH"
	username   string
	addr       string // the client's address key, for grouping
	clientInfo string // the client's CLIENT LIST line at the last failure
	id         int64
	created    int64 // Unix ms
	updated    int64 // Unix ms
}

// aclLog is the server's log of refused authentications, newest first.
// Its methods are safe for concurrent use.
type aclLog struct {
	mu      sync.Mutex
	entries []*aclEntry // newest first, at most aclLogMaxLen
	nextID  int64
}

// add logs a failure of the current command of c, or counts it in a recent
// entry of the same client address, user, reason, context and object.
func (l *aclLog) add(c *Conn, reason, context, object, username string) {
	now := c.srv.now() / 1e6
	info := strings.TrimSuffix(string(c.srv.appendClientLine(nil, c, c.srv.now())), "\n")
	key := authguard.AddrKey(c.nc.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < aclLogScan; i++ {
		e := l.entries[i]
		if e.reason == reason && e.context == context && e.object == object && e.username == username &&
			e.addr == key && now-e.updated < aclLogGroupMillis {
			e.count++
			e.updated = now
			e.clientInfo = info
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			return
		}
	}
	e := &aclEntry{count: 1, reason: reason, context: context, object: object, username: username,
		addr: key, clientInfo: info, id: l.nextID, created: now, updated: now}
	l.nextID++
	if len(l.entries) < aclLogMaxLen {
		l.entries = append(l.entries, nil)
	}
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
}

// newest returns copies of up to n entries, newest first.
func (l *aclLog) newest(n int) []aclEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.entries))
	out := make([]aclEntry, n)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

func (l *aclLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

func aclCommand() *Command {
	flags := FlagAdmin | FlagNoScript | FlagLoading | FlagStale
	return &Command{
		Name: "acl", Arity: -2, Flags: FlagNoScript | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
		Summary: "Inspects the users and the log of refused authentications.", Complexity: "Depends on the subcommand",
		Subcommands: []*Command{
			{
				Name: "log", Arity: -2, MaxArgs: 3, Flags: flags, Group: "server", Since: "0.1.0",
				Summary: "Lists the recent failed authentications, or resets the list.", Complexity: "O(N) where N is the number of entries returned",
				Args: []Arg{{Name: "operation", Type: "oneof", Optional: true, Args: []Arg{
					{Name: "count", Type: "integer", Doc: "how many entries, newest first (default 10)"},
					{Name: "reset", Type: "pure-token", Token: "RESET"},
				}}},
				Reply: "Array of entries, newest first; each a map (flat array in RESP2) of `count`, `reason` (`auth`), `context` (`toplevel`), " +
					"`object` (`AUTH`), `username`, `age-seconds` (a double; a bulk string in RESP2), `client-info` (the client's CLIENT LIST line), " +
					"`entry-id`, `timestamp-created` and `timestamp-last-updated` (Unix milliseconds). With RESET: simple string OK.",
				Errors: []string{"`ERR value is out of range, must be positive` for a negative count."},
				Notes: []string{"Every failed AUTH and HELLO AUTH is logged. Failures of the same client address and user name within 60 seconds " +
					"of the entry's last update are counted in one entry (Redis groups them the same way, without the address). The newest 128 entries are kept."},
				Handler: aclLogHandler,
			},
			{
				Name: "whoami", Arity: 2, Flags: FlagNoScript | FlagLoading | FlagStale | FlagFast, Group: "server", Since: "0.1.0",
				Summary: "Returns the connection's user name.", Complexity: "O(1)",
				Reply:   "Bulk string: `default` (the only user).",
				Handler: func(c *Conn, _ [][]byte) error { c.WriteBulkString("default"); return nil },
			},
		},
	}
}

func aclLogHandler(c *Conn, args [][]byte) error {
	n := int64(10)
	if len(args) == 3 {
		if equalFoldString(args[2], "reset") {
			c.srv.acllog.reset()
			c.WriteOK()
			return nil
		}
		v, err := engine.ParseInt(args[2])
		if err != nil {
			return err
		}
		if v < 0 {
			return &textError{"ERR value is out of range, must be positive"}
		}
		n = v
	}
	now := c.srv.now() / 1e6
	entries := c.srv.acllog.newest(int(min(n, aclLogMaxLen)))
	c.WriteArray(len(entries))
	for _, e := range entries {
		c.WriteMap(10)
		c.WriteBulkString("count")
		c.WriteInt(e.count)
		c.WriteBulkString("reason")
		c.WriteBulkString(e.reason)
		c.WriteBulkString("context")
		c.WriteBulkString(e.context)
		c.WriteBulkString("object")
		c.WriteBulkString(e.object)
		c.WriteBulkString("username")
		c.WriteBulkString(e.username)
		c.WriteBulkString("age-seconds")
		c.WriteDouble(float64(max(now-e.updated, 0)) / 1000)
		c.WriteBulkString("client-info")
		c.WriteBulkString(e.clientInfo)
		c.WriteBulkString("entry-id")
		c.WriteInt(e.id)
		c.WriteBulkString("timestamp-created")
		c.WriteInt(e.created)
		c.WriteBulkString("timestamp-last-updated")
		c.WriteInt(e.updated)
	}
	return nil
}
