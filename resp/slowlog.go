package resp

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/slowlog"
)

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

func slowlogGetHandler(c *Conn, args [][]byte) error {
	n := int64(10)
	if len(args) == 3 {
		v, err := engine.ParseInt(args[2])
		if err != nil {
			return err
		}
		if v < -1 {
			return errSlowlogCount
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
}

func slowlogLenHandler(c *Conn, _ [][]byte) error {
	c.WriteInt(int64(c.srv.slowlog.Len()))
	return nil
}

func slowlogResetHandler(c *Conn, _ [][]byte) error {
	c.srv.slowlog.Reset()
	c.WriteOK()
	return nil
}
