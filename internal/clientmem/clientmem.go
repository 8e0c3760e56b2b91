package clientmem

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/internal/setting"
)

// Limit is the maxmemory-clients setting.
type Limit struct {
	// Auto chooses the limit from maxmemory (see Bytes); the default.
	Auto bool
	// Percent, when not 0, is the limit as a percentage (1..100) of
	// maxmemory; no limit while maxmemory is 0 (as Redis).
	Percent int64
	// Size is the limit in bytes when neither Auto nor Percent is set
	// (0: no limit).
	Size int64
}

// Client memory bounds: the automatic limit's range, and Redis's floor for
// any limit (so that a mistaken setting cannot close every client at once).
const (
	autoMin  = 16 << 20
	autoMax  = 1 << 30
	MinLimit = 128 << 10
)

// DefaultLimit is maxmemory-clients' default, auto.
func DefaultLimit() Limit { return Limit{Auto: true} }

// errLimit is a maxmemory-clients value that does not parse.
var errLimit = errors.New("argument must be 0, auto, a memory size (e.g. 64mb) or a percentage of maxmemory (e.g. 10%)")

// ParseLimit reads a maxmemory-clients value: auto, 0 (no
// limit), a memory size (64mb, 1gb) or a percentage of maxmemory (1% to
// 100%).
func ParseLimit(v string) (Limit, error) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "auto") {
		return Limit{Auto: true}, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 1 || n > 100 {
			return Limit{}, errors.New("a percentage of maxmemory must be from 1% to 100%")
		}
		return Limit{Percent: n}, nil
	}
	n, err := setting.ParseBytes(v)
	if err != nil || n < 0 {
		return Limit{}, errLimit
	}
	return Limit{Size: n}, nil
}

