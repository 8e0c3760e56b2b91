package resp

import (
	"crypto/subtle"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

func connectionCommands() []*Command {
	return []*Command{
		{
			Name: "ping", Arity: -1, MaxArgs: 2, Flags: FlagFast | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
			Summary: "Returns PONG, or the message given.", Complexity: "O(1)",
			Args:  []Arg{{Name: "message", Type: "string", Optional: true}},
			Reply: "Simple string PONG, or the message as a bulk string.",
			Handler: func(c *Conn, args [][]byte) error {
				if len(args) == 2 {
					c.WriteBulk(args[1])
				} else {
					c.WriteSimple("PONG")
				}
				return nil
			},
		},
		{
			Name: "echo", Arity: 2, Flags: FlagFast | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
			Summary: "Returns the message given.", Complexity: "O(1)",
			Args:    []Arg{{Name: "message", Type: "string"}},
			Reply:   "Bulk string: the message.",
			Handler: func(c *Conn, args [][]byte) error { c.WriteBulk(args[1]); return nil },
		},
		{
			Name: "quit", Arity: -1, Flags: FlagFast | FlagNoAuth | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
			Summary: "Closes the connection after replying OK.", Complexity: "O(1)",
			Reply:   "Simple string OK; then the server closes the connection.",
			Handler: func(c *Conn, _ [][]byte) error { c.WriteOK(); c.quit = true; return nil },
		},
		{
			Name: "hello", Arity: -1, Flags: FlagFast | FlagNoAuth | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
			Summary:    "Selects the protocol version (2 or 3), optionally authenticates and names the connection, and describes the server.",
			Complexity: "O(1)",
			Args: []Arg{{Name: "arguments", Type: "block", Optional: true, Args: []Arg{
				{Name: "protover", Type: "integer", Doc: "2 (RESP2) or 3 (RESP3)"},
				{Name: "auth", Type: "block", Token: "AUTH", Optional: true, Args: []Arg{
					{Name: "username", Type: "string", Doc: "`default`"}, {Name: "password", Type: "string"},
				}},
				{Name: "clientname", Type: "string", Token: "SETNAME", Optional: true},
			}}},
			Reply: "Map (flat array in RESP2): `server`, `version`, `proto`, `id`, `mode`, `role`, `modules`.",
			Errors: []string{"`NOPROTO unsupported protocol version`.", "`WRONGPASS invalid username-password pair or user is disabled.`",
				"`NOAUTH HELLO must be called with the client already authenticated, ...` when a password is required and AUTH is not given."},
			Handler: helloHandler,
		},
		{
			Name: "auth", Arity: -2, MaxArgs: 3, Flags: FlagFast | FlagNoAuth | FlagStale | FlagLoading | FlagNoScript, Group: "connection", Since: "0.1.0",
			Summary: "Authenticates the connection.", Complexity: "O(1)",
			Args: []Arg{
				{Name: "username", Type: "string", Optional: true, Doc: "`default` (the only user)"},
				{Name: "password", Type: "string", Doc: "the server's requirepass"},
			},
			Reply:  "Simple string OK.",
			Errors: []string{"`WRONGPASS invalid username-password pair or user is disabled.`", "`ERR AUTH <password> called without any password configured for the default user. ...` when no password is configured."},
			Handler: func(c *Conn, args [][]byte) error {
				user, pass := []byte("default"), args[1]
				if len(args) == 3 {
					user, pass = args[1], args[2]
				}
				if err := c.authenticate(user, pass, len(args) == 2); err != nil {
					return err
				}
				c.WriteOK()
				return nil
			},
		},
		{
			Name: "select", Arity: 2, Flags: FlagFast | FlagLoading | FlagStale, Group: "connection", Since: "0.1.0",
			Summary: "Selects the database: only database 0 exists.", Complexity: "O(1)",
			Args:   []Arg{{Name: "index", Type: "integer", Doc: "0"}},
			Reply:  "Simple string OK.",
			Errors: []string{"`ERR DB index is out of range` for any index but 0."},
			Handler: func(c *Conn, args [][]byte) error {
				n, err := engine.ParseInt(args[1])
				if err != nil {
					return err
				}
				if n != 0 {
					return ErrDBIndex
				}
				c.WriteOK()
				return nil
			},
		},
		clientCommand(),
	}
}

// authenticate checks a user name and password against requirepass.
// passOnly is AUTH with one argument.
func (c *Conn) authenticate(user, pass []byte, passOnly bool) error {
	want := *c.srv.requirePass.Load()
	if want == "" {
		if passOnly {
			return ErrNoPasswordSet
		}
		if string(user) != "default" {
			return ErrWrongPass
		}
		c.authed = true
		return nil
	}
	if string(user) != "default" || subtle.ConstantTimeCompare(pass, []byte(want)) != 1 {
		return ErrWrongPass
	}
	c.authed = true
	return nil
}

func helloHandler(c *Conn, args [][]byte) error {
	proto := c.proto
	if len(args) > 1 {
		v, err := engine.ParseInt(args[1])
		if err != nil {
			return &textError{"ERR Protocol version is not an integer or out of range"}
		}
		if v != 2 && v != 3 {
			return ErrNoProto
		}
		proto = int(v)
	}
	var name []byte
	setName := false
	for i := 2; i < len(args); i++ {
		switch {
		case equalFoldString(args[i], "auth") && i+2 < len(args):
			if err := c.authenticate(args[i+1], args[i+2], false); err != nil {
				return err
			}
			i += 2
		case equalFoldString(args[i], "setname") && i+1 < len(args):
			if err := validName(args[i+1]); err != nil {
				return err
			}
			name, setName = args[i+1], true
			i++
		default:
			return &textError{"ERR Syntax error in HELLO option '" + string(clip(args[i])) + "'"}
		}
	}
	if !c.authed {
		return ErrHelloNoAuth
	}
	c.proto = proto
	c.mu.Lock()
	c.pubProto = proto
	if setName {
		c.name = string(name)
	}
	c.mu.Unlock()
	role := "master"
	if cl := c.srv.cfg.Cluster; cl != nil && !cl.Role().Leader {
		role = "replica"
	}
	c.WriteMap(7)
	c.WriteBulkString("server")
	c.WriteBulkString("cellserver")
	c.WriteBulkString("version")
	c.WriteBulkString(Version)
	c.WriteBulkString("proto")
	c.WriteInt(int64(proto))
	c.WriteBulkString("id")
	c.WriteInt(c.id)
	c.WriteBulkString("mode")
	c.WriteBulkString("standalone")
	c.WriteBulkString("role")
	c.WriteBulkString(role)
	c.WriteBulkString("modules")
	c.WriteArray(0)
	return nil
}

// validName checks a client name or library field as Redis does: printable
// ASCII without spaces.
func validName(b []byte) error {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return &textError{"ERR Client names cannot contain spaces, newlines or special characters."}
		}
	}
	return nil
}

