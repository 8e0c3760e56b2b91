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

// Slots is a Node's changes of its group's cluster state (Node.Slots):
// slot ownership and migration, and the move lease (a cluster.MoveLog).
// Every change is an entry of the group's log.
type Slots struct{ n *Node }

// AddSlots assigns slots to this group (CLUSTER ADDSLOTS), replicated in
// its log. A slot this group or another known group owns fails the whole
// call with a *cluster.SlotError wrapping cluster.ErrSlotBusy; nothing is
// assigned then. On a follower the change is made by the leader (forwarded).
func (sl *Slots) AddSlots(ctx context.Context, slots []int) error {
	return sl.changeCluster(ctx, &clusterChange{Action: actAddSlots, Ranges: cluster.ToRanges(slots)})
}

// DelSlots makes slots of this group unowned (CLUSTER DELSLOTS). A slot
// another known group owns is left alone (nil for it); a slot no group
// owns fails with a *cluster.SlotError wrapping cluster.ErrSlotUnassigned.
func (sl *Slots) DelSlots(ctx context.Context, slots []int) error {
	return sl.changeCluster(ctx, &clusterChange{Action: actDelSlots, Ranges: cluster.ToRanges(slots)})
}

// SetSlot runs CLUSTER SETSLOT slot action [clusterID]: clusterID names a
// node (cluster.NodeID) of the group the slot is imported from, migrates
// to, or is assigned to. cluster.ErrUnknownNode when no known group has
// that node; *cluster.SlotError for a slot in the wrong state.
func (sl *Slots) SetSlot(ctx context.Context, slot int, action cluster.SlotAction, clusterID string) error {
	c, err := sl.setSlotChange(slot, action, clusterID)
	if err != nil {
		return err
	}
	return sl.changeCluster(ctx, c)
}

// setSlotChange is the cluster change of SETSLOT slot action clusterID.
func (sl *Slots) setSlotChange(slot int, action cluster.SlotAction, clusterID string) (*clusterChange, error) {
	n := sl.n
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
func (sl *Slots) ChangeSlots(ctx context.Context, changes []cluster.SlotChange) ([]error, error) {
	n := sl.n
	errs := make([]error, len(changes))
	list := make([]clusterChange, 0, len(changes))
	idx := make([]int, 0, len(changes))
	for i := range changes {
		c, err := sl.slotChange(&changes[i])
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
	err := n.lead.onLeaderReply(ctx, "cluster change", func() error {
		var err error
		sub, err = sl.changeListOnLeader(ctx, list)
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
func (sl *Slots) slotChange(sc *cluster.SlotChange) (*clusterChange, error) {
	n := sl.n
	return sc.Change(n.Routing(), n.cfg.Group)
}

// changeListOnLeader checks the changes of list in order against the
// replicated state as the ones before leave it (cluster.CheckList), and
// commits those that pass as one entry. It returns each change's refusal
// (nil: applied).
func (sl *Slots) changeListOnLeader(ctx context.Context, list []clusterChange) ([]error, error) {
	n := sl.n
	st := n.fsm.clusterState()
	ok, errs := cluster.CheckList(&st, n.Routing(), n.cfg.Group, list, sl.slotHasKeys)
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
func (sl *Slots) changeCluster(ctx context.Context, c *clusterChange) error {
	n := sl.n
	for _, r := range c.Ranges {
		if r[0] < 0 || r[1] >= hashslot.Count {
			return fmt.Errorf("replication: slot range %d-%d out of range", r[0], r[1])
		}
	}
	body := encodeClusterChange(c)
	return n.lead.onLeader(ctx, "cluster change", func() error { return sl.changeClusterOnLeader(ctx, c) }, reqCluster, body, nil)
}

// changeClusterOnLeader validates c against the replicated state and the
// directory, then submits it and waits until it is applied.
func (sl *Slots) changeClusterOnLeader(ctx context.Context, c *clusterChange) error {
	n := sl.n
	st := n.fsm.clusterState()
	if err := sl.checkChange(&st, c); err != nil {
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
func (sl *Slots) checkChange(st *clusterState, c *clusterChange) error {
	n := sl.n
	return cluster.CheckChange(st, n.Routing(), n.cfg.Group, c, sl.slotHasKeys)
}

// slotHasKeys reports whether any live key of slot, or any key of it in
// flight, is in this node's keyspace: a scan of the whole keyspace that
// stops at the first one (there is no per-slot index).
func (sl *Slots) slotHasKeys(slot int) bool {
	n := sl.n
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
func (sl *Slots) GroupHasSlotKeys(ctx context.Context, group string, slot int) (bool, error) {
	n := sl.n
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
func (sl *Slots) TakeMove(ctx context.Context, holder string, lease time.Duration) error {
	if holder == "" || lease <= 0 {
		return fmt.Errorf("replication: move lease needs a holder and a positive duration")
	}
	return sl.changeCluster(ctx, &clusterChange{Action: actTakeMove, Holder: holder, Lease: int64(lease)})
}

// DropMove frees the group's move lease if holder holds it (cluster.MoveLog's).
func (sl *Slots) DropMove(ctx context.Context, holder string) error {
	if holder == "" {
		return fmt.Errorf("replication: move lease needs a holder")
	}
	return sl.changeCluster(ctx, &clusterChange{Action: actDropMove, Holder: holder})
}

// MoveLease returns the group's move lease as this node's replica has
// applied it (cluster.MoveLog's): a read of local state, no log entry.
func (sl *Slots) MoveLease() cluster.MoveLease {
	sl.n.fsm.mu.Lock()
	defer sl.n.fsm.mu.Unlock()
	return sl.n.fsm.cluster.Lease
}

var _ cluster.MoveLog = (*Slots)(nil)

// MoveDest returns where the key in flight out of this group was sent (the
// RESP address its MIGRATE named), as this node's replica knows it; empty
// when unknown or not in flight.
func (sl *Slots) MoveDest(key []byte) string {
	n := sl.n
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	return n.fsm.cluster.MovingTo[string(key)]
}

// Tombstone reports whether key was moved away from this group while its
// slot migrated and has not come back (cluster.State.Moved), as this
// node's replica knows it. Cheap while there is none (one atomic load).
func (sl *Slots) Tombstone(key []byte) bool {
	n := sl.n
	if n.fsm.tombstones.Load() == 0 {
		return false
	}
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	return n.fsm.cluster.Tombstone(key)
}
