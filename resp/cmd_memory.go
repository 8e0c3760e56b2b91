package resp

import "github.com/cellserver/cellserver/engine"

// memoryCommand is MEMORY: the keyspace's own accounting of a key, the
// figure maxmemory is enforced against.
func memoryCommand() *Command {
	flags := FlagReadonly
	return &Command{
		Name: "memory", Arity: -2, Flags: flags, Group: "server", Since: "0.1.0",
		Summary: "Reports memory use.", Complexity: "Depends on the subcommand",
		Subcommands: []*Command{
			{
				Name: "usage", Arity: -3, Flags: flags, FirstKey: 2, LastKey: 2, KeyStep: 1, Group: "server", Since: "0.1.0",
				Summary:    "Returns the bytes a key accounts for in the keyspace's memory (what maxmemory counts).",
				Complexity: "O(1)",
				Args: []Arg{
					{Name: "key", Type: "key"},
					{Name: "count", Type: "integer", Token: "SAMPLES", Optional: true, Doc: "accepted for compatibility; the figure is always exact"},
				},
				Reply: "Integer: bytes — the key's record and table slot (26), its name, and for every kind but GCRA a side-table entry (64) " +
					"plus, for a sliding log, 16 per entry of its array's capacity; nil when the key does not exist.",
				Errors: []string{"`ERR syntax error` for an option other than SAMPLES count."},
				Handler: func(c *Conn, args [][]byte) error {
					if len(args) != 3 && (len(args) != 5 || !equalFoldString(args[3], "samples")) {
						return engine.ErrSyntax
					}
					if len(args) == 5 {
						if _, err := engine.ParseInt(args[4]); err != nil {
							return err
						}
					}
					now, err := c.readNow()
					if err != nil {
						return err
					}
					n, ok := c.srv.backend.Store().KeyBytes(args[2], now)
					if !ok {
						c.WriteNull()
						return nil
					}
					c.WriteInt(n)
					return nil
				},
			},
		},
	}
}
