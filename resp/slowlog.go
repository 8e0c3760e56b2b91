package resp

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/slowlog"
)

// DefaultSlowlogSlowerThan is Redis's slowlog-log-slower-than (µs).
const DefaultSlowlogSlowerThan = slowlog.DefaultSlowerThan

// DefaultSlowlogMaxLen is Redis's slowlog-max-len.
const DefaultSlowlogMaxLen = slowlog.DefaultMaxLen

// logSlow logs a call of ns nanoseconds of cmd to the slow log.
func logSlow(c *Conn, cmd *Command, args [][]byte, ns int64) {
	e := slowlog.Entry{At: c.srv.now() / 1e9, Usec: ns / 1e3, Addr: c.addr}
	c.mu.Lock()
	e.Name = c.name
	c.mu.Unlock()
	c.srv.slowlog.Add(e, args, func(i int) bool { return redacted(cmd, args, i) })
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

func slowlogCommand() *Command {
	flags := FlagAdmin | FlagLoading | FlagStale
	return &Command{
		Name: "slowlog", Arity: -2, Flags: flags, Group: "server", Since: "0.1.0",
		Summary: "Reads or resets the log of slow commands.", Complexity: "Depends on the subcommand",
		Notes: []string{"A command is logged when its execution took at least `slowlog-log-slower-than` microseconds (negative: off, 0: every command); " +
			"the log keeps the newest `slowlog-max-len` entries. Both can change live with CONFIG SET. The time is the server's execution time, without I/O; " +
			"a pipelined run of limiter writes shares its time evenly among its commands. Passwords (AUTH, HELLO AUTH, CONFIG SET requirepass) are logged as `(redacted)`."},
		Subcommands: []*Command{
			{
				Name: "get", Arity: -2, MaxArgs: 3, Flags: flags, Group: "server", Since: "0.1.0",
				Summary: "Returns the newest entries of the slow log.", Complexity: "O(N) where N is the number of entries returned",
				Args: []Arg{{Name: "count", Type: "integer", Optional: true, Doc: "how many entries (default 10; -1: all)"}},
				Reply: "Array of entries, newest first; each an array of the entry id, the Unix time it was logged, the execution time in microseconds, " +
					"the arguments (at most 32; each at most 128 bytes, then `... (N more bytes)`), the client's address and its name.",
				Errors: []string{"`ERR count should be greater than or equal to -1`."},
				Handler: func(c *Conn, args [][]byte) error {
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
					entries := c.srv.slowlog.Newest(n)
					c.WriteArray(len(entries))
					for _, e := range entries {
						c.WriteArray(6)
						c.WriteInt(e.ID)
						c.WriteInt(e.At)
						c.WriteInt(e.Usec)
						c.WriteArray(len(e.Args))
						for _, a := range e.Args {
							c.WriteBulk(a)
						}
						c.WriteBulkString(e.Addr)
						c.WriteBulkString(e.Name)
					}
					return nil
				},
			},
			{
				Name: "len", Arity: 2, Flags: flags | FlagFast, Group: "server", Since: "0.1.0",
				Summary: "Returns the number of entries in the slow log.", Complexity: "O(1)",
				Reply: "Integer.",
				Handler: func(c *Conn, _ [][]byte) error {
					c.WriteInt(int64(c.srv.slowlog.Len()))
					return nil
				},
			},
			{
				Name: "reset", Arity: 2, Flags: flags, Group: "server", Since: "0.1.0",
				Summary: "Empties the slow log.", Complexity: "O(N) where N is the number of entries",
				Reply: "Simple string OK.",
				Handler: func(c *Conn, _ [][]byte) error {
					c.srv.slowlog.Reset()
					c.WriteOK()
					return nil
				},
			},
		},
	}
}
