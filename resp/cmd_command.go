package resp

import (
	"bytes"

	"github.com/cellserver/cellserver/internal/cmdmeta"
)

// COMMAND and its subcommands: cmdmeta says what an entry holds (Info,
// Docs), these handlers choose the commands and write the replies.

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
		return commandHandler(c, args)
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
		m := cmd.meta()
		c.WriteNode(cmdmeta.Docs(&m, cmd.fullName))
	}
	return nil
}

// lookupName finds a command by name, or a subcommand by "container|sub",
// in any letter case.
func (t *table) lookupName(b []byte) *Command {
	name, sub, isSub := bytes.Cut(b, []byte{'|'})
	cmd := t.lookup(name)
	switch {
	case !isSub:
		return cmd
	case cmd == nil || cmd.subs == nil:
		return nil
	}
	return lookupFold(cmd.subs, sub)
}

// writeCommandInfo appends a COMMAND INFO entry.
func (c *Conn) writeCommandInfo(cmd *Command) {
	m := cmd.meta()
	c.WriteNode(cmdmeta.Info(&m, cmd.fullName))
}
