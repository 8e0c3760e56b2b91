package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGroupsMigrateTwoNodesAtOnce: two MIGRATEs of one key sent at once to
// two nodes of one three-node group, to a target outside the cluster. The
// first node's RESTORE is held at the target; the second MIGRATE must not
// reach the target while the first runs (the group's move lease makes it
// wait), and afterwards the key is in exactly one place: at the target, in
// flight, or back here (still exhausted), never in two.
//
// With one lock per process the second node resends the key (in flight,
// so "sent again") and it lands; the first then reads BUSYKEY for its own
// RESTORE and puts the key back here too: the key is served in two places,
// each admitting for it.
func TestGroupsMigrateTwoNodesAtOnce(t *testing.T) {
	groups := startGroups(t, 1)
	a := groups[0]
	cc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: 8})
	key := slotKeys(100, 1)[0]
	exhaustSlotKeys(t, cc, []string{key})
	tgt := startHeldTarget(t)
	leader := a.leader(t)
	follower := a.others(leader)[0]
	ctx := ctxT(t)
	migrate := func(nd *clusterNode) <-chan error {
		ch := make(chan error, 1)
		go func() {
			c := redis.NewClient(&redis.Options{Addr: nd.Addr, ReadTimeout: time.Minute, MaxRetries: -1})
			defer c.Close()
			mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			ch <- c.Do(mctx, "MIGRATE", "127.0.0.1", tgt.port, key, 0, 20000).Err()
		}()
		return ch
	}
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not within 30 s", what)
		}
	}
	first := migrate(leader)
	wait(tgt.arrived[0], "the first MIGRATE's RESTORE at the target")
	second := migrate(follower)
	var err1, err2 error
	select {
	case <-tgt.arrived[1]:
		t.Errorf("the second MIGRATE (on %s) reached the target while the first (on %s) was still running", follower.id, leader.id)
		// Play the interleaving out: the second's RESTORE has landed;
		// the first's then finds the key there.
		close(tgt.release[0])
		err1 = <-first
		close(tgt.release[1])
		err2 = <-second
	case <-time.After(3 * time.Second):
		// The second waits for the first (a window in which it must not
		// reach the target, not a synchronisation).
		close(tgt.release[0])
		close(tgt.release[1])
		err1, err2 = <-first, <-second
	}
	t.Logf("MIGRATE on %s: %v; on %s: %v", leader.id, err1, follower.id, err2)

	places := 0
	var where []string
	if tgt.has(key) {
		places++
		where = append(where, "the target")
	}
	lc := quickClient(a.leader(t).Addr)
	defer lc.Close()
	dump, derr := lc.Do(ctx, "DUMP", key).Result()
	switch {
	case derr == nil && dump != nil:
		places++
		where = append(where, "the source group")
	case derr != nil && strings.HasPrefix(derr.Error(), "TRYAGAIN"):
		places++
		where = append(where, "in flight")
	case derr == redis.Nil:
		if v, err := lc.Do(ctx, "CL.THROTTLE", key, 4, 5, 3600, 0).Int64Slice(); err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN") {
			places++
			where = append(where, "in flight")
		} else if err != nil {
			t.Errorf("CL.THROTTLE %s peek on the source = %v, %v", key, v, err)
		}
	default:
		t.Errorf("DUMP %s on the source = %v, %v", key, dump, derr)
	}
	if places != 1 {
		t.Errorf("key %s is in %d places (%v), want exactly 1", key, places, where)
	}
	if strings.Contains(fmt.Sprint(where), "source") {
		checkExhausted(t, cc, []string{key})
	}
}

// heldTarget is a MIGRATE target outside the cluster that keeps restored
// keys in memory (BUSYKEY for a key it has, without REPLACE) and holds the
// RESTOREs of its first two connections: the first's until release[0]
// before applying it, the second's until release[1] after applying it and
// before answering. arrived[i] closes when connection i's RESTORE arrives.
type heldTarget struct {
	port    int
	arrived [2]chan struct{}
	release [2]chan struct{}
	mu      sync.Mutex
	keys    map[string]bool
	conns   int
}

func startHeldTarget(t *testing.T) *heldTarget {
	h := &heldTarget{keys: map[string]bool{}}
	for i := range h.arrived {
		h.arrived[i], h.release[i] = make(chan struct{}), make(chan struct{})
	}
	h.port = fakeTarget(t, h.serve)
	return h
}

func (h *heldTarget) has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key]
}

// restore applies RESTORE args and returns its reply.
func (h *heldTarget) restore(args []string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	replace := len(args) > 4 && strings.EqualFold(args[4], "replace")
	if h.keys[args[1]] && !replace {
		return "-BUSYKEY Target key name already exists.\r\n"
	}
	h.keys[args[1]] = true
	return "+OK\r\n"
}

func (h *heldTarget) serve(nc net.Conn) {
	h.mu.Lock()
	n := h.conns
	h.conns++
	h.mu.Unlock()
	r := bufio.NewReader(nc)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		reply := "+OK\r\n"
		if strings.EqualFold(args[0], "restore") && len(args) >= 4 {
			switch n {
			case 0:
				close(h.arrived[0])
				<-h.release[0]
				reply = h.restore(args)
			case 1:
				close(h.arrived[1])
				reply = h.restore(args)
				<-h.release[1]
			default:
				reply = h.restore(args)
			}
			n = 2 // one held RESTORE per connection
		}
		if _, err := io.WriteString(nc, reply); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[0] != '*' {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 || n > 64 {
		return nil, fmt.Errorf("bad array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		if err != nil || hdr[0] != '$' || size < 0 || size > 1<<20 {
			return nil, fmt.Errorf("bad bulk header %q", hdr)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}
