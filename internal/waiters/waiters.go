// Package waiters is a server's registry of the clients waiting in
// concurrency keys' lines (CC.ACQUIRE … WAIT): which client waits for
// which (key, lease id), and the lease ids the server makes for acquires
// that wait without ID. It holds data only; resp answers the clients.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages (checked by internal/layers).
package waiters

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
)

// Key names one waiter: its key and lease id.
type Key struct{ Key, ID string }

// Registry maps (key, lease id) to the client waiting for it. Safe for
// concurrent use; make one with New.
type Registry[C comparable] struct {
	mu  sync.Mutex
	by  map[Key]C
	seq atomic.Uint64
	tag string // this server's random part of the ids it makes
}

// New returns an empty registry with a random tag for its ids.
func New[C comparable]() *Registry[C] {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return &Registry[C]{by: make(map[Key]C), tag: hex.EncodeToString(r[:])}
}

// NewID makes a lease id for an acquire that waits without ID: "w", a
// counter of this registry and its random tag, unique across the servers
// of a group.
func (l *Registry[C]) NewID() string {
	b := append([]byte("w"), strconv.FormatUint(l.seq.Add(1), 36)...)
	return string(append(append(b, '-'), l.tag...))
}

// Add records c as the client waiting for k.
func (l *Registry[C]) Add(k Key, c C) {
	l.mu.Lock()
	l.by[k] = c
	l.mu.Unlock()
}

// Remove forgets k when c is still the client waiting for it.
func (l *Registry[C]) Remove(k Key, c C) {
	l.mu.Lock()
	if l.by[k] == c {
		delete(l.by, k)
	}
	l.mu.Unlock()
}

// Take forgets the client waiting for k and returns it, ok false when
// none waits.
func (l *Registry[C]) Take(k Key) (c C, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok = l.by[k]; ok {
		delete(l.by, k)
	}
	return c, ok
}
