package test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// hugeLimit and hugeWindow make FW.INCR a plain counter: a limit nothing
// reaches, a window (3660 days) no test crosses.
const (
	hugeLimit  = 1 << 40
	hugeWindow = "3660d"
)

// countOf peeks key's counter on c and returns what was counted.
func countOf(t *testing.T, c redis.UniversalClient, key string) (int64, error) {
	v, err := c.Do(ctxT(t), "FW.INCR", key, hugeLimit, hugeWindow, 0).Result()
	if err != nil {
		return 0, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 5 {
		return 0, fmt.Errorf("reply %#v", v)
	}
	return hugeLimit - arr[2].(int64), nil
}

// TestRegionsAsync, at 20 and 80 ms one way and the default 100 ms sync
// interval: three regions hammering one GCRA key admit no more than the
// stated bound, L + r·T + (R−1)·(L + r·(s+d)); after a counter's load
// stops, every region reads the same count within two sync intervals.
func TestRegionsAsync(t *testing.T) {
	for _, delay := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			const syncEvery = 100 * time.Millisecond
			names := []string{"r1", "r2", "r3"}
			rs := startRegionSet(t, names, delay, "a:* async")
			cl := map[string]*redis.Client{}
			for _, n := range names {
				cl[n] = redis.NewClient(&redis.Options{Addr: rs.srv[n].Addr, Protocol: 2, PoolSize: 8})
				t.Cleanup(func() { cl[n].Close() })
			}

			// The bound: limit L = 10 (max_burst 9), r = 10 per second.
			const L, r, R = 10, 10.0, 3
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			stop := start.Add(2 * time.Second)
			for _, n := range names {
				for range 3 {
					wg.Go(func() {
						for time.Now().Before(stop) {
							v, err := cl[n].Do(ctxT(t), "CL.THROTTLE", "a:gcra", 9, 10, 1).Result()
							if err != nil {
								t.Errorf("%s: %v", n, err)
								return
							}
							if v.([]any)[0].(int64) == 0 {
								admitted.Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			// d as the test machine delivers it: the link's delay plus up
			// to 50 ms of processing on a loaded machine.
			d := (delay + 50*time.Millisecond).Seconds()
			bound := L + r*elapsed + (R-1)*(L+r*(syncEvery.Seconds()+d))
			local := R * (L + r*elapsed)
			t.Logf("async, d=%v, s=%v: admitted %d in %.2fs; stated bound %.1f; each region alone would admit up to %.1f",
				delay, syncEvery, admitted.Load(), elapsed, bound, local)
			if float64(admitted.Load()) > bound {
				t.Errorf("admitted %d, above the stated bound %.1f", admitted.Load(), bound)
			}

			// Convergence: a counter incremented in every region, then
			// the time until every region reads the same count. A loaded
			// machine can delay one sync round past the bound, so a miss
			// is measured once more on a fresh counter; two misses fail.
			converge := func(key string) time.Duration {
				var want atomic.Int64
				for _, n := range names {
					for range 2 {
						wg.Go(func() {
							for i := range 100 {
								if err := cl[n].Do(ctxT(t), "FW.INCR", key, hugeLimit, hugeWindow, 1+i%3).Err(); err != nil {
									t.Errorf("%s: %v", n, err)
									return
								}
								want.Add(int64(1 + i%3))
							}
						})
					}
				}
				wg.Wait()
				stopped := time.Now()
				var agreed time.Duration
				poll.Until(t, 10*time.Second, func() error {
					for _, n := range names {
						got, err := countOf(t, cl[n], key)
						if err != nil {
							return err
						}
						if got != want.Load() {
							return fmt.Errorf("%s counts %d on %s, want %d", n, got, key, want.Load())
						}
					}
					agreed = time.Since(stopped)
					return nil
				})
				t.Logf("every region agreed on %s %v after the load stopped (two sync intervals: %v)", key, agreed, 2*syncEvery)
				return agreed
			}
			limit := 2*syncEvery + 2*delay + 300*time.Millisecond
			if agreed := converge("a:count"); agreed > limit {
				if again := converge("a:count2"); again > limit {
					t.Errorf("regions agreed after %v, then %v, want within two sync intervals (%v, plus the link and %v of slack: %v)", agreed, again, 2*syncEvery, 300*time.Millisecond, limit)
				}
			}
			info, _ := cl["r1"].Info(ctxT(t), "regions").Result()
			f := parseInfo(info)
			if !strings.Contains(f["region_peer_r2"], "batches_sent=") || strings.Contains(f["region_peer_r2"], "batches_applied=0,") {
				t.Errorf("INFO regions: %q, want batches sent to and applied from r2", f["region_peer_r2"])
			}
		})
	}
}

// TestRegionsAsyncExactDelivery: counters incremented N times across
// regions read N in every region afterwards, through a 10 s cut of one
// region's links and a kill -9 of the leader of a region that is a Raft
// group, mid-sync.
func TestRegionsAsyncExactDelivery(t *testing.T) {
	const delay = 20 * time.Millisecond
	// r1 and r2 standalone; g a group of three.
	r1 := newServer(t, "--save", "")
	r2 := newServer(t, "--save", "")
	std := map[string]*server{"r1": r1, "r2": r2}
	links := map[[2]string][]*linkProxy{}
	// The group's links to r1 and r2 exist before it starts.
	gArgs := []string{"--region", "g", "--region-policy", "c:* async"}
	for n, s := range std {
		p := startLinkProxy(t, s.Addr, delay)
		links[[2]string{"g", n}] = []*linkProxy{p}
		gArgs = append(gArgs, "--region-peer", n+" "+p.Addr())
	}
	groups := startGroupsEach(t, 1, func(string) []string { return gArgs })
	g := groups[0]
	for n, s := range std {
		args := []string{"--region", n, "--region-policy", "c:* async"}
		for o, os := range std {
			if o != n {
				p := startLinkProxy(t, os.Addr, delay)
				links[[2]string{n, o}] = []*linkProxy{p}
				args = append(args, "--region-peer", o+" "+p.Addr())
			}
		}
		var addrs []string
		for _, nd := range g.nodes {
			p := startLinkProxy(t, nd.Addr, delay)
			links[[2]string{n, "g"}] = append(links[[2]string{n, "g"}], p)
			addrs = append(addrs, p.Addr())
		}
		args = append(args, "--region-peer", "g "+strings.Join(addrs, ","))
		s.args = append(s.args, args...)
		s.start()
	}
	cut := func(region string, on bool) {
		for k, ps := range links {
			if k[0] == region || k[1] == region {
				for _, p := range ps {
					if on {
						p.Cut()
					} else {
						p.Heal()
					}
				}
			}
		}
	}

	keys := []string{"c:1", "c:2", "c:{t}3", "c:4"}
	var want [4]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for n, s := range std {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2})
		t.Cleanup(func() { c.Close() })
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := i % len(keys)
				if err := c.Do(ctxT(t), "FW.INCR", keys[k], hugeLimit, hugeWindow, 1).Err(); err != nil {
					t.Errorf("%s: %v", n, err)
					return
				}
				want[k].Add(1)
				time.Sleep(2 * time.Millisecond) // pacing: a steady load, not synchronisation
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // load runs while links are whole
	cut("r2", true)
	t.Log("r2 cut off for 10 s")
	time.Sleep(3 * time.Second)
	leader := g.leader(t)
	leader.kill()
	t.Logf("killed the leader of region g (%s) with SIGKILL", leader.id)
	time.Sleep(7 * time.Second)
	cut("r2", false)
	t.Log("r2's links healed")
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var readers []redis.UniversalClient
	names := []string{"r1", "r2"}
	for _, n := range names {
		readers = append(readers, std[n].client(t, 2))
	}
	for _, nd := range g.others(leader) {
		readers = append(readers, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nd.Addr}}))
		names = append(names, "g via "+nd.id)
	}
	poll.Until(t, 30*time.Second, func() error {
		for i, c := range readers {
			for k, key := range keys {
				got, err := countOf(t, c, key)
				if err != nil {
					return fmt.Errorf("%s: %v", names[i], err)
				}
				if got != want[k].Load() {
					return fmt.Errorf("%s counts %d on %s, want %d", names[i], got, key, want[k].Load())
				}
			}
		}
		return nil
	})
	total := int64(0)
	for k := range keys {
		total += want[k].Load()
	}
	info, _ := std["r1"].client(t, 2).Info(ctxT(t), "regions").Result()
	t.Logf("%d increments read back exactly in every region; r1: %s", total, strconv.Quote(parseInfo(info)["region_peer_r2"]))
}

