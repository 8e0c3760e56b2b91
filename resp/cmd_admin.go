package resp

import (
	"github.com/cellserver/cellserver/engine"
)

// builtinCommands returns a fresh copy of every built-in command (the table
// annotates its entries, so each server gets its own).
func builtinCommands() []*Command {
	var all []*Command
	all = append(all, limiterCommands()...)
	all = append(all, leaseCommands()...)
	all = append(all, keyCommands()...)
	all = append(all, connectionCommands()...)
	all = append(all, serverCommands()...)
	all = append(all, clusterCommand())
	all = append(all, clusterConnCommands()...)
	all = append(all, migrateCommands()...)
	all = append(all, transactionCommands()...)
	all = append(all, hotkeyCommands()...)
	return all
}

func serverCommands() []*Command {
	return []*Command{
		commandCommand(),
		configCommand(),
		slowlogCommand(),
		aclCommand(),
		memoryCommand(),
		{
			Name: "info", Arity: -1, Flags: FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
			Summary: "Returns information and statistics about the server.", Complexity: "O(1)",
			Args: []Arg{{Name: "section", Type: "string", Optional: true, Multiple: true,
				Doc: "server, clients, memory, persistence, stats, replication, cpu, cluster (`cluster_enabled`: 1 in a replication group), keyspace, commandstats; default, all or everything"}},
			Reply:   "Bulk string: `# Section` headers and `field:value` lines separated by CRLF, as Redis writes them.",
			Handler: infoHandler,
		},
		{
			Name: "time", Arity: 1, Flags: FlagFast | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
			Summary: "Returns the server's time.", Complexity: "O(1)",
			Reply: "Array of two bulk strings: Unix seconds and microseconds within the second.",
			Handler: func(c *Conn, _ [][]byte) error {
				now := c.srv.now()
				c.WriteArray(2)
				c.WriteBulkInt(now / 1e9)
				c.WriteBulkInt(now % 1e9 / 1e3)
				return nil
			},
		},
		{
			Name: "save", Arity: 1, Flags: FlagAdmin | FlagNoScript | FlagNoMulti, Group: "server", Since: "0.1.0",
			Summary: "Saves a snapshot of the keyspace to disk and waits until it is durable.", Complexity: "O(N) where N is the number of keys",
			Reply:  "Simple string OK.",
			Errors: []string{"`ERR persistence is off: ...` when the server runs in memory only (`save \"\"`) or in cluster mode (Raft snapshots persist the keyspace)."},
			Handler: func(c *Conn, _ [][]byte) error {
				p := c.srv.cfg.Persistence
				if p == nil {
					return ErrPersistenceOff
				}
				if err := p.Save(); err != nil {
					return err
				}
				c.WriteOK()
				return nil
			},
		},
		{
			Name: "bgsave", Arity: -1, MaxArgs: 2, Flags: FlagAdmin | FlagNoScript, Group: "server", Since: "0.1.0",
			Summary: "Starts saving a snapshot in the background.", Complexity: "O(1) to start; O(N) in the background",
			Args:   []Arg{{Name: "schedule", Type: "pure-token", Token: "SCHEDULE", Optional: true, Doc: "accepted for compatibility"}},
			Reply:  "Simple string `Background saving started`.",
			Errors: []string{"`ERR Background save already in progress`.", "`ERR persistence is off: ...`."},
			Handler: func(c *Conn, args [][]byte) error {
				if len(args) == 2 && !equalFoldString(args[1], "schedule") {
					return engine.ErrSyntax
				}
				p := c.srv.cfg.Persistence
				if p == nil {
					return ErrPersistenceOff
				}
				if err := p.BGSave(); err != nil {
					return err
				}
				c.WriteSimple("Background saving started")
				return nil
			},
		},
		{
			Name: "lastsave", Arity: 1, Flags: FlagFast | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
			Summary: "Returns the Unix time of the last successful save.", Complexity: "O(1)",
			Reply: "Integer: Unix seconds (the start time when persistence is off or nothing was saved yet).",
			Handler: func(c *Conn, _ [][]byte) error {
				if p := c.srv.cfg.Persistence; p != nil {
					c.WriteInt(p.LastSave())
				} else {
					c.WriteInt(c.srv.started / 1e9)
				}
				return nil
			},
		},
		{
			Name: "shutdown", Arity: -1, MaxArgs: 4, Flags: FlagAdmin | FlagNoScript | FlagLoading | FlagStale | FlagNoMulti, Group: "server", Since: "0.1.0",
			Summary: "Saves (when persistence is on) and stops the server.", Complexity: "O(N) when saving",
			Args: []Arg{
				{Name: "save-selector", Type: "oneof", Optional: true, Args: []Arg{
					{Name: "nosave", Type: "pure-token", Token: "NOSAVE"}, {Name: "save", Type: "pure-token", Token: "SAVE"},
				}, Doc: "NOSAVE skips the final save; SAVE requires one; default: save when persistence is on"},
				{Name: "now", Type: "pure-token", Token: "NOW", Optional: true, Doc: "accepted for compatibility"},
				{Name: "force", Type: "pure-token", Token: "FORCE", Optional: true, Doc: "stop even if the final save fails"},
			},
			Reply:   "None on success: the server closes the connection, stops accepting, finishes the replies in flight and exits.",
			Errors:  []string{"`ERR Errors trying to SHUTDOWN. Check logs.` when the final save failed (the server keeps running).", "`ERR persistence is off: ...` for SAVE without persistence."},
			Handler: shutdownHandler,
		},
		{
			Name: "role", Arity: 1, Flags: FlagFast | FlagLoading | FlagStale | FlagNoScript, Group: "server", Since: "0.1.0",
			Summary: "Returns the node's replication role.", Complexity: "O(1)",
			Reply: "Array: `master`, the replication offset (applied index) and an array of the replicas the leader reaches (`[host, port, offset]`, the offset being the member's applied index at its last answer to the leader; a member the leader cannot reach is left out, as Redis lists connected replicas only); or on a follower `slave`, the leader's host and port, the link state and the offset. A standalone server answers like a Redis master with no replicas.",
			Handler: func(c *Conn, _ [][]byte) error {
				var r RoleInfo
				r.Leader = true
				if cl := c.srv.cfg.Cluster; cl != nil {
					r = cl.Role()
				}
				if r.Leader {
					c.WriteArray(3)
					c.WriteBulkString("master")
					c.WriteInt(r.Offset)
					c.WriteArray(len(r.Replicas))
					for _, rep := range r.Replicas {
						c.WriteArray(3)
						c.WriteBulkString(rep.Host)
						c.WriteBulkString(itoa(int64(rep.Port)))
						c.WriteBulkString(itoa(rep.Offset))
					}
					return nil
				}
				c.WriteArray(5)
				c.WriteBulkString("slave")
				c.WriteBulkString(r.LeaderHost)
				c.WriteInt(int64(r.LeaderPort))
				c.WriteBulkString(r.State)
				c.WriteInt(r.Offset)
				return nil
			},
		},
	}
}

func shutdownHandler(c *Conn, args [][]byte) error {
	p := c.srv.cfg.Persistence
	save, force := p != nil, false
	for _, a := range args[1:] {
		switch {
		case equalFoldString(a, "nosave"):
			save = false
		case equalFoldString(a, "save"):
			if p == nil {
				return ErrPersistenceOff
			}
			save = true
		case equalFoldString(a, "now"):
		case equalFoldString(a, "force"):
			force = true
		case equalFoldString(a, "abort"):
			return &textError{"ERR No shutdown in progress."}
		default:
			return engine.ErrSyntax
		}
	}
	if save {
		// Shutdown rather than Save: a BGSAVE in progress is waited for, not
		// an error, as in Redis.
		if err := p.Shutdown(true); err != nil {
			c.srv.log.Error("final save failed", "err", err, "force", force)
			if !force {
				return ErrShutdownFailed
			}
		}
	}
	c.srv.log.Info("shutdown requested by a client", "client", c.addr)
	c.quit = true
	c.srv.requestShutdown()
	return nil
}
