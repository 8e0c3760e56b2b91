package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
)

// Group returns this node's group name.
func (n *Node) Group() string { return n.cfg.Group }

// AddSlots assigns slots to this group (CLUSTER ADDSLOTS), replicated in
// its log. A slot this group or another known group owns fails the whole
// call with a *cluster.SlotError wrapping cluster.ErrSlotBusy; nothing is
// assigned then. On a follower the change is made by the leader (forwarded).
func (n *Node) AddSlots(ctx context.Context, slots []int) error {
	return n.changeCluster(ctx, &clusterChange{Action: actAddSlots, Ranges: cluster.ToRanges(slots)})
}

// DelSlots makes slots of this group unowned (CLUSTER DELSLOTS). A slot
// another known group owns is left alone (nil for it); a slot no group
// owns fails with a *cluster.SlotError wrapping cluster.ErrSlotUnassigned.
func (n *Node) DelSlots(ctx context.Context, slots []int) error {
	return n.changeCluster(ctx, &clusterChange{Action: actDelSlots, Ranges: cluster.ToRanges(slots)})
}

// SetSlot runs CLUSTER SETSLOT slot action [clusterID]: clusterID names a
// node (cluster.NodeID) of the group the slot is imported from, migrates
// to, or is assigned to. cluster.ErrUnknownNode when no known group has
// that node; *cluster.SlotError for a slot in the wrong state.
func (n *Node) SetSlot(ctx context.Context, slot int, action cluster.SlotAction, clusterID string) error {
	c, err := n.setSlotChange(slot, action, clusterID)
	if err != nil {
		return err
	}
	return n.changeCluster(ctx, c)
}

// setSlotChange is the cluster change of SETSLOT slot action clusterID.
func (n *Node) setSlotChange(slot int, action cluster.SlotAction, clusterID string) (*clusterChange, error) {
	sc := cluster.SlotChange{Kind: cluster.SlotSet, Slot: slot, Action: action, NodeID: clusterID}
	return sc.Change(n.Routing(), n.cfg.Group)
}

// ChangeSlots makes a list of slot changes (the CLUSTER ADDSLOTS, DELSLOTS
// and SETSLOT of one MULTI/EXEC, as redis-cli --cluster fix sends them) as
// one entry of this group's log, so that a failover applies all of them or
// none. The leader checks each against the state as the ones before it
// leave it: errs[i] is the refusal of changes[i] (as AddSlots, DelSlots or
// SetSlot would answer it), which is then left out; the others are
// applied, in order. err is about the whole call (ErrNoLeader, ctx's error,
// ...): then errs is nil and it is unknown whether the entry was applied
// only when err wraps ErrLeadershipLost. On a follower the leader does it
// (forwarded).
func (n *Node) ChangeSlots(ctx context.Context, changes []cluster.SlotChange) ([]error, error) {
	errs := make([]error, len(changes))
	list := make([]clusterChange, 0, len(changes))
	idx := make([]int, 0, len(changes))
	for i := range changes {
		c, err := n.slotChange(&changes[i])
		if err != nil {
			errs[i] = err
			continue
		}
		list = append(list, *c)
		idx = append(idx, i)
	}
	if len(list) == 0 {
		return errs, nil
	}
	var sub []error
	body := encodeClusterChange(&clusterChange{Action: actList, List: list})
	err := n.onLeaderReply(ctx, "cluster change", func() error {
		var err error
		sub, err = n.changeListOnLeader(ctx, list)
		return err
	}, reqClusterList, body, nil, func(reply []byte) error {
		var err error
		sub, err = decodeChangeErrors(reply, len(list))
		return err
	})
	if err != nil {
		return nil, err
	}
	for k, i := range idx {
		errs[i] = sub[k]
	}
	return errs, nil
}

// slotChange turns a SlotChange into the cluster change it makes, checking
// what can be checked without the leader's state.
func (n *Node) slotChange(sc *cluster.SlotChange) (*clusterChange, error) {
	return sc.Change(n.Routing(), n.cfg.Group)
}

// changeListOnLeader checks the changes of list in order against the
// replicated state as the ones before leave it (cluster.CheckList), and
// commits those that pass as one entry. It returns each change's refusal
// (nil: applied).
func (n *Node) changeListOnLeader(ctx context.Context, list []clusterChange) ([]error, error) {
	st := n.fsm.clusterState()
	ok, errs := cluster.CheckList(&st, n.Routing(), n.cfg.Group, list, n.slotHasKeys)
	if len(ok) == 0 {
		return errs, nil
	}
	err := n.submit(ctx, &pending{control: encodeClusterChange(&clusterChange{Action: actList, List: ok})})
	if err != nil {
		return nil, err
	}
	n.kickDirectory()
	return errs, nil
}

// changeCluster checks c against the cluster as the leader knows it and
// commits it, on the leader (forwarded from a follower).
func (n *Node) changeCluster(ctx context.Context, c *clusterChange) error {
	for _, r := range c.Ranges {
		if r[0] < 0 || r[1] >= hashslot.Count {
			return fmt.Errorf("replication: slot range %d-%d out of range", r[0], r[1])
		}
	}
	body := encodeClusterChange(c)
	return n.onLeader(ctx, "cluster change", func() error { return n.changeClusterOnLeader(ctx, c) }, reqCluster, body, nil)
}