func clientCommand() *Command {
	return &Command{
		Name: "client", Arity: -2, Flags: FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
		Summary: "Inspects and names client connections.", Complexity: "Depends on the subcommand",
		Subcommands: []*Command{
			{
				Name: "id", Arity: 2, Flags: FlagFast | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
				Summary: "Returns the connection's unique id.", Complexity: "O(1)", Reply: "Integer: the id.",
				Handler: func(c *Conn, _ [][]byte) error { c.WriteInt(c.id); return nil },
			},
			{
				Name: "setname", Arity: 3, Flags: FlagFast | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
				Summary: "Names the connection (an empty name clears it).", Complexity: "O(1)",
				Args:  []Arg{{Name: "connection-name", Type: "string", Doc: "printable ASCII without spaces"}},
				Reply: "Simple string OK.",
				Handler: func(c *Conn, args [][]byte) error {
					if err := validName(args[2]); err != nil {
						return err
					}
					c.mu.Lock()
					c.name = string(args[2])
					c.mu.Unlock()
					c.WriteOK()
					return nil
				},
			},
			{
				Name: "getname", Arity: 2, Flags: FlagFast | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
				Summary: "Returns the connection's name.", Complexity: "O(1)", Reply: "Bulk string: the name; nil when none is set.",
				Handler: func(c *Conn, _ [][]byte) error {
					c.mu.Lock()
					name := c.name
					c.mu.Unlock()
					if name == "" {
						c.WriteNull()
					} else {
						c.WriteBulkString(name)
					}
					return nil
				},
			},
			{
				Name: "setinfo", Arity: 4, Flags: FlagFast | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
				Summary: "Records the client library's name or version (shown by CLIENT LIST).", Complexity: "O(1)",
				Args: []Arg{{Name: "attr", Type: "oneof", Args: []Arg{
					{Name: "libname", Type: "string", Token: "LIB-NAME"}, {Name: "libver", Type: "string", Token: "LIB-VER"},
				}}},
				Reply: "Simple string OK.",
				Handler: func(c *Conn, args [][]byte) error {
					var field *string
					switch {
					case equalFoldString(args[2], "lib-name"):
						field = &c.libName
					case equalFoldString(args[2], "lib-ver"):
						field = &c.libVer
					default:
						return &textError{"ERR Unrecognized option '" + string(clip(args[2])) + "'"}
					}
					for _, ch := range args[3] {
						if ch < '!' || ch > '~' {
							return &textError{"ERR " + strings.ToLower(string(args[2])) + " cannot contain spaces, newlines or special characters."}
						}
					}
					c.mu.Lock()
					*field = string(args[3])
					c.mu.Unlock()
					c.WriteOK()
					return nil
				},
			},
			{
				Name: "list", Arity: -2, Flags: FlagAdmin | FlagNoScript | FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
				Summary: "Lists the client connections.", Complexity: "O(N) where N is the number of clients",
				Args: []Arg{
					{Name: "client-type", Type: "oneof", Token: "TYPE", Optional: true, Args: []Arg{
						{Name: "normal", Type: "pure-token", Token: "NORMAL"}, {Name: "master", Type: "pure-token", Token: "MASTER"},
						{Name: "replica", Type: "pure-token", Token: "REPLICA"}, {Name: "pubsub", Type: "pure-token", Token: "PUBSUB"},
					}},
					{Name: "client-id", Type: "integer", Token: "ID", Optional: true, Multiple: true},
				},
				Reply:   "Bulk string: one line per client, `field=value` pairs as Redis writes them.",
				Handler: clientListHandler,
			},
			{
				Name: "info", Arity: 2, Flags: FlagStale | FlagLoading, Group: "connection", Since: "0.1.0",
				Summary: "Describes this connection (one CLIENT LIST line).", Complexity: "O(1)",
				Reply: "Bulk string: the connection's `field=value` line.",
				Handler: func(c *Conn, _ [][]byte) error {
					c.WriteBulk(c.srv.appendClientLine(nil, c, c.srv.now()))
					return nil
				},
			},
		},
	}
}

