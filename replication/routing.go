package replication

import (
	"errors"

	"github.com/cellserver/cellserver/cluster"
)

// The Redis Cluster model is package cluster's; these names keep this
// package's API (resp, cmd/cellserver) while its callers move to it.

// Routing is cluster.Routing: the cluster as this node sees it.
type Routing = cluster.Routing

// GroupView is cluster.GroupView.
type GroupView = cluster.GroupView

// GroupMember is cluster.GroupMember.
type GroupMember = cluster.GroupMember

// SlotError is cluster.SlotError.
type SlotError = cluster.SlotError

// NewRouting is cluster.NewRouting.
func NewRouting(self int, selfID string, groups []GroupView) *Routing {
	return cluster.NewRouting(self, selfID, groups)
}

// ClusterNodeID is cluster.NodeID.
func ClusterNodeID(group, nodeID string) string { return cluster.NodeID(group, nodeID) }

// The cluster sentinels, by their names in this package.
var (
	ErrMoved              = cluster.ErrMoved
	ErrAsk                = cluster.ErrAsk
	ErrTryAgain           = cluster.ErrTryAgain
	ErrSlotBusy           = cluster.ErrSlotBusy
	ErrSlotNotOwned       = cluster.ErrSlotNotOwned
	ErrSlotOwned          = cluster.ErrSlotOwned
	ErrSlotHasKeys        = cluster.ErrSlotHasKeys
	ErrSlotUnassigned     = cluster.ErrSlotUnassigned
	ErrGroupUnknown       = cluster.ErrGroupUnknown
	ErrUnknownClusterNode = cluster.ErrUnknownNode
)

// Errors of Meet and Join.
var (
	// ErrOwnGroup: Meet named a node of this very group.
	ErrOwnGroup = errors.New("replication: that node belongs to this group")
	// ErrOtherGroup: a node of another group was asked to join this one.
	ErrOtherGroup = errors.New("replication: that node belongs to another group")
)

// slotErrs are the sentinels a *SlotError wraps, by their index in the
// forwarding service's detail of a *SlotError (the slot, that index and
// an unused text kept for older nodes; service.go): never renumber one.
var slotErrs = [...]error{ErrSlotBusy, ErrSlotNotOwned, ErrSlotOwned, ErrSlotHasKeys, ErrSlotUnassigned}
