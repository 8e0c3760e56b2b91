package resp

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/replication"
)

func timeHandler(c *Conn, _ [][]byte) error {
	now := c.srv.now()
	c.WriteArray(2)
	c.WriteBulkInt(now / 1e9)
	c.WriteBulkInt(now % 1e9 / 1e3)
	return nil
}

func saveHandler(c *Conn, _ [][]byte) error {
	p := c.srv.cfg.Persistence
	if p == nil {
		return ErrPersistenceOff
	}
	return okOr(c, p.Save())
}

func bgsaveHandler(c *Conn, args [][]byte) error {
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
}

func lastsaveHandler(c *Conn, _ [][]byte) error {
	if p := c.srv.cfg.Persistence; p != nil {
		c.WriteInt(p.LastSave())
	} else {
		c.WriteInt(c.srv.started / 1e9)
	}
	return nil
}

func roleHandler(c *Conn, _ [][]byte) error {
	r := replication.Role{Leader: true}
	if cl := c.srv.cfg.Cluster; cl != nil {
		r = cl.Role()
	}
	c.WriteNode(r.Reply())
	return nil
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
			return errNoShutdown
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
