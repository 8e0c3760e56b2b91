package resp

import (
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/acllog"
	"github.com/cellserver/cellserver/internal/authguard"
)

// logAuthFailure adds a refused authentication of c's current command to
// ACL LOG (internal/acllog).
func logAuthFailure(c *Conn, reason, context, object, username string) {
	now := c.srv.now()
	c.srv.acllog.Add(acllog.Entry{Reason: reason, Context: context, Object: object, Username: username,
		Addr:       authguard.AddrKey(c.nc.RemoteAddr()),
		ClientInfo: strings.TrimSuffix(string(c.srv.appendClientLine(nil, c, now)), "\n")}, now/1e6)
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
			c.srv.acllog.Reset()
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
	entries := c.srv.acllog.Newest(int(min(n, acllog.MaxLen)))
	c.WriteArray(len(entries))
	for _, e := range entries {
		c.WriteMap(10)
		c.WriteBulkString("count")
		c.WriteInt(e.Count)
		c.WriteBulkString("reason")
		c.WriteBulkString(e.Reason)
		c.WriteBulkString("context")
		c.WriteBulkString(e.Context)
		c.WriteBulkString("object")
		c.WriteBulkString(e.Object)
		c.WriteBulkString("username")
		c.WriteBulkString(e.Username)
		c.WriteBulkString("age-seconds")
		c.WriteDouble(float64(max(now-e.Updated, 0)) / 1000)
		c.WriteBulkString("client-info")
		c.WriteBulkString(e.ClientInfo)
		c.WriteBulkString("entry-id")
		c.WriteInt(e.ID)
		c.WriteBulkString("timestamp-created")
		c.WriteInt(e.Created)
		c.WriteBulkString("timestamp-last-updated")
		c.WriteInt(e.Updated)
	}
	return nil
}
