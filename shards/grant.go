package shards

import "github.com/cellserver/cellserver/engine"

// GrantHook is told of the waiters in a concurrency key's line that an
// applied op granted (engine.Granted): key, and each waiter's allowed
// reply with its lease id, in arrival order. It runs on the goroutine that
// applied the op, after the key's lock is let go, once per op that granted
// any; key and granted are valid during the call only. Every store applying
// the same op (each member of a group, through its log) calls it alike, so
// the node holding the waiting client's connection answers it wherever the
// op was decided.
type GrantHook func(key []byte, granted []engine.Result)

// SetGrantHook sets the hook told of granted waiters (nil: none). Safe to
// call while the store serves.
func (s *Store) SetGrantHook(h GrantHook) {
	if h == nil {
		s.grantHook.Store(nil)
		return
	}
	s.grantHook.Store(&h)
}

// granted tells the grant hook of the waiters that the op turning before
// into after granted. before had waiters (C > 0).
func (s *Store) granted(key []byte, before, after *engine.State, now int64) {
	h := s.grantHook.Load()
	if h == nil {
		return
	}
	if g := engine.Granted(before, after, now, nil); len(g) > 0 {
		(*h)(key, g)
	}
}