// TestRegionsClusterRegion: a region of two groups (one Redis Cluster)
// beside a standalone region: global keys homed there are forwarded to the
// group owning their slot (MOVED followed), exactly; async consumption
// reaches the right group, per slot, exactly once.
func TestRegionsClusterRegion(t *testing.T) {
	const delay = 10 * time.Millisecond
	r1 := newServer(t, "--save", "")
	pol := "g:* global c a:* async"
	p := startLinkProxy(t, r1.Addr, delay)
	groups := startGroupsEach(t, 2, func(string) []string {
		return []string{"--region", "c", "--region-policy", pol, "--region-peer", "r1 " + p.Addr()}
	})
	// r1 knows one node of the first group only: the rest is MOVED.
	q := startLinkProxy(t, groups[0].nodes[0].Addr, delay)
	r1.args = append(r1.args, "--region", "r1", "--region-policy", pol, "--region-peer", "c "+q.Addr())
	r1.start()
	c1 := r1.client(t, 2)
	cc := newClusterClient(t, groups, nil)

	// Keys on both groups' slots.
	gkeys := []string{keysIn(groups[0], "g:", 1)[0], keysIn(groups[1], "g:", 1)[0]}
	akeys := append(keysIn(groups[0], "a:", 3), keysIn(groups[1], "a:", 3)...)
	for _, k := range gkeys {
		allowed := 0
		for range 8 {
			v, err := c1.Do(ctxT(t), "CL.THROTTLE", k, 4, 1, 3600).Result()
			if err != nil {
				t.Fatalf("global %s from r1: %v", k, err)
			}
			if v.([]any)[0].(int64) == 0 {
				allowed++
			}
		}
		if allowed != 5 {
			t.Errorf("global %s: %d allowed from r1, want exactly 5", k, allowed)
		}
		if n, _ := c1.Exists(ctxT(t), k).Result(); n != 0 {
			t.Errorf("r1 holds the global key %s", k)
		}
	}
	want := map[string]int64{}
	for i := range 60 {
		k := akeys[i%len(akeys)]
		if err := c1.Do(ctxT(t), "FW.INCR", k, hugeLimit, hugeWindow, 1).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cc.Do(ctxT(t), "FW.INCR", k, hugeLimit, hugeWindow, 2).Err(); err != nil {
			t.Fatal(err)
		}
		want[k] += 3
	}
	poll.Until(t, 20*time.Second, func() error {
		for _, k := range akeys {
			for name, c := range map[string]redis.UniversalClient{"r1": c1, "c": cc} {
				got, err := countOf(t, c, k)
				if err != nil {
					return fmt.Errorf("%s: %v", name, err)
				}
				if got != want[k] {
					return fmt.Errorf("%s counts %d on %s, want %d", name, got, k, want[k])
				}
			}
		}
		return nil
	})
}

