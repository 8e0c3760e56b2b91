package resp

import (
	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/reply"
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
	params := "unknown"
	if in.Known {
		params = "known"
	}
	m := reply.Map(reply.Bulk("algorithm"), reply.Bulk(in.Kind.String()), reply.Bulk("params"), reply.Bulk(params))
	for _, f := range in.Fields() {
		m.Elems = append(m.Elems, reply.Bulk(f.Name), orNull(!f.Unknown, reply.Int(f.Value)))
	}
	pol := c.srv.cfg.Policy.Lookup(args[1])
	override := reply.Null()
	if pol.Override != nil {
		override = reply.Bulk(pol.Override.String())
	}
	m.Elems = append(m.Elems, reply.Bulk("override"), override, reply.Bulk("shadow"), orNull(pol.ShadowOK, reply.Bulk(pol.Shadow)))
	list := func(ls []engine.Lease) reply.Node {
		a := reply.Array()
		for _, l := range ls {
			a.Elems = append(a.Elems, reply.Array(reply.Bulk(l.ID), reply.Int(l.Units), reply.Int(engine.CeilMillis(l.ExpireAt-now))))
		}
		return a
	}
	if in.Leases != nil {
		m.Elems = append(m.Elems, reply.Bulk("leases"), list(in.Leases))
	}
	if len(in.Waiting) > 0 {
		m.Elems = append(m.Elems, reply.Bulk("waiting"), list(in.Waiting))
	}
	c.WriteNode(m)
	return nil
}

// orNull is n when ok, else the null reply.
func orNull(ok bool, n reply.Node) reply.Node {
	if ok {
		return n
	}
	return reply.Null()
}