// changeClusterOnLeader validates c against the replicated state and the
// directory, then submits it and waits until it is applied.
func (n *Node) changeClusterOnLeader(ctx context.Context, c *clusterChange) error {
	st := n.fsm.clusterState()
	if err := n.checkChange(&st, c); err != nil {
		if errors.Is(err, cluster.ErrNoChange) {
			return nil
		}
		return err
	}
	err := n.submit(ctx, &pending{control: encodeClusterChange(c)})
	if err == nil && c.Action != actTakeMove && c.Action != actDropMove {
		n.kickDirectory()
	}
	return err
}

// checkChange refuses a change that the state st forbids
// (cluster.CheckChange, against this node's routing table).
func (n *Node) checkChange(st *clusterState, c *clusterChange) error {
	return cluster.CheckChange(st, n.Routing(), n.cfg.Group, c, n.slotHasKeys)
}

// slotHasKeys reports whether any live key of slot, or any key of it in
// flight, is in this node's keyspace: a scan of the whole keyspace that
// stops at the first one (there is no per-slot index).
func (n *Node) slotHasKeys(slot int) bool {
	found := false
	n.store.MovingKeys(func(key []byte, _ engine.State) bool {
		found = hashslot.Of(key) == slot
		return !found
	})
	now := n.fsm.LastTime()
	for cur := uint64(0); !found; {
		cur = n.store.Scan(cur, 1024, now, func(key []byte, _ engine.Kind) {
			found = found || hashslot.Of(key) == slot
		})
		if cur == 0 {
			break
		}
	}
	return found
}

// GroupHasSlotKeys asks every member of group, another group of the
// cluster as this node's directory knows it (the members' raft addresses
// in the routing table), whether its keyspace holds a key of slot, live
// or in flight (slotHasKeys), over the raft port's forwarding service —
// the directory's own channel, with the cluster's credentials, not a
// RESP connection. It is true when any member says so, and an error when
// the group is unknown or has no member, or a member does not answer.
func (n *Node) GroupHasSlotKeys(ctx context.Context, group string, slot int) (bool, error) {
	if slot < 0 || slot >= hashslot.Count {
		return false, fmt.Errorf("replication: slot %d out of range", slot)
	}
	r := n.Routing()
	g := r.Group(group)
	if g < 0 || g == r.Self {
		return false, fmt.Errorf("%w: %q", cluster.ErrGroupUnknown, group)
	}
	ms := r.Groups[g].Members
	if len(ms) == 0 {
		return false, fmt.Errorf("replication: group %q has no known member", group)
	}
	payload := binary.AppendUvarint(nil, uint64(slot))
	has := make([]bool, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			body, err := n.fwd.do(ctx, m.RaftAddr, reqSlotKeys, payload, true)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s of group %s: %w", m.RaftAddr, group, err)
			case len(body) != 1:
				errs[i] = fmt.Errorf("%s of group %s: %w: slot keys answer of %d bytes", m.RaftAddr, group, ErrBadPayload, len(body))
			default:
				has[i] = body[0] == 1
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	return slices.Contains(has, true), nil
}

// TakeMove takes (or renews) the group's move lease for holder for lease
// from the leader's log time, through the log (cluster.State.ApplyMove
// decides at apply time, alike on every replica); while another holder's
// has not lapsed it answers a *cluster.MoveBusyError. On a follower the
// leader does it (forwarded). It is cluster.MoveLog's.
func (n *Node) TakeMove(ctx context.Context, holder string, lease time.Duration) error {
	if holder == "" || lease <= 0 {
		return fmt.Errorf("replication: move lease needs a holder and a positive duration")
	}
	return n.changeCluster(ctx, &clusterChange{Action: actTakeMove, Holder: holder, Lease: int64(lease)})
}

// DropMove frees the group's move lease if holder holds it (cluster.MoveLog's).
func (n *Node) DropMove(ctx context.Context, holder string) error {
	if holder == "" {
		return fmt.Errorf("replication: move lease needs a holder")
	}
	return n.changeCluster(ctx, &clusterChange{Action: actDropMove, Holder: holder})
}

// MoveLease returns the group's move lease as this node's replica has
// applied it (cluster.MoveLog's): a read of local state, no log entry.
func (n *Node) MoveLease() cluster.MoveLease {
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	return n.fsm.cluster.Lease
}

var _ cluster.MoveLog = (*Node)(nil)

// MoveDest returns where the key in flight out of this group was sent (the
// RESP address its MIGRATE named), as this node's replica knows it; empty
// when unknown or not in flight.
func (n *Node) MoveDest(key []byte) string {
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	return n.fsm.cluster.MovingTo[string(key)]
}

// Tombstone reports whether key was moved away from this group while its
// slot migrated and has not come back (cluster.State.Moved), as this
// node's replica knows it. Cheap while there is none (one atomic load).
func (n *Node) Tombstone(key []byte) bool {
	if n.fsm.tombstones.Load() == 0 {
		return false
	}
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	return n.fsm.cluster.Tombstone(key)
}
