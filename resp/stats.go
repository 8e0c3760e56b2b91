package resp

import "sync/atomic"

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

// serverStats are the server-wide counters.
type serverStats struct {
	connections   atomic.Int64 // total_connections_received
	rejectedConns atomic.Int64 // rejected_connections
	errors        atomic.Int64 // total_error_replies
	closed        []cmdStats   // totals of closed connections, by command index
}

// absorb adds a closing connection's counters to the server's totals.
func (st *serverStats) absorb(c *Conn) {
	for i := range c.stats {
		var d statsSnapshot
		c.stats[i].addTo(&d)
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
		for i := range c.stats {
			c.stats[i].addTo(&out[i])
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
		for i := range c.stats {
			c.stats[i].reset()
		}
	}
	s.mu.Unlock()
	s.stats.connections.Store(0)
	s.stats.rejectedConns.Store(0)
	s.stats.errors.Store(0)
}
