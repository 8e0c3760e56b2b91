package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/internal/respclient"
)

// cellserver --assign-slots ADDR,ADDR,... joins groups into one Redis
// Cluster: what the Helm chart's slot Job runs after every install and
// upgrade, with the server's own image (which has no shell and no
// redis-cli). ADDR is the RESP address of any node of each group, in the
// groups' order. It is idempotent, and keeps every limiter's state:
//
//   - no group owns a slot or holds a key (a new release): the 16384 slots
//     are split evenly in the order given (CLUSTER ADDSLOTSRANGE);
//   - otherwise the groups that own slots or hold keys are the
//     established ones: slots nobody owns go to the first of them (a
//     single group that served every key without owning slots claims them
//     all, and so keeps its keys), and a group with neither is left
//     without slots, to be given some by a reshard that moves the keys
//     with them; the command to run is printed;
//   - every group is then introduced to the first (CLUSTER MEET), unless
//     it already knows it.
//
// Each round reads every group's state afresh; a round that fails (a node
// not answering yet, a group without a leader) is retried every
// assignRetry until the deadline.

// Bounds of --assign-slots.
const (
	assignDeadline = 10 * time.Minute
	assignRetry    = 2 * time.Second
	slotCount      = 16384
)

// slotGroup is one group as --assign-slots sees it through one node.
type slotGroup struct {
	addr  string   // the RESP address given
	id    string   // the node's cluster id (CLUSTER NODES, myself)
	known []string // cluster ids of every node it lists
	slots []bool   // the slots its group owns, by number
	owned int      // how many
	keys  int64    // DBSIZE
}

// assignSlots runs --assign-slots until it succeeds, ctx ends or the
// deadline passes, logging each step to out.
func assignSlots(ctx context.Context, list, password string, out io.Writer) error {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("assign-slots: %q is not HOST:PORT (expected a comma-separated list of one node's RESP address per group)", a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) < 2 {
		return errors.New("assign-slots: expected the RESP addresses of at least two groups, comma-separated")
	}
	ctx, cancel := context.WithTimeout(ctx, assignDeadline)
	defer cancel()
	for {
		err := assignRound(ctx, addrs, password, out)
		if err == nil {
			return nil
		}
		fmt.Fprintf(out, "assign-slots: %v; retrying\n", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("assign-slots: gave up after %s: %w", assignDeadline, err)
		case <-time.After(assignRetry):
		}
	}
}

// assignRound is one attempt: read every group, assign what is free,
// introduce the groups.
func assignRound(ctx context.Context, addrs []string, password string, out io.Writer) error {
	groups := make([]*slotGroup, len(addrs))
	for i, a := range addrs {
		g, err := readSlotGroup(ctx, a, password)
		if err != nil {
			return err
		}
		groups[i] = g
	}
	owner := make([]int, slotCount) // group index +1, 0: nobody
	var established []int
	for i, g := range groups {
		for s, own := range g.slots {
			if own {
				owner[s] = i + 1
			}
		}
		if g.owned > 0 || g.keys > 0 {
			established = append(established, i)
		}
	}
	if len(established) == 0 {
		n := len(groups)
		for i, g := range groups {
			lo, hi := i*slotCount/n, (i+1)*slotCount/n-1
			if err := clusterCommand(ctx, g.addr, password, out, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
				return err
			}
		}
	} else {
		to := groups[established[0]]
		var args []string
		for s := 0; s < slotCount; s++ {
			if owner[s] != 0 {
				continue
			}
			e := s
			for e+1 < slotCount && owner[e+1] == 0 {
				e++
			}
			args = append(args, strconv.Itoa(s), strconv.Itoa(e))
			s = e
		}
		if len(args) > 0 {
			if err := clusterCommand(ctx, to.addr, password, out, append([]string{"CLUSTER", "ADDSLOTSRANGE"}, args...)...); err != nil {
				return err
			}
		}
	}
	for _, g := range groups[1:] {
		if containsID(groups[0].known, g.id) {
			continue
		}
		host, port, _ := net.SplitHostPort(g.addr)
		if err := clusterCommand(ctx, groups[0].addr, password, out, "CLUSTER", "MEET", host, port); err != nil {
			return err
		}
	}
	if len(established) > 0 {
		for i, g := range groups {
			if g.owned == 0 && i != established[0] {
				fmt.Fprintf(out, "assign-slots: the group of %s owns no slot: give it slots with their keys by a reshard, e.g.\n"+
					"  redis-cli -a \"$PASSWORD\" --cluster rebalance %s --cluster-use-empty-masters --cluster-yes\n", g.addr, groups[0].addr)
			}
		}
	}
	fmt.Fprintf(out, "assign-slots: done: %d groups\n", len(groups))
	return nil
}

