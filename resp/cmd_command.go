package resp

import "strings"

func commandHandler(c *Conn, _ [][]byte) error {
	cmds := c.srv.table.sorted()
	c.WriteArray(len(cmds))
	for _, cmd := range cmds {
		c.writeCommandInfo(cmd)
	}
	return nil
}

func commandCountHandler(c *Conn, _ [][]byte) error {
	c.WriteInt(int64(len(c.srv.table.byName)))
	return nil
}

func commandListHandler(c *Conn, _ [][]byte) error {
	cmds := c.srv.table.sorted()
	c.WriteArray(len(cmds))
	for _, cmd := range cmds {
		c.WriteBulkString(cmd.Name)
	}
	return nil
}

func commandInfoHandler(c *Conn, args [][]byte) error {
	if len(args) == 2 {
		cmds := c.srv.table.sorted()
		c.WriteArray(len(cmds))
		for _, cmd := range cmds {
			c.writeCommandInfo(cmd)
		}
		return nil
	}
	c.WriteArray(len(args) - 2)
	for _, name := range args[2:] {
		if cmd := c.srv.table.lookupName(name); cmd != nil {
			c.writeCommandInfo(cmd)
		} else {
			c.WriteNullArray()
		}
	}
	return nil
}

func commandDocsHandler(c *Conn, args [][]byte) error {
	var cmds []*Command
	if len(args) == 2 {
		cmds = c.srv.table.sorted()
	} else {
		for _, name := range args[2:] {
			if cmd := c.srv.table.lookupName(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	c.WriteMap(len(cmds))
	for _, cmd := range cmds {
		c.WriteBulkString(cmd.fullName)
		c.writeCommandDocs(cmd)
	}
	return nil
}

// lookupName finds a command by name, or a subcommand by "container|sub".
func (t *table) lookupName(b []byte) *Command {
	name := strings.ToLower(string(b))
	if i := strings.IndexByte(name, '|'); i >= 0 {
		if cmd := t.byName[name[:i]]; cmd != nil && cmd.subs != nil {
			return cmd.subs[name[i+1:]]
		}
		return nil
	}
	return t.byName[name]
}

// writeCommandInfo appends a COMMAND INFO entry in Redis 7's ten-element shape.
func (c *Conn) writeCommandInfo(cmd *Command) {
	c.WriteArray(10)
	c.WriteBulkString(cmd.fullName)
	c.WriteInt(int64(cmd.Arity))
	flags := cmd.Flags.names()
	if cmd.MovableKeys != nil {
		flags = append(flags, "movablekeys")
	}
	c.WriteSet(len(flags))
	for _, f := range flags {
		c.WriteSimple(f)
	}
	c.WriteInt(int64(cmd.FirstKey))
	c.WriteInt(int64(cmd.LastKey))
	c.WriteInt(int64(cmd.KeyStep))
	cats := aclCategories(cmd)
	c.WriteSet(len(cats))
	for _, cat := range cats {
		c.WriteSimple(cat)
	}
	c.WriteArray(0) // tips
	c.writeKeySpecs(cmd)
	c.WriteArray(len(cmd.Subcommands))
	for _, sub := range cmd.Subcommands {
		c.writeCommandInfo(sub)
	}
}

// writeKeySpecs describes the key positions in Redis 7's key-spec form.
func (c *Conn) writeKeySpecs(cmd *Command) {
	if cmd.FirstKey <= 0 {
		c.WriteArray(0)
		return
	}
	flags := "RW"
	access := "UPDATE"
	if cmd.Flags&FlagReadonly != 0 {
		flags, access = "RO", "ACCESS"
	}
	c.WriteArray(1)
	c.WriteMap(3)
	c.WriteBulkString("flags")
	c.WriteSet(2)
	c.WriteSimple(flags)
	c.WriteSimple(access)
	c.WriteBulkString("begin_search")
	c.WriteMap(2)
	c.WriteBulkString("type")
	c.WriteBulkString("index")
	c.WriteBulkString("spec")
	c.WriteMap(1)
	c.WriteBulkString("index")
	c.WriteInt(int64(cmd.FirstKey))
	c.WriteBulkString("find_keys")
	c.WriteMap(2)
	c.WriteBulkString("type")
	c.WriteBulkString("range")
	c.WriteBulkString("spec")
	c.WriteMap(3)
	c.WriteBulkString("lastkey")
	last := 0
	if cmd.LastKey < 0 {
		last = -1
	} else {
		last = cmd.LastKey - cmd.FirstKey
	}
	c.WriteInt(int64(last))
	c.WriteBulkString("keystep")
	c.WriteInt(int64(cmd.KeyStep))
	c.WriteBulkString("limit")
	c.WriteInt(0)
}

func aclCategories(cmd *Command) []string {
	var cats []string
	switch {
	case cmd.Flags&FlagWrite != 0:
		cats = append(cats, "@write")
	case cmd.Flags&FlagReadonly != 0:
		cats = append(cats, "@read")
	}
	if cmd.Flags&FlagFast != 0 {
		cats = append(cats, "@fast")
	} else {
		cats = append(cats, "@slow")
	}
	if cmd.Flags&FlagAdmin != 0 {
		cats = append(cats, "@admin", "@dangerous")
	}
	switch cmd.Group {
	case "ratelimit":
		cats = append(cats, "@ratelimit")
	case "generic":
		cats = append(cats, "@keyspace")
	case "connection":
		cats = append(cats, "@connection")
	}
	return cats
}

// writeCommandDocs appends one command's COMMAND DOCS map.
func (c *Conn) writeCommandDocs(cmd *Command) {
	n := 4
	if len(cmd.Args) > 0 {
		n++
	}
	if len(cmd.Subcommands) > 0 {
		n++
	}
	c.WriteMap(n)
	c.WriteBulkString("summary")
	c.WriteBulkString(cmd.Summary)
	c.WriteBulkString("since")
	c.WriteBulkString(cmd.Since)
	c.WriteBulkString("group")
	c.WriteBulkString(cmd.Group)
	c.WriteBulkString("complexity")
	c.WriteBulkString(cmd.Complexity)
	if len(cmd.Args) > 0 {
		c.WriteBulkString("arguments")
		c.writeArgDocs(cmd.Args)
	}
	if len(cmd.Subcommands) > 0 {
		c.WriteBulkString("subcommands")
		c.WriteMap(len(cmd.Subcommands))
		for _, sub := range cmd.Subcommands {
			c.WriteBulkString(sub.fullName)
			c.writeCommandDocs(sub)
		}
	}
}

func (c *Conn) writeArgDocs(args []Arg) {
	c.WriteArray(len(args))
	for _, a := range args {
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		n := 2
		display := a.Type != "pure-token" && a.Type != "oneof" && a.Type != "block"
		if display {
			n++
		}
		if a.Token != "" {
			n++
		}
		if len(flags) > 0 {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		c.WriteMap(n)
		c.WriteBulkString("name")
		c.WriteBulkString(a.Name)
		c.WriteBulkString("type")
		c.WriteBulkString(a.Type)
		if display {
			c.WriteBulkString("display_text")
			c.WriteBulkString(a.Name)
		}
		if a.Token != "" {
			c.WriteBulkString("token")
			c.WriteBulkString(a.Token)
		}
		if len(flags) > 0 {
			c.WriteBulkString("flags")
			c.WriteSet(len(flags))
			for _, f := range flags {
				c.WriteSimple(f)
			}
		}
		if len(a.Args) > 0 {
			c.WriteBulkString("arguments")
			c.writeArgDocs(a.Args)
		}
	}
}
