package test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// MULTI/EXEC through the clients that use it: go-redis's TxPipelined and
// redis-py's pipeline() (transaction=True by default), on a standalone
// server and through the leader and a follower of a 3-node group.

// checkTxGoRedis runs the transaction checks with go-redis against addr;
// keys start with prefix.
func checkTxGoRedis(t *testing.T, addr, prefix string) {
	t.Helper()
	ctx := ctxT(t)
	c := noRetryClient(t, addr)
	thr := func(p redis.Pipeliner, key string, args ...any) *redis.Cmd {
		return p.Do(ctx, append([]any{"CL.THROTTLE", key}, args...)...)
	}
	// Two CL.THROTTLE tx 0 1 60 in one transaction: allowed, then limited.
	var first, second *redis.Cmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		first = thr(p, prefix+"tx", 0, 1, 60)
		second = thr(p, prefix+"tx", 0, 1, 60)
		return nil
	}); err != nil {
		t.Fatalf("TxPipelined: %v", err)
	}
	a, _ := first.Int64Slice()
	b, _ := second.Int64Slice()
	if fmt.Sprint(a) != "[0 1 0 -1 60]" || len(b) != 5 || b[0] != 1 || b[3] < 59 {
		t.Fatalf("transaction replies %v, %v; want [0 1 0 -1 60] then limited with retry_after ~60", a, b)
	}
	// A wrong arity while queuing aborts the whole transaction.
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		thr(p, prefix+"abort", 0, 1, 60)
		p.Do(ctx, "CL.THROTTLE", prefix+"abort")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") && !strings.Contains(err.Error(), "wrong number of arguments") {
		t.Fatalf("transaction with a wrong arity: %v, want EXECABORT", err)
	}
	if n, err := c.Exists(ctx, prefix+"abort").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after EXECABORT = %d, %v; want 0 (nothing ran)", n, err)
	}
	// DISCARD, nested MULTI, EXEC and DISCARD without MULTI, on one
	// connection.
	conn := c.Conn()
	defer conn.Close()
	steps := []struct {
		args []any
		want string
	}{
		{[]any{"EXEC"}, "ERR EXEC without MULTI"},
		{[]any{"DISCARD"}, "ERR DISCARD without MULTI"},
		{[]any{"MULTI"}, "OK"},
		{[]any{"CL.THROTTLE", prefix + "discard", 0, 1, 60}, "QUEUED"},
		{[]any{"MULTI"}, "ERR MULTI calls can not be nested"},
		{[]any{"DISCARD"}, "OK"},
		{[]any{"EXISTS", prefix + "discard"}, "0"},
	}
	for _, st := range steps {
		v, err := conn.Do(ctx, st.args...).Result()
		got := fmt.Sprint(v)
		if err != nil {
			got = err.Error()
		}
		if got != st.want {
			t.Fatalf("%v = %q, want %q", st.args, got, st.want)
		}
	}
}

// checkTxRedisPy runs the transaction checks with redis-py.
func checkTxRedisPy(t *testing.T, py string, port int, prefix string) {
	t.Helper()
	script := `
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
p = sys.argv[2]
pipe = r.pipeline()
pipe.execute_command("CL.THROTTLE", p + "tx", 0, 1, 60)
pipe.execute_command("CL.THROTTLE", p + "tx", 0, 1, 60)
a, b = pipe.execute()
print(*a)
print(b[0], b[1], b[2])
pipe = r.pipeline()
pipe.execute_command("CL.THROTTLE", p + "abort", 0, 1, 60)
pipe.execute_command("CL.THROTTLE", p + "abort")
try:
    pipe.execute()
    print("executed")
except redis.exceptions.ResponseError as e:
    print("aborted", "wrong number of arguments" in str(e))
print(r.exists(p + "abort"))
`
	out, err := exec.Command(py, "-c", script, strconv.Itoa(port), prefix).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
	want := "0 1 0 -1 60\n1 1 0\naborted True\n0"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("redis-py printed:\n%s\nwant:\n%s", got, want)
	}
}

