package test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// runAssignSlots runs cellserver --assign-slots (what the chart's slot Job
// runs) on one node of each group and returns its output.
func runAssignSlots(t *testing.T, groups []*group) string {
	t.Helper()
	var addrs []string
	for _, g := range groups {
		addrs = append(addrs, g.nodes[0].Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--assign-slots", strings.Join(addrs, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("cellserver --assign-slots %s: %v\n%s", strings.Join(addrs, ","), err, out)
	}
	return string(out)
}

// The slot Job's command on a new release of three groups: the slots are
// split evenly and the groups joined into one cluster; run again (a helm
// upgrade that changes nothing) it changes nothing.
func TestAssignSlotsNewCluster(t *testing.T) {
	groups := launchGroups(t, 3, nil)
	runAssignSlots(t, groups)
	waitGroups(t, groups, 30*time.Second)
	again := runAssignSlots(t, groups)
	if strings.Contains(again, "ADDSLOTS") || strings.Contains(again, "MEET") {
		t.Errorf("second run changed the cluster:\n%s", again)
	}
	waitGroups(t, groups, 30*time.Second)
}

// helm upgrade from one group to two: the first group served every key
// without owning slots, and holds keys; the Job gives it every slot (so
// its keys stay served, an exhausted key stays exhausted), joins the new
// group, and prints the reshard to run for the new group's share.
func TestAssignSlotsAddedGroup(t *testing.T) {
	groups := launchGroups(t, 2, nil)
	a, b := groups[0], groups[1]
	ctx := ctxT(t)
	key := keysWhere("user:up", 1, func(slot int) bool { return slot >= slotCount/2 })[0] // in b's share of an even split
	la := noRetryClient(t, a.leader(t).Addr)
	if r, err := throttle(ctx, la, key, 0, 1, 600); err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE %s (first) = %v, %v; want allowed", key, r, err)
	}
	out := runAssignSlots(t, groups)
	if !strings.Contains(out, "--cluster rebalance "+a.nodes[0].Addr) {
		t.Errorf("assign-slots output names no reshard for the new group:\n%s", out)
	}
	a.lo, a.hi = 0, slotCount-1
	poll.Until(t, 30*time.Second, func() error {
		for _, nd := range allNodes(groups) {
			if err := checkClusterOK(nd); err != nil {
				return err
			}
		}
		return nil
	})
	// Group b's nodes send the key to group a (TRYAGAIN, which clients
	// retry, may come first while b's nodes learn a's slots).
	for _, nd := range b.nodes {
		c := noRetryClient(t, nd.Addr)
		poll.Until(t, 15*time.Second, func() error {
			_, err := c.Do(ctx, "CL.THROTTLE", key, 0, 1, 600).Result()
			if err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN") {
				return err
			}
			if err == nil || !strings.HasPrefix(err.Error(), "MOVED "+strconv.Itoa(keySlot(key))+" ") {
				t.Fatalf("CL.THROTTLE %s via %s = %v; want MOVED to group a", key, nd.id, err)
			}
			return nil
		})
	}
	if r, err := throttle(ctx, noRetryClient(t, a.leader(t).Addr), key, 0, 1, 600); err != nil || r[0] != 1 {
		t.Errorf("CL.THROTTLE %s after the upgrade = %v, %v; want still limited", key, r, err)
	}
	if again := runAssignSlots(t, groups); strings.Contains(again, "ADDSLOTS") || strings.Contains(again, "MEET") {
		t.Errorf("second run changed the cluster:\n%s", again)
	}
}