// TestRegionsGlobalGroupHome: a global key whose home region is a Raft
// group: decisions forwarded from a standalone region go on through a
// kill -9 of the group's leader (the link tries the group's other
// members), and never admit more than the limit.
func TestRegionsGlobalGroupHome(t *testing.T) {
	r1 := newServer(t, "--save", "")
	p := startLinkProxy(t, r1.Addr, 5*time.Millisecond)
	groups := startGroupsEach(t, 1, func(string) []string {
		return []string{"--region", "g", "--region-policy", "k:* global g", "--region-peer", "r1 " + p.Addr()}
	})
	g := groups[0]
	var addrs []string
	for _, nd := range g.nodes {
		addrs = append(addrs, startLinkProxy(t, nd.Addr, 5*time.Millisecond).Addr())
	}
	r1.args = append(r1.args, "--region", "r1", "--region-policy", "k:* global g", "--region-peer", "g "+strings.Join(addrs, ","))
	r1.start()
	c := r1.client(t, 2)
	const limit = 100
	allowed := 0
	decide := func() error {
		v, err := c.Do(ctxT(t), "CL.THROTTLE", "k:1", limit-1, 1, 3600).Result()
		if err != nil {
			return err
		}
		if v.([]any)[0].(int64) == 0 {
			allowed++
		}
		return nil
	}
	for range 30 {
		if err := decide(); err != nil {
			t.Fatal(err)
		}
	}
	leader := g.leader(t)
	leader.kill()
	t.Logf("killed the leader %s", leader.id)
	// Until the group has a new leader, r1 answers an error naming g.
	poll.Until(t, 30*time.Second, decide)
	for range 100 {
		if err := decide(); err != nil {
			t.Fatalf("after the failover: %v", err)
		}
	}
	if allowed > limit || allowed < limit-2 {
		t.Errorf("%d allowed through the failover, want the limit %d (one decision in flight at the kill may count without an answer)", allowed, limit)
	}
}