func TestTransactionsStandalone(t *testing.T) {
	s := startServer(t)
	checkTxGoRedis(t, s.Addr, "go:")
	checkTxRedisPy(t, pythonWithRedis(t), s.Port, "py:")
}

func TestTransactionsGroup(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	f := (l + 1) % 3
	for _, c := range []struct {
		name string
		nd   *clusterNode
	}{{"leader", nodes[l]}, {"follower", nodes[f]}} {
		t.Run(c.name, func(t *testing.T) {
			checkTxGoRedis(t, c.nd.Addr, c.name+":go:")
			checkTxRedisPy(t, pythonWithRedis(t), c.nd.Port, c.name+":py:")
		})
	}
}

// TestGroupsTransactionCrossSlot: on two groups, a transaction's keys must
// share one slot of the node's group: CROSSSLOT at EXEC for two slots of
// the group, MOVED at queue time (then EXECABORT) for a key of the other.
func TestGroupsTransactionCrossSlot(t *testing.T) {
	groups := startGroups(t, 2)
	a, b := groups[0], groups[1]
	ctx := ctxT(t)
	c := noRetryClient(t, a.leader(t).Addr)
	ka := keysIn(a, "x", 2)
	kb := keysIn(b, "y", 1)[0]
	if keySlot(ka[0]) == keySlot(ka[1]) {
		t.Fatalf("keys %v share a slot", ka)
	}
	run := func(keys ...string) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Do(ctx, "CL.THROTTLE", k, 0, 1, 60)
			}
			return nil
		})
		return err
	}
	if err := run(ka[0], ka[1]); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("transaction over two slots of one group: %v, want CROSSSLOT", err)
	}
	if err := run(ka[0], kb); err == nil || !strings.Contains(err.Error(), "MOVED") && !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("transaction over two groups: %v, want MOVED / EXECABORT", err)
	}
	for _, k := range append(ka, kb) {
		if n, err := quickClient(groupOf(groups, k).leader(t).Addr).Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s = %d, %v after refused transactions; want 0", k, n, err)
		}
	}
	// The same two keys of one slot ({tag}) run.
	tag := "{" + ka[0] + "}"
	if err := run(tag+"1", tag+"2"); err != nil {
		t.Fatalf("transaction over one slot: %v", err)
	}
}

// groupOf returns the group owning key's slot.
func groupOf(groups []*group, key string) *group {
	for _, g := range groups {
		if g.owns(keySlot(key)) {
			return g
		}
	}
	return nil
}

