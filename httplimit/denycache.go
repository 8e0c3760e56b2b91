package httplimit

import (
	"container/list"
	"sync"
	"time"
)

// Deny cache defaults (WithDenyCache).
const (
	// DefaultDenyCacheMax is the longest a refusal is repeated locally:
	// an operator who deletes or raises a key is obeyed within it.
	DefaultDenyCacheMax = time.Second
	// DenyCacheEntries bounds the refusals the cache holds; the oldest
	// is dropped for a new one.
	DenyCacheEntries = 10_000
)

// denyKey is what a cached refusal answers: the same client key asking
// for the same quantity.
type denyKey struct {
	key string
	n   int64
}

// denial is one cached refusal: the decision as the server gave it, when,
// and until when it is repeated.
type denial struct {
	key   denyKey
	d     Decision
	at    time.Time
	until time.Time
}

// denyCache repeats a refusal locally while it must still hold: after
// the server refused (key, n) with a retry_after of r, the same (key, n)
// is refused without a round trip until min(r, max) has passed (max alone
// for a request that can never be allowed). It only ever refuses, and
// only what the server refused, so it cannot admit anything the server
// would not. It holds at most entries refusals, dropping the oldest
// first. Safe for concurrent use: one mutex around a map lookup.
type denyCache struct {
	max     time.Duration // > 0
	entries int           // >= 1
	now     func() time.Time
	// slack is the limiter's WithWait: a request arriving slack before the
	// refusal's retry_after is up is admitted by waiting, so a refusal
	// holds only until then.
	slack time.Duration

	mu    sync.Mutex
	m     map[denyKey]*list.Element // guarded by mu; values are *denial
	order list.List                 // oldest first; guarded by mu
}

func newDenyCache(max time.Duration, entries int, now func() time.Time) *denyCache {
	return &denyCache{max: max, entries: entries, now: now, m: make(map[denyKey]*list.Element)}
}

// get returns the cached refusal of (key, n), its times reduced by the
// time passed since the server gave it; ok is false when there is none
// still holding.
func (c *denyCache) get(key string, n int64) (Decision, bool) {
	k := denyKey{key, n}
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	if !ok {
		c.mu.Unlock()
		return Decision{}, false
	}
	den := e.Value.(*denial)
	if !now.Before(den.until) {
		c.order.Remove(e)
		delete(c.m, k)
		c.mu.Unlock()
		return Decision{}, false
	}
	d, at := den.d, den.at
	c.mu.Unlock()
	return d.after(now.Sub(at)), true
}

// put caches d, the server's refusal of (key, n), if it is one that
// holds for a while.
func (c *denyCache) put(key string, n int64, d Decision) {
	if d.Allowed {
		return
	}
	ttl := c.max
	if wait, ok := d.RetryAfter(); ok {
		wait -= c.slack
		if wait <= 0 {
			return
		}
		ttl = min(wait, c.max)
	}
	now := c.now()
	den := &denial{key: denyKey{key, n}, d: d, at: now, until: now.Add(ttl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[den.key]; ok {
		c.order.Remove(e)
	}
	for len(c.m) >= c.entries {
		oldest := c.order.Front()
		delete(c.m, oldest.Value.(*denial).key)
		c.order.Remove(oldest)
	}
	c.m[den.key] = c.order.PushBack(den)
}

// len returns how many refusals the cache holds, expired ones included.
func (c *denyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// after returns d as it stands elapsed later, if nothing happened
// meanwhile: every RetryAfter and ResetAfter reduced by elapsed (not below
// zero; a RetryAfter of "never" stays), Remaining unchanged. This is what
// the deny cache answers; the fields are then derived as usual.
func (d Decision) after(elapsed time.Duration) Decision {
	out := Decision{Allowed: d.Allowed, Results: make([]Result, len(d.Results))}
	for i, r := range d.Results {
		r.ResetAfter = max(0, r.ResetAfter-elapsed)
		if r.RetryAfter >= 0 {
			r.RetryAfter = max(0, r.RetryAfter-elapsed)
		}
		out.Results[i] = r
	}
	return out
}
