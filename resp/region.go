package resp

import (
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/shards"
)

// RegisterRegions adds the commands of the region layer to s, backed by g:
// REGION.EXEC (what peer regions send) and REGION STATUS. INFO regions is
// served from Config.Regions. Call it once, before s serves.
func RegisterRegions(s *Server, g *region.Gate) {
	s.gate = g
	for _, cmd := range commands(registerRegion) {
		s.Handle(cmd)
	}
}

// gateHandler wraps a region command's handler: it gets the server's
// gate, or answers region.ErrNotConfigured without one.
func gateHandler(h func(c *Conn, g *region.Gate, args [][]byte) error) func(c *Conn, args [][]byte) error {
	return func(c *Conn, args [][]byte) error {
		if g := c.srv.gate; g != nil {
			return h(c, g, args)
		}
		return region.ErrNotConfigured
	}
}

func regionExecHandler(c *Conn, g *region.Gate, args [][]byte) error {
	call, err := region.DecodeExec(args[1:], c.srv.cfg.Parse.MaxLogLimit)
	if err != nil {
		g.RefusedBatch(err)
		return err
	}
	// The home's limit-override and limit-shadow decide a global
	// key, whichever region the request entered by (docs/regions.md).
	if err := c.applyPolicy(&call.Op); err != nil {
		return err
	}
	c.markNoGrow(&call.Op) // maxmemory holds for a peer's decisions as for a client's
	var res shards.Result
	if err := g.Exec(c.srv.ctx, &call, &res); err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	c.WriteNode(region.ExecReply(res.Results))
	return nil
}

func regionApplyHandler(c *Conn, g *region.Gate, args [][]byte) error {
	call, err := region.DecodeApply(args[1:], c.srv.cfg.Parse.MaxLogLimit)
	if err != nil {
		g.RefusedBatch(err)
		return err
	}
	call.NoGrow = c.srv.mem.OOM() // as markNoGrow: over maxmemory, no new keys
	dup, err := g.Apply(c.srv.ctx, &call)
	if err != nil {
		return err
	}
	if dup {
		c.WriteSimple("DUP")
	} else {
		c.WriteOK()
	}
	return nil
}

func regionStatusHandler(c *Conn, g *region.Gate, _ [][]byte) error {
	st := g.Status()
	writeFieldMap(c, st.Fields())
	return nil
}
