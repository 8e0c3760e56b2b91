package resp

import (
	"strconv"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/limitpolicy"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/shards"
)

// CL.INSPECT, the limit-override and limit-shadow settings, and the
// violations log's settings.

// policySettings are CONFIG GET/SET limit-override, limit-shadow,
// violations-log and violations-log-rate.
func (s *Server) policySettings() []Setting {
	p := s.cfg.Policy
	set := func(name, canonical string, apply func()) error {
		if s.cfg.ReplicateSetting != nil {
			return s.cfg.ReplicateSetting(name, canonical)
		}
		apply()
		return nil
	}
	return []Setting{
		{Name: "limit-override", Get: func() string { return limitpolicy.FormatOverrides(p.Overrides()) }, Set: func(v string) error {
			o, err := limitpolicy.ParseOverrides(v)
			if err != nil {
				return err
			}
			return set("limit-override", limitpolicy.FormatOverrides(o), func() { p.SetOverrides(o) })
		}},
		{Name: "limit-shadow", Get: func() string { return limitpolicy.FormatShadow(p.Shadow()) }, Set: func(v string) error {
			sh, err := limitpolicy.ParseShadow(v)
			if err != nil {
				return err
			}
			return set("limit-shadow", limitpolicy.FormatShadow(sh), func() { p.SetShadow(sh) })
		}},
		{Name: "violations-log", Get: func() string {
			if s.cfg.Violations.Enabled() {
				return "yes"
			}
			return "no"
		}, Set: func(v string) error {
			b, err := setting.ParseYesNo(v)
			if err != nil {
				return err
			}
			s.cfg.Violations.SetEnabled(b)
			return nil
		}},
		{Name: "violations-log-rate", Get: func() string { return strconv.FormatInt(s.cfg.Violations.Rate(), 10) }, Set: func(v string) error {
			n, err := setting.Must("violations-log-rate").ParseLive(v)
			if err != nil {
				return err
			}
			s.cfg.Violations.SetRate(n)
			return nil
		}},
	}
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
	m := c.srv.cfg.Policy.Lookup(args[1])
	var leases, waiting []engine.Lease
	if st.Kind == engine.KindConcurrency {
		leases, waiting = liveLeases(st.Leases, now)
		if len(waiting) > 0 {
			c.WriteMap(14)
		} else {
			c.WriteMap(13)
		}
	} else {
		c.WriteMap(12)
	}
	c.WriteBulkString("algorithm")
	c.WriteBulkString(st.Kind.String())
	c.WriteBulkString("params")
	var r engine.Result
	switch {
	case known && st.Kind == engine.KindConcurrency:
		// No peek: what an acquire would find is max and the units the
		// live leases hold.
		r.Limit = p.Burst
		for _, l := range append(leases, waiting...) {
			r.Remaining += l.Units
		}
		r.Remaining = max(p.Burst-r.Remaining, 0)
	case known:
		peek := p.Request(st.Kind, 0)
		if peek.Validate() != nil {
			known = false // parameters that cannot peek (never stored so)
		} else {
			_, r = engine.Apply(st, &peek, now)
		}
	}
	if known {
		c.WriteBulkString("known")
	} else {
		c.WriteBulkString("unknown")
	}
	intOrNull := func(name string, v int64) {
		c.WriteBulkString(name)
		if known {
			c.WriteInt(v)
		} else {
			c.WriteNull()
		}
	}
	interval := int64(0)
	if p.Interval {
		interval = 1
	}
	intOrNull("burst", p.Burst)
	intOrNull("rate", p.Rate)
	intOrNull("period_ms", engine.CeilMillis(p.Period))
	intOrNull("interval", interval)
	intOrNull("limit", r.Limit)
	intOrNull("remaining", r.Remaining)
	ms := engine.CeilMillis(st.ExpireAt - now)
	c.WriteBulkString("reset_ms")
	c.WriteInt(ms)
	c.WriteBulkString("ttl_ms")
	c.WriteInt(ms)
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
	if st.Kind == engine.KindConcurrency {
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
		list("leases", leases)
		if len(waiting) > 0 {
			list("waiting", waiting)
		}
	}
	return nil
}

// liveLeases returns the held leases of ls not expired at now, and the
// waiters in line before their deadline (new slices: the store's array is
// shared and never written).
func liveLeases(ls []engine.Lease, now int64) (held, waiting []engine.Lease) {
	held = make([]engine.Lease, 0, len(ls))
	for _, l := range ls {
		switch {
		case l.ExpireAt <= now:
		case l.Waiting():
			waiting = append(waiting, l)
		default:
			held = append(held, l)
		}
	}
	return held, waiting
}
