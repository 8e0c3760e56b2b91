package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
)

// SlotAction is the subcommand of CLUSTER SETSLOT.
type SlotAction int

// The SETSLOT actions.
const (
	SlotImporting SlotAction = iota + 1 // import the slot from the node's group
	SlotMigrating                       // migrate the slot to the node's group
	SlotNode                            // the node's group owns the slot
	SlotStable                          // clear importing / migrating
)

// errNoChange: a cluster change that changes nothing here (DELSLOTS of
// slots another group owns) succeeds without an entry.
var errNoChange = errors.New("replication: no change")

// Group returns this node's group name.
func (n *Node) Group() string { return n.cfg.Group }

// AddSlots assigns slots to this group (CLUSTER ADDSLOTS), replicated in
// its log. A slot this group or another known group owns fails the whole
// call with a *SlotError wrapping ErrSlotBusy; nothing is assigned then.
// On a follower the change is made by the leader (forwarded).
func (n *Node) AddSlots(ctx context.Context, slots []int) error {
	return n.changeCluster(ctx, &clusterChange{Action: actAddSlots, Ranges: toRanges(slots)})
}

// DelSlots makes slots of this group unowned (CLUSTER DELSLOTS). A slot
// another known group owns is left alone (nil for it); a slot no group
// owns fails with a *SlotError wrapping ErrSlotUnassigned.
func (n *Node) DelSlots(ctx context.Context, slots []int) error {
	return n.changeCluster(ctx, &clusterChange{Action: actDelSlots, Ranges: toRanges(slots)})
}

// SetSlot runs CLUSTER SETSLOT slot action [clusterID]: clusterID names a
// node (ClusterNodeID) of the group the slot is imported from, migrates
// to, or is assigned to. ErrUnknownClusterNode when no known group has
// that node; *SlotError for a slot in the wrong state.
func (n *Node) SetSlot(ctx context.Context, slot int, action SlotAction, clusterID string) error {
	c, err := n.setSlotChange(slot, action, clusterID)
	if err != nil {
		return err
	}
	return n.changeCluster(ctx, c)
}

// setSlotChange is the cluster change of SETSLOT slot action clusterID.
func (n *Node) setSlotChange(slot int, action SlotAction, clusterID string) (*clusterChange, error) {
	if slot < 0 || slot >= hashslot.Count {
		return nil, fmt.Errorf("replication: slot %d out of range", slot)
	}
	c := &clusterChange{Slot: slot}
	group := ""
	if action != SlotStable {
		rt := n.Routing()
		g := rt.NodeGroup(clusterID)
		if g < 0 {
			return nil, fmt.Errorf("replication: node %s: %w", clusterID, ErrUnknownClusterNode)
		}
		group = rt.Groups[g].Name
	}
	switch action {
	case SlotImporting:
		c.Action, c.Group = actImporting, group
	case SlotMigrating:
		c.Action, c.Group = actMigrating, group
	case SlotNode:
		c.Action = actDisown
		if group == n.cfg.Group {
			c.Action = actOwn
		}
	case SlotStable:
		c.Action = actStable
	default:
		return nil, fmt.Errorf("replication: unknown slot action %d", action)
	}
	return c, nil
}

// SlotChangeKind says which CLUSTER command a SlotChange is.
type SlotChangeKind int

// The kinds of SlotChange.
const (
	SlotAdd SlotChangeKind = iota + 1 // CLUSTER ADDSLOTS Slots
	SlotDel                           // CLUSTER DELSLOTS Slots
	SlotSet                           // CLUSTER SETSLOT Slot Action NodeID
)

