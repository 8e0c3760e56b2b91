package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// waiter is one client sending a CC.ACQUIRE that waits, on a connection of
// its own; its reply (or error) arrives on done with the instant.
type waiter struct {
	c    *redis.Client
	sent time.Time
	done chan waiterReply
}

type waiterReply struct {
	r   acquireReply
	err error
	at  time.Time
}

// waitingClient returns a client of one connection whose reads wait long
// enough for a WAIT of seconds.
func waitingClient(t *testing.T, s *server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, PoolSize: 1, MaxRetries: -1, ReadTimeout: 40 * time.Second})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(ctxT(t)).Err(); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	return c
}

// startWaiter sends CC.ACQUIRE args on a new connection and, for arrival
// order, returns once the server counts it waiting (blocked was the count
// before).
func startWaiter(t *testing.T, s *server, blocked int, args ...any) *waiter {
	t.Helper()
	w := &waiter{c: waitingClient(t, s), sent: time.Now(), done: make(chan waiterReply, 1)}
	ctx := ctxT(t)
	go func() {
		r, err := ccAcquireErr(ctx, w.c, args...)
		w.done <- waiterReply{r, err, time.Now()}
	}()
	waitBlocked(t, s, blocked+1)
	return w
}

// reply returns the waiter's reply, failing after a generous bound.
func (w *waiter) reply(t *testing.T) waiterReply {
	t.Helper()
	select {
	case r := <-w.done:
		if r.err != nil {
			t.Fatalf("waiting CC.ACQUIRE: %v", r.err)
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("a waiter got no reply within 30s")
	}
	return waiterReply{}
}

// still fails if the waiter has been answered.
func (w *waiter) still(t *testing.T, name string) {
	t.Helper()
	select {
	case r := <-w.done:
		t.Fatalf("%s answered %v (err %v) while it should still wait", name, r.r, r.err)
	default:
	}
}

// inspect returns CL.INSPECT key's lease ids and waiting ids as text:
// "leases [a b] waiting [c]".
func inspect(t *testing.T, c doer, key string) string {
	t.Helper()
	s, err := inspectErr(ctxT(t), c, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// doer is a client or a cluster client.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

func inspectErr(ctx context.Context, c doer, key string) (string, error) {
	v, err := c.Do(ctx, "CL.INSPECT", key).Result()
	if err != nil {
		return "", fmt.Errorf("CL.INSPECT %s: %v", key, err)
	}
	fields := map[string]any{}
	switch m := v.(type) {
	case []any: // RESP2: a flat array
		for i := 0; i+1 < len(m); i += 2 {
			fields[fmt.Sprint(m[i])] = m[i+1]
		}
	case map[any]any:
		for k, x := range m {
			fields[fmt.Sprint(k)] = x
		}
	default:
		return "", fmt.Errorf("CL.INSPECT %s = %#v", key, v)
	}
	ids := func(name string) []string {
		var out []string
		list, _ := fields[name].([]any)
		for _, e := range list {
			if l, ok := e.([]any); ok && len(l) > 0 {
				out = append(out, fmt.Sprint(l[0]))
			}
		}
		return out
	}
	return fmt.Sprintf("leases %v waiting %v", ids("leases"), ids("waiting")), nil
}

// TestLeaseWait: CC.ACQUIRE … WAIT on a standalone server, on event loops
// and on a goroutine per connection: two of max 2 held, three waiters with
// WAIT 5s; each CC.RELEASE admits exactly the next waiter, in arrival
// order; a waiter whose WAIT ends gets the limited reply then; a lease of
// ttl 300ms expiring admits the next waiter; a waiter that disconnects
// never makes the key admit more than max; WAIT inside MULTI is refused.
func TestLeaseWait(t *testing.T) {
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			s := startServer(t, append([]string{"--save", ""}, mode.args...)...)
			c := s.client(t, 2)

			t.Run("each release admits the next waiter in arrival order", func(t *testing.T) {
				key := "ccw:line"
				for _, id := range []string{"h1", "h2"} {
					if r := ccAcquire(t, c, key, 2, "30s", "ID", id); r.f[0] != 0 {
						t.Fatalf("holder %s: %v, want allowed", id, r)
					}
				}
				ws := make([]*waiter, 3)
				for i := range ws {
					ws[i] = startWaiter(t, s, i, key, 2, "30s", "ID", fmt.Sprintf("w%d", i+1), "WAIT", "5s")
				}
				// A newcomer that does not wait is refused: it never
				// overtakes the line, and remaining counts the waiters.
				if r := ccAcquire(t, c, key, 2, "30s", "ID", "newcomer"); r.f[0] != 1 || r.f[2] != 0 || !r.nilID {
					t.Fatalf("newcomer: %v, want limited, remaining 0, nil lease", r)
				}
				for i, rel := range []string{"h1", "h2", "w1"} {
					if n := ccInt(t, c, "CC.RELEASE", key, rel); n != 1 {
						t.Fatalf("CC.RELEASE %s = %d, want 1", rel, n)
					}
					got := ws[i].reply(t)
					want := fmt.Sprintf("w%d", i+1)
					if got.r.f[0] != 0 || got.r.f[1] != 2 || got.r.f[3] != -1 || got.r.f[4] <= 0 || got.r.lease != want {
						t.Fatalf("after CC.RELEASE %s, waiter %s got %v, want allowed with lease %s", rel, want, got.r, want)
					}
					waitBlocked(t, s, 2-i)
					for _, w := range ws[i+1:] {
						w.still(t, "a later waiter")
					}
				}
				if r := ccAcquire(t, c, key, 2, "30s"); r.f[0] != 1 {
					t.Fatalf("w2 and w3 hold the key's 2 units: a third acquire got %v", r)
				}
			})

			t.Run("a waiter whose wait ends gets the limited reply", func(t *testing.T) {
				key := "ccw:deadline"
				ccAcquire(t, c, key, 1, "30s", "ID", "h")
				w := startWaiter(t, s, 0, key, 1, "30s", "ID", "late", "WAIT", "500ms")
				got := w.reply(t)
				if got.r.f[0] != 1 || got.r.f[3] <= 0 || !got.r.nilID {
					t.Fatalf("waiter at its deadline: %v, want limited, retry_after > 0, nil lease", got.r)
				}
				if d := got.at.Sub(w.sent); d < 400*time.Millisecond {
					t.Fatalf("waiter answered after %v, want at its 500ms deadline", d)
				}
				waitBlocked(t, s, 0)
				// It consumed nothing and left the line: the holder's
				// release frees the unit for a newcomer.
				ccInt(t, c, "CC.RELEASE", key, "h")
				if r := ccAcquire(t, c, key, 1, "30s", "ID", "next"); r.f[0] != 0 {
					t.Fatalf("after the waiter left and the holder released: %v, want allowed", r)
				}
			})

			t.Run("an expiring lease admits the next waiter", func(t *testing.T) {
				key := "ccw:expiry"
				ccAcquire(t, c, key, 1, "300ms", "ID", "short")
				w := startWaiter(t, s, 0, key, 1, "30s", "WAIT", "5s")
				got := w.reply(t)
				if got.r.f[0] != 0 || got.r.lease == "" {
					t.Fatalf("waiter after the lease's ttl: %v, want allowed with a lease", got.r)
				}
				if d := got.at.Sub(w.sent); d > 4*time.Second {
					t.Fatalf("waiter admitted after %v: the 300ms lease's expiry did not admit it", d)
				}
				if n := ccInt(t, c, "CC.RELEASE", key, got.r.lease); n != 1 {
					t.Fatalf("CC.RELEASE of the granted lease %q = %d, want 1", got.r.lease, n)
				}
			})

			t.Run("a disconnecting waiter never over-admits", func(t *testing.T) {
				key := "ccw:gone"
				ccAcquire(t, c, key, 1, "30s", "ID", "h")
				w := startWaiter(t, s, 0, key, 1, "30s", "ID", "gone", "WAIT", "5s")
				if got := inspect(t, c, key); got != "leases [h] waiting [gone]" {
					t.Fatalf("CL.INSPECT %s = %s, want the waiter in line", key, got)
				}
				w.c.Close()
				waitBlocked(t, s, 0)
				// Its server releases it: it leaves the line.
				poll.Until(t, 10*time.Second, func() error {
					if got := inspect(t, c, key); got != "leases [h] waiting []" {
						return fmt.Errorf("CL.INSPECT %s = %s: the gone waiter is still in line", key, got)
					}
					return nil
				})
				if n := ccInt(t, c, "CC.RELEASE", key, "h"); n != 1 {
					t.Fatalf("CC.RELEASE h = %d, want 1", n)
				}
				if r := ccAcquire(t, c, key, 1, "30s", "ID", "a"); r.f[0] != 0 {
					t.Fatalf("first acquire after the release: %v, want allowed (the gone waiter holds nothing)", r)
				}
				if r := ccAcquire(t, c, key, 1, "30s", "ID", "b"); r.f[0] != 1 {
					t.Fatalf("second acquire: %v, want limited (max 1)", r)
				}
				if n := ccInt(t, c, "CC.RELEASE", key, "gone"); n != 0 {
					t.Fatalf("CC.RELEASE of the gone waiter = %d, want 0 (not held, not waiting)", n)
				}
			})

			t.Run("WAIT inside MULTI is refused", func(t *testing.T) {
				tx := waitingClient(t, s)
				_, err := tx.TxPipelined(ctxT(t), func(p redis.Pipeliner) error {
					p.Do(ctxT(t), "CC.ACQUIRE", "ccw:multi", 1, "30s", "WAIT", "1s")
					return nil
				})
				if err == nil {
					t.Fatal("CC.ACQUIRE … WAIT in MULTI was accepted")
				}
			})
		})
	}
}

