package decide

import (
	"context"

	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// Gate is what Groups needs of the region stage: a Write with the region
// policy applied (split scaled, async shipped, global forwarded) whose
// local part goes through w instead of the gate's own Backend.
// region.Gate has it; declared here, where it is used, because region
// depends on this package (for Backend), not the other way round.
type Gate interface {
	WriteThrough(ctx context.Context, ops []shards.Op, res []shards.Result, w WriteFunc) error
}

// Groups is the routing stage for a door that decides each key in the
// group that serves it, whichever node it entered by (the Envoy service;
// a RESP client follows MOVED itself instead): the group of a key is the
// cluster's slot rule over this node's routing table
// (cluster.Routing.GroupOfKey), and a write in a named group goes through
// the region stage, when there is one, to that group's leader
// (replication.Node.WriteGroup). A group's per-operation refusals are
// cluster's sentinels (cluster.ErrMoved, ErrAsk, ErrTryAgain). It has
// rls.Router's methods. Safe for concurrent use.
type Groups struct {
	node *replication.Node
	gate Gate // nil without a region
}

// NewGroups returns the routing stage over node, its writes through gate
// (nil: no region stage).
func NewGroups(node *replication.Node, gate Gate) *Groups {
	return &Groups{node: node, gate: gate}
}

// Self names this node's group.
func (g *Groups) Self() string { return g.node.Group() }

// Route names the group that serves key's slot in this node's view of
// the cluster (ok false when none does) and, while that slot migrates,
// the group importing it ("" otherwise).
func (g *Groups) Route(key []byte) (owner, importer string, ok bool) {
	return g.node.Routing().GroupOfKey(key)
}

// WriteGroup writes ops in group (this node's or another's, through its
// leader), through the region stage first when there is one.
func (g *Groups) WriteGroup(ctx context.Context, group string, ops []shards.Op, res []shards.Result) error {
	if g.gate == nil {
		return g.node.WriteGroup(ctx, group, ops, res)
	}
	return g.gate.WriteThrough(ctx, ops, res, func(ctx context.Context, ops []shards.Op, res []shards.Result) error {
		return g.node.WriteGroup(ctx, group, ops, res)
	})
}
