package test

import (
	"bufio"
	"context"
	"fmt"
	"net"
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

// Interrupted reshards, on one cluster of two groups × three nodes: each
// subtest opens a slot of its own (owned by a), leaves it the way a crash,
// a pause or a bogus target leaves it, repairs it with the documented
// commands, and checks that no key was ever served fresh: every exhausted
// key is still exhausted afterwards, in exactly one group.
func TestGroupsInterruptedReshards(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	groups := startGroups(t, 2)
	t.Run("FixAfterTwoMigrates", func(t *testing.T) { testFixOpenSlot(t, groups, 300, false) })
	t.Run("FixAfterSourceLeaderKill", func(t *testing.T) { testFixOpenSlot(t, groups, 301, true) })
	t.Run("FixWhenTargetHasMost", func(t *testing.T) { testFixTargetHasMost(t, groups, 304) })
	t.Run("TargetLeaderPaused", func(t *testing.T) { testTargetLeaderPaused(t, groups, 302) })
	t.Run("BogusTargets", func(t *testing.T) { testBogusTargets(t, groups, 303) })
	t.Run("FixAfterBogusTargetInOpenSlot", func(t *testing.T) { testFixBogusInOpenSlot(t, groups, 305) })
}

// slotKeys returns n keys of slot, each with a hash tag of its own.
func slotKeys(slot, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if tag := "{x" + strconv.Itoa(i) + "}"; keySlot(tag) == slot {
			keys = append(keys, tag+"k")
		}
	}
	return keys
}

// exhaustSlotKeys takes CL.THROTTLE key 4 5 3600 five times (burst 4: the fifth
// empties the bucket) through the cluster client.
func exhaustSlotKeys(t *testing.T, cc *redis.ClusterClient, keys []string) {
	t.Helper()
	ctx := ctxT(t)
	for _, k := range keys {
		for i := range 5 {
			v, err := cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600).Int64Slice()
			if err != nil || v[0] != 0 {
				t.Fatalf("CL.THROTTLE %s 4 5 3600 (take %d) = %v, %v; want allowed", k, i+1, v, err)
			}
		}
	}
}

// checkExhausted wants every key still exhausted, through the cluster
// client (which follows MOVED and ASK): a peek (quantity 0) shows no
// token left and a take is limited. A key answering TRYAGAIN is retried
// for up to 30 s (a repair settling), then fails.
func checkExhausted(t *testing.T, cc *redis.ClusterClient, keys []string) {
	t.Helper()
	for _, k := range keys {
		var peek, take []int64
		poll.Until(t, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			if peek, err = cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600, 0).Int64Slice(); err != nil {
				return fmt.Errorf("peek %s: %w", k, err)
			}
			if take, err = cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600).Int64Slice(); err != nil {
				return fmt.Errorf("take %s: %w", k, err)
			}
			return nil
		})
		if peek[2] != 0 || take[0] != 1 {
			t.Errorf("exhausted key %s: peek = %v (want 0 remaining), take = %v (want limited)", k, peek, take)
		}
	}
}

// checkOneGroup wants every key in exactly one group's keyspace.
func checkOneGroup(t *testing.T, groups []*group, keys []string) {
	t.Helper()
	where := map[string][]string{}
	for _, g := range groups {
		for _, k := range keys {
			if slices.Contains(groupKeys(t, g, k), k) {
				where[k] = append(where[k], g.name)
			}
		}
	}
	for _, k := range keys {
		if len(where[k]) != 1 {
			t.Errorf("key %s is in groups %v, want exactly one", k, where[k])
		}
	}
}

// redisCli runs redis-cli with args (bounded at 2 minutes).
func redisCli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	return string(out), err
}

// checkClean polls until redis-cli --cluster check through nd exits 0
// without warnings or errors.
func checkClean(t *testing.T, groups []*group, nd *clusterNode) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		out, err := redisCli(t, "--cluster", "check", nd.Addr)
		if err != nil || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERR]") {
			return fmt.Errorf("redis-cli --cluster check %s = %v\n%s\nCLUSTER NODES:\n%s", nd.Addr, err, out, clusterNodesOfAll(groups))
		}
		return nil
	})
}

// openSlot sets slot IMPORTING on b and MIGRATING on a, through their
// leaders.
func openSlot(t *testing.T, a, b *group, slot int) {
	t.Helper()
	al, bl := a.leader(t), b.leader(t)
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "IMPORTING", a.cid(al))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "MIGRATING", b.cid(bl))
}

// migrate runs MIGRATE on src moving keys to dst, with a timeout of 5 s.
func migrate(ctx context.Context, src, dst *clusterNode, keys ...string) error {
	return migrateWithin(ctx, src, dst, 5000, keys...)
}

