package httplimit

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// refusal is a one-policy decision refused with retry_after retry
// (negative: never) and reset_after reset.
func refusal(retry, reset time.Duration) Decision {
	return Decision{Results: []Result{{Policy: "p", Limited: true, Limit: 5, Remaining: 0, RetryAfter: retry, ResetAfter: reset}}}
}

// TestDenyCacheHolds: a refusal is repeated, aged, until min(retry_after,
// max) and not a moment longer; "never" holds for max; an allowed
// decision, a refusal to retry at once, another key or another quantity
// is not answered from the cache.
func TestDenyCacheHolds(t *testing.T) {
	const max = time.Second
	for _, tc := range []struct {
		name string
		d    Decision
		hold time.Duration // 0: not cached
	}{
		{"retry before max", refusal(300*time.Millisecond, 2*time.Second), 300 * time.Millisecond},
		{"retry after max", refusal(5*time.Second, 10*time.Second), max},
		{"never", refusal(-1, 0), max},
		{"retry now", refusal(0, time.Second), 0},
		{"allowed", Decision{Allowed: true, Results: []Result{{Policy: "p", Limit: 5, Remaining: 4, RetryAfter: -1}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			c := newDenyCache(max, 10, func() time.Time { return now })
			c.put("k", 1, tc.d)
			if tc.hold == 0 {
				if d, ok := c.get("k", 1); ok {
					t.Fatalf("get = %+v, want nothing cached", d)
				}
				return
			}
			if _, ok := c.get("k", 2); ok {
				t.Error("another quantity answered from the cache")
			}
			if _, ok := c.get("other", 1); ok {
				t.Error("another key answered from the cache")
			}
			for _, at := range []time.Duration{0, tc.hold / 2, tc.hold - time.Nanosecond} {
				now = time.Unix(1_700_000_000, 0).Add(at)
				d, ok := c.get("k", 1)
				if !ok {
					t.Fatalf("%v after the refusal: not cached, want it held for %v", at, tc.hold)
				}
				if want := tc.d.after(at); !reflect.DeepEqual(d, want) {
					t.Errorf("%v after: get = %+v, want %+v", at, d, want)
				}
			}
			now = time.Unix(1_700_000_000, 0).Add(tc.hold)
			if d, ok := c.get("k", 1); ok {
				t.Errorf("%v after: still cached (%+v), want it gone", tc.hold, d)
			}
			if n := c.len(); n != 0 {
				t.Errorf("an expired refusal stays: %d entries", n)
			}
		})
	}
}

func TestDecisionAfter(t *testing.T) {
	d := Decision{Results: []Result{
		{Policy: "a", Limited: true, Limit: 5, Remaining: 0, RetryAfter: time.Second, ResetAfter: 3 * time.Second},
		{Policy: "b", Limit: 9, Remaining: 4, RetryAfter: -1, ResetAfter: 100 * time.Millisecond},
	}}
	got := d.after(400 * time.Millisecond)
	want := Decision{Results: []Result{
		{Policy: "a", Limited: true, Limit: 5, Remaining: 0, RetryAfter: 600 * time.Millisecond, ResetAfter: 2600 * time.Millisecond},
		{Policy: "b", Limit: 9, Remaining: 4, RetryAfter: -1, ResetAfter: 0},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after(400ms) = %+v, want %+v", got, want)
	}
	if d.Results[0].RetryAfter != time.Second {
		t.Error("after changed the cached decision")
	}
}

// TestDenyCacheBounded: the cache holds at most its entries, dropping the
// oldest refusal for a new one; caching a key again renews its place.
func TestDenyCacheBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := newDenyCache(time.Second, 3, func() time.Time { return now })
	r := refusal(time.Second, time.Second)
	for _, k := range []string{"a", "b", "c", "a", "d"} { // a renewed, so b is the oldest
		c.put(k, 1, r)
	}
	if n := c.len(); n != 3 {
		t.Fatalf("len = %d, want 3", n)
	}
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.get(k, 1); ok != want {
			t.Errorf("get(%q) cached = %v, want %v", k, ok, want)
		}
	}
}

// TestDenyCacheConcurrent hammers the cache from many goroutines (run it
// under -race): every answer is a refusal that was put.
func TestDenyCacheConcurrent(t *testing.T) {
	c := newDenyCache(time.Second, 64, time.Now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := fmt.Sprint((g + i) % 100)
				if d, ok := c.get(k, 1); ok && d.Allowed {
					t.Errorf("the cache answered an allowed decision for %s", k)
					return
				}
				c.put(k, 1, refusal(time.Second, time.Second))
			}
		}()
	}
	wg.Wait()
	if n := c.len(); n > 64 {
		t.Errorf("len = %d, above its bound of 64", n)
	}
}