// containsID reports whether ids holds id.
func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// clusterCommand runs one command on addr and logs it; an error reply is
// returned as an error.
func clusterCommand(ctx context.Context, addr, password string, out io.Writer, args ...string) error {
	c, err := respclient.Dial(ctx, addr, respclient.Config{Password: password})
	if err != nil {
		return err
	}
	defer c.Close()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	v, err := c.Do(b...)
	if err == nil {
		err = v.Err()
	}
	if err != nil && strings.Contains(err.Error(), "already busy") && args[1] == "ADDSLOTSRANGE" {
		// The group claimed them explicitly in an earlier round that
		// stopped before the groups met: what the round wanted holds.
		fmt.Fprintf(out, "assign-slots: %s: %s: %v (kept)\n", addr, strings.Join(args, " "), err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", addr, strings.Join(args, " "), err)
	}
	fmt.Fprintf(out, "assign-slots: %s: %s: %s\n", addr, strings.Join(args, " "), v.Str)
	return nil
}

// readSlotGroup reads the group of the node at addr: its id, the slots its
// group owns, the nodes it knows and its key count.
func readSlotGroup(ctx context.Context, addr, password string) (*slotGroup, error) {
	c, err := respclient.Dial(ctx, addr, respclient.Config{Password: password})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.Do([]byte("DBSIZE"))
	if err == nil {
		err = v.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: DBSIZE: %w", addr, err)
	}
	g := &slotGroup{addr: addr, keys: v.Int, slots: make([]bool, slotCount)}
	if v, err = c.Do([]byte("CLUSTER"), []byte("NODES")); err == nil {
		err = v.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", addr, err)
	}
	if err := g.parseNodes(v.Str); err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return g, nil
}

// parseNodes reads CLUSTER NODES as the node answered it into g: its id,
// the ids it knows and the slots its group owns (those of its group's
// master line).
func (g *slotGroup) parseNodes(nodes string) error {
	var lines [][]string
	master := ""
	for _, l := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		lines = append(lines, f)
		g.known = append(g.known, f[0])
		flags := strings.Split(f[2], ",")
		if containsID(flags, "myself") {
			g.id = f[0]
			if master = f[3]; containsID(flags, "master") {
				master = f[0]
			}
		}
	}
	if g.id == "" || master == "-" {
		return errors.New("not a cluster node, or its group has no leader yet (CLUSTER NODES names no master for it)")
	}
	// The master line of the node's group lists its slots; a line of
	// another master (or a replica of one) is another group's.
	var own []string
	found, others := false, false
	for _, f := range lines {
		switch {
		case f[0] == master:
			found, own = true, f[8:]
		case f[3] != master:
			others = true
		}
	}
	if !found {
		return fmt.Errorf("its group has no leader yet (CLUSTER NODES lists no line for its master %s)", master)
	}
	// A group that owns no slot and knows no other group serves every key,
	// and CLUSTER NODES shows it owning 0-16383: it owns nothing yet.
	if !others && len(own) == 1 && own[0] == "0-16383" {
		return nil
	}
	for _, r := range own {
		if strings.HasPrefix(r, "[") {
			continue // a slot migrating or importing: owned as listed
		}
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b >= slotCount || a > b {
			return fmt.Errorf("CLUSTER NODES: bad slot range %q", r)
		}
		for s := a; s <= b; s++ {
			if !g.slots[s] {
				g.slots[s] = true
				g.owned++
			}
		}
	}
	return nil
}
