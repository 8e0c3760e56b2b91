package region

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/internal/respclient"
)

// Link tuning.
const (
	// maxRedirects bounds the MOVED replies one call follows (a region of
	// several groups answers at most one per reshard in progress).
	maxRedirects = 5
	// maxIdlePerAddr bounds the idle connections kept to one address.
	maxIdlePerAddr = 32
	// downBackoff is how long a link that failed answers unreachable at
	// once, before the next call tries the region again: a region that
	// is down costs its callers nothing but this check.
	downBackoff = 250 * time.Millisecond
)

// link is this region's client side of one peer region: pooled RESP
// connections to the peer's nodes, tried in turn, MOVED followed. Safe for
// concurrent use; each call uses one connection of its own.
type link struct {
	name   string
	addrs  []string          // the peer's RESP addresses, as configured
	cfg    respclient.Config // TLS is tls's, read at each dial
	tls    atomic.Pointer[tls.Config]
	ctx    context.Context // closes every connection when done
	logger *slog.Logger
	now    func() int64

	mu   sync.Mutex
	idle map[string][]*respclient.Client

	prefer    atomic.Int32 // index in addrs of the address that last answered
	state     atomic.Int32 // linkUnknown, linkUp or linkDown
	downUntil atomic.Int64 // Unix ns; calls before it fail at once
	lastOK    atomic.Int64 // Unix ns of the last answer; 0: never
	lastErr   atomic.Pointer[string]

	sent, failed atomic.Int64 // calls answered, calls that found the region unreachable
	forwarded    atomic.Int64 // global decisions it answered
}

func newLink(ctx context.Context, p PeerConfig, timeout time.Duration, tc *tls.Config, logger *slog.Logger, now func() int64) *link {
	l := &link{
		name: p.Name, addrs: p.Addrs, ctx: ctx, logger: logger, now: now,
		cfg:  respclient.Config{Timeout: timeout, Password: p.Password},
		idle: make(map[string][]*respclient.Client),
	}
	l.tls.Store(tc)
	return l
}

// errTransient marks a reply that asks to try another node (the region is
// between leaders, or loading).
var errTransient = errors.New("region: the peer is between leaders")

// call sends args to the peer region and returns its reply, which may be
// an error reply (the peer's answer, not a failure of the link). err is an
// *UnreachableError when no node of the region answered.
func (l *link) call(args ...[]byte) (v respclient.Value, err error) {
	err = l.try(func(addr string) (err error) {
		v, err = l.callAt(addr, args)
		return err
	})
	return v, err
}

// callMany sends every call on one connection (pipelined) and returns
// their replies, in order; a MOVED reply is followed for that call alone.
// err is an *UnreachableError when no node of the region answered them all;
// the calls may then have been applied or not (the caller retries them,
// and their receiver must recognise a repeat).
func (l *link) callMany(calls [][][]byte) (out []respclient.Value, err error) {
	err = l.try(func(addr string) (err error) {
		out, err = l.pipeline(addr, calls)
		return err
	})
	if err != nil {
		return nil, err
	}
	for j, v := range out {
		if w, err := l.follow(v, calls[j]); err == nil {
			out[j] = w
		}
	}
	return out, nil
}

// try runs fn on the peer's addresses in turn, starting from the one that
// last answered, until one succeeds; it returns an *UnreachableError when
// none does, or at once while the region is marked down.
func (l *link) try(fn func(addr string) error) error {
	if l.now() < l.downUntil.Load() {
		l.failed.Add(1)
		return &UnreachableError{Region: l.name, Err: errors.New(l.lastError())}
	}
	start := int(l.prefer.Load())
	var last error
	for i := range l.addrs {
		idx := (start + i) % len(l.addrs)
		if last = fn(l.addrs[idx]); last == nil {
			l.prefer.Store(int32(idx))
			l.markUp()
			return nil
		}
	}
	l.markDown(last)
	return &UnreachableError{Region: l.name, Err: last}
}