// TestLeaseWaitGroup: CC.ACQUIRE … WAIT in a 3-node group. A waiter on a
// follower is admitted by a release sent to the leader (the follower
// learns of the grant by applying the log). kill -9 of the leader keeps
// every lease and every place in line: a waiter on a surviving follower
// is admitted by the next release on the new leader, and a waiter whose
// connection died with the leader, asking again on another node with its
// ID, keeps its place ahead of a later arrival.
func TestLeaseWaitGroup(t *testing.T) {
	nodes := startCluster(t, 3, "--max-wait", "60s")
	l := waitLeader(t, nodes)
	leader, f1, f2 := nodes[l], nodes[(l+1)%3], nodes[(l+2)%3]
	lc := noRetryClient(t, leader.Addr)
	const key = "ccw:group"
	for _, id := range []string{"h1", "h2"} {
		if r, err := ccAcquireErr(ctxT(t), lc, key, 2, "120s", "ID", id); err != nil || r.f[0] != 0 {
			t.Fatalf("holder %s: %v, %v; want allowed", id, r, err)
		}
	}
	inLine := func(nd *clusterNode, want string) {
		t.Helper()
		c := noRetryClient(t, nd.Addr)
		poll.Until(t, 10*time.Second, func() error {
			if got, err := inspectErr(ctxT(t), c, key); err != nil || got != want {
				return fmt.Errorf("CL.INSPECT %s on %s = %s (%v), want %s", key, nd.id, got, err, want)
			}
			return nil
		})
	}
	a := startWaiter(t, f1.server, 0, key, 2, "120s", "ID", "wa", "WAIT", "50s")
	inLine(leader, "leases [h1 h2] waiting [wa]")
	b := startWaiter(t, f2.server, 0, key, 2, "120s", "ID", "wb", "WAIT", "50s")
	inLine(leader, "leases [h1 h2] waiting [wa wb]")
	cw := startWaiter(t, leader.server, 0, key, 2, "120s", "ID", "wc", "WAIT", "50s")
	inLine(leader, "leases [h1 h2] waiting [wa wb wc]")

	if n := ccInt(t, lc, "CC.RELEASE", key, "h1"); n != 1 {
		t.Fatalf("CC.RELEASE h1 on the leader = %d, want 1", n)
	}
	if got := a.reply(t); got.r.f[0] != 0 || got.r.lease != "wa" {
		t.Fatalf("waiter on follower %s: %v, want allowed with lease wa", f1.id, got.r)
	}
	b.still(t, "the second waiter")

	leader.kill()
	select { // its connection dies with the leader
	case r := <-cw.done:
		if r.err == nil {
			t.Fatalf("the waiter on the killed leader was answered %v", r.r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter on the killed leader saw no end of its connection")
	}
	others := []*clusterNode{f1, f2}
	var nl *clusterNode
	poll.Until(t, 30*time.Second, func() error {
		i := leaderOf(others)
		if i < 0 {
			return fmt.Errorf("no new leader yet")
		}
		nl = others[i]
		return nil
	})
	// Every lease and place survived: h2 and wa held, wb and wc waiting.
	inLine(nl, "leases [h2 wa] waiting [wb wc]")
	// wc's client asks again on a surviving node with its ID: it keeps
	// its place, ahead of wd arriving after it.
	c2 := startWaiter(t, f1.server, 0, key, 2, "120s", "ID", "wc", "WAIT", "50s")
	d := startWaiter(t, f1.server, 1, key, 2, "120s", "ID", "wd", "WAIT", "50s")
	inLine(nl, "leases [h2 wa] waiting [wb wc wd]")

	nc := noRetryClient(t, nl.Addr)
	for _, step := range []struct {
		release string
		w       *waiter
		id      string
	}{{"h2", b, "wb"}, {"wa", c2, "wc"}, {"wb", d, "wd"}} {
		if n := ccInt(t, nc, "CC.RELEASE", key, step.release); n != 1 {
			t.Fatalf("CC.RELEASE %s on the new leader = %d, want 1", step.release, n)
		}
		if got := step.w.reply(t); got.r.f[0] != 0 || got.r.lease != step.id {
			t.Fatalf("after CC.RELEASE %s: %v, want allowed with lease %s", step.release, got.r, step.id)
		}
	}
}

// TestLeaseWaitClusterOfGroups: in a cluster of two groups, a waiter on
// each group's key (a cluster client follows MOVED to the group serving
// its slot) is admitted by a release of the held unit.
func TestLeaseWaitClusterOfGroups(t *testing.T) {
	groups := startGroups(t, 2)
	cc := newClusterClient(t, groups, nil)
	ctx := ctxT(t)
	for _, g := range groups {
		key := keysIn(g, "ccw", 1)[0]
		if r, err := cc.Do(ctx, "CC.ACQUIRE", key, 1, "30s", "ID", "h").Slice(); err != nil || len(r) != 6 || r[0] != int64(0) {
			t.Fatalf("group %s: holder = %v, %v; want allowed", g.name, r, err)
		}
		wc := newClusterClient(t, groups, &redis.ClusterOptions{ReadTimeout: 20 * time.Second, MaxRetries: -1})
		done := make(chan []any, 1)
		go func() {
			r, err := wc.Do(ctx, "CC.ACQUIRE", key, 1, "30s", "ID", "w", "WAIT", "8s").Slice()
			if err != nil {
				r = []any{err}
			}
			done <- r
		}()
		poll.Until(t, 10*time.Second, func() error {
			if got, err := inspectErr(ctx, cc, key); err != nil || got != "leases [h] waiting [w]" {
				return fmt.Errorf("group %s: CL.INSPECT %s = %s, %v; want w waiting", g.name, key, got, err)
			}
			return nil
		})
		if n, err := cc.Do(ctx, "CC.RELEASE", key, "h").Int64(); err != nil || n != 1 {
			t.Fatalf("group %s: release = %d, %v; want 1", g.name, n, err)
		}
		select {
		case r := <-done:
			if len(r) != 6 || r[0] != int64(0) || r[5] != "w" {
				t.Fatalf("group %s: waiter = %v, want allowed with lease w", g.name, r)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("group %s: the waiter got no reply", g.name)
		}
	}
}
