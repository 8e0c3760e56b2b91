package cluster

import (
	"context"
	"fmt"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
)

// CLUSTER ABORTMOVE's decision: which keys of a slot in flight out of
// this group may go back into its keyspace. A key in flight was sent by a
// MIGRATE whose RESTORE may or may not have landed; putting it back while
// the target holds it would let both groups admit for it. So a key goes
// back only when its destination is no member of a known group (nothing
// of the cluster can hold it), or a group that can neither hold nor take
// a key of the slot, or when the operator forces it.

// SlotKeysAsker asks another group whether its keyspace holds a key of a
// slot: replication.Node over the directory of other groups (its
// members, asked on the raft port), injected so that this package dials
// nothing itself.
type SlotKeysAsker interface {
	// GroupHasSlotKeys reports whether any member of the group named
	// group holds a key of slot, live or in flight; an error when a
	// member cannot be asked.
	GroupHasSlotKeys(ctx context.Context, group string, slot int) (bool, error)
}

// AbortBlockedError is CLUSTER ABORTMOVE's refusal: Keys keys of Slot are
// in flight to a destination that may hold them (Dest, a member of Group;
// Dest "" when the destination is unknown), so none is put back.
type AbortBlockedError struct {
	Slot, Keys  int
	Dest, Group string
}

func (e *AbortBlockedError) Error() string {
	where := "an unknown destination"
	if e.Dest != "" {
		where = e.Dest + ", a member of group " + e.Group
	}
	return fmt.Sprintf("cluster: %d key(s) of slot %d are in flight to %s, which may hold them", e.Keys, e.Slot, where)
}

// PlanAbort decides CLUSTER ABORTMOVE for keys, the keys of slot in flight
// out of this group (r.Self), whose destinations dest gives (the RESP
// address their MIGRATE named, "" when unknown): nil when every one may be
// put back, else an *AbortBlockedError counting those that may not. With
// force every key may. A key may go back when its destination is the
// address of no known member, or of a member of another group that cannot
// hold the slot's keys (LacksSlot, asked once per group). keys of other
// slots are the caller's mistake and are counted like the others.
func PlanAbort(ctx context.Context, r *Routing, ask SlotKeysAsker, slot int, force bool, keys [][]byte, dest func(key []byte) string) error {
	if force {
		return nil
	}
	var blocked *AbortBlockedError
	cleared := map[int]bool{} // groups asked: true when they cannot hold the slot's keys
	for _, key := range keys {
		d := dest(key)
		g := r.GroupOfAddr(d)
		if g >= 0 && g != r.Self {
			c, ok := cleared[g]
			if !ok {
				c = r.LacksSlot(ctx, ask, g, slot)
				cleared[g] = c
			}
			if c {
				continue
			}
		}
		if d != "" && g < 0 {
			continue // sent outside the cluster: no group of it holds the key
		}
		if blocked == nil {
			blocked = &AbortBlockedError{Slot: slot}
			if g >= 0 {
				blocked.Dest, blocked.Group = d, r.Groups[g].Name
			}
		}
		blocked.Keys++
	}
	if blocked != nil {
		return blocked
	}
	return nil
}

// LacksSlot reports whether group g of r can neither hold nor take a key
// of slot: the routing model rules it out (MayTakeSlot: it does not own
// the slot, no group's view shows it importing, and its view is fresh),
// and its members, asked now through ask, hold no key of it (keys in
// flight included: a count only they know). A RESTORE of the slot's key
// arriving there late is then refused by its log (not importing). Any
// doubt (no asker, a member that does not answer) is false.
func (r *Routing) LacksSlot(ctx context.Context, ask SlotKeysAsker, g, slot int) bool {
	if ask == nil || r.MayTakeSlot(g, slot) {
		return false
	}
	has, err := ask.GroupHasSlotKeys(ctx, r.Groups[g].Name, slot)
	return err == nil && !has
}

// AbortKeyspace is the group's keyspace as an Abort needs it: resp's
// Backend, through the connection that runs CLUSTER ABORTMOVE.
type AbortKeyspace interface {
	// ReadNow is a read barrier: MovingKeys after it reports every key
	// put in flight before.
	ReadNow() error
	// MovingKeys calls fn for each key in flight until it returns false.
	MovingKeys(fn func(key []byte, st engine.State) bool)
	// PutBack puts keys back into the keyspace (one shards.OpMoveAbort)
	// and returns how many went back.
	PutBack(keys [][]byte) (int64, error)
}

// Abort is one CLUSTER ABORTMOVE of Slot, run holding the group's move
// lease (Mover.Run), so that it never races a MIGRATE of any node of the
// group.
type Abort struct {
	Slot  int
	Force bool
	// Keyspace is required.
	Keyspace AbortKeyspace
	// Routing returns this node's routing table as it is once the lease
	// is held; MoveDest where a key in flight was sent ("" unknown).
	Routing  func() *Routing
	MoveDest func(key []byte) string
	// Ask asks other groups whether they hold the slot's keys (the
	// node's directory); nil: every group that may is a doubt.
	Ask SlotKeysAsker
}

// Run puts the slot's keys in flight out of this group back into its
// keyspace when PlanAbort allows it, and returns how many went back (0
// when none is in flight); an *AbortBlockedError when a key may be held
// elsewhere.
func (a *Abort) Run(ctx context.Context) (int64, error) {
	if err := a.Keyspace.ReadNow(); err != nil {
		return 0, err
	}
	var keys [][]byte
	a.Keyspace.MovingKeys(func(key []byte, _ engine.State) bool {
		if hashslot.Of(key) == a.Slot {
			keys = append(keys, key)
		}
		return true
	})
	if err := PlanAbort(ctx, a.Routing(), a.Ask, a.Slot, a.Force, keys, a.MoveDest); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, nil
	}
	return a.Keyspace.PutBack(keys)
}