func clientListHandler(c *Conn, args [][]byte) error {
	var ids map[int64]bool
	typeFilter := ""
	for i := 2; i < len(args); i++ {
		switch {
		case equalFoldString(args[i], "type") && i+1 < len(args):
			t := strings.ToLower(string(args[i+1]))
			switch t {
			case "normal", "master", "replica", "slave", "pubsub":
			default:
				return &textError{"ERR Unknown client type '" + string(clip(args[i+1])) + "'"}
			}
			typeFilter = t
			i++
		case equalFoldString(args[i], "id") && i+1 < len(args):
			ids = make(map[int64]bool)
			for i++; i < len(args); i++ {
				id, err := engine.ParseInt(args[i])
				if err != nil || id < 1 {
					return &textError{"ERR Invalid client ID"}
				}
				ids[id] = true
			}
		default:
			return engine.ErrSyntax
		}
	}
	var out []byte
	if typeFilter == "" || typeFilter == "normal" {
		now := c.srv.now()
		c.srv.mu.Lock()
		conns := make([]*Conn, 0, len(c.srv.conns))
		for o := range c.srv.conns {
			if ids == nil || ids[o.id] {
				conns = append(conns, o)
			}
		}
		c.srv.mu.Unlock()
		sortConns(conns)
		for _, o := range conns {
			out = c.srv.appendClientLine(out, o, now)
		}
	}
	c.WriteBulk(out)
	return nil
}

func sortConns(cs []*Conn) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].id < cs[j-1].id; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// appendClientLine appends o's CLIENT LIST line (with its "\n").
func (s *Server) appendClientLine(b []byte, o *Conn, now int64) []byte {
	o.mu.Lock()
	name, lib, ver, proto := o.name, o.libName, o.libVer, o.pubProto
	o.mu.Unlock()
	cmd := "NULL"
	if last := o.lastCmd.Load(); last != nil {
		cmd = last.fullName
	}
	age := (now - o.start) / 1e9
	idle := (now - o.lastSeen.Load()) / 1e9
	b = append(b, "id="...)
	b = strconv.AppendInt(b, o.id, 10)
	b = append(b, " addr="...)
	b = append(b, o.addr...)
	b = append(b, " laddr="...)
	b = append(b, o.laddr...)
	b = append(b, " fd=-1 name="...)
	b = append(b, name...)
	b = append(b, " age="...)
	b = strconv.AppendInt(b, max(age, 0), 10)
	b = append(b, " idle="...)
	b = strconv.AppendInt(b, max(idle, 0), 10)
	b = append(b, " flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd="...)
	b = append(b, cmd...)
	b = append(b, " user=default redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(proto), 10)
	b = append(b, " lib-name="...)
	b = append(b, lib...)
	b = append(b, " lib-ver="...)
	b = append(b, ver...)
	return append(b, '\n')
}
