package keyclass

import (
	"sync"
	"sync/atomic"
)

// Live is the classes a server has in force, and their configuration:
// readers load the current Classes without a lock; a change (CONFIG SET
// metrics-class, metrics-class-limit) makes new Classes that keep the
// counts of the classes they keep, and swaps them in. The zero Live is
// off (no classes).
type Live struct {
	cur atomic.Pointer[Classes] // nil when off
	mu  sync.Mutex              // serialises changes; guards cfg
	cfg Config
}

// Update changes the configuration with change and puts the classes it
// makes in force (nil: off).
func (l *Live) Update(change func(*Config)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	change(&l.cfg)
	l.cur.Store(New(l.cfg, l.cur.Load()))
}

// Config returns the configuration in force.
func (l *Live) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// Current returns the classes in force (nil while off).
func (l *Live) Current() *Classes { return l.cur.Load() }

// Counts returns every class's counts (nil while off).
func (l *Live) Counts() []Counts {
	if c := l.cur.Load(); c != nil {
		return c.Counts()
	}
	return nil
}

// Reset sets every class's counts to 0 (CONFIG RESETSTAT).
func (l *Live) Reset() {
	if c := l.cur.Load(); c != nil {
		c.Reset()
	}
}
