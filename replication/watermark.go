package replication

import (
	"sync"
	"sync/atomic"
)

// watermark is a monotonically increasing counter that goroutines can wait
// on: reach(v) returns a channel closed once the value is at least v. The
// advance path costs one atomic load when nobody waits.
type watermark struct {
	v     atomic.Uint64
	nwait atomic.Int32
	mu    sync.Mutex
	wait  []markWaiter // guarded by mu
}

type markWaiter struct {
	v  uint64
	ch chan struct{}
}

func (w *watermark) load() uint64 { return w.v.Load() }

// set stores v without waking waiters (call wake after a run of sets).
func (w *watermark) set(v uint64) { w.v.Store(v) }

// advance stores v and wakes the waiters it satisfies.
func (w *watermark) advance(v uint64) {
	w.v.Store(v)
	w.wake()
}

func (w *watermark) wake() {
	if w.nwait.Load() == 0 {
		return
	}
	v := w.v.Load()
	w.mu.Lock()
	kept := w.wait[:0]
	for _, x := range w.wait {
		if x.v <= v {
			close(x.ch)
		} else {
			kept = append(kept, x)
		}
	}
	clear(w.wait[len(kept):])
	w.wait = kept
	w.nwait.Store(int32(len(kept)))
	w.mu.Unlock()
}

// reach returns a channel closed once the value is at least v.
func (w *watermark) reach(v uint64) <-chan struct{} {
	ch := make(chan struct{})
	if w.v.Load() >= v {
		close(ch)
		return ch
	}
	w.mu.Lock()
	w.wait = append(w.wait, markWaiter{v: v, ch: ch})
	w.nwait.Store(int32(len(w.wait)))
	w.mu.Unlock()
	w.wake() // the value may have moved between the check and the append
	return ch
}
