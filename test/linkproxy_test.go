package test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// linkProxy is an inter-region link the test controls: a TCP proxy to one
// address that delays every byte by a one-way delay in each direction and
// can be cut (every connection closed, new ones closed at once) and healed.
type linkProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // one-way delay, ns
	cut    atomic.Bool
	bytes  atomic.Int64 // bytes carried, both directions

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startLinkProxy proxies a loopback port to target with the given one-way
// delay, until the test ends.
func startLinkProxy(t testing.TB, target string, delay time.Duration) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.delay.Store(int64(delay))
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, which the regions are given as the peer's.
func (p *linkProxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the link and refuses new ones until
// Heal.
func (p *linkProxy) Cut() {
	p.cut.Store(true)
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Heal lets connections through again.
func (p *linkProxy) Heal() { p.cut.Store(false) }

func (p *linkProxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *linkProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut.Load() {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *linkProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			in.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *linkProxy) serve(in net.Conn) {
	defer p.wg.Done()
	out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		in.Close()
		return
	}
	if !p.track(in) || !p.track(out) {
		p.untrack(in)
		p.untrack(out)
		return
	}
	var pair sync.WaitGroup
	pair.Add(2)
	go func() { defer pair.Done(); p.pipe(out, in) }()
	go func() { defer pair.Done(); p.pipe(in, out) }()
	pair.Wait()
}

// pipe copies src to dst, each chunk delivered delay after it was read;
// when either side ends, both connections close.
type chunk struct {
	at   time.Time
	data []byte
}

func (p *linkProxy) pipe(dst, src net.Conn) {
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				p.bytes.Add(int64(n))
				q <- chunk{at: time.Now().Add(time.Duration(p.delay.Load())), data: b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at)) // the injected one-way delay
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	p.untrack(dst)
	p.untrack(src)
	for range q { // let the reader finish
	}
}
