package resp

import (
	"crypto/subtle"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
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
	if err := c.auth.authenticate(c, user, pass, len(args) == 2); err != nil {
		return err
	}
	c.WriteOK()
	return nil
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
			if err := validName(args[i+1]); err != nil {
				return err
			}
			name, setName = args[i+1], true
			i++
		default:
			return &argRefusal{refuseHelloOption, string(clip(args[i]))}
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
			return errClientName
		}
	}
	return nil
}

func clientIDHandler(c *Conn, _ [][]byte) error { c.WriteInt(c.id); return nil }

func clientSetnameHandler(c *Conn, args [][]byte) error {
	if err := validName(args[2]); err != nil {
		return err
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
		return &argRefusal{refuseClientOption, string(clip(args[2]))}
	}
	for _, ch := range args[3] {
		if ch < '!' || ch > '~' {
			return &argRefusal{refuseClientInfo, strings.ToLower(string(args[2]))}
		}
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
		c.cmem.noEvict.Store(true)
	case equalFoldString(args[2], "off"):
		c.cmem.noEvict.Store(false)
		c.srv.cmem.Request() // it may be over the limit already
	default:
		return engine.ErrSyntax
	}
	c.WriteOK()
	return nil
}

func clientInfoHandler(c *Conn, _ [][]byte) error {
	c.WriteBulk(c.srv.appendClientLine(nil, c, c.srv.now()))
	return nil
}

// killFilter is CLIENT KILL's selection; zero fields match every client.
type killFilter struct {
	id          int64
	addr, laddr string
	user        string
	noNormal    bool  // TYPE other than normal: matches none (every client is normal)
	maxAge      int64 // seconds; 0: any
	skipMe      bool
}

func (f *killFilter) match(c, o *Conn, now int64) bool {
	switch {
	case f.noNormal, f.skipMe && o == c, o.closing.Load():
		return false
	case f.id != 0 && o.id != f.id, f.addr != "" && o.addr != f.addr, f.laddr != "" && o.laddr != f.laddr:
		return false
	case f.user != "" && f.user != "default":
		return false
	case f.maxAge > 0 && (now-o.start)/1e9 < f.maxAge:
		return false
	}
	return true
}

// parseKillFilter reads CLIENT KILL's new form (args after KILL).
func parseKillFilter(args [][]byte) (*killFilter, error) {
	f := &killFilter{skipMe: true}
	if len(args)%2 != 0 {
		return nil, engine.ErrSyntax
	}
	for i := 0; i < len(args); i += 2 {
		v := args[i+1]
		switch {
		case equalFoldString(args[i], "id"):
			id, err := engine.ParseInt(v)
			if err != nil || id < 1 {
				return nil, errKillClientID
			}
			f.id = id
		case equalFoldString(args[i], "type"):
			switch strings.ToLower(string(v)) {
			case "normal":
			case "master", "replica", "slave", "pubsub":
				f.noNormal = true
			default:
				return nil, &argRefusal{refuseClientType, string(clip(v))}
			}
		case equalFoldString(args[i], "addr"):
			f.addr = string(v)
		case equalFoldString(args[i], "laddr"):
			f.laddr = string(v)
		case equalFoldString(args[i], "user"):
			f.user = string(v)
		case equalFoldString(args[i], "maxage"):
			age, err := engine.ParseInt(v)
			if err != nil || age < 0 {
				return nil, engine.ErrSyntax
			}
			f.maxAge = age
		case equalFoldString(args[i], "skipme"):
			switch {
			case equalFoldString(v, "yes"):
				f.skipMe = true
			case equalFoldString(v, "no"):
				f.skipMe = false
			default:
				return nil, engine.ErrSyntax
			}
		default:
			return nil, engine.ErrSyntax
		}
	}
	return f, nil
}

// clientKillHandler closes the matching clients: another connection at
// once (whatever it is doing ends at its next read or write), the calling
// one after this reply.
func clientKillHandler(c *Conn, args [][]byte) error {
	old := len(args) == 3
	var f *killFilter
	if old {
		f = &killFilter{addr: string(args[2])}
	} else {
		var err error
		if f, err = parseKillFilter(args[2:]); err != nil {
			return err
		}
	}
	now := c.srv.now()
	var victims []*Conn
	c.srv.mu.Lock()
	for o := range c.srv.conns {
		if f.match(c, o, now) {
			victims = append(victims, o)
		}
	}
	c.srv.mu.Unlock()
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
	var ids map[int64]bool
	typeFilter := ""
	for i := 2; i < len(args); i++ {
		switch {
		case equalFoldString(args[i], "type") && i+1 < len(args):
			t := strings.ToLower(string(args[i+1]))
			switch t {
			case "normal", "master", "replica", "slave", "pubsub":
			default:
				return &argRefusal{refuseClientType, string(clip(args[i+1]))}
			}
			typeFilter = t
			i++
		case equalFoldString(args[i], "id") && i+1 < len(args):
			ids = make(map[int64]bool)
			for i++; i < len(args); i++ {
				id, err := engine.ParseInt(args[i])
				if err != nil || id < 1 {
					return errInvalidClientID
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
			// A killed client is gone for CLIENT LIST at once, as in
			// Redis, though its goroutine or loop may still be closing it.
			if (ids == nil || ids[o.id]) && !o.closing.Load() {
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
	// multi is -1 outside a transaction, else the commands queued (Redis's
	// flag x marks a client inside MULTI, e one with CLIENT NO-EVICT on).
	multi, multiMem := o.multi.Load(), o.multiMem.Load()
	b = append(b, " flags="...)
	switch noEvict := o.cmem.noEvict.Load(); {
	case multi >= 0 && noEvict:
		b = append(b, "xe"...)
	case multi >= 0:
		b = append(b, 'x')
	case noEvict:
		b = append(b, 'e')
	default:
		b = append(b, 'N')
	}
	b = append(b, " db=0 sub=0 psub=0 ssub=0 multi="...)
	b = strconv.AppendInt(b, multi, 10)
	b = append(b, " watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem="...)
	b = strconv.AppendInt(b, multiMem, 10)
	b = append(b, " rbs=0 rbp=0 obl=0 oll=0 omem="...)
	b = strconv.AppendInt(b, o.ob.omem.Load(), 10)
	b = append(b, " tot-mem="...)
	b = strconv.AppendInt(b, o.cmem.mem.Load(), 10)
	b = append(b, " events=r cmd="...)
	b = append(b, cmd...)
	b = append(b, " user=default redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(proto), 10)
	b = append(b, " lib-name="...)
	b = append(b, lib...)
	b = append(b, " lib-ver="...)
	b = append(b, ver...)
	return append(b, '\n')
}