// migrateWithin runs MIGRATE on src moving keys to dst, with a timeout of
// ms milliseconds.
func migrateWithin(ctx context.Context, src, dst *clusterNode, ms int, keys ...string) error {
	c := redis.NewClient(&redis.Options{Addr: src.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 30 * time.Second})
	defer c.Close()
	args := []any{"MIGRATE", "127.0.0.1", dst.Port, "", 0, ms, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Err()
}

// The state a source crash mid-reshard leaves: six exhausted keys of
// slot, the slot open on both groups, two keys already on b. Then
// redis-cli --cluster fix repairs it: check is clean afterwards, every key
// is in one group and still exhausted. Without kill, a's SETSLOT STABLE
// (fix's first step) is sent alone first: a moved key then answers
// TRYAGAIN on a, never fresh. With kill, two more keys are left in flight
// (MIGRATE to b's leader while it is stopped, then killed, so that their
// RESTORE never lands) and a's leader is killed with kill -9 (both then
// restarted); after fix, CLUSTER ABORTMOVE puts the keys in flight back.
func testFixOpenSlot(t *testing.T, groups []*group, slot int, kill bool) {
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	keys := slotKeys(slot, 6)
	exhaustSlotKeys(t, cc, keys)
	openSlot(t, a, b, slot)
	ctx := ctxT(t)
	if err := migrate(ctx, a.leader(t), b.leader(t), keys[:2]...); err != nil {
		t.Fatalf("MIGRATE %v to b = %v", keys[:2], err)
	}
	if !kill {
		al := a.leader(t)
		clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "STABLE")
		ac := noRetryClient(t, al.Addr)
		if v, err := throttle(ctx, ac, keys[0], 4, 5, 3600); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
			t.Errorf("CL.THROTTLE %s on a after SETSLOT STABLE (the key is on b) = %v, %v; want TRYAGAIN", keys[0], v, err)
		}
	}
	if kill {
		bl := b.leader(t)
		if err := bl.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		err := migrateWithin(ctx, a.leader(t), bl, 500, keys[2:4]...)
		if err == nil || !strings.Contains(err.Error(), "in flight") {
			t.Errorf("MIGRATE %v to b's stopped leader = %v, want an error saying they are in flight", keys[2:4], err)
		}
		// b's stopped leader dies too, so the RESTOREs it had not read
		// never land: the keys stay in flight on a.
		bl.kill()
		dead := a.leader(t)
		dead.kill()
		bl.restart()
		poll.Until(t, 30*time.Second, func() error {
			if l := leaderOf(a.others(dead)); l < 0 {
				return fmt.Errorf("group a has no new leader")
			}
			return nil
		})
		dead.restart()
		waitGroups(t, groups, 60*time.Second)
		// A key in flight to b is never sent to another group (here: a
		// member of a itself), where it could land a second time.
		al := a.leader(t)
		if err := migrate(ctx, al, a.others(al)[0], keys[2]); err == nil || !strings.Contains(err.Error(), "is in flight to") {
			t.Errorf("MIGRATE of %s (in flight to b) to a member of a = %v, want a refusal", keys[2], err)
		}
	}
	al := a.leader(t)
	out, err := redisCli(t, "--cluster", "fix", al.Addr, "--cluster-yes")
	t.Logf("redis-cli --cluster fix %s: %v\n%s", al.Addr, err, tail(out, 3000))
	if err != nil {
		t.Errorf("redis-cli --cluster fix = %v", err)
	}
	if kill {
		// Keys in flight whose RESTORE never landed stay in flight after
		// fix (b no longer imports the slot and holds none of its keys):
		// CLUSTER ABORTMOVE puts them back.
		// Refused until every member of b shows the slot closed.
		ac := noRetryClient(t, al.Addr)
		poll.Until(t, 30*time.Second, func() error {
			n, err := ac.Do(ctx, "CLUSTER", "ABORTMOVE", slot).Result()
			if err != nil || n != int64(2) {
				return fmt.Errorf("CLUSTER ABORTMOVE %d after fix = %v, %v; want 2 keys put back", slot, n, err)
			}
			return nil
		})
	}
	checkClean(t, groups, al)
	checkOneGroup(t, groups, keys)
	checkExhausted(t, cc, keys)
}

