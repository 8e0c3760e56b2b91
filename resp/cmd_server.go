package resp

import (
	"cmp"
	"crypto/subtle"
	"slices"
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/clientlist"
	"github.com/cellserver/cellserver/internal/reply"
)

func pingHandler(c *Conn, args [][]byte) error {
	if len(args) == 2 {
		c.WriteBulk(args[1])
	} else {
		c.WriteSimple("PONG")
	}
	return nil
}

func echoHandler(c *Conn, args [][]byte) error { c.WriteBulk(args[1]); return nil }

func quitHandler(c *Conn, _ [][]byte) error { c.WriteOK(); c.quit = true; return nil }

func authHandler(c *Conn, args [][]byte) error {
	user, pass := []byte("default"), args[1]
	if len(args) == 3 {
		user, pass = args[1], args[2]
	}
	return okOr(c, c.auth.authenticate(c, user, pass, len(args) == 2))
}

func selectHandler(c *Conn, args [][]byte) error {
	n, err := engine.ParseInt(args[1])
	if err != nil {
		return err
	}
	if n != 0 {
		return ErrDBIndex
	}
	c.WriteOK()
	return nil
}

// authenticate checks a user name and password against requirepass (any
// password is right for the default user when none is set), under the
// guard against guessing (checkPassword). passOnly is AUTH with one
// argument.
func (a *authState) authenticate(c *Conn, user, pass []byte, passOnly bool) error {
	want := *c.srv.requirePass.Load()
	if want == "" && passOnly {
		return ErrNoPasswordSet
	}
	return a.checkPassword(c, user, func() bool {
		if string(user) != "default" {
			return false
		}
		return want == "" || subtle.ConstantTimeCompare(pass, []byte(want)) == 1
	})
}

func helloHandler(c *Conn, args [][]byte) error {
	proto := c.proto
	if len(args) > 1 {
		v, err := engine.ParseInt(args[1])
		if err != nil {
			return errProtoVersion
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
			if err := c.auth.authenticate(c, args[i+1], args[i+2], false); err != nil {
				return err
			}
			i += 2
		case equalFoldString(args[i], "setname") && i+1 < len(args):
			if !clientlist.ValidName(args[i+1]) {
				return errClientName
			}
			name, setName = args[i+1], true
			i++
		default:
			return refusal(refuseHelloOption, string(clip(args[i])))
		}
	}
	if !c.auth.authed {
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
	c.WriteNode(reply.Map(reply.Bulk("server"), reply.Bulk("cellserver"), reply.Bulk("version"), reply.Bulk(Version),
		reply.Bulk("proto"), reply.Int(proto), reply.Bulk("id"), reply.Int(c.id), reply.Bulk("mode"), reply.Bulk("standalone"),
		reply.Bulk("role"), reply.Bulk(role), reply.Bulk("modules"), reply.Array()))
	return nil
}

func clientIDHandler(c *Conn, _ [][]byte) error { c.WriteInt(c.id); return nil }

func clientSetnameHandler(c *Conn, args [][]byte) error {
	if !clientlist.ValidName(args[2]) {
		return errClientName
	}
	c.mu.Lock()
	c.name = string(args[2])
	c.mu.Unlock()
	c.WriteOK()
	return nil
}

func clientGetnameHandler(c *Conn, _ [][]byte) error {
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	if name == "" {
		c.WriteNull()
	} else {
		c.WriteBulkString(name)
	}
	return nil
}

func clientSetinfoHandler(c *Conn, args [][]byte) error {
	var field *string
	switch {
	case equalFoldString(args[2], "lib-name"):
		field = &c.libName
	case equalFoldString(args[2], "lib-ver"):
		field = &c.libVer
	default:
		return refusal(refuseClientOption, string(clip(args[2])))
	}
	if !clientlist.ValidName(args[3]) {
		return refusal(refuseClientInfo, strings.ToLower(string(args[2])))
	}
	c.mu.Lock()
	*field = string(args[3])
	c.mu.Unlock()
	c.WriteOK()
	return nil
}

func clientNoEvictHandler(c *Conn, args [][]byte) error {
	switch {
	case equalFoldString(args[2], "on"):
		c.cmem.NoEvict.Store(true)
	case equalFoldString(args[2], "off"):
		c.cmem.NoEvict.Store(false)
		c.srv.cmem.Request() // it may be over the limit already
	default:
		return engine.ErrSyntax
	}
	c.WriteOK()
	return nil
}

func clientInfoHandler(c *Conn, _ [][]byte) error {
	c.WriteBulk(appendClientLine(nil, c, c.srv.now()))
	return nil
}

// appendClientLine appends o's CLIENT LIST line at now (internal/clientlist).
func appendClientLine(b []byte, o *Conn, now int64) []byte {
	o.mu.Lock()
	cl := clientlist.Client{Name: o.name, LibName: o.libName, LibVer: o.libVer, Proto: o.pubProto}
	o.mu.Unlock()
	cl.ID, cl.Addr, cl.LAddr = o.id, o.addr, o.laddr
	cl.Age, cl.Idle = (now-o.start)/1e9, (now-o.lastSeen.Load())/1e9
	cl.Multi, cl.MultiMem = o.multi.Load(), o.multiMem.Load()
	cl.NoEvict, cl.OutMem, cl.TotMem = o.cmem.NoEvict.Load(), o.ob.omem.Load(), o.cmem.Mem()
	cl.Cmd = "NULL"
	if last := o.lastCmd.Load(); last != nil {
		cl.Cmd = last.fullName
	}
	return cl.AppendLine(b)
}

// connsWhere returns the connections keep selects, by id. A killed client
// is gone at once, as in Redis, though its goroutine or loop may still be
// closing it.
func connsWhere(s *Server, keep func(o *Conn) bool) []*Conn {
	s.mu.Lock()
	var out []*Conn
	for o := range s.conns {
		if !o.closing.Load() && keep(o) {
			out = append(out, o)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *Conn) int { return cmp.Compare(a.id, b.id) })
	return out
}

// clientKillHandler closes the matching clients: another connection at
// once (whatever it is doing ends at its next read or write), the calling
// one after this reply.
func clientKillHandler(c *Conn, args [][]byte) error {
	old := len(args) == 3
	f := &clientlist.Kill{Addr: string(args[2])}
	if !old {
		var err error
		if f, err = clientlist.ParseKill(args[2:]); err != nil {
			return err
		}
	}
	now := c.srv.now()
	victims := connsWhere(c.srv, func(o *Conn) bool {
		return f.Match(&clientlist.Client{ID: o.id, Addr: o.addr, LAddr: o.laddr, Age: (now - o.start) / 1e9}, o == c)
	})
	for _, o := range victims {
		if o == c {
			c.quit = true
		} else {
			o.closeNow()
		}
	}
	if old {
		if len(victims) == 0 {
			return errNoSuchClient
		}
		c.WriteOK()
		return nil
	}
	c.WriteInt(int64(len(victims)))
	return nil
}

func clientListHandler(c *Conn, args [][]byte) error {
	l, err := clientlist.ParseList(args[2:])
	if err != nil {
		return err
	}
	var out []byte
	now := c.srv.now()
	for _, o := range connsWhere(c.srv, func(o *Conn) bool { return l.Match(o.id) }) {
		out = appendClientLine(out, o, now)
	}
	c.WriteBulk(out)
	return nil
}
