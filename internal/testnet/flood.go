package testnet

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Flood keeps connections open on a port, as an attacker holding its
// handshake slots would: each sends nothing (half-open) or, trickling,
// one byte a second. A connection the port closes is opened again after
// ReopenPause, so the pressure stays until Stop (which t.Cleanup calls).
type Flood struct {
	stopped chan struct{}
	wg      sync.WaitGroup
	dials   atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open now, closed by Stop; guarded by mu
}

// ReopenPause is how long a flood connection waits before replacing one
// the port closed: short enough to keep every slot it can take, long
// enough not to turn a test into a busy loop on a shared machine.
const ReopenPause = 20 * time.Millisecond

// StartFlood opens n connections to addr from the source address from
// (nil: the system's choice). With trickle > 0, every second connection
// sends that byte once a second; the others send nothing.
func StartFlood(t testing.TB, from net.IP, addr string, n int, trickle byte) *Flood {
	t.Helper()
	f := &Flood{stopped: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	d := &net.Dialer{Timeout: time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	for i := range n {
		var b byte
		if i%2 == 1 {
			b = trickle
		}
		f.wg.Add(1)
		go f.conn(d, addr, b)
	}
	t.Cleanup(f.Stop)
	return f
}

// Dials returns how many connections the flood has opened so far.
func (f *Flood) Dials() int64 { return f.dials.Load() }

// conn is one flood connection, reopened until Stop. It blocks in Read
// until the port closes it (or, trickling, until its next byte is due).
func (f *Flood) conn(d *net.Dialer, addr string, trickle byte) {
	defer f.wg.Done()
	buf := make([]byte, 64)
	for {
		c, err := d.Dial("tcp", addr)
		if err == nil && f.track(c) {
			f.dials.Add(1)
			for {
				if trickle != 0 {
					if _, err := c.Write([]byte{trickle}); err != nil {
						break
					}
					_ = c.SetReadDeadline(time.Now().Add(time.Second))
				}
				if _, err := c.Read(buf); err != nil {
					if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
						break // closed by the port or by Stop
					}
				}
			}
			f.untrack(c)
		}
		select {
		case <-f.stopped:
			return
		case <-time.After(ReopenPause):
		}
	}
}

// track registers c for Stop; false (c closed) once stopped.
func (f *Flood) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.stopped:
		c.Close()
		return false
	default:
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Flood) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// Stop closes every flood connection and waits for them. Idempotent.
func (f *Flood) Stop() {
	f.mu.Lock()
	select {
	case <-f.stopped:
		f.mu.Unlock()
		return
	default:
	}
	close(f.stopped)
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