// A reshard whose target leader is paused (SIGSTOP, 5 s) while keys move:
// MIGRATE reaches the group through any member, so the loop that moves
// the slot (retrying a MIGRATE that failed, on another member) completes.
func testTargetLeaderPaused(t *testing.T, groups []*group, slot int) {
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	keys := slotKeys(slot, 12)
	exhaustSlotKeys(t, cc, keys)
	ctx := ctxT(t)
	al, bl := a.leader(t), b.leader(t)
	// A follower of b that has not applied IMPORTING yet (stopped while
	// it was committed) takes a key at once: a RESTORE after ASKING
	// through any member reaches the group's log, whose state decides.
	f := b.others(bl)[0]
	if err := f.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	openSlot(t, a, b, slot)
	f.cmd.Process.Signal(syscall.SIGCONT)
	// a learns that b imports the slot from its directory (twice a
	// second); the BUSYKEY rule below reads it.
	poll.Until(t, 10*time.Second, func() error {
		out, err := noRetryClient(t, al.Addr).Do(ctx, "CLUSTER", "NODES").Text()
		if err != nil {
			return err
		}
		if !strings.Contains(out, fmt.Sprintf("[%d-<-", slot)) {
			return fmt.Errorf("a does not show slot %d imported by b yet", slot)
		}
		return nil
	})
	if err := migrate(ctx, al, f, keys[0]); err != nil {
		t.Fatalf("MIGRATE %s to a follower of b = %v, want OK", keys[0], err)
	}
	// A key b already took from a (another node's RESTORE of it landed):
	// MIGRATE's BUSYKEY from a group importing from a means the move is
	// done, and the key stays in b only.
	payload, err := noRetryClient(t, al.Addr).Dump(ctx, keys[1]).Result()
	if err != nil {
		t.Fatalf("DUMP %s = %v", keys[1], err)
	}
	if err := asking(ctx, noRetryClient(t, bl.Addr), "RESTORE", keys[1], 0, payload).Err(); err != nil {
		t.Fatalf("ASKING + RESTORE %s on b = %v", keys[1], err)
	}
	if err := migrate(ctx, al, bl, keys[1]); err != nil {
		t.Errorf("MIGRATE %s (already on b) = %v, want OK", keys[1], err)
	}
	if err := bl.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			bl.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	stopped := time.Now()
	deadline := time.Now().Add(90 * time.Second)
	for i, k := range keys[1:] {
		for n := 0; ; n++ {
			if time.Since(stopped) > 5*time.Second {
				resume()
			}
			dst := b.nodes[(i+n)%len(b.nodes)]
			err := migrate(ctx, a.leader(t), dst, k)
			if err == nil || err.Error() == "NOKEY" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("MIGRATE %s: still failing after 90 s: %v", k, err)
			}
			t.Logf("MIGRATE %s to %s: %v (retrying)", k, dst.id, err)
		}
	}
	resume()
	bl = b.leader(t)
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	clusterDo(t, a.leader(t), "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	checkOneGroup(t, groups, keys)
	for _, k := range keys {
		if got := groupKeys(t, b, k); len(got) != 1 {
			t.Errorf("key %s is not in group b after the move", k)
		}
	}
	checkExhausted(t, cc, keys)
}

