package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// A move reaches the importing group through any of its members, on one
// cluster of two groups × three nodes: MIGRATE to each member, MIGRATE to
// a leader stopped (SIGSTOP) before and past MIGRATE's timeout, and
// redis-cli --cluster reshard while the target's leader is stopped. Every
// subtest moves slots of its own from a to b; no key is ever served fresh.
func TestGroupsMoveToAnyMember(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	groups := startGroups(t, 2)
	t.Run("MigrateToEveryMember", func(t *testing.T) { testMigrateToEveryMember(t, groups, 306) })
	t.Run("MigrateToStoppedLeader", func(t *testing.T) { testMigrateToStoppedLeader(t, groups, 307) })
	t.Run("ReshardTargetLeaderStopped", func(t *testing.T) { testReshardTargetLeaderStopped(t, groups) })
}

// MIGRATE as redis-cli --cluster sends it (MIGRATE host port "" 0 timeout
// REPLACE KEYS k1 k2 …), to each member of the importing group in turn,
// followers first: every one of them takes the keys (a follower forwards
// the RESTOREs, with their ASKING, to its leader), MIGRATE answers OK, and
// the keys end in b only, still exhausted.
func testMigrateToEveryMember(t *testing.T, groups []*group, slot int) {
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	keys := slotKeys(slot, 2*len(b.nodes))
	exhaustSlotKeys(t, cc, keys)
	openSlot(t, a, b, slot)
	ctx := ctxT(t)
	bl := b.leader(t)
	targets := append(b.others(bl), bl)
	for i, dst := range targets {
		al := a.leader(t)
		c := noRetryClient(t, al.Addr)
		pair := keys[2*i : 2*i+2]
		err := c.Do(ctx, "MIGRATE", "127.0.0.1", dst.Port, "", 0, 5000, "REPLACE", "KEYS", pair[0], pair[1]).Err()
		if err != nil {
			role := "follower"
			if dst == bl {
				role = "leader"
			}
			t.Errorf("MIGRATE %v to %s (%s of b) = %v, want OK", pair, dst.id, role, err)
		}
	}
	bl = b.leader(t)
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	clusterDo(t, a.leader(t), "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	checkClean(t, groups, a.leader(t))
	checkInB(t, groups, cc, keys)
}

// redis-cli --cluster reshard moves slots 0 to moved-1 (two exhausted keys
// in each, forty in each of stopSlots) from a to b. Right after redis-cli
// reports the first batch of a stop slot's keys moved (a dot; it migrates
// ten keys per MIGRATE), b's leader of the moment is stopped (SIGSTOP) for
// 5 s, so the next MIGRATE's RESTOREs wait in its socket (when it is the
// member redis-cli names, as it is the first time) or in the forwarding of
// the member redis-cli names, while b elects another leader; the stopped
// one, resumed, is deposed. The reshard completes (redis-cli exits
// 0), check is clean, every key is in b only and still exhausted.
func testReshardTargetLeaderStopped(t *testing.T, groups []*group) {
	const moved = 48
	stopSlots := []int{5, 25}
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	var keys []string
	for slot := range moved {
		n := 2
		if slices.Contains(stopSlots, slot) {
			n = 40
		}
		keys = append(keys, slotKeys(slot, n)...)
	}
	exhaustSlotKeys(t, cc, keys)
	al, bl := a.leader(t), b.leader(t)
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, "redis-cli", "--cluster", "reshard", al.Addr,
		"--cluster-from", a.cid(al), "--cluster-to", b.cid(bl),
		"--cluster-slots", strconv.Itoa(moved), "--cluster-yes")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	var out strings.Builder
	var resumed []chan struct{}
	var stopped []string
	r := bufio.NewReader(pr)
	for {
		c, err := r.ReadByte()
		if err != nil {
			break
		}
		out.WriteByte(c)
		if c != '.' || len(resumed) == len(stopSlots) {
			continue
		}
		mark := fmt.Sprintf("Moving slot %d from ", stopSlots[len(resumed)])
		if !strings.Contains(out.String()[max(0, out.Len()-200):], mark) {
			continue
		}
		l := b.leader(t)
		if err := l.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped = append(stopped, l.id)
		done := make(chan struct{})
		resumed = append(resumed, done)
		time.AfterFunc(5*time.Second, func() {
			l.cmd.Process.Signal(syscall.SIGCONT)
			close(done)
		})
	}
	err := <-waited
	for _, done := range resumed {
		<-done
	}
	if len(resumed) < len(stopSlots) {
		t.Fatalf("redis-cli did not report keys of slots %v moved: %v\n%s", stopSlots, err, tail(out.String(), 3000))
	}
	if err != nil {
		t.Fatalf("redis-cli --cluster reshard with b's leader stopped 5 s twice (%v) = %v\n%s\nraft states: %s\nCLUSTER NODES of every node:\n%s",
			stopped, err, tail(out.String(), 3000), raftStates(groups), clusterNodesOfAll(groups))
	}
	t.Logf("stopped b's leaders %v; b's leader now %s", stopped, b.leader(t).id)
	t.Logf("redis-cli --cluster reshard: %s", tail(out.String(), 600))
	checkClean(t, groups, a.leader(t))
	checkOneGroup(t, groups, keys)
	for _, k := range keys {
		if got := groupKeys(t, b, k); len(got) != 1 {
			t.Errorf("key %s (slot %d) is not in group b after the reshard", k, keySlot(k))
		}
	}
	checkExhausted(t, cc, keys)
	// Every node names b for the moved slots.
	poll.Until(t, 30*time.Second, func() error {
		want := b.leader(t).Addr
		for _, nd := range allNodes(groups) {
			for _, slot := range []int{0, moved - 1} {
				if got, err := slotMaster(nd, slot); err != nil || got != want {
					return fmt.Errorf("%s: master of slot %d = %q, %v; want %s", nd.id, slot, got, err, want)
				}
			}
		}
		return nil
	})
}

