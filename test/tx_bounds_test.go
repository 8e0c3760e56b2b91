package test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// Bounded transactions on a 3-node group (issue 27, case 3): a transaction
// is one raft log entry, so transaction-max-commands and
// transaction-max-bytes bound it at queue time, EXEC refuses a reply the
// client's output buffer limit would cut off, and the largest transaction
// the defaults allow does not hold up other clients' writes.

// pipeTx sends MULTI, cmds and EXEC on conn in one pipeline and returns
// the replies of cmds and EXEC's (go-redis's plain pipeline: each
// command's own reply, QUEUED included).
func pipeTx(ctx context.Context, t *testing.T, conn *redis.Conn, cmds [][]any) ([]redis.Cmder, *redis.Cmd) {
	t.Helper()
	var queued []redis.Cmder
	var exec *redis.Cmd
	_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		if err := p.Do(ctx, "MULTI").Err(); err != nil {
			return err
		}
		for _, c := range cmds {
			queued = append(queued, p.Do(ctx, c...))
		}
		exec = p.Do(ctx, "EXEC")
		return nil
	})
	if err != nil && exec == nil {
		t.Fatalf("transaction pipeline: %v", err)
	}
	return queued, exec
}

// configInt reads an integer setting with CONFIG GET.
func configInt(ctx context.Context, t *testing.T, c *redis.Client, name string) int64 {
	t.Helper()
	m, err := c.ConfigGet(ctx, name).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", name, err)
	}
	n, err := strconv.ParseInt(m[name], 10, 64)
	if err != nil {
		t.Fatalf("CONFIG GET %s = %q (%v): want an integer setting", name, m[name], err)
	}
	return n
}

// queuedBytes is what one queued command with args accounts for against
// transaction-max-bytes: its argument bytes.
func queuedBytes(args []any) int {
	n := 0
	for _, a := range args {
		n += len(fmt.Sprint(a))
	}
	return n
}

// checkRefused checks a transaction refused at queue time: every reply
// before the refused command is QUEUED, the refused one names setting,
// and EXEC answers EXECABORT.
func checkRefused(t *testing.T, queued []redis.Cmder, exec *redis.Cmd, refusedAt int, setting string) {
	t.Helper()
	for i, q := range queued[:refusedAt] {
		if v, err := q.(*redis.Cmd).Result(); err != nil || v != "QUEUED" {
			t.Fatalf("queued command %d = %v, %v; want QUEUED", i, v, err)
		}
	}
	err := queued[refusedAt].Err()
	if err == nil || !strings.Contains(err.Error(), "("+setting+")") {
		t.Fatalf("command %d past the bound = %v; want an error naming %s", refusedAt, err, setting)
	}
	if err := exec.Err(); err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("EXEC after the refusal = %v, %v; want EXECABORT", exec.Val(), err)
	}
}

