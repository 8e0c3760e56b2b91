package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/shards"
)

// Writes through the leader and through followers (forwarded) reach every
// replica, and every replica holds the same state.
func TestWritesReplicate(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	for i := range c.nodes {
		// CL.THROTTLE k 9 10 60 1 on a fresh key: limit 10, remaining 9.
		r, err := write(t, c.nodes[i].node, throttle(fmt.Sprintf("k%d", i), 9, 10, 60, 1))
		if err != nil {
			t.Fatalf("write via %s (leader %s): %v", c.nodes[i].id, c.nodes[l].id, err)
		}
		if r.Limited || r.Limit != 10 || r.Remaining != 9 {
			t.Fatalf("write via %s = %+v, want allowed, limit 10, remaining 9", c.nodes[i].id, r)
		}
	}
	c.waitConverged(10 * time.Second)
	for _, tn := range c.nodes {
		now := tn.node.fsm.LastTime()
		if got := tn.node.Store().Len(now); got != 3 {
			t.Errorf("%s holds %d keys, want 3", tn.id, got)
		}
		for i := range c.nodes {
			a, okA := tn.node.Store().Lookup([]byte(fmt.Sprintf("k%d", i)), now)
			b, okB := c.nodes[l].node.Store().Lookup([]byte(fmt.Sprintf("k%d", i)), now)
			if !okA || !okB || a.A != b.A || a.ExpireAt != b.ExpireAt {
				t.Errorf("%s: k%d = %+v (%v), leader has %+v (%v)", tn.id, i, a, okA, b, okB)
			}
		}
	}
	// Linearizable reads on every node see the writes.
	for _, tn := range c.nodes {
		now, err := tn.node.ReadNow(context.Background())
		if err != nil {
			t.Fatalf("ReadNow on %s: %v", tn.id, err)
		}
		if _, ok := tn.node.Store().Lookup([]byte("k2"), now); !ok {
			t.Errorf("%s: k2 missing after ReadNow", tn.id)
		}
	}
}

// A key exhausted on the leader stays limited after the leader dies and a
// new one is elected, with a retry_after consistent with the time passed;
// over each log store.
func TestFailoverKeepsLimit(t *testing.T) {
	for _, store := range logStores {
		t.Run(store, func(t *testing.T) { testFailoverKeepsLimit(t, store) })
	}
}

func testFailoverKeepsLimit(t *testing.T, store string) {
	c := newTestCluster(t, 3, withLogStore(store, FsyncAlways))
	l := c.WaitForLeader(10 * time.Second)
	// CL.THROTTLE key 0 1 60: one request per 60 s, no burst.
	first, err := write(t, c.nodes[l].node, throttle("user:1", 0, 1, 60, 1))
	if err != nil || first.Limited {
		t.Fatalf("first request = %+v, %v; want allowed", first, err)
	}
	second, err := write(t, c.nodes[l].node, throttle("user:1", 0, 1, 60, 1))
	if err != nil || !second.Limited {
		t.Fatalf("second request = %+v, %v; want limited", second, err)
	}
	killed := time.Now()
	c.stop(l)
	nl := c.WaitForLeader(10*time.Second, l)
	failover := time.Since(killed)
	t.Logf("failover: new leader %s ready %v after the old one stopped", c.nodes[nl].id, failover)
	third, err := write(t, c.nodes[nl].node, throttle("user:1", 0, 1, 60, 1))
	if err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	elapsed := time.Since(killed) + time.Second
	// retry_after can only have shrunk by the time passed (and never grown).
	if !third.Limited || third.RetryAfter > second.RetryAfter || third.RetryAfter < second.RetryAfter-int64(elapsed) {
		t.Fatalf("after failover = %+v; want limited with retry_after in [%d-%d, %d]", third, second.RetryAfter, int64(elapsed), second.RetryAfter)
	}
}