// TestClusterTransactionsKillLeader: kill -9 of the leader during a stream
// of transactions, each throttling two keys of one slot alike, never
// applies half of one: afterwards both keys hold the same TAT on every
// node.
func TestClusterTransactionsKillLeader(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	ctx := context.Background()
	clients := make([]*redis.Client, len(nodes))
	for i, nd := range nodes {
		clients[i] = noRetryClient(t, nd.Addr)
	}
	const ka, kb = "{pair}a", "{pair}b"
	var ok, failed atomic.Int64
	var dead atomic.Int32
	dead.Store(-1)
	stop := make(chan struct{})
	done := make(chan struct{})
	for w := 0; w < 3; w++ {
		go func(w int) {
			defer func() { done <- struct{}{} }()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := i % len(nodes)
				if int(dead.Load()) == n {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := clients[n].TxPipelined(cctx, func(p redis.Pipeliner) error {
					p.Do(cctx, "CL.THROTTLE", ka, 1000000, 1, 3600)
					p.Do(cctx, "CL.THROTTLE", kb, 1000000, 1, 3600)
					return nil
				})
				cancel()
				if err != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}
		}(w)
	}
	poll.Until(t, 20*time.Second, func() error {
		if ok.Load() < 50 {
			return fmt.Errorf("%d transactions so far", ok.Load())
		}
		return nil
	})
	dead.Store(int32(l))
	nodes[l].kill()
	before := ok.Load()
	poll.Until(t, 30*time.Second, func() error {
		if ok.Load() < before+50 {
			return fmt.Errorf("%d transactions since the kill", ok.Load()-before)
		}
		return nil
	})
	close(stop)
	for range 3 {
		<-done
	}
	t.Logf("%d transactions applied, %d failed (around the kill)", ok.Load(), failed.Load())
	nodes[l].restart()
	// Every node, the restarted one included once caught up, holds the
	// same TAT for both keys.
	poll.Until(t, 30*time.Second, func() error {
		var want string
		for _, nd := range nodes {
			c := quickClient(nd.Addr)
			c.Do(ctx, "READONLY")
			va, errA := c.Get(ctx, ka).Result()
			vb, errB := c.Get(ctx, kb).Result()
			c.Close()
			if errA != nil || errB != nil {
				return fmt.Errorf("%s: GET: %v, %v", nd.id, errA, errB)
			}
			if va != vb {
				return fmt.Errorf("%s: half a transaction applied: TAT of a %s, of b %s", nd.id, va, vb)
			}
			if want != "" && va != want {
				return fmt.Errorf("%s: TAT %s, another node %s (not caught up yet)", nd.id, va, want)
			}
			want = va
		}
		return nil
	})
	// The keys also answer alike.
	c := clients[(l+1)%3]
	ra, errA := throttle(ctx, c, ka, 1000000, 1, 3600, 0)
	rb, errB := throttle(ctx, c, kb, 1000000, 1, 3600, 0)
	if errA != nil || errB != nil || fmt.Sprint(ra) != fmt.Sprint(rb) {
		t.Fatalf("peeks differ: a %v (%v), b %v (%v)", ra, errA, rb, errB)
	}
}

// TestClusterTransactionSlotChanges: the CLUSTER slot changes of one
// transaction (as redis-cli --cluster fix sends them: DELSLOTS, ADDSLOTS,
// SETSLOT STABLE) are one log entry, each checked against the state the
// ones before it leave; sent through a follower, which forwards them.
func TestClusterTransactionSlotChanges(t *testing.T) {
	groups := startGroups(t, 1)
	g := groups[0]
	l := g.leader(t)
	f := g.others(l)[0]
	ctx := ctxT(t)
	c := noRetryClient(t, f.Addr)
	lastIndex := func() uint64 {
		n, _ := strconv.ParseUint(raftInfo(l)["raft_last_log_index"], 10, 64)
		return n
	}
	// The group is idle: a transaction's entries are the only new ones.
	var cmds []redis.Cmder
	var before, after uint64
	for attempt := 0; ; attempt++ {
		before = lastIndex()
		var err error
		cmds, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "CLUSTER", "DELSLOTS", 5)
			p.Do(ctx, "CLUSTER", "DELSLOTS", 5)
			p.Do(ctx, "CLUSTER", "ADDSLOTS", 5)
			p.Do(ctx, "CLUSTER", "SETSLOT", 5, "STABLE")
			return nil
		})
		var rerr redis.Error
		if err != nil && !errors.As(err, &rerr) {
			t.Fatalf("EXEC: %v", err)
		}
		after = lastIndex()
		if after-before == 1 || attempt == 3 {
			break
		}
	}
	var got []string
	for _, cm := range cmds {
		if cm.Err() != nil {
			got = append(got, cm.Err().Error())
		} else {
			got = append(got, fmt.Sprint(cm.(*redis.Cmd).Val()))
		}
	}
	want := "OK|ERR Slot 5 is already unassigned|OK|OK"
	if strings.Join(got, "|") != want {
		t.Fatalf("replies %q, want %q", strings.Join(got, "|"), want)
	}
	if after-before != 1 {
		t.Fatalf("the transaction's slot changes took %d log entries, want 1", after-before)
	}
	// Slot 5 is still the group's: DELSLOTS and ADDSLOTS applied together.
	if err := checkClusterOK(f); err != nil {
		t.Fatal(err)
	}
	if owner, err := slotMaster(f, 5); err != nil || owner == "" {
		t.Fatalf("slot 5 master = %q, %v; want the group's leader", owner, err)
	}
}
