package resp

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/shards"
)

// Client memory (maxmemory-clients), as Redis 7's client eviction: what
// every client makes the server hold is counted per client and in total,
// and when the total passes the limit the clients using the most are
// closed until it is back within it. See DESIGN.md ("Client memory").
//
// A connection counts its query buffer beyond the fixed one every
// connection starts with, its parsed arguments, its transaction's queue,
// its reply buffer and the replies its event loop keeps for it, and its
// scratch for writes. It publishes the figure itself, from its own
// goroutine or loop, whenever it may have changed (a command queued, a
// batch flushed, before waiting to read): one atomic add to the total
// when it did change, nothing else on the hot path. A goroutine of the
// server closes the clients when the total passes the limit.

// ClientMemoryLimit is the maxmemory-clients setting.
type ClientMemoryLimit struct {
	// Auto chooses the limit from maxmemory (see Bytes); the default.
	Auto bool
	// Percent, when not 0, is the limit as a percentage (1..100) of
	// maxmemory; no limit while maxmemory is 0 (as Redis).
	Percent int64
	// Size is the limit in bytes when neither Auto nor Percent is set
	// (0: no limit).
	Size int64
}

// Client memory bounds: the automatic limit's range, Redis's floor for any
// limit (so that a mistaken setting cannot close every client at once),
// and the wait between two eviction passes that could not bring the
// total within the limit.
const (
	autoClientMemoryMin = 16 << 20
	autoClientMemoryMax = 1 << 30
	minClientMemory     = 128 << 10
	evictRetry          = 50 * time.Millisecond
)

// DefaultClientMemoryLimit is maxmemory-clients' default, auto.
func DefaultClientMemoryLimit() ClientMemoryLimit { return ClientMemoryLimit{Auto: true} }

// errClientMemoryLimit is a maxmemory-clients value that does not parse.
var errClientMemoryLimit = errors.New("argument must be 0, auto, a memory size (e.g. 64mb) or a percentage of maxmemory (e.g. 10%)")

// ParseClientMemoryLimit reads a maxmemory-clients value: auto, 0 (no
// limit), a memory size (64mb, 1gb) or a percentage of maxmemory (1% to
// 100%).
func ParseClientMemoryLimit(v string) (ClientMemoryLimit, error) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "auto") {
		return ClientMemoryLimit{Auto: true}, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 1 || n > 100 {
			return ClientMemoryLimit{}, errors.New("a percentage of maxmemory must be from 1% to 100%")
		}
		return ClientMemoryLimit{Percent: n}, nil
	}
	n, err := setting.ParseBytes(v)
	if err != nil || n < 0 {
		return ClientMemoryLimit{}, errClientMemoryLimit
	}
	return ClientMemoryLimit{Size: n}, nil
}

// String writes the setting as CONFIG GET shows it: auto, N% or bytes.
func (l ClientMemoryLimit) String() string {
	switch {
	case l.Auto:
		return "auto"
	case l.Percent > 0:
		return strconv.FormatInt(l.Percent, 10) + "%"
	}
	return strconv.FormatInt(l.Size, 10)
}

// Bytes is the limit in force under maxmemory bytes (0: no limit). Auto is
// half of maxmemory, from 16 MiB to 1 GiB, and 1 GiB without maxmemory:
// half leaves the keyspace its share of a process sized from maxmemory,
// 16 MiB lets a few hundred clients pipeline and hold large replies at
// once under a small maxmemory, and 1 GiB is what one client may already
// hold in its query buffer by default (client-query-buffer-limit), so that
// no single legitimate client meets the bound while all clients together
// can no longer take the host's memory. Any limit is at least 128 KiB (as
// Redis), so that a mistaken value cannot close the administrator too.
func (l ClientMemoryLimit) Bytes(maxmemory int64) int64 {
	var n int64
	switch {
	case l.Auto && maxmemory <= 0:
		n = autoClientMemoryMax
	case l.Auto:
		n = min(max(maxmemory/2, autoClientMemoryMin), autoClientMemoryMax)
	case l.Percent > 0 && maxmemory > 0:
		n = int64(float64(maxmemory) * float64(l.Percent) / 100)
	case l.Percent > 0:
		return 0
	default:
		n = l.Size
	}
	if n <= 0 {
		return 0
	}
	return max(n, minClientMemory)
}