// Time never runs backwards across a leader change, even when the new
// leader's clock is behind the old one's.
func TestTimeNeverRunsBackwards(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	c.nodes[l].clock.offset.Store(int64(30 * time.Second)) // the old leader runs 30 s ahead
	r1, err := write(t, c.nodes[l].node, throttle("k", 0, 1, 60, 1))
	if err != nil || r1.Limited {
		t.Fatalf("first = %+v, %v", r1, err)
	}
	stamped := c.nodes[l].node.fsm.LastTime()
	c.waitConverged(10 * time.Second)
	c.stop(l)
	nl := c.WaitForLeader(10*time.Second, l)
	r2, err := write(t, c.nodes[nl].node, throttle("k", 0, 1, 60, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[nl].node.fsm.LastTime(); got < stamped {
		t.Fatalf("new leader applied at %d, before the old leader's %d", got, stamped)
	}
	// With time held at the old leader's instant, the key is still fully
	// exhausted: retry_after is the whole 60 s period (not 90 s, as a clock
	// 30 s behind would give, nor negative).
	if !r2.Limited || r2.RetryAfter > int64(60*time.Second) || r2.RetryAfter < int64(50*time.Second) {
		t.Fatalf("after the change = %+v; want limited with retry_after in [50s, 60s]", r2)
	}
}

// A partitioned leader admits nothing; the majority elects a leader and
// keeps serving; after healing there is one history.
func TestPartitionedLeader(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	old := c.WaitForLeader(10 * time.Second)
	if _, err := write(t, c.nodes[old].node, throttle("k", 4, 1, 60, 1)); err != nil {
		t.Fatal(err)
	}
	c.waitConverged(10 * time.Second)
	c.Partition(old, true)

	// The old leader can no longer admit anything: each write fails (it
	// cannot commit), within the no-leader bound plus the lease.
	start := time.Now()
	_, err := write(t, c.nodes[old].node, throttle("k", 4, 1, 60, 1))
	if err == nil {
		t.Fatal("partitioned leader admitted a write")
	}
	// A generous failure bound: the figure is a measurement, logged here.
	d := time.Since(start)
	t.Logf("partitioned write failed after %v (no-leader bound %v)", d, c.nodes[old].node.cfg.NoLeaderTimeout)
	if limit := max(10*time.Second, 2*c.nodes[old].node.cfg.NoLeaderTimeout+time.Second); d > limit {
		t.Fatalf("partitioned write took %v, want under %v", d, limit)
	}
	if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("partitioned write: %v, want ErrNoLeader or ErrLeadershipLost", err)
	}
	if _, err := c.nodes[old].node.ReadNow(context.Background()); err == nil {
		t.Fatal("partitioned node confirmed a linearizable read")
	}

	nl := c.WaitForLeader(10*time.Second, old)
	var last int64 = -1
	for i := 0; i < 3; i++ {
		r, err := write(t, c.nodes[nl].node, throttle("k", 4, 1, 60, 1))
		if err != nil {
			t.Fatalf("majority write %d: %v", i, err)
		}
		last = r.Remaining
	}
	c.Partition(old, false)
	c.waitConverged(15 * time.Second)
	if isLeader(c.nodes[old].node) {
		t.Fatal("healed old leader is leader again without an election")
	}
	// One history: every replica holds the same state for k.
	now := c.nodes[nl].node.fsm.LastTime()
	want, _ := c.nodes[nl].node.Store().Lookup([]byte("k"), now)
	for _, tn := range c.nodes {
		got, ok := tn.node.Store().Lookup([]byte("k"), now)
		if !ok || got.A != want.A {
			t.Errorf("%s: k = %+v, want %+v", tn.id, got, want)
		}
	}
	// 1 write before the partition + 3 after: remaining 5-4 = 1 (give or
	// take emission during the test).
	if last > 2 {
		t.Errorf("remaining after 4 admitted of 5 = %d, want <= 2", last)
	}
}

// With no leader, writes and reads fail with ErrNoLeader within the bound.
func TestNoLeaderBound(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.NoLeaderTimeout = time.Second })
	l := c.WaitForLeader(10 * time.Second)
	var f int
	for i := range c.nodes {
		if i != l {
			f = i
		}
	}
	for i := range c.nodes {
		if i != f {
			c.stop(i)
		}
	}
	start := time.Now()
	_, err := write(t, c.nodes[f].node, throttle("k", 1, 1, 1, 1))
	d := time.Since(start)
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("write with no quorum: %v, want ErrNoLeader", err)
	}
	// The failure bounds are generous (a loaded machine stretches the 1 s
	// bound); the measured figures are logged.
	t.Logf("write with no quorum failed after %v (bound 1s)", d)
	if d > 10*time.Second {
		t.Fatalf("write with no quorum took %v, want well under 10s (bound 1s)", d)
	}
	start = time.Now()
	_, err = c.nodes[f].node.ReadNow(context.Background())
	d = time.Since(start)
	t.Logf("read with no quorum failed after %v (bound 1s)", d)
	if !errors.Is(err, ErrNoLeader) || d > 10*time.Second {
		t.Fatalf("read with no quorum: %v after %v, want ErrNoLeader well within 10s (bound 1s)", err, d)
	}
}

// Group commit packs the writes of concurrent callers into shared entries.
func TestGroupCommitBatches(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	n := c.nodes[l].node
	before := n.Info()
	const workers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res := make([]shards.Result, 2)
				ops := []shards.Op{throttle(fmt.Sprintf("w%d", w), 100, 1, 1, 1), throttle(fmt.Sprintf("x%d", w), 100, 1, 1, 1)}
				if err := n.Write(context.Background(), ops, res); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := n.Info()
	entries, ops := after.Entries-before.Entries, after.Ops-before.Ops
	if ops != workers*each*2 {
		t.Fatalf("ops submitted = %d, want %d", ops, workers*each*2)
	}
	perEntry := float64(ops) / float64(entries)
	t.Logf("%d ops in %d entries: %.1f ops per entry", ops, entries, perEntry)
	if perEntry <= 2 {
		t.Fatalf("%.2f ops per entry: concurrent writes were not batched (each write has 2)", perEntry)
	}
}

// With LocalReads a node answers reads at its own last applied time, with
// no round trip: even cut off from the others.
func TestLocalReads(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LocalReads = true })
	l := c.WaitForLeader(10 * time.Second)
	if _, err := write(t, c.nodes[l].node, throttle("k", 1, 1, 60, 1)); err != nil {
		t.Fatal(err)
	}
	c.waitConverged(10 * time.Second)
	f := (l + 1) % 3
	c.Partition(f, true)
	defer c.Partition(f, false)
	now, err := c.nodes[f].node.ReadNow(context.Background())
	if err != nil {
		t.Fatalf("local read on a cut-off follower: %v", err)
	}
	if want := c.nodes[f].node.fsm.LastTime(); now != want {
		t.Fatalf("ReadNow = %d, want the last applied time %d", now, want)
	}
	if _, ok := c.nodes[f].node.Store().Lookup([]byte("k"), now); !ok {
		t.Fatal("k missing from a local read")
	}
}