// fakeTarget listens on loopback and treats each connection with serve.
func fakeTarget(t *testing.T, serve func(nc net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer nc.Close(); serve(nc) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// drain reads what the client sends until it stops.
func drain(nc net.Conn) { bufio.NewReader(nc).WriteTo(discard{}) }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// MIGRATE to targets that are not working cellservers: the reply says
// the keys are in flight, they answer TRYAGAIN (never fresh), and CLUSTER
// ABORTMOVE puts them back, still exhausted. A standalone cellserver
// takes the keys and MIGRATE answers OK.
func testBogusTargets(t *testing.T, groups []*group, slot int) {
	a := groups[0]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	targets := []struct {
		name  string
		serve func(net.Conn)
	}{
		{"silent", drain},
		{"garbage", func(nc net.Conn) {
			nc.Read(make([]byte, 1))
			nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			drain(nc)
		}},
		{"cut", func(nc net.Conn) { nc.Read(make([]byte, 1)) }},
		{"trickle", func(nc net.Conn) {
			go drain(nc)
			for _, c := range []byte("+OK\r\n+OK\r\n+OK\r\n") {
				time.Sleep(time.Second)
				if _, err := nc.Write([]byte{c}); err != nil {
					return
				}
			}
		}},
	}
	keys := slotKeys(slot, len(targets))
	exhaustSlotKeys(t, cc, keys)
	ctx := ctxT(t)
	for i, tt := range targets {
		k := keys[i]
		port := fakeTarget(t, tt.serve)
		c := quickClient(a.leader(t).Addr)
		err := c.Do(ctx, "MIGRATE", "127.0.0.1", port, k, 0, 1000).Err()
		c.Close()
		if err == nil || !strings.Contains(err.Error(), "in flight") {
			t.Errorf("%s target: MIGRATE %s = %v, want an error saying the key is in flight", tt.name, k, err)
		}
		v, err := cc.Do(ctx, "CL.THROTTLE", k, 4, 5, 3600).Int64Slice()
		if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
			t.Errorf("%s target: CL.THROTTLE %s after MIGRATE = %v, %v; want TRYAGAIN", tt.name, k, v, err)
		}
	}
	n := clusterDo(t, a.leader(t), "CLUSTER", "ABORTMOVE", slot)
	if n != int64(len(keys)) {
		t.Errorf("CLUSTER ABORTMOVE %d = %v, want %d keys put back", slot, n, len(keys))
	}
	checkExhausted(t, cc, keys)

	// A standalone cellserver takes the key: MIGRATE answers OK.
	solo := startServer(t)
	c := quickClient(a.leader(t).Addr)
	defer c.Close()
	if err := c.Do(ctx, "MIGRATE", "127.0.0.1", solo.Port, keys[0], 0, 5000).Err(); err != nil {
		t.Errorf("MIGRATE %s to a standalone cellserver = %v, want OK", keys[0], err)
	}
	sc := quickClient(solo.Addr)
	defer sc.Close()
	if v, err := sc.Do(ctx, "CL.THROTTLE", keys[0], 4, 5, 3600).Int64Slice(); err != nil || v[0] != 1 {
		t.Errorf("CL.THROTTLE %s on the standalone server = %v, %v; want limited", keys[0], v, err)
	}
}

// When the target holds most of the slot's keys, redis-cli --cluster fix
// picks it as the owner and cannot give it the slot (the source owns it):
// fix stops, with no key served fresh anywhere (the moved keys answer
// TRYAGAIN on the source, whose slot fix made stable). The move is then
// finished by hand, as docs/cluster.md says: IMPORTING again on the
// target, MIGRATE the rest, SETSLOT NODE on both.
func testFixTargetHasMost(t *testing.T, groups []*group, slot int) {
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	keys := slotKeys(slot, 6)
	exhaustSlotKeys(t, cc, keys)
	openSlot(t, a, b, slot)
	ctx := ctxT(t)
	if err := migrate(ctx, a.leader(t), b.leader(t), keys[:4]...); err != nil {
		t.Fatalf("MIGRATE %v to b = %v", keys[:4], err)
	}
	al, bl := a.leader(t), b.leader(t)
	for run := 1; run <= 2; run++ { // the second run stops as the first
		out, err := redisCli(t, "--cluster", "fix", al.Addr, "--cluster-yes")
		t.Logf("redis-cli --cluster fix %s (run %d): %v\n%s", al.Addr, run, err, tail(out, 1500))
		if err == nil || !strings.Contains(out, "is already busy") {
			t.Errorf("redis-cli --cluster fix (run %d) = %v, want it to stop at ADDSLOTS on the target (already busy)", run, err)
		}
	}
	ac := noRetryClient(t, al.Addr)
	for _, k := range keys[:4] {
		if v, err := throttle(ctx, ac, k, 4, 5, 3600); err == nil {
			t.Errorf("CL.THROTTLE %s on a after fix (the key is on b) = %v, want an error (TRYAGAIN, ASK or MOVED)", k, v)
		}
	}
	// Finish the move by hand.
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "IMPORTING", a.cid(al))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "MIGRATING", b.cid(bl))
	if err := migrate(ctx, al, bl, keys[4:]...); err != nil {
		t.Fatalf("MIGRATE %v to b = %v", keys[4:], err)
	}
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	checkClean(t, groups, al)
	checkOneGroup(t, groups, keys)
	checkExhausted(t, cc, keys)
}

// A slot open from a to b whose keys were sent to a target that never
// answers (a wrong address): redis-cli --cluster fix completes the move to
// b (GETKEYSINSLOT on a lists the keys in flight, and MIGRATE sends them
// again), so check is clean and the keys are on b, still exhausted.
func testFixBogusInOpenSlot(t *testing.T, groups []*group, slot int) {
	a, b := groups[0], groups[1]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	keys := slotKeys(slot, 3)
	exhaustSlotKeys(t, cc, keys)
	openSlot(t, a, b, slot)
	port := fakeTarget(t, drain)
	al := a.leader(t)
	c := quickClient(al.Addr)
	defer c.Close()
	ctx := ctxT(t)
	if err := c.Do(ctx, "MIGRATE", "127.0.0.1", port, "", 0, 500, "KEYS", keys[0], keys[1]).Err(); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Errorf("MIGRATE to a silent target = %v, want an error saying the keys are in flight", err)
	}
	out, err := redisCli(t, "--cluster", "fix", al.Addr, "--cluster-yes")
	t.Logf("redis-cli --cluster fix %s: %v\n%s", al.Addr, err, tail(out, 1500))
	if err != nil {
		t.Errorf("redis-cli --cluster fix = %v", err)
	}
	checkClean(t, groups, al)
	checkOneGroup(t, groups, keys)
	for _, k := range keys {
		if got := groupKeys(t, b, k); len(got) != 1 {
			t.Errorf("key %s is not on b after fix", k)
		}
	}
	checkExhausted(t, cc, keys)
}
