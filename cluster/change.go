package cluster

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// Slot changes: the CLUSTER ADDSLOTS, DELSLOTS and SETSLOT a group is
// asked for, turned into the Change its log records, and the rule that
// refuses those the cluster's state forbids (CheckChange, CheckList). The
// group's leader runs them against its replicated State and its Routing
// just before it commits the change.

// SlotAction is the subcommand of CLUSTER SETSLOT.
type SlotAction int

// The SETSLOT actions.
const (
	SlotImporting SlotAction = iota + 1 // import the slot from the node's group
	SlotMigrating                       // migrate the slot to the node's group
	SlotNode                            // the node's group owns the slot
	SlotStable                          // clear importing / migrating
)

// SlotChangeKind says which CLUSTER command a SlotChange is.
type SlotChangeKind int

// The kinds of SlotChange.
const (
	SlotAdd SlotChangeKind = iota + 1 // CLUSTER ADDSLOTS Slots
	SlotDel                           // CLUSTER DELSLOTS Slots
	SlotSet                           // CLUSTER SETSLOT Slot Action NodeID
)

// SlotChange is one slot change as a client asks for it.
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

// ErrNoChange is CheckChange's answer for a change that changes nothing
// here (DELSLOTS of slots another group owns): not a refusal, the change
// succeeds without an entry.
var ErrNoChange = errors.New("cluster: no change")

// Change returns the Change that sc makes in the log of group self, the
// node ids resolved by rt: what can be checked without the leader's state
// (slots in range, a known node id: ErrUnknownNode otherwise).
func (sc *SlotChange) Change(rt *Routing, self string) (*Change, error) {
	switch sc.Kind {
	case SlotAdd, SlotDel:
		for _, s := range sc.Slots {
			if s < 0 || s >= hashslot.Count {
				return nil, fmt.Errorf("cluster: slot %d out of range", s)
			}
		}
		act := AddSlots
		if sc.Kind == SlotDel {
			act = DelSlots
		}
		return &Change{Action: act, Ranges: ToRanges(sc.Slots)}, nil
	case SlotSet:
		return setSlotChange(rt, self, sc.Slot, sc.Action, sc.NodeID)
	}
	return nil, fmt.Errorf("cluster: unknown slot change kind %d", sc.Kind)
}

// setSlotChange is the Change of SETSLOT slot action nodeID in group self.
func setSlotChange(rt *Routing, self string, slot int, action SlotAction, nodeID string) (*Change, error) {
	if slot < 0 || slot >= hashslot.Count {
		return nil, fmt.Errorf("cluster: slot %d out of range", slot)
	}
	c := &Change{Slot: slot}
	group := ""
	if action != SlotStable {
		g := rt.NodeGroup(nodeID)
		if g < 0 {
			return nil, fmt.Errorf("cluster: node %s: %w", nodeID, ErrUnknownNode)
		}
		group = rt.Groups[g].Name
	}
	switch action {
	case SlotImporting:
		c.Action, c.Group = Importing, group
	case SlotMigrating:
		c.Action, c.Group = Migrating, group
	case SlotNode:
		c.Action = Disown
		if group == self {
			c.Action = Own
		}
	case SlotStable:
		c.Action = Stable
	default:
		return nil, fmt.Errorf("cluster: unknown slot action %d", action)
	}
	return c, nil
}

// CheckChange refuses a change of group self that the state st and the
// routing rt forbid: a *SlotError naming the slot and why, or an error
// wrapping ErrGroupUnknown while another group's slots are unknown.
// hasKeys reports whether keys of a slot (live, or in flight) are still in
// the group's keyspace. A DELSLOTS is narrowed, in c, to the slots this
// group owns; ErrNoChange when none is left.
func CheckChange(st *State, rt *Routing, self string, c *Change, hasKeys func(slot int) bool) error {
	switch c.Action {
	case AddSlots:
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
	case Own:
		if !st.SlotImporting(c.Slot) && !st.Owns(c.Slot) {
			// Taking a slot without importing it: only a free one.
			if err := allFresh(rt); err != nil {
				return err
			}
			if o := rt.Owner(c.Slot); rt.Sharded && o >= 0 && o != rt.Self {
				return &SlotError{Slot: c.Slot, Err: ErrSlotBusy}
			}
		}
	case DelSlots:
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
			return ErrNoChange
		}
		c.Ranges = ToRanges(mine)
	case Migrating:
		if !st.Owns(c.Slot) {
			return &SlotError{Slot: c.Slot, Err: ErrSlotNotOwned}
		}
		if c.Group == self {
			return &SlotError{Slot: c.Slot, Err: ErrSlotOwned}
		}
	case Disown:
		if st.Owns(c.Slot) && hasKeys(c.Slot) {
			return &SlotError{Slot: c.Slot, Err: ErrSlotHasKeys}
		}
	case Importing:
		if st.Owns(c.Slot) {
			return &SlotError{Slot: c.Slot, Err: ErrSlotOwned}
		}
	}
	return nil
}

// CheckList checks the changes of list (the slot changes of one
// transaction), in order, each against st as the ones before it leave it
// (st is changed so). It returns the changes that pass, to be committed
// together, and each change's refusal (nil: passes, or changes nothing).
func CheckList(st *State, rt *Routing, self string, list []Change, hasKeys func(slot int) bool) (ok []Change, errs []error) {
	orig := st.Clone()
	errs = make([]error, len(list))
	ok = make([]Change, 0, len(list))
	for i := range list {
		if list[i].Action == AddSlots && retaking(&orig, st, list[i].Ranges) {
			// Taking back slots this group owned when the list began and
			// an earlier change of it freed (redis-cli --cluster fix:
			// DELSLOTS then ADDSLOTS) cannot make two owners; refusing it
			// (another group's view stale) would leave them without any.
		} else if errs[i] = CheckChange(st, rt, self, &list[i], hasKeys); errs[i] != nil {
			if errors.Is(errs[i], ErrNoChange) {
				errs[i] = nil
			}
			continue
		}
		st.Apply(&list[i], self)
		ok = append(ok, list[i])
	}
	return ok, errs
}

// retaking reports whether every slot of ranges was owned in orig and is
// not in st.
func retaking(orig, st *State, ranges [][2]int) bool {
	for _, r := range ranges {
		for s := r[0]; s <= r[1]; s++ {
			if !orig.Owns(s) || st.Owns(s) {
				return false
			}
		}
	}
	return true
}

// ToRanges turns slots into ascending inclusive ranges.
func ToRanges(slots []int) [][2]int {
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

// allFresh refuses a slot assignment while another known group's view is
// not fresh (never answered, or not lately): its slots are unknown, and
// assigning one of them would make two owners.
func allFresh(rt *Routing) error {
	for g := range rt.Groups {
		if g != rt.Self && !rt.Groups[g].Reachable {
			return fmt.Errorf("cluster: group %s has not answered lately, so its slots are unknown: %w", rt.Groups[g].Name, ErrGroupUnknown)
		}
	}
	return nil
}
