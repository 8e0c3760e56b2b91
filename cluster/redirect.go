package cluster

import (
	"errors"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// Where a refused command goes: Check's verdicts and the state machine's
// refusals made redirections (MOVED, ASK) naming the address Routing gives
// for the slot's group, or refusals (TRYAGAIN, CLUSTERDOWN). resp words
// them.

// Refusals of a slot no group serves, from Routing.Refusal.
var (
	// ErrSlotNotServed: no group owns the slot, or its owner has no
	// known member.
	ErrSlotNotServed = errors.New("cluster: hash slot not served")
	// ErrSlotNotKnown: no group is known to own the slot, and a known
	// group has not answered yet (just after CLUSTER MEET or a restart):
	// it may own it.
	ErrSlotNotKnown = errors.New("cluster: hash slot not known yet")
)

// RedirectError is a MOVED (or, with Ask, ASK) redirection: Slot is
// served by the node at Addr (host:port).
type RedirectError struct {
	Ask  bool
	Slot int
	Addr string
}

func (e *RedirectError) Error() string { return "cluster: redirect to " + e.Addr }

// Refusal returns what a client is answered for verdict v: a
// *RedirectError naming the address RedirectAddr gives for the slot's
// group (TRYAGAIN, ErrTryAgain, for an ASK whose target has no known
// member; ErrSlotNotServed or ErrSlotNotKnown for a slot nobody serves),
// v's sentinel otherwise (shards' ErrMoving for a key in flight is the
// caller's), nil when served.
func (r *Routing) Refusal(v Verdict) error {
	switch v.Kind {
	case Moved, Unassigned:
		return r.moved(v.Slot)
	case Ask:
		addr := r.RedirectAddr(r.MigratingTo(v.Slot))
		if addr == "" {
			return ErrTryAgain
		}
		return &RedirectError{Ask: true, Slot: v.Slot, Addr: addr}
	}
	return v.Err()
}

// moved returns the MOVED redirection of slot to its owner's leader (its
// first member while no leader is known); ErrSlotNotServed when no group
// owns it, or ErrSlotNotKnown while a known group has not answered yet
// and may own it.
func (r *Routing) moved(slot int) error {
	addr := r.RedirectAddr(r.Owner(slot))
	if addr != "" {
		return &RedirectError{Slot: slot, Addr: addr}
	}
	for g := range r.Groups {
		if g != r.Self && len(r.Groups[g].Members) == 0 {
			return ErrSlotNotKnown
		}
	}
	return ErrSlotNotServed
}

// OpRefusal makes the state machine's refusal err of an op on keys what
// a client is answered: ErrMoved and ErrAsk become redirections (Refusal)
// for the slot of the first key concerned; ErrMoved for a slot this
// routing still shows owned here is ErrTryAgain (the group gave the slot
// away and this table does not show it yet). Other errors are returned as
// they are. A nil r (no routing table yet) refuses with ErrSlotNotServed.
func (r *Routing) OpRefusal(err error, keys [][]byte) error {
	ask := errors.Is(err, ErrAsk)
	if len(keys) == 0 || !ask && !errors.Is(err, ErrMoved) {
		return err
	}
	if r == nil {
		return ErrSlotNotServed
	}
	slot := hashslot.Of(keys[0])
	for _, k := range keys {
		s := hashslot.Of(k)
		if (ask && r.MigratingTo(s) >= 0) || (!ask && r.Owner(s) != r.Self) {
			slot = s
			break
		}
	}
	if ask {
		return r.Refusal(Verdict{Kind: Ask, Slot: slot})
	}
	if r.Owner(slot) == r.Self {
		return ErrTryAgain
	}
	return r.Refusal(Verdict{Kind: Moved, Slot: slot})
}