func TestGroupTransactionBounded(t *testing.T) {
	g := startGroups(t, 1)[0]
	l := g.leader(t)
	ctx := ctxT(t)
	lc := noRetryClient(t, l.Addr)
	maxCmds := configInt(ctx, t, lc, "transaction-max-commands")
	maxBytes := configInt(ctx, t, lc, "transaction-max-bytes")
	if maxCmds < 1000 || maxBytes < 1<<19 {
		t.Fatalf("defaults transaction-max-commands %d, transaction-max-bytes %d: too small for ordinary transactions", maxCmds, maxBytes)
	}
	conn := lc.Conn()
	defer conn.Close()

	t.Run("commands", func(t *testing.T) {
		cmds := make([][]any, maxCmds+1)
		for i := range cmds {
			cmds[i] = []any{"CL.THROTTLE", "{b}over" + strconv.Itoa(i), 10, 1, 60}
		}
		queued, exec := pipeTx(ctx, t, conn, cmds)
		checkRefused(t, queued, exec, int(maxCmds), "transaction-max-commands")
		if n, err := lc.Exists(ctx, "{b}over0").Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS {b}over0 = %d, %v after EXECABORT; want 0", n, err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		key := strings.Repeat("k", int(maxBytes/8))
		n := int(maxBytes/int64(queuedBytes([]any{"CL.THROTTLE", key, 10, 1, 60}))) + 1
		cmds := make([][]any, n)
		for i := range cmds {
			cmds[i] = []any{"CL.THROTTLE", "{b}" + strconv.Itoa(i) + key, 10, 1, 60}
		}
		queued, exec := pipeTx(ctx, t, conn, cmds)
		checkRefused(t, queued, exec, n-1, "transaction-max-bytes")
	})
	t.Run("largest", func(t *testing.T) { checkLargestTx(t, g, l, int(maxCmds), int(maxBytes), true) })
	t.Run("reply", func(t *testing.T) {
		// A reply over the output buffer's hard limit: EXEC refuses it
		// before anything runs, instead of applying the writes and
		// closing the client.
		if err := lc.ConfigSet(ctx, "client-output-buffer-limit", "normal 100kb 0 0").Err(); err != nil {
			t.Fatalf("CONFIG SET client-output-buffer-limit: %v", err)
		}
		cmds := make([][]any, maxCmds)
		for i := range cmds {
			cmds[i] = []any{"CL.THROTTLE", "{b}reply" + strconv.Itoa(i), 10, 1, 60}
		}
		c := lc.Conn()
		defer c.Close()
		_, exec := pipeTx(ctx, t, c, cmds)
		if err := exec.Err(); err == nil || !strings.Contains(err.Error(), "client-output-buffer-limit") {
			t.Fatalf("EXEC of %d throttles under a 100kb output limit = %v; want an error naming client-output-buffer-limit", maxCmds, err)
		}
		if v, err := c.Ping(ctx).Result(); err != nil {
			t.Fatalf("PING after the refused EXEC = %v, %v; want the client still connected", v, err)
		}
		if n, err := lc.Exists(ctx, "{b}reply0").Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS {b}reply0 = %d, %v after the refused EXEC; want 0 (nothing applied)", n, err)
		}
	})
}

// TestGroupTransactionMeasure measures, for each transaction-max-bytes
// in CELLSERVER_MEASURE_TX (e.g. "1mb 4mb 16mb"; skipped when unset),
// how long other clients' writes wait behind the largest transaction
// allowed (docs/performance.md, "The largest transaction").
func TestGroupTransactionMeasure(t *testing.T) {
	sizes := strings.Fields(os.Getenv("CELLSERVER_MEASURE_TX"))
	if len(sizes) == 0 {
		t.Skip("set CELLSERVER_MEASURE_TX to a list of transaction-max-bytes values")
	}
	g := startGroups(t, 1)[0]
	l := g.leader(t)
	ctx := ctxT(t)
	lc := noRetryClient(t, l.Addr)
	maxCmds := configInt(ctx, t, lc, "transaction-max-commands")
	for _, size := range sizes {
		t.Run(size, func(t *testing.T) {
			if err := lc.ConfigSet(ctx, "transaction-max-bytes", size).Err(); err != nil {
				t.Fatalf("CONFIG SET transaction-max-bytes %s: %v", size, err)
			}
			checkLargestTx(t, g, l, int(maxCmds), int(configInt(ctx, t, lc, "transaction-max-bytes")), false)
		})
	}
}

