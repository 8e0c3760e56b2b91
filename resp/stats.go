package resp

import (
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/latency"
	"github.com/cellserver/cellserver/internal/serverstats"
)

// cmdStats counts one command's calls. Each connection owns one array of
// them (written by its goroutine only, so the atomics never contend); INFO
// sums the live connections and the totals of closed ones.
type cmdStats struct {
	calls    atomic.Int64
	nanos    atomic.Int64
	rejected atomic.Int64 // refused before running: arity, NOAUTH
	failed   atomic.Int64 // ran and answered an error
	allowed  atomic.Int64 // limiter decisions
	limited  atomic.Int64
}

// statsSnapshot is a plain copy of cmdStats.
type statsSnapshot struct {
	calls, nanos, rejected, failed, allowed, limited int64
}

func (s *cmdStats) addTo(d *statsSnapshot) {
	d.calls += s.calls.Load()
	d.nanos += s.nanos.Load()
	d.rejected += s.rejected.Load()
	d.failed += s.failed.Load()
	d.allowed += s.allowed.Load()
	d.limited += s.limited.Load()
}

func (s *cmdStats) add(d *statsSnapshot) {
	s.calls.Add(d.calls)
	s.nanos.Add(d.nanos)
	s.rejected.Add(d.rejected)
	s.failed.Add(d.failed)
	s.allowed.Add(d.allowed)
	s.limited.Add(d.limited)
}

func (s *cmdStats) reset() {
	s.calls.Store(0)
	s.nanos.Store(0)
	s.rejected.Store(0)
	s.failed.Store(0)
	s.allowed.Store(0)
	s.limited.Store(0)
}

// tally is a connection's accounting of its commands: its counters per
// command (stats), the decisions of the command or run of writes in
// progress by key class until they are accounted (classes, classes.go),
// and the generator that picks the decisions the heavy-hitter summaries
// sample (hotRand, hotkeys.go). The connection's goroutine or loop writes
// it; other goroutines read the counters' atomics only.
type tally struct {
	stats   []cmdStats // per command, indexed by Command.index
	classes classTally
	hotRand hotkeys.Sampler
}

// serverStats are the server-wide counters.
type serverStats struct {
	connections   atomic.Int64 // total_connections_received
	rejectedConns atomic.Int64 // rejected_connections
	errors        atomic.Int64 // total_error_replies
	evicted       atomic.Int64 // evicted_keys (maxmemory volatile-ttl)
	queryLimited  atomic.Int64 // clients closed by client-query-buffer-limit
	queryTimeouts atomic.Int64 // clients closed by the query timeout
	outputLimited atomic.Int64 // clients closed by client-output-buffer-limit
	// protectedDenied counts clients refused by protected mode (also
	// counted in rejectedConns, as Redis counts them).
	protectedDenied atomic.Int64
	closed          []cmdStats // totals of closed connections, by command index
}

// absorb adds a closing connection's counters to the server's totals.
func (st *serverStats) absorb(c *Conn) {
	for i := range c.acct.stats {
		var d statsSnapshot
		c.acct.stats[i].addTo(&d)
		st.closed[i].add(&d)
	}
}

// commandStats returns the counters of every command, indexed like
// table.all: closed connections plus live ones.
func (s *Server) commandStats() []statsSnapshot {
	out := make([]statsSnapshot, len(s.table.all))
	for i := range s.stats.closed {
		s.stats.closed[i].addTo(&out[i])
	}
	s.mu.Lock()
	for c := range s.conns {
		for i := range c.acct.stats {
			c.acct.stats[i].addTo(&out[i])
		}
	}
	s.mu.Unlock()
	return out
}

// resetStats is CONFIG RESETSTAT.
func (s *Server) resetStats() {
	for i := range s.stats.closed {
		s.stats.closed[i].reset()
	}
	s.mu.Lock()
	for c := range s.conns {
		for i := range c.acct.stats {
			c.acct.stats[i].reset()
		}
	}
	s.mu.Unlock()
	s.stats.connections.Store(0)
	s.stats.rejectedConns.Store(0)
	s.stats.errors.Store(0)
	s.stats.evicted.Store(0)
	s.stats.queryLimited.Store(0)
	s.stats.queryTimeouts.Store(0)
	s.stats.outputLimited.Store(0)
	s.cmem.ResetEvicted()
	s.stats.protectedDenied.Store(0)
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

// Stats, CommandStats, WaitStats and HotKey are the snapshot Server.Stats
// returns (cmd/cellserver's metrics read it); serverstats holds them.
type (
	Stats        = serverstats.Stats
	CommandStats = serverstats.CommandStats
	WaitStats    = serverstats.WaitStats
	HotKey       = serverstats.HotKey
)

// Stats returns a snapshot of the server's counters. It is safe to call
// concurrently with serving, at any time; its cost is O(commands ×
// connections).
func (s *Server) Stats() Stats {
	st := Stats{
		Wait:                 s.waits.stats(),
		Classes:              s.classes.Counts(),
		ConnectedClients:     s.clients.Load(),
		ConnectionsReceived:  s.stats.connections.Load(),
		RejectedConnections:  s.stats.rejectedConns.Load(),
		ProtectedModeDenied:  s.stats.protectedDenied.Load(),
		AuthFailures:         s.guard.Failures(),
		AuthClosed:           s.guard.Disconnects(),
		QueryBufferClosed:    s.stats.queryLimited.Load(),
		QueryTimeoutClosed:   s.stats.queryTimeouts.Load(),
		OutputBufferClosed:   s.stats.outputLimited.Load(),
		EvictedClients:       s.cmem.Evicted(),
		ClientMemory:         s.cmem.Total(),
		ClientMemoryLimit:    s.cmem.Bound(),
		ErrorReplies:         s.stats.errors.Load(),
		TLSHandshakeFailures: s.tlsFailures(),
		EvictedKeys:          s.stats.evicted.Load(),
		MaxMemory:            s.maxMemory.Load(),
		UsedMemory:           s.backend.Store().UsedBytes(),
		OOM:                  s.oom.Load(),
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
	if lat == nil {
		return st // not serving yet
	}
	cs := s.commandStats()
	for _, cmd := range s.table.all {
		c := cs[cmd.index]
		if c.calls == 0 && c.rejected == 0 && c.failed == 0 {
			continue
		}
		st.Commands = append(st.Commands, CommandStats{
			Name: cmd.fullName, Limiter: cmd.Group == "ratelimit",
			Calls: c.calls, Rejected: c.rejected, Failed: c.failed, Allowed: c.allowed, Limited: c.limited,
			Time: time.Duration(c.nanos), Latency: lat.Snapshot(cmd.index),
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
