package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// ccAnswer is a CC.ACQUIRE's answer through go-redis, with when it came.
type ccAnswer struct {
	v   []any
	err error
	at  time.Time
}

// ccAcquireAsync sends CC.ACQUIRE args on c from a goroutine; the answer comes
// on the channel.
func ccAcquireAsync(c *redis.Client, args ...any) <-chan ccAnswer {
	ch := make(chan ccAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		v, err := c.Do(ctx, append([]any{"CC.ACQUIRE"}, args...)...).Slice()
		ch <- ccAnswer{v, err, time.Now()}
	}()
	return ch
}

// ccWaiting reads how many acquires wait in key's line at s (CL.INSPECT).
func ccWaiting(ctx context.Context, c *redis.Client, key string) (int, error) {
	v, err := c.Do(ctx, "CL.INSPECT", key).Slice()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(v); i += 2 {
		if v[i] == "waiting" {
			l, ok := v[i+1].([]any)
			if !ok {
				return 0, fmt.Errorf("CL.INSPECT %s: waiting is %T", key, v[i+1])
			}
			return len(l), nil
		}
	}
	return 0, nil
}

// CC.ACQUIRE … WAIT on a global key through the region that is not its
// home (docs/regions.md, "Waiting (WAIT) across regions"): the waiter
// takes its place in the home's line and its client, connected to the
// other region, is answered allowed — promptly, not at the end of its
// wait — when a holder releases at the home; the unit never goes to
// nobody. The unit granted to a waiter through the other region that
// disconnected comes back by its lease's ttl.
func TestRegionsCCWait(t *testing.T) {
	rs := startRegionSet(t, []string{"r1", "r2"}, 10*time.Millisecond, "cc:* global r1",
		"--region-sync-interval", "20ms")
	r1, r2 := rs.srv["r1"], rs.srv["r2"]
	c1, c2 := r1.client(t, 2), r2.client(t, 2)
	ctx := ctxT(t)
	acquired := func(who string, r ccAnswer, lease string) {
		t.Helper()
		if r.err != nil || len(r.v) != 6 || r.v[0] != int64(0) || r.v[5] != lease {
			t.Fatalf("%s = %v, %v; want allowed with lease %q", who, r.v, r.err, lease)
		}
	}

	t.Run("granted through the other region at the release", func(t *testing.T) {
		acquired("holder through the home", <-ccAcquireAsync(c1, "cc:a", 1, "60s", "ID", "h"), "h")
		waiter := ccAcquireAsync(c2, "cc:a", 1, "60s", "ID", "w", "WAIT", "5s")
		waitBlocked(t, r2, 1)
		poll.Until(t, 10*time.Second, func() error {
			if n, err := ccWaiting(ctx, c1, "cc:a"); err != nil || n != 1 {
				return fmt.Errorf("the home's line holds %d, %v; want the waiter", n, err)
			}
			return nil
		})
		released := time.Now()
		if n, err := c1.Do(ctx, "CC.RELEASE", "cc:a", "h").Int(); err != nil || n != 1 {
			t.Fatalf("CC.RELEASE of the holder = %d, %v; want 1", n, err)
		}
		r := <-waiter
		acquired("waiter through r2", r, "w")
		// Prompt: well before the end of its 5 s wait.
		if d := r.at.Sub(released); d > 2500*time.Millisecond {
			t.Errorf("the waiter was answered %v after the release, want promptly (its wait is 5s)", d)
		}
		// The unit is the waiter's: nobody else gets it, and its release
		// through r2 empties the key at the home.
		if r := <-ccAcquireAsync(c1, "cc:a", 1, "60s"); r.err != nil || len(r.v) != 6 || r.v[0] != int64(1) {
			t.Fatalf("a third acquire while the waiter holds the unit = %v, %v; want limited", r.v, r.err)
		}
		if n, err := c2.Do(ctx, "CC.RELEASE", "cc:a", "w").Int(); err != nil || n != 1 {
			t.Fatalf("CC.RELEASE of the granted waiter through r2 = %d, %v; want 1", n, err)
		}
		if n, err := c1.Exists(ctx, "cc:a").Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS cc:a at the home after both released = %d, %v; want 0", n, err)
		}
	})

	t.Run("a waiter through the other region that disconnects gives its unit back by its ttl", func(t *testing.T) {
		acquired("holder through the home", <-ccAcquireAsync(c1, "cc:b", 1, "60s", "ID", "h"), "h")
		w := dialRaw(t, r2.Addr)
		w.send("CC.ACQUIRE", "cc:b", "1", "1s", "ID", "gone", "WAIT", "2s")
		waitBlocked(t, r2, 1)
		poll.Until(t, 10*time.Second, func() error {
			if n, err := ccWaiting(ctx, c1, "cc:b"); err != nil || n != 1 {
				return fmt.Errorf("the home's line holds %d, %v; want the waiter", n, err)
			}
			return nil
		})
		w.conn.Close()
		// The holder's release grants the unit to the gone waiter, still
		// in line: a region server runs every client on a goroutine, which
		// notices the disconnection only at the end of its wait
		// (resp/DESIGN.md) and does not release a unit granted before
		// then: the unit comes back at the lease's ttl (1s), never
		// admitting more than max meanwhile.
		if n, err := c1.Do(ctx, "CC.RELEASE", "cc:b", "h").Int(); err != nil || n != 1 {
			t.Fatalf("CC.RELEASE of the holder = %d, %v; want 1", n, err)
		}
		waitBlocked(t, r2, 0)
		poll.Until(t, 10*time.Second, func() error {
			r := <-ccAcquireAsync(c1, "cc:b", 1, "60s", "ID", "next")
			if r.err != nil || len(r.v) != 6 || r.v[0] != int64(0) {
				return fmt.Errorf("an acquire after the holder released and the waiter left = %v, %v; want allowed", r.v, r.err)
			}
			return nil
		})
	})
}
