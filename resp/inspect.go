package resp

import (
	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// CL.INSPECT, the limit-override and limit-shadow settings, and the
// violations log's settings.

// policySettings are CONFIG GET/SET limit-override, limit-shadow (given
// to Config.ReplicateSetting in a group), violations-log and
// violations-log-rate.
func (s *Server) policySettings() []Setting {
	return append(s.cfg.Policy.Settings(s.cfg.ReplicateSetting), s.cfg.Violations.Settings()...)
}

// applyPolicy runs the decision path's first stage (decide.Rules: the
// limit-override and limit-shadow rules) on op (parsed, on keys), before
// the op is submitted: the logged op carries the final parameters, so
// every replica applies the same (limitpolicy's DESIGN.md).
func (c *Conn) applyPolicy(op *shards.Op) error {
	if err := c.srv.rules().Apply(op); err != nil {
		return &textError{"ERR " + err.Error()}
	}
	return nil
}

// rules is the decision path's rules stage over this server's Policy.
func (s *Server) rules() decide.Rules {
	return decide.Rules{Policy: s.cfg.Policy, Parse: s.cfg.Parse}
}

// violation writes a limited decision on key to the violations log.
func violation(c *Conn, key []byte) {
	if v := c.srv.cfg.Violations; v.Enabled() {
		v.Limited(c.srv.now(), key, c.cur.Name, "")
	}
}

func inspectHandler(c *Conn, args [][]byte) error {
	now, err := c.readNow()
	if err != nil {
		return err
	}
	st, p, known, ok := c.srv.backend.Store().Inspect(args[1], now)
	if !ok {
		c.WriteNull()
		return nil
	}
	in := shards.Describe(st, p, known, now)
	fields := in.Fields()
	n := 4 + len(fields)
	if in.Leases != nil {
		n++
	}
	if len(in.Waiting) > 0 {
		n++
	}
	c.WriteMap(n)
	c.WriteBulkString("algorithm")
	c.WriteBulkString(in.Kind.String())
	c.WriteBulkString("params")
	if in.Known {
		c.WriteBulkString("known")
	} else {
		c.WriteBulkString("unknown")
	}
	for _, f := range fields {
		c.WriteBulkString(f.Name)
		if f.Unknown {
			c.WriteNull()
		} else {
			c.WriteInt(f.Value)
		}
	}
	m := c.srv.cfg.Policy.Lookup(args[1])
	c.WriteBulkString("override")
	if m.Override != nil {
		c.WriteBulkString(m.Override.String())
	} else {
		c.WriteNull()
	}
	c.WriteBulkString("shadow")
	if m.ShadowOK {
		c.WriteBulkString(m.Shadow)
	} else {
		c.WriteNull()
	}
	list := func(name string, ls []engine.Lease) {
		c.WriteBulkString(name)
		c.WriteArray(len(ls))
		for _, l := range ls {
			c.WriteArray(3)
			c.WriteBulkString(l.ID)
			c.WriteInt(l.Units)
			c.WriteInt(engine.CeilMillis(l.ExpireAt - now))
		}
	}
	if in.Leases != nil {
		list("leases", in.Leases)
	}
	if len(in.Waiting) > 0 {
		list("waiting", in.Waiting)
	}
	return nil
}
