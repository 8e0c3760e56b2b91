package serverstats

import "sync/atomic"

// Counters count one command's calls. Each connection owns one array of
// them, indexed like the command table (written by its goroutine or loop
// only, so the atomics never contend); INFO and the metrics sum the live
// connections and the totals of closed ones.
type Counters struct {
	Calls    atomic.Int64
	Nanos    atomic.Int64
	Rejected atomic.Int64 // refused before running: arity, NOAUTH
	Failed   atomic.Int64 // ran and answered an error
	Allowed  atomic.Int64 // limiter decisions
	Limited  atomic.Int64
}

// Counts is a plain copy of Counters.
type Counts struct {
	Calls, Nanos, Rejected, Failed, Allowed, Limited int64
}

// AddTo adds the counters to d.
func (c *Counters) AddTo(d *Counts) {
	d.Calls += c.Calls.Load()
	d.Nanos += c.Nanos.Load()
	d.Rejected += c.Rejected.Load()
	d.Failed += c.Failed.Load()
	d.Allowed += c.Allowed.Load()
	d.Limited += c.Limited.Load()
}

// Absorb adds src's counters to c (a closing connection's, to the
// server's totals).
func (c *Counters) Absorb(src *Counters) {
	var d Counts
	src.AddTo(&d)
	c.Calls.Add(d.Calls)
	c.Nanos.Add(d.Nanos)
	c.Rejected.Add(d.Rejected)
	c.Failed.Add(d.Failed)
	c.Allowed.Add(d.Allowed)
	c.Limited.Add(d.Limited)
}

// Reset sets the counters to 0 (CONFIG RESETSTAT).
func (c *Counters) Reset() {
	c.Calls.Store(0)
	c.Nanos.Store(0)
	c.Rejected.Store(0)
	c.Failed.Store(0)
	c.Allowed.Store(0)
	c.Limited.Store(0)
}

// ServerCounters are a server's counters that are not per command (INFO
// stats, the metrics). Safe for concurrent use.
type ServerCounters struct {
	Connections   atomic.Int64 // total_connections_received
	RejectedConns atomic.Int64 // rejected_connections
	Errors        atomic.Int64 // total_error_replies
	Evicted       atomic.Int64 // evicted_keys (maxmemory volatile-ttl)
	QueryLimited  atomic.Int64 // clients closed by client-query-buffer-limit
	QueryTimeouts atomic.Int64 // clients closed by the query timeout
	OutputLimited atomic.Int64 // clients closed by client-output-buffer-limit
	// ProtectedDenied counts clients refused by protected mode (also
	// counted in RejectedConns, as Redis counts them).
	ProtectedDenied atomic.Int64
	// Closed are the totals of closed connections' per-command counters,
	// indexed like the command table.
	Closed []Counters
}

// Absorb adds a closing connection's per-command counters to Closed.
func (st *ServerCounters) Absorb(conn []Counters) {
	for i := range conn {
		st.Closed[i].Absorb(&conn[i])
	}
}

// Reset sets the counters to 0 (CONFIG RESETSTAT), but for Closed: the
// server resets those with the live connections' counters.
func (st *ServerCounters) Reset() {
	for _, c := range []*atomic.Int64{&st.Connections, &st.RejectedConns, &st.Errors, &st.Evicted,
		&st.QueryLimited, &st.QueryTimeouts, &st.OutputLimited, &st.ProtectedDenied} {
		c.Store(0)
	}
}
