package resp

import (
	"unsafe"

	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/shards"
)

// Client memory (maxmemory-clients), as Redis 7's client eviction: each
// connection measures what it makes the server hold (memUsage) and
// publishes it to the pool (internal/clientmem) when it changed; a
// goroutine closes the largest clients while the total is over the bound.
// See DESIGN.md ("Client memory").

// Sizes of the scratch a connection keeps, per element.
const (
	argSize  = int64(unsafe.Sizeof([]byte(nil)))
	spanSize = int64(unsafe.Sizeof(argSpan{}))
	opSize   = int64(unsafe.Sizeof(shards.Op{}) + unsafe.Sizeof(shards.Result{}))
	slotSize = int64(unsafe.Sizeof(slot{}))
)

// clientMem is the connection's share of the server's clientmem.Pool.
type clientMem struct{ clientmem.Client }

// memUsage is the memory the connection accounts for (CLIENT LIST
// tot-mem), in bytes: its query buffer beyond the initial one every
// connection has, its parsed arguments, its transaction's queue, its reply
// buffer and, on a loop, what gnet keeps of its input and output, and its
// scratch for writes. The fixed cost of a connection (the initial read
// buffer, the Conn itself, a goroutine's stack) is bounded by maxclients
// and not counted. The connection's goroutine or loop only.
func memUsage(c *Conn) int64 {
	rd := c.rd
	n := int64(max(len(rd.buf)-initialReadBuf, 0)) +
		int64(cap(rd.args))*argSize + int64(cap(rd.pendArgs))*spanSize +
		c.tx.Bytes + int64(cap(c.out)) +
		int64(cap(c.wb.ops))*opSize + int64(cap(c.wb.slots))*slotSize
	if c.lp.gc != nil {
		// On a loop, gnet keeps the replies the socket has not taken and
		// the input not read yet (a goroutine connection's pending
		// replies are c.out itself).
		n += c.ob.omem.Load() + int64(c.lp.gc.InboundBuffered())
	}
	return n
}

// trackMem publishes the connection's memory (clientmem.Client.Track).
// The connection's goroutine or loop only.
func (m *clientMem) trackMem(c *Conn) { m.Track(c.srv.cmem, memUsage(c)) }

// release lets go of what a closing connection holds (its transaction,
// buffers and scratch), so that an evicted client's memory is free at once
// even while its transport is still being closed. The connection's
// goroutine or loop only, after its last command.
func release(c *Conn) {
	c.wt.unwait(c) // a reservation stays consumed; it no longer waits here
	c.ccw.abandon(c)
	c.wt.held, c.wt.pending = nil, nil
	c.tx = txState{}
	c.multi.Store(-1)
	c.multiMem.Store(0)
	c.out = nil
	c.rd.buf, c.rd.r, c.rd.w = nil, 0, 0
	c.rd.args, c.rd.pendArgs = nil, nil
	c.wb.ops, c.wb.res, c.wb.slots = nil, nil, nil
}

// evictLoop runs eviction passes (evictClients) when asked, until the
// server's context ends.
func (s *Server) evictLoop() {
	defer s.bg.Done()
	s.cmem.Run(s.ctx, s.evictClients)
}

// evictClients runs one eviction pass (clientmem.Evict) over the
// connections, skipping clients with CLIENT NO-EVICT on; clients already
// closing count as gone.
func (s *Server) evictClients() bool {
	return clientmem.Evict(s.cmem, s.evictCandidates, s.evictClient, func(total, limit int64) {
		s.log.Warn("clients over maxmemory-clients after evicting every client that may be evicted (the rest have CLIENT NO-EVICT on)",
			"clients_mem", total, "maxmemory_clients", limit)
	})
}

// evictCandidates returns the connections that may be evicted and the
// total to count. The total is read under the lock that removeConn holds
// while a connection leaves the set and the total together, so every byte
// of it belongs to a connection seen here.
func (s *Server) evictCandidates() (cands []clientmem.Candidate[*Conn], total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total = s.cmem.Total()
	for c := range s.conns {
		m := c.cmem.Mem()
		switch {
		case c.closing.Load():
			total -= m // its memory goes as it closes
		case m > 0 && !c.cmem.NoEvict.Load():
			cands = append(cands, clientmem.Candidate[*Conn]{Client: c, Mem: m})
		}
	}
	return cands, total
}

// evictClient closes k's client for its memory, logged with the figures
// that decided it.
func (s *Server) evictClient(k clientmem.Candidate[*Conn], total, limit int64) {
	c := k.Client
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	s.log.Warn("evicting client: clients' memory over maxmemory-clients, this client uses the most",
		"client", c.addr, "id", c.id, "name", name, "tot_mem", k.Mem, "clients_mem", total, "maxmemory_clients", limit)
	c.closeNow()
}