// pipeline sends calls to addr on one connection and reads every reply.
func (l *link) pipeline(addr string, calls [][][]byte) ([]respclient.Value, error) {
	c, err := l.get(addr)
	if err != nil {
		return nil, err
	}
	for _, args := range calls {
		c.Send(args...)
	}
	if err := c.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	out := make([]respclient.Value, len(calls))
	for i := range out {
		if out[i], err = c.Read(); err != nil {
			c.Close()
			return nil, err
		}
	}
	l.put(addr, c)
	return out, nil
}

// callAt sends args to the node at addr, following MOVED to other nodes of
// the region. A reply of the peer is returned with a nil error; err is the
// failure to get one (connection, authentication, a region between leaders).
func (l *link) callAt(addr string, args [][]byte) (respclient.Value, error) {
	v, err := l.doAt(addr, args)
	if err != nil {
		return respclient.Value{}, err
	}
	return l.follow(v, args)
}

// follow returns the peer's reply v to args, after following MOVED to
// other nodes of the region (respclient.Follow, up to maxRedirects). A
// reply asking to try another node later (TRYAGAIN, CLUSTERDOWN, LOADING:
// the region is between leaders, or loading) is an error wrapping
// errTransient; any other reply is returned with a nil error.
func (l *link) follow(v respclient.Value, args [][]byte) (respclient.Value, error) {
	v, err := respclient.Follow(v, maxRedirects, func(addr string) (respclient.Value, error) {
		return l.doAt(addr, args)
	})
	if errors.Is(err, respclient.ErrTooManyRedirects) {
		return respclient.Value{}, errors.New("region: too many redirects")
	}
	if err != nil {
		return respclient.Value{}, err
	}
	if re := v.Err(); errors.Is(re, respclient.ErrTryAgain) || errors.Is(re, respclient.ErrClusterDown) || errors.Is(re, respclient.ErrLoading) {
		return respclient.Value{}, errors.Join(errTransient, re)
	}
	return v, nil
}

// doAt sends args to the node at addr and reads its reply, on a pooled
// connection.
func (l *link) doAt(addr string, args [][]byte) (respclient.Value, error) {
	c, err := l.get(addr)
	if err != nil {
		return respclient.Value{}, err
	}
	v, err := c.Do(args...)
	if err != nil {
		c.Close()
		return respclient.Value{}, err
	}
	l.put(addr, c)
	return v, nil
}

func (l *link) get(addr string) (*respclient.Client, error) {
	l.mu.Lock()
	if n := len(l.idle[addr]); n > 0 {
		c := l.idle[addr][n-1]
		l.idle[addr] = l.idle[addr][:n-1]
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	cfg := l.cfg
	cfg.TLS = l.tls.Load()
	return respclient.Dial(l.ctx, addr, cfg)
}

func (l *link) put(addr string, c *respclient.Client) {
	l.mu.Lock()
	if len(l.idle[addr]) < maxIdlePerAddr && l.ctx.Err() == nil {
		l.idle[addr] = append(l.idle[addr], c)
		c = nil
	}
	l.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// The states of a link, as REGION STATUS shows them.
const (
	linkUnknown int32 = iota // not called yet
	linkUp
	linkDown
)

func (l *link) markUp() {
	l.sent.Add(1)
	l.lastOK.Store(l.now())
	if l.state.Swap(linkUp) != linkUp {
		l.logger.Info("region peer is up", "region", l.name)
	}
}

// markDown records a failed call; the first failure after an answer (or
// the first ever) is logged, not every retry.
func (l *link) markDown(err error) {
	l.failed.Add(1)
	msg := err.Error()
	l.lastErr.Store(&msg)
	l.downUntil.Store(l.now() + int64(downBackoff))
	if l.state.Swap(linkDown) != linkDown {
		l.logger.Warn("region peer is unreachable", "region", l.name, "err", msg)
	}
}

func (l *link) lastError() string {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return "not reached yet"
}

// close closes the idle connections (the context closes those in use).
func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, cs := range l.idle {
		for _, c := range cs {
			c.Close()
		}
		delete(l.idle, a)
	}
}