// clientMemory is the server's accounting of client memory.
type clientMemory struct {
	setting atomic.Pointer[ClientMemoryLimit]
	// limit is the bound in force in bytes (0: none), from setting and
	// maxmemory (setLimit).
	limit atomic.Int64
	// total is the sum of the connected clients' Conn.mem.
	total atomic.Int64
	// evicted counts the clients closed for it (evicted_clients).
	evicted atomic.Int64
	// wanted is set while an eviction pass is requested and not begun, so
	// that a client growing over the limit signals wake once.
	wanted atomic.Bool
	wake   chan struct{}
	// warned is when the evictor last logged that it could not bring the
	// total within the limit (its goroutine only).
	warned time.Time
}

// initClientMemory sets up the accounting with the configured limit.
func (s *Server) initClientMemory(l ClientMemoryLimit) {
	s.cmem.wake = make(chan struct{}, 1)
	s.setClientMemoryLimit(l)
}

// setClientMemoryLimit puts l in force (maxmemory-clients), under the
// maxmemory in force.
func (s *Server) setClientMemoryLimit(l ClientMemoryLimit) {
	s.cmem.setting.Store(&l)
	s.updateClientMemoryLimit()
}

// updateClientMemoryLimit computes the bound again from the setting and
// maxmemory (both live), and has the clients checked against it.
func (s *Server) updateClientMemoryLimit() {
	s.cmem.limit.Store(s.cmem.setting.Load().Bytes(s.maxMemory.Load()))
	s.requestEviction()
}

// ClientMemory returns the memory the connected clients account for and
// the maxmemory-clients bound in force (0: none), in bytes.
func (s *Server) ClientMemory() (used, limit int64) {
	return s.cmem.total.Load(), s.cmem.limit.Load()
}

// Sizes of the scratch a connection keeps, per element.
const (
	argSize  = int64(unsafe.Sizeof([]byte(nil)))
	spanSize = int64(unsafe.Sizeof(argSpan{}))
	opSize   = int64(unsafe.Sizeof(shards.Op{}) + unsafe.Sizeof(shards.Result{}))
	slotSize = int64(unsafe.Sizeof(slot{}))
)

// memUsage is the memory the connection accounts for (CLIENT LIST
// tot-mem), in bytes: its query buffer beyond the initial one every
// connection has, its parsed arguments, its transaction's queue, its reply
// buffer and, on a loop, what gnet keeps of its input and output, and its
// scratch for writes. The fixed cost of a connection (the initial read
// buffer, the Conn itself, a goroutine's stack) is bounded by maxclients
// and not counted. The connection's goroutine or loop only.
func (c *Conn) memUsage() int64 {
	rd := c.rd
	n := int64(max(len(rd.buf)-initialReadBuf, 0)) +
		int64(cap(rd.args))*argSize + int64(cap(rd.pendArgs))*spanSize +
		c.tx.bytes + int64(cap(c.out)) +
		int64(cap(c.ops))*opSize + int64(cap(c.slots))*slotSize
	if c.gc != nil {
		// On a loop, gnet keeps the replies the socket has not taken and
		// the input not read yet (a goroutine connection's pending
		// replies are c.out itself).
		n += c.omem.Load() + int64(c.gc.InboundBuffered())
	}
	return n
}