// checkLargestTx pipes to leader l the largest transaction the bounds
// allow (maxCmds CL.THROTTLE on keys padded to fill maxBytes) while a
// client of every node of g writes every 50 ms: the EXEC reply is whole
// and, with bound, each of their writes is answered within 1.5 s and the
// leader stays (without, the figures are only logged).
func checkLargestTx(t *testing.T, g *group, l *clusterNode, maxCmds, maxBytes int, bound bool) {
	ctx := ctxT(t)
	termBefore := raftInfo(l)["raft_term"]
	pad := maxBytes/maxCmds - queuedBytes([]any{"CL.THROTTLE", "", 10, 1, 60})
	cmds := make([][]any, maxCmds)
	total := 0
	for i := range cmds {
		k := "{b}m" + strconv.Itoa(i) + ":"
		cmds[i] = []any{"CL.THROTTLE", k + strings.Repeat("x", max(pad-len(k), 0)), 10, 1, 60}
		total += queuedBytes(cmds[i])
	}
	if total > maxBytes || total < maxBytes*9/10 {
		t.Fatalf("largest transaction: %d bytes against a bound of %d", total, maxBytes)
	}

	// Writers: one client per node, one write every 50 ms.
	type writer struct {
		mu     sync.Mutex
		n      int
		worst  time.Duration
		errs   []string
		during int // writes answered while the transaction was under way
	}
	var txOn sync.Mutex
	running := false
	ws := make([]*writer, len(g.nodes))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, nd := range g.nodes {
		w := &writer{}
		ws[i] = w
		c := noRetryClient(t, nd.Addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				t0 := time.Now()
				_, err := throttle(ctx, c, "{w}"+nd.id, 1000000, 1000000, 1, 1)
				took := time.Since(t0)
				txOn.Lock()
				on := running
				txOn.Unlock()
				w.mu.Lock()
				w.n++
				w.worst = max(w.worst, took)
				if on {
					w.during++
				}
				if err != nil {
					w.errs = append(w.errs, err.Error())
				}
				w.mu.Unlock()
			}
		}()
	}
	written := func() []int {
		out := make([]int, len(ws))
		for i, w := range ws {
			w.mu.Lock()
			out[i] = w.n
			w.mu.Unlock()
		}
		return out
	}
	atLeast := func(base []int, more int) func() error {
		return func() error {
			for i, n := range written() {
				if n < base[i]+more {
					return fmt.Errorf("writer %s: %d writes, want %d", g.nodes[i].id, n, base[i]+more)
				}
			}
			return nil
		}
	}
	poll.Until(t, 15*time.Second, atLeast(make([]int, len(ws)), 5))

	conn := noRetryClient(t, l.Addr).Conn()
	defer conn.Close()
	txOn.Lock()
	running = true
	txOn.Unlock()
	t0 := time.Now()
	queued, exec := pipeTx(ctx, t, conn, cmds)
	took := time.Since(t0)
	txOn.Lock()
	running = false
	txOn.Unlock()
	poll.Until(t, 15*time.Second, atLeast(written(), 10))
	close(stop)
	wg.Wait()

	for i, q := range queued {
		if v, err := q.(*redis.Cmd).Result(); err != nil || v != "QUEUED" {
			t.Fatalf("queued command %d = %v, %v; want QUEUED", i, v, err)
		}
	}
	replies, err := exec.Slice()
	if err != nil || len(replies) != maxCmds {
		t.Fatalf("EXEC = %d replies, %v; want %d", len(replies), err, maxCmds)
	}
	for i, r := range replies {
		a, ok := r.([]any)
		if !ok || len(a) != 5 || fmt.Sprint(a[:3]) != "[0 11 10]" {
			t.Fatalf("EXEC reply %d = %v; want a fresh key's [0 11 10 -1 …]", i, r)
		}
	}
	t.Logf("largest transaction: %d commands, %d queued bytes, sent and answered in %v", maxCmds, total, took)
	for i, w := range ws {
		t.Logf("writer on %s: %d writes (%d during the transaction, %d failed), slowest %v", g.nodes[i].id, w.n, w.during, len(w.errs), w.worst)
		if len(w.errs) > 0 && bound {
			t.Errorf("writer on %s: %d writes failed, first: %s", g.nodes[i].id, len(w.errs), w.errs[0])
		}
		if w.worst > 1500*time.Millisecond && bound {
			t.Errorf("writer on %s: a write took %v while the largest transaction committed; want under 1.5s", g.nodes[i].id, w.worst)
		}
	}
	for _, nd := range g.nodes {
		inf := raftInfo(nd)
		if inf["raft_leader_id"] != l.id || inf["raft_term"] != termBefore {
			t.Logf("%s: leader %q in term %s after the transaction (before: %s in term %s)", nd.id, inf["raft_leader_id"], inf["raft_term"], l.id, termBefore)
		}
		if (inf["raft_leader_id"] != l.id || inf["raft_term"] != termBefore) && bound {
			t.Errorf("%s: leader %q in term %s after the transaction; want %s in term %s (no leader change)",
				nd.id, inf["raft_leader_id"], inf["raft_term"], l.id, termBefore)
		}
	}
}