// SlotChange is one slot change of a list applied together (ChangeSlots).
type SlotChange struct {
	Kind SlotChangeKind
	// Slots are ADDSLOTS' and DELSLOTS' slots, each in [0, 16383].
	Slots []int
	// Slot, Action and NodeID are SETSLOT's (NodeID: a member's 40-hex
	// cluster node id, "" for SlotStable).
	Slot   int
	Action SlotAction
	NodeID string
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
func (n *Node) ChangeSlots(ctx context.Context, changes []SlotChange) ([]error, error) {
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
func (n *Node) slotChange(sc *SlotChange) (*clusterChange, error) {
	switch sc.Kind {
	case SlotAdd, SlotDel:
		for _, s := range sc.Slots {
			if s < 0 || s >= hashslot.Count {
				return nil, fmt.Errorf("replication: slot %d out of range", s)
			}
		}
		act := actAddSlots
		if sc.Kind == SlotDel {
			act = actDelSlots
		}
		return &clusterChange{Action: act, Ranges: toRanges(sc.Slots)}, nil
	case SlotSet:
		return n.setSlotChange(sc.Slot, sc.Action, sc.NodeID)
	}
	return nil, fmt.Errorf("replication: unknown slot change kind %d", sc.Kind)
}

// changeListOnLeader checks the changes of list in order against the
// replicated state as the ones before leave it, and commits those that
// pass as one entry. It returns each change's refusal (nil: applied).
func (n *Node) changeListOnLeader(ctx context.Context, list []clusterChange) ([]error, error) {
	orig := n.fsm.clusterState()
	st := orig.Clone()
	errs := make([]error, len(list))
	ok := make([]clusterChange, 0, len(list))
	for i := range list {
		if list[i].Action == actAddSlots && retaking(&orig, &st, list[i].Ranges) {
			// Taking back slots this group owned when the list began and
			// an earlier change of it freed (redis-cli --cluster fix:
			// DELSLOTS then ADDSLOTS) cannot make two owners; refusing it
			// (another group's view stale) would leave them without any.
		} else if errs[i] = n.checkChange(&st, &list[i]); errs[i] != nil {
			if errors.Is(errs[i], errNoChange) {
				errs[i] = nil
			}
			continue
		}
		st.Apply(&list[i], n.cfg.Group)
		ok = append(ok, list[i])
	}
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

// retaking reports whether every slot of ranges was owned in orig and is
// not in st.
func retaking(orig, st *clusterState, ranges [][2]int) bool {
	for _, r := range ranges {
		for s := r[0]; s <= r[1]; s++ {
			if !orig.Owns(s) || st.Owns(s) {
				return false
			}
		}
	}
	return true
}

// toRanges turns slots into ascending inclusive ranges.
func toRanges(slots []int) [][2]int {
	s := slices.Clone(slots)
	slices.Sort(s)
	var out [][2]int
	for _, x := range s {
		if k := len(out); k > 0 && (out[k-1][1] == x || out[k-1][1] == x-1) {
			out[k-1][1] = x
		} else {
			out = append(out, [2]int{x, x})
		}
	}
	return out
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
		if errors.Is(err, errNoChange) {
			return nil
		}
		return err
	}
	err := n.submit(ctx, &pending{control: encodeClusterChange(c)})
	if err == nil {
		n.kickDirectory()
	}
	return err
}

// checkChange refuses a change that the state st forbids, with Redis's
// wording in the *SlotError.
func (n *Node) checkChange(st *clusterState, c *clusterChange) error {
	rt := n.Routing()
	switch c.Action {
	case actAddSlots:
		if err := allFresh(rt); err != nil {
			return err
		}
		for _, r := range c.Ranges {
			for s := r[0]; s <= r[1]; s++ {
				if st.Owns(s) || rt.Owner(s) >= 0 && rt.Sharded && rt.Owner(s) != rt.Self {
					return &SlotError{Slot: s, Err: ErrSlotBusy}
				}
			}
		}
	case actOwn:
		if _, importing := st.Importing[c.Slot]; !importing && !st.Owns(c.Slot) {
			// Taking a slot without importing it: only a free one.
			if err := allFresh(rt); err != nil {
				return err
			}
			if o := rt.Owner(c.Slot); rt.Sharded && o >= 0 && o != rt.Self {
				return &SlotError{Slot: c.Slot, Err: ErrSlotBusy}
			}
		}
	case actDelSlots:
		// A slot another group owns is left alone, and the call succeeds
		// for it: as in Redis, DELSLOTS on a node that does not own the
		// slot is how a tool (redis-cli --cluster fix) makes sure a node
		// is not its owner. Another group's slots are not this one's to
		// unassign.
		var mine []int
		for _, r := range c.Ranges {
			for s := r[0]; s <= r[1]; s++ {
				switch o := rt.Owner(s); {
				case st.Owns(s):
					mine = append(mine, s)
				case !rt.Sharded || o < 0 || o == rt.Self:
					return &SlotError{Slot: s, Err: ErrSlotUnassigned}
				}
			}
		}
		if len(mine) == 0 {
			return errNoChange
		}
		c.Ranges = toRanges(mine)
	case actMigrating:
		if !st.Owns(c.Slot) {
			return &SlotError{Slot: c.Slot, Err: ErrSlotNotOwned}
		}
		if c.Group == n.cfg.Group {
			return &SlotError{Slot: c.Slot, Err: ErrSlotOwned}
		}
	case actDisown:
		if st.Owns(c.Slot) && n.slotHasKeys(c.Slot) {
			return &SlotError{Slot: c.Slot, Err: ErrSlotHasKeys}
		}
	case actImporting:
		if st.Owns(c.Slot) {
			return &SlotError{Slot: c.Slot, Err: ErrSlotOwned}
		}
	}
	return nil
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

// allFresh refuses a slot assignment while another known group's view is
// not fresh (never answered, or not for directoryStale): its slots are
// unknown, and assigning one of them would make two owners.
func allFresh(rt *Routing) error {
	for g := range rt.Groups {
		if g != rt.Self && !rt.Groups[g].Reachable {
			return fmt.Errorf("replication: group %s has not answered lately, so its slots are unknown: %w", rt.Groups[g].Name, ErrGroupUnknown)
		}
	}
	return nil
}

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