// MIGRATE as redis-cli sends it, to b's leader while it is stopped: the
// RESTOREs wait in its socket until it resumes, deposed (b elected another
// leader meanwhile), and answers that leadership changed. MIGRATE sends
// them again, through the same node, now a follower that forwards them to
// the new leader, and answers OK. Then a MIGRATE whose timeout runs out
// while the new leader is stopped leaves its keys in flight (never served
// fresh), and a second MIGRATE to another member of b completes the move;
// the first one's RESTOREs, applied when the stopped node resumes, do not
// undo what clients took from the keys on b since.
func testMigrateToStoppedLeader(t *testing.T, groups []*group, slot int) {
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	keys := slotKeys(slot, 5)
	exhausted, used := keys[:3], keys[3:]
	exhaustSlotKeys(t, cc, exhausted)
	ctx := ctxT(t)
	for _, k := range used {
		for range 2 {
			if v, err := cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600).Int64Slice(); err != nil || v[0] != 0 {
				t.Fatalf("CL.THROTTLE %s 4 5 3600 = %v, %v; want allowed", k, v, err)
			}
		}
	}
	openSlot(t, a, b, slot)
	// a learns that b imports the slot from its directory.
	poll.Until(t, 10*time.Second, func() error {
		out, err := noRetryClient(t, a.leader(t).Addr).Do(ctx, "CLUSTER", "NODES").Text()
		if err != nil {
			return err
		}
		if !strings.Contains(out, fmt.Sprintf("[%d-<-", slot)) {
			return fmt.Errorf("a does not show slot %d imported by b yet", slot)
		}
		return nil
	})

	stop := func(nd *clusterNode) func() {
		if err := nd.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				nd.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
		t.Cleanup(resume)
		return resume
	}
	newLeader := func(old *clusterNode) *clusterNode {
		var nl *clusterNode
		poll.Until(t, 30*time.Second, func() error {
			o := b.others(old)
			i := leaderOf(o)
			if i < 0 {
				return fmt.Errorf("group b has no new leader yet")
			}
			nl = o[i]
			return nil
		})
		return nl
	}
	migrateAs := func(src, dst *clusterNode, ms int, keys []string) error {
		c := redis.NewClient(&redis.Options{Addr: src.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 3 * time.Minute})
		defer c.Close()
		args := []any{"MIGRATE", "127.0.0.1", dst.Port, "", 0, ms, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return c.Do(ctx, args...).Err()
	}

	// The target leader stopped for 5 s within MIGRATE's timeout.
	al, bl := a.leader(t), b.leader(t)
	resume := stop(bl)
	stopped := time.Now()
	done := make(chan error, 1)
	go func() { done <- migrateAs(al, bl, 60000, exhausted) }()
	newLeader(bl)
	for time.Since(stopped) < 5*time.Second {
		select {
		case err := <-done:
			t.Fatalf("MIGRATE to the stopped leader of b answered while it was stopped: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	resume()
	if err := <-done; err != nil {
		t.Errorf("MIGRATE %v to b's leader, stopped 5 s = %v; want OK", exhausted, err)
	}

	// The target leader stopped past MIGRATE's timeout.
	bl = b.leader(t)
	restores := func(nd *clusterNode) int64 {
		c := quickClient(nd.Addr)
		defer c.Close()
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatalf("%s: INFO commandstats: %v", nd.id, err)
		}
		var n int64
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_restore:"); ok {
				for _, f := range strings.Split(rest, ",") {
					if name, v, ok := strings.Cut(f, "="); ok && (name == "calls" || name == "rejected_calls") {
						x, _ := strconv.ParseInt(v, 10, 64)
						n += x
					}
				}
			}
		}
		return n
	}
	before := restores(bl)
	resume = stop(bl)
	err := migrateAs(a.leader(t), bl, 300, used)
	t.Logf("MIGRATE %v to b's leader, stopped past the timeout: %v", used, err)
	if err != nil {
		if !strings.Contains(err.Error(), "in flight") {
			t.Errorf("MIGRATE %v to b's stopped leader = %v, want OK or an error saying the keys are in flight", used, err)
		}
		for _, k := range used {
			if v, err := cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600).Int64Slice(); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
				t.Errorf("CL.THROTTLE %s in flight = %v, %v; want TRYAGAIN", k, v, err)
			}
		}
	}
	nl := newLeader(bl)
	// A retry, to a running member of b, completes the move.
	var other *clusterNode
	for _, nd := range b.others(nl) {
		if nd != bl {
			other = nd
		}
	}
	if err := migrateAs(a.leader(t), other, 5000, used); err != nil && err.Error() != "NOKEY" {
		t.Errorf("MIGRATE %v again, to a member of b = %v; want OK", used, err)
	}
	// The keys are used on b: three more takes exhaust them.
	for _, k := range used {
		for i := range 3 {
			if v, err := cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600).Int64Slice(); err != nil || v[0] != 0 {
				t.Errorf("CL.THROTTLE %s on b (take %d of 3) = %v, %v; want allowed", k, i+1, v, err)
			}
		}
	}
	resume()
	// The stopped node's RESTOREs of the timed-out MIGRATE run now.
	poll.Until(t, 30*time.Second, func() error {
		if n := restores(bl); n < before+int64(len(used)) {
			return fmt.Errorf("%s ran %d RESTOREs since it was stopped, want at least %d", bl.id, n-before, len(used))
		}
		return nil
	})
	nl = b.leader(t)
	clusterDo(t, nl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(nl))
	clusterDo(t, a.leader(t), "CLUSTER", "SETSLOT", slot, "NODE", b.cid(nl))
	checkClean(t, groups, a.leader(t))
	checkInB(t, groups, cc, keys)
}

// checkInB checks that every key is in group b alone and still exhausted.
func checkInB(t *testing.T, groups []*group, cc *redis.ClusterClient, keys []string) {
	t.Helper()
	checkOneGroup(t, groups, keys)
	for _, k := range keys {
		if got := groupKeys(t, groups[1], k); len(got) != 1 {
			t.Errorf("key %s is not in group b after the move", k)
		}
	}
	checkExhausted(t, cc, keys)
}