// trackMem publishes the connection's memory when it changed, and asks
// for an eviction pass when the total passes the limit. The connection's
// goroutine or loop only; cheap enough for every queued command.
func (c *Conn) trackMem() {
	n := c.memUsage()
	old := c.mem.Load()
	if n == old {
		return
	}
	c.mem.Store(n)
	s := c.srv
	total := s.cmem.total.Add(n - old)
	if n > old {
		if l := s.cmem.limit.Load(); l > 0 && total > l {
			s.requestEviction()
		}
	}
}

// untrackMem removes a closing connection's memory from the total.
func (c *Conn) untrackMem() {
	c.srv.cmem.total.Add(-c.mem.Swap(0))
}

// release lets go of what a closing connection holds (its transaction,
// buffers and scratch), so that an evicted client's memory is free at once
// even while its transport is still being closed. The connection's
// goroutine or loop only, after its last command.
func (c *Conn) release() {
	c.unwait() // a reservation stays consumed; it no longer waits here
	c.held, c.pending = nil, nil
	c.tx = txState{}
	c.multi.Store(-1)
	c.multiMem.Store(0)
	c.out = nil
	c.rd.buf, c.rd.r, c.rd.w = nil, 0, 0
	c.rd.args, c.rd.pendArgs = nil, nil
	c.ops, c.res, c.slots = nil, nil, nil
}

// requestEviction wakes the evictor, once until it runs.
func (s *Server) requestEviction() {
	if s.cmem.wanted.Load() || !s.cmem.wanted.CompareAndSwap(false, true) {
		return
	}
	select {
	case s.cmem.wake <- struct{}{}:
	default:
	}
}

// evictLoop runs eviction passes when asked, until the server's context
// ends. After a pass that could not bring the total within the limit (the
// rest is held by clients with CLIENT NO-EVICT on, or closing), it waits a
// little before the next, so that clients growing meanwhile do not make it
// scan the connections continuously.
func (s *Server) evictLoop() {
	defer s.bg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.cmem.wake:
		}
		s.cmem.wanted.Store(false)
		if s.evictClients() {
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(evictRetry):
		}
	}
}

// evictClients closes the clients using the most memory until the total
// is within the limit, as Redis's client eviction does, skipping clients
// with CLIENT NO-EVICT on. Clients already closing count as gone. It
// reports whether the total is within the limit.
func (s *Server) evictClients() bool {
	limit := s.cmem.limit.Load()
	if limit <= 0 || s.cmem.total.Load() <= limit {
		return true
	}
	type candidate struct {
		c   *Conn
		mem int64
	}
	var cands []candidate
	// The total is read under the lock that removeConn holds while a
	// connection leaves the set and the total together, so every byte of
	// it belongs to a connection seen here.
	s.mu.Lock()
	total := s.cmem.total.Load()
	for c := range s.conns {
		m := c.mem.Load()
		switch {
		case c.closing.Load():
			total -= m // its memory goes as it closes
		case m > 0 && !c.noEvict.Load():
			cands = append(cands, candidate{c, m})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(b.mem, a.mem) })
	for _, k := range cands {
		if total <= limit {
			break
		}
		s.evictClient(k.c, k.mem, total, limit)
		total -= k.mem
	}
	if total <= limit {
		return true
	}
	if now := time.Now(); now.Sub(s.cmem.warned) > 10*time.Second {
		s.cmem.warned = now
		s.log.Warn("clients over maxmemory-clients after evicting every client that may be evicted (the rest have CLIENT NO-EVICT on)",
			"clients_mem", total, "maxmemory_clients", limit)
	}
	return false
}

// evictClient closes c for its memory, counted and logged with the
// figures that decided it.
func (s *Server) evictClient(c *Conn, mem, total, limit int64) {
	s.cmem.evicted.Add(1)
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	s.log.Warn("evicting client: clients' memory over maxmemory-clients, this client uses the most",
		"client", c.addr, "id", c.id, "name", name, "tot_mem", mem, "clients_mem", total, "maxmemory_clients", limit)
	c.closeNow()
}