// String writes the setting as CONFIG GET shows it: auto, N% or bytes.
func (l Limit) String() string {
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
func (l Limit) Bytes(maxmemory int64) int64 {
	var n int64
	switch {
	case l.Auto && maxmemory <= 0:
		n = autoMax
	case l.Auto:
		n = min(max(maxmemory/2, autoMin), autoMax)
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
	return max(n, MinLimit)
}

// Pool is the clients' memory: the setting and the bound in force, the
// total the connected clients account for, the clients evicted, and the
// signal that an eviction pass is wanted. Its methods are safe for
// concurrent use.
type Pool struct {
	setting atomic.Pointer[Limit]
	// bound is the limit in force in bytes (0: none), from setting and
	// maxmemory.
	bound atomic.Int64
	// total is the sum of what the connected clients account for.
	total atomic.Int64
	// evicted counts the clients closed for it (evicted_clients).
	evicted atomic.Int64
	// wanted is set while an eviction pass is requested and not begun, so
	// that a client growing over the limit signals wake once.
	wanted atomic.Bool
	wake   chan struct{}
	// warned is when Warn last answered true (Unix ns).
	warned atomic.Int64
}

// NewPool returns an empty pool with l in force under maxmemory.
func NewPool(l Limit, maxmemory int64) *Pool {
	p := &Pool{wake: make(chan struct{}, 1)}
	p.SetLimit(l, maxmemory)
	return p
}

// SetLimit puts l in force (maxmemory-clients) under maxmemory.
func (p *Pool) SetLimit(l Limit, maxmemory int64) {
	p.setting.Store(&l)
	p.Update(maxmemory)
}

// Update computes the bound again from the setting and maxmemory, and asks
// for an eviction pass (clients may be over the new bound).
func (p *Pool) Update(maxmemory int64) {
	p.bound.Store(p.setting.Load().Bytes(maxmemory))
	p.Request()
}

// Setting returns the maxmemory-clients setting in force.
func (p *Pool) Setting() Limit { return *p.setting.Load() }

// Bound returns the limit in force in bytes (0: none).
func (p *Pool) Bound() int64 { return p.bound.Load() }

// Total returns what the connected clients account for, in bytes.
func (p *Pool) Total() int64 { return p.total.Load() }

// Add changes the total by delta (a client's change of memory) and asks
// for an eviction pass when a growth takes it past the bound.
func (p *Pool) Add(delta int64) {
	total := p.total.Add(delta)
	if delta > 0 {
		if l := p.bound.Load(); l > 0 && total > l {
			p.Request()
		}
	}
}

// Over reports whether the total is past the bound.
func (p *Pool) Over() bool {
	l := p.bound.Load()
	return l > 0 && p.total.Load() > l
}

// Request asks for an eviction pass, once until the pass begins.
func (p *Pool) Request() {
	if p.wanted.Load() || !p.wanted.CompareAndSwap(false, true) {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Wanted is signalled when an eviction pass is requested; the evictor
// calls Begin when it receives.
func (p *Pool) Wanted() <-chan struct{} { return p.wake }

// Begin marks the requested pass begun: a later Request signals again.
func (p *Pool) Begin() { p.wanted.Store(false) }

// Retry is the wait between two eviction passes that could not bring the
// total within the bound.
const Retry = 50 * time.Millisecond

// Run runs eviction passes when asked (Request), until ctx ends: pass
// closes clients and reports whether the total is within the bound. After
// a pass that could not bring it within (the rest is held by clients that
// may not be evicted, or closing), Run waits Retry before the next, so
// that clients growing meanwhile do not make it scan continuously.
func (p *Pool) Run(ctx context.Context, pass func() bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.Begin()
		if pass() {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(Retry):
		}
	}
}

// Warn reports whether a pass that left the total over the bound should
// be logged: at most once every 10 seconds.
func (p *Pool) Warn() bool {
	now, last := time.Now().UnixNano(), p.warned.Load()
	return now-last > int64(10*time.Second) && p.warned.CompareAndSwap(last, now)
}

// Evicted counts the clients evicted.
func (p *Pool) Evicted() int64 { return p.evicted.Load() }

// CountEviction counts one client evicted.
func (p *Pool) CountEviction() { p.evicted.Add(1) }

// ResetEvicted sets the count of evicted clients to 0 (CONFIG RESETSTAT).
func (p *Pool) ResetEvicted() { p.evicted.Store(0) }

// Client is one client's share of a pool: the memory it accounts for
// (CLIENT LIST tot-mem), published by the client's own goroutine or loop
// only (Track), and NoEvict, CLIENT NO-EVICT, which exempts it from
// eviction. Other goroutines read both.
type Client struct {
	mem     atomic.Int64
	NoEvict atomic.Bool
}

// Mem returns what the client accounts for, in bytes.
func (c *Client) Mem() int64 { return c.mem.Load() }

// Track publishes n, what the client accounts for now, and adds the change
// to p's total (Pool.Add: past the bound, an eviction pass is asked for).
// An unchanged figure costs one atomic load, so it is cheap enough for
// every queued command. The client's goroutine or loop only.
func (c *Client) Track(p *Pool, n int64) {
	old := c.mem.Load()
	if n == old {
		return
	}
	c.mem.Store(n)
	p.Add(n - old)
}

// Untrack removes a closing client's memory from p's total.
func (c *Client) Untrack(p *Pool) { p.Add(-c.mem.Swap(0)) }

// Candidate is a client that may be evicted and the memory it accounts for.
type Candidate[T any] struct {
	Client T
	Mem    int64
}

// Choose picks the clients to evict to bring total within limit, as
// Redis's client eviction does: the largest first, until what is left is
// within limit (cands is sorted in place). It returns them in the order to
// evict, and what the total will be once they are gone (still over limit
// when evicting every candidate is not enough).
func Choose[T any](cands []Candidate[T], total, limit int64) ([]Candidate[T], int64) {
	slices.SortFunc(cands, func(a, b Candidate[T]) int { return cmp.Compare(b.Mem, a.Mem) })
	n := 0
	for n < len(cands) && total > limit {
		total -= cands[n].Mem
		n++
	}
	return cands[:n], total
}

// Evict runs one eviction pass over p, as Redis's client eviction: while
// the total is over the bound, gather returns the clients that may be
// evicted and the total to count (without what clients already closing
// hold), and evict closes the chosen ones, largest first (Choose), each
// counted and given the total and bound that chose it. When even that
// leaves the total over the bound, warn is called, at most once every 10
// seconds (Warn). Evict reports whether the total is within the bound.
func Evict[T any](p *Pool, gather func() ([]Candidate[T], int64), evict func(c Candidate[T], total, limit int64), warn func(total, limit int64)) bool {
	limit := p.Bound()
	if limit <= 0 || p.Total() <= limit {
		return true
	}
	cands, total := gather()
	chosen, left := Choose(cands, total, limit)
	for _, k := range chosen {
		p.CountEviction()
		evict(k, total, limit)
		total -= k.Mem
	}
	if left <= limit {
		return true
	}
	if p.Warn() {
		warn(left, limit)
	}
	return false
}
