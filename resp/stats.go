package resp

import (
	"time"

	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/internal/latency"
	"github.com/cellserver/cellserver/internal/serverstats"
)

// tally is a connection's accounting of its commands: its counters per
// command (stats, indexed by Command.index), the decisions of the command
// or run of writes in progress by key class until they are accounted
// (classes, classes.go), and the generator that picks the decisions the
// heavy-hitter summaries sample (hotRand, hotkeys.go). The connection's
// goroutine or loop writes it; other goroutines read the counters'
// atomics only.
type tally struct {
	stats   []serverstats.Counters
	classes keyclass.Tally
	hotRand hotkeys.Sampler
}

// commandStats returns the counters of every command, indexed like
// table.all: closed connections plus live ones.
func (s *Server) commandStats() []serverstats.Counts {
	out := make([]serverstats.Counts, len(s.table.all))
	eachCounters(s, func(i int, c *serverstats.Counters) { c.AddTo(&out[i]) })
	return out
}

// eachCounters calls fn with every command's counters, by command index:
// the closed connections' totals, then each live connection's (under the
// server's lock).
func eachCounters(s *Server, fn func(i int, c *serverstats.Counters)) {
	for i := range s.stats.Closed {
		fn(i, &s.stats.Closed[i])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		for i := range c.acct.stats {
			fn(i, &c.acct.stats[i])
		}
	}
}

// resetStats is CONFIG RESETSTAT.
func (s *Server) resetStats() {
	eachCounters(s, func(_ int, c *serverstats.Counters) { c.Reset() })
	s.stats.Reset()
	s.cmem.ResetEvicted()
	s.guard.ResetCounters()
	if l := s.latencyHists(); l != nil {
		l.Reset()
	}
	s.classes.Reset()
}

func (s *Server) latencyHists() *latency.Striped {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latency
}

// Stats returns a snapshot of the server's counters (cmd/cellserver's
// metrics read it), its Commands those called, rejected or failed at
// least once. It is safe to call concurrently with serving, at any time;
// its cost is O(commands × connections).
func (s *Server) Stats() serverstats.Stats { return statsOf(s, true, false) }

// statsOf returns s's counters, with commands those of the commands too:
// every command of the table when all, else those called, rejected or
// failed at least once.
func statsOf(s *Server, commands, all bool) serverstats.Stats {
	st := serverstats.Stats{
		Wait:                 s.waits.done.Snapshot(s.waits.count.Load()),
		Classes:              s.classes.Counts(),
		ConnectedClients:     s.clients.Load(),
		ConnectionsReceived:  s.stats.Connections.Load(),
		RejectedConnections:  s.stats.RejectedConns.Load(),
		ProtectedModeDenied:  s.stats.ProtectedDenied.Load(),
		AuthFailures:         s.guard.Failures(),
		AuthClosed:           s.guard.Disconnects(),
		QueryBufferClosed:    s.stats.QueryLimited.Load(),
		QueryTimeoutClosed:   s.stats.QueryTimeouts.Load(),
		OutputBufferClosed:   s.stats.OutputLimited.Load(),
		EvictedClients:       s.cmem.Evicted(),
		ClientMemory:         s.cmem.Total(),
		ClientMemoryLimit:    s.cmem.Bound(),
		ErrorReplies:         s.stats.Errors.Load(),
		TLSHandshakeFailures: s.tlsFailures(),
		EvictedKeys:          s.stats.Evicted.Load(),
		MaxMemory:            s.mem.Limit(),
		UsedMemory:           s.backend.Store().UsedBytes(),
		OOM:                  s.mem.OOM(),
		SlowlogLen:           s.slowlog.Len(),
		ShadowLimited:        s.backend.Store().Shadowed(),
	}
	ps := s.cfg.Policy.Stats()
	st.LimitOverridden, st.ShadowRequests = ps.Overridden, ps.ShadowRequests
	vs := s.cfg.Violations.Stats()
	st.ViolationsLogged, st.ViolationsSuppressed = vs.Logged, vs.Suppressed
	if h := s.hot.Load(); h != nil {
		st.HotRequested = topKeys(s.table, h.Requested, hotTop)
		st.HotLimited = topKeys(s.table, h.Limited, hotTop)
	}
	lat := s.latencyHists()
	if !commands || lat == nil { // nil: not serving yet
		return st
	}
	cs := s.commandStats()
	for _, cmd := range s.table.all {
		c := cs[cmd.index]
		if !all && c.Calls == 0 && c.Rejected == 0 && c.Failed == 0 {
			continue
		}
		limiter := cmd.Group == "ratelimit"
		st.Commands = append(st.Commands, serverstats.CommandStats{
			Name: cmd.fullName, Limiter: limiter, Decides: limiter && cmd.Finish != nil,
			Calls: c.Calls, Rejected: c.Rejected, Failed: c.Failed, Allowed: c.Allowed, Limited: c.Limited,
			Time: time.Duration(c.Nanos), Latency: lat.Snapshot(cmd.index),
		})
	}
	return st
}

// tlsFailures reads Config.TLSHandshakeFailures (0 without it).
func (s *Server) tlsFailures() int64 {
	if f := s.cfg.TLSHandshakeFailures; f != nil {
		return f()
	}
	return 0
}
