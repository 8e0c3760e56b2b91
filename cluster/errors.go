package cluster

import (
	"errors"
	"fmt"
)

// Errors of keyed operations in a sharded cluster: the sentinels of Check's
// verdicts (Verdict.Err). Their texts are plain; the wire layer words them
// (MOVED, ASK, TRYAGAIN, CROSSSLOT) with the slot and the address Routing
// gives.
var (
	// ErrMoved: a key's slot is not served by this group (owned by
	// another group or by none, or importing and the op was not sent after
	// ASKING).
	ErrMoved = errors.New("cluster: slot served by another group")
	// ErrAsk: the op's slot is migrating out of this group and none of its
	// keys is here: the target group serves it after ASKING.
	ErrAsk = errors.New("cluster: slot migrating, key not here")
	// ErrTryAgain: the keys of a migrating slot are partly here and partly
	// moved, or a key was moved away from a slot that no longer migrates
	// (a tombstone): the client retries once the move is over.
	ErrTryAgain = errors.New("cluster: keys of a migrating slot are split")
	// ErrCrossSlot: keys of several slots, not all served by this group
	// (or a transaction, whose keys must share one slot).
	ErrCrossSlot = errors.New("cluster: keys in request don't hash to the same slot")
)

// Refusals of slot changes (CheckChange), carried by a *SlotError naming
// the slot; ErrGroupUnknown and ErrUnknownNode come bare (wrapped).
var (
	// ErrSlotBusy: ADDSLOTS (or SETSLOT NODE of a slot not imported) of a
	// slot some group owns.
	ErrSlotBusy = errors.New("cluster: slot already busy")
	// ErrSlotNotOwned: SETSLOT MIGRATING of a slot this group does not own.
	ErrSlotNotOwned = errors.New("cluster: slot not owned by this group")
	// ErrSlotOwned: SETSLOT IMPORTING of a slot this group owns, or
	// MIGRATING naming this group.
	ErrSlotOwned = errors.New("cluster: slot already owned by this group")
	// ErrSlotHasKeys: SETSLOT NODE giving away a slot whose keys are
	// still here (or in flight).
	ErrSlotHasKeys = errors.New("cluster: slot still has keys here")
	// ErrSlotUnassigned: DELSLOTS of a slot no group owns.
	ErrSlotUnassigned = errors.New("cluster: slot already unassigned")
	// ErrGroupUnknown: a slot assignment while another known group's
	// slots are not known (it has not answered lately).
	ErrGroupUnknown = errors.New("cluster: another group's slots are unknown")
	// ErrUnknownNode: SETSLOT named a node id no known group has.
	ErrUnknownNode = errors.New("cluster: unknown cluster node id")
)

// SlotError is a slot change's refusal about one slot.
type SlotError struct {
	Slot int
	Err  error // one of the slot change sentinels above
}

func (e *SlotError) Error() string { return fmt.Sprintf("%v: slot %d", e.Err, e.Slot) }

// Unwrap returns the sentinel.
func (e *SlotError) Unwrap() error { return e.Err }

// ErrMoveBusy: the group's move lease is held by another MIGRATE or CLUSTER
// ABORTMOVE (on this node or another of the group), carried by a
// *MoveBusyError naming the holder.
var ErrMoveBusy = errors.New("cluster: another move of this group is running")

// MoveBusyError is a TakeMove's refusal: who holds the lease, and until
// when (Unix ns of the group's log time).
type MoveBusyError struct {
	Holder string
	Until  int64
}

func (e *MoveBusyError) Error() string { return fmt.Sprintf("%v (held by %s)", ErrMoveBusy, e.Holder) }

// Unwrap returns ErrMoveBusy.
func (e *MoveBusyError) Unwrap() error { return ErrMoveBusy }

// Refusals of the slot arguments of the CLUSTER commands (args.go).
var (
	// ErrBadSlot: a slot argument that is not an integer in [0, 16384).
	ErrBadSlot = errors.New("cluster: invalid or out of range slot")
	// ErrSetSlotSyntax: SETSLOT with an unknown action or the wrong
	// number of arguments for it.
	ErrSetSlotSyntax = errors.New("cluster: invalid SETSLOT action or number of arguments")
	// ErrNotMaster: CLUSTER REPLICAS of a node that is not its group's
	// leader.
	ErrNotMaster = errors.New("cluster: node is not a master")
	// ErrInvalidSlot: COUNTKEYSINSLOT's slot out of range.
	ErrInvalidSlot = errors.New("cluster: invalid slot")
	// ErrInvalidSlotOrCount: GETKEYSINSLOT's slot out of range or
	// negative count.
	ErrInvalidSlotOrCount = errors.New("cluster: invalid slot or number of keys")
	// ErrFailoverOption: FAILOVER FORCE or TAKEOVER.
	ErrFailoverOption = errors.New("cluster: FAILOVER FORCE and TAKEOVER are not needed")
)

// SlotRepeatError: a slot named twice in ADDSLOTS, DELSLOTS or their
// RANGE forms.
type SlotRepeatError struct{ Slot int }

func (e *SlotRepeatError) Error() string {
	return fmt.Sprintf("cluster: slot %d specified multiple times", e.Slot)
}

// SlotOrderError: a slot range whose start is past its end.
type SlotOrderError struct{ First, Last int }

func (e *SlotOrderError) Error() string {
	return fmt.Sprintf("cluster: start slot %d is greater than end slot %d", e.First, e.Last)
}

// PortError: MEET's port (or bus port, Bus) is not one.
type PortError struct {
	Bus   bool
	Value string
}

func (e *PortError) Error() string { return "cluster: invalid port " + e.Value }

// NodeIDError: a node id the routing does not know (CLUSTER REPLICAS).
type NodeIDError struct{ ID string }

func (e *NodeIDError) Error() string { return "cluster: unknown node " + e.ID }
