package resp

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/cmdmeta"
	"github.com/cellserver/cellserver/shards"
)

// Flag tags a command, as the flags of Redis's COMMAND INFO do; the
// constants (FlagWrite, FlagReadonly, ...) are generated from
// internal/cmdmeta.Flags into commands_gen.go.
type Flag uint16

// names returns the Redis names of the flags set in f, in Redis's order.
func (f Flag) names() []string {
	var out []string
	for i, name := range flagNames {
		if f&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// Command is one entry of the command table. The dispatcher checks arity,
// authentication and subcommands before calling the handler, so handlers
// see a well-formed argument count. The built-in commands' metadata comes
// from resp/commands/*.json (commands_gen.go) and their code from
// bindings() (handlers.go); Server.Handle takes a whole entry.
type Command struct {
	// Command is the metadata, as cmdmeta documents its fields, except
	// its Flags and Subcommands: the fields of those names below hold
	// them. Its MovableKeys is set exactly when the MovableKeys below is
	// bound.
	cmdmeta.Command
	// Flags tag the command (FlagWrite, FlagReadonly, ...).
	Flags Flag
	// MovableKeys, when set, finds a call's keys instead of the key
	// positions (Redis's movablekeys: MIGRATE's keys after KEYS),
	// appending them to dst. The cluster routing check uses it.
	MovableKeys func(dst, args [][]byte) [][]byte

	// Handler runs the command and appends its reply. A non-nil error is
	// answered as the reply instead (and counted as a failed call); the
	// handler must then have appended nothing.
	Handler func(c *Conn, args [][]byte) error

	// Prepare and Finish make a write command batchable: Prepare parses the
	// arguments into op (whose slices it may reuse by appending to them);
	// the ops of consecutive batchable commands in a pipeline go to the
	// Backend in one Write call; Finish appends the reply from the result
	// (it runs only when Prepare and the write succeeded and res.Err is nil).
	// A command has either Handler or both Prepare and Finish.
	Prepare func(c *Conn, args [][]byte, op *shards.Op) error
	Finish  func(c *Conn, args [][]byte, res *shards.Result)

	// Subcommands, when set, make this a container (CLIENT, CONFIG): the
	// second word selects one. Handler, if set, runs when the container is
	// called with no subcommand.
	Subcommands []*Command

	// slotChange, set on the CLUSTER subcommands that change slots,
	// parses a call into the change it makes, so that a transaction's
	// slot changes are one Cluster.ChangeSlots call (tx.go).
	slotChange func(args [][]byte) (cluster.SlotChange, error)

	fullName string // "client|setname": the name errors and stats use
	index    int    // position in the per-connection statistics
	subs     map[string]*Command
}

// Syntax returns the command's syntax line generated from its Args, e.g.
// "CL.THROTTLE key max_burst count_per_period period [quantity]".
func (cmd *Command) Syntax() string { return cmdmeta.Syntax(cmd.fullName, cmd.Arguments) }

// table is the command table: one entry per name; registering a name twice
// panics (a programming error, found by the first test that builds a server).
type table struct {
	byName map[string]*Command
	all    []*Command  // every command and subcommand, by index
	sealed atomic.Bool // set when serving starts; Handle may race with it
}

func newTable() *table { return &table{byName: make(map[string]*Command)} }

// add registers cmd and its subcommands. It panics on a duplicate name, on a
// malformed entry, or once the server has started serving.
func (t *table) add(cmd *Command) {
	if t.sealed.Load() {
		panic("resp: command " + cmd.Name + " registered after the server started")
	}
	t.enter(t.byName, cmd, "")
	if len(cmd.Subcommands) > 0 {
		cmd.Subcommands = append(cmd.Subcommands, helpSubcommand(cmd))
		cmd.subs = make(map[string]*Command, len(cmd.Subcommands))
		for _, sub := range cmd.Subcommands {
			t.enter(cmd.subs, sub, cmd.Name)
		}
	}
}

// enter checks cmd and registers it in m, by its name in lower case, and
// in all; container is the command it is a subcommand of ("" for none).
func (t *table) enter(m map[string]*Command, cmd *Command, container string) {
	name := strings.ToLower(cmd.Name)
	full := name
	if container != "" {
		full = container + "|" + name
	}
	if _, dup := m[name]; dup {
		panic("resp: command " + full + " registered twice")
	}
	t.check(cmd, container)
	cmd.Name, cmd.fullName, cmd.index = name, full, len(t.all)
	t.all = append(t.all, cmd)
	m[name] = cmd
}

func (t *table) check(cmd *Command, container string) {
	full := cmd.Name
	if container != "" {
		full = container + "|" + cmd.Name
	}
	switch {
	case cmd.Name == "":
		panic("resp: command without a name")
	case cmd.Arity == 0:
		panic("resp: command " + full + " has arity 0")
	case cmd.Handler == nil && (cmd.Prepare == nil || cmd.Finish == nil) && len(cmd.Subcommands) == 0:
		panic("resp: command " + full + " has no handler")
	case cmd.Handler != nil && cmd.Prepare != nil:
		panic("resp: command " + full + " has both a handler and a batch writer")
	case container != "" && len(cmd.Subcommands) > 0:
		panic("resp: subcommand " + full + " has subcommands")
	case cmd.Summary == "":
		panic("resp: command " + full + " has no summary")
	case cmd.Command.MovableKeys != (cmd.MovableKeys != nil):
		panic("resp: command " + full + ": movable_keys in its metadata and a bound MovableKeys go together")
	}
}

// sorted returns the top-level commands by name.
func (t *table) sorted() []*Command {
	return slices.SortedFunc(maps.Values(t.byName), func(a, b *Command) int { return strings.Compare(a.Name, b.Name) })
}

// lookup finds the command named b in any letter case, without allocating.
func (t *table) lookup(b []byte) *Command { return lookupFold(t.byName, b) }

// lookupFold finds the entry of m named b in any letter case, without
// allocating (names are at most 32 bytes).
func lookupFold(m map[string]*Command, b []byte) *Command {
	var lower [32]byte
	if len(b) > len(lower) {
		return nil
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return m[string(lower[:len(b)])]
}

// resolve finds the command args name, descending into a subcommand, and
// checks its arity. It has no side effects.
func (t *table) resolve(args [][]byte) (*Command, error) {
	cmd := t.lookup(args[0])
	if cmd == nil {
		return nil, &unknownCommandError{args: args}
	}
	return resolveFrom(cmd, args)
}

// resolveFrom is resolve once the top-level command cmd (args[0]) is found.
func resolveFrom(cmd *Command, args [][]byte) (*Command, error) {
	if cmd.subs != nil {
		if len(args) < 2 {
			if cmd.Handler != nil {
				return cmd, nil
			}
			return cmd, &arityError{cmd.fullName}
		}
		sub := lookupFold(cmd.subs, args[1])
		if sub == nil {
			return cmd, unknownSubcommand(args[1], cmd.Name)
		}
		cmd = sub
	}
	if !arityOK(cmd, len(args)) {
		return cmd, &arityError{cmd.fullName}
	}
	return cmd, nil
}

func arityOK(cmd *Command, n int) bool {
	if cmd.Arity > 0 {
		return n == cmd.Arity
	}
	if n < -cmd.Arity {
		return false
	}
	return cmd.MaxArgs <= 0 || n <= cmd.MaxArgs
}

// Handle registers an additional command (for example the cluster's). It
// must be called before the server starts serving; it panics on a name
// already registered.
func (s *Server) Handle(cmd *Command) { s.table.add(cmd) }

// Commands returns the top-level commands, sorted by name (for documentation).
func (s *Server) Commands() []*Command { return s.table.sorted() }

// String returns the Redis names of the flags set in f, as a bracketed
// list ("[write denyoom fast]").
func (f Flag) String() string { return fmt.Sprint(f.names()) }

// helpSubcommand generates a container's HELP from its subcommands' syntax
// and summaries, as Redis's "<CMD> HELP" lists them.
func helpSubcommand(container *Command) *Command {
	return &Command{
		Command: cmdmeta.Command{Name: "help", Arity: 2, Group: container.Group, Since: container.Since,
			Summary: "Lists the subcommands of " + strings.ToUpper(container.Name) + ".", Complexity: "O(1)",
			Reply: "Array of simple strings."},
		Flags: FlagLoading | FlagStale,
		Handler: func(c *Conn, _ [][]byte) error {
			m := container.meta()
			lines := cmdmeta.Help(&m)
			c.WriteArray(len(lines))
			for _, l := range lines {
				c.WriteSimple(l)
			}
			return nil
		},
	}
}
