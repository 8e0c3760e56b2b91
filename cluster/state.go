package cluster

import (
	"maps"
	"slices"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// State is a group's replicated cluster state: which hash slots it owns,
// which it is migrating out or importing, which other groups it knows, and
// the keys it moves. It changes only by Apply (a log entry's Change) and
// the move notes (a log entry's ops), so that every replica holds the same
// state and Check decides alike everywhere. Not safe for concurrent use:
// the owner (replication's FSM) serialises access.
type State struct {
	owned  [hashslot.Count / 64]uint64
	nOwned int
	// Migrating maps a slot migrating out to its target group's name.
	Migrating map[int]string
	// Importing maps a slot imported to its source group's name.
	Importing map[int]string
	// Groups are the other groups known (CLUSTER MEET) and where to reach
	// them.
	Groups map[string]Seeds
	// Moved are the keys this group moved away (MoveDone) while their slot
	// was migrating: tombstones. Such a key answers TRYAGAIN here once the
	// slot is stable again (ASK while it still migrates), never as a fresh
	// key, until it comes back (Restored) or the slot is given to another
	// group (Disown).
	Moved map[string]struct{}
	// MovingTo maps a key in flight to the RESP address its move named
	// (empty: unknown), for CLUSTER ABORTMOVE.
	MovingTo map[string]string
	// Lease is the group's one move in progress (MIGRATE or CLUSTER
	// ABORTMOVE on any of its nodes), taken and dropped through the log
	// (TakeMove, DropMove): see Mover.
	Lease MoveLease
}

// MoveLease is who holds a group's move lease and until when. The zero
// value is free.
type MoveLease struct {
	Holder string // the Mover's holder id (node and call), "" when free
	Until  int64  // Unix ns of the log entry time after which it lapses
}

// Seeds are where another group can be reached: raft addresses for the
// directory's requests, RESP addresses for display and MEET.
type Seeds struct {
	Raft []string `json:"raft"`
	Resp []string `json:"resp,omitempty"`
}

// NewState returns the state of a group that owns nothing and knows no one.
func NewState() State {
	return State{Migrating: map[int]string{}, Importing: map[int]string{}, Groups: map[string]Seeds{},
		Moved: map[string]struct{}{}, MovingTo: map[string]string{}}
}

// Owns reports whether the group owns slot.
func (s *State) Owns(slot int) bool { return s.owned[slot/64]&(1<<(slot%64)) != 0 }

// SetOwned makes slot owned or not (a snapshot's restore; log entries go
// through Apply).
func (s *State) SetOwned(slot int, own bool) {
	if s.Owns(slot) == own {
		return
	}
	if own {
		s.owned[slot/64] |= 1 << (slot % 64)
		s.nOwned++
	} else {
		s.owned[slot/64] &^= 1 << (slot % 64)
		s.nOwned--
	}
}

// Sharded reports whether slot checks apply: the group owns a slot or
// knows another group. Otherwise it serves every key.
func (s *State) Sharded() bool { return s.nOwned > 0 || len(s.Groups) > 0 }

// Ranges returns the owned slots as inclusive, ascending ranges.
func (s *State) Ranges() [][2]int {
	var out [][2]int
	for slot := 0; slot < hashslot.Count; slot++ {
		if !s.Owns(slot) {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == slot-1 {
			out[n-1][1] = slot
		} else {
			out = append(out, [2]int{slot, slot})
		}
	}
	return out
}

// Clone returns a copy of s without the moves (Moved and MovingTo nil): a
// copy's readers decide about slots (the directory, CheckChange), and the
// sets can be large.
func (s *State) Clone() State {
	c := *s
	c.Migrating, c.Importing, c.Groups = maps.Clone(s.Migrating), maps.Clone(s.Importing), maps.Clone(s.Groups)
	c.Moved, c.MovingTo = nil, nil
	return c
}

// SlotOwner is Table's: Here for an owned slot, Elsewhere otherwise (a
// group's state does not know the other groups' slots).
func (s *State) SlotOwner(slot int) Owner {
	if s.Owns(slot) {
		return Here
	}
	return Elsewhere
}

// SlotMigrating is Table's.
func (s *State) SlotMigrating(slot int) bool {
	_, ok := s.Migrating[slot]
	return ok
}

// SlotImporting is Table's.
func (s *State) SlotImporting(slot int) bool {
	_, ok := s.Importing[slot]
	return ok
}

var _ Table = (*State)(nil)

// Action is what a Change does. The numbers are part of the log format
// (replication's codec writes them): never renumber one.
type Action byte

// The actions of a Change.
const (
	AddSlots  Action = 1 // own the ranges
	DelSlots  Action = 2 // own none of the ranges (and stop moving them)
	Migrating Action = 3 // an owned slot migrates to Group
	Importing Action = 4 // the slot is imported from Group
	Stable    Action = 5 // the slot neither migrates nor imports
	Own       Action = 6 // SETSLOT NODE naming this group: own, stop importing
	Disown    Action = 7 // SETSLOT NODE naming another group: disown, stop migrating
	Meet      Action = 8 // record another group (Group) and where to reach it (Seeds)
	List      Action = 9 // several changes, in order (a MULTI/EXEC's slot changes)
	// TakeMove takes the move lease for Holder, for Lease ns from the
	// entry's time; DropMove frees it if Holder holds it. Neither is ever
	// part of a List. See ApplyMove.
	TakeMove Action = 10
	DropMove Action = 11
)

// Change is one change of a State, as one log entry carries it.
type Change struct {
	Action Action
	Ranges [][2]int // AddSlots, DelSlots: inclusive ranges
	Slot   int      // Migrating, Importing, Stable, Own, Disown
	Group  string   // Migrating, Importing: the other group; Meet: the group met
	Seeds  Seeds    // Meet
	List   []Change // List (none of them a List)
	Holder string   // TakeMove, DropMove: the lease's holder id
	Lease  int64    // TakeMove: how long the lease lasts, ns (> 0)
}

// Apply changes s as c says. self is this group's name (a Meet of it is
// ignored).
func (s *State) Apply(c *Change, self string) {
	switch c.Action {
	case AddSlots, DelSlots:
		for _, r := range c.Ranges {
			for slot := r[0]; slot <= r[1]; slot++ {
				s.SetOwned(slot, c.Action == AddSlots)
				if c.Action == DelSlots {
					delete(s.Migrating, slot)
					delete(s.Importing, slot)
				}
			}
		}
	case Migrating:
		s.Migrating[c.Slot] = c.Group
		delete(s.Importing, c.Slot)
	case Importing:
		s.Importing[c.Slot] = c.Group
		delete(s.Migrating, c.Slot)
	case Stable:
		delete(s.Migrating, c.Slot)
		delete(s.Importing, c.Slot)
	case Own:
		s.SetOwned(c.Slot, true)
		delete(s.Migrating, c.Slot)
		delete(s.Importing, c.Slot)
	case Disown:
		s.SetOwned(c.Slot, false)
		delete(s.Migrating, c.Slot)
		delete(s.Importing, c.Slot)
		// The slot's keys are the new owner's now, wherever they are.
		for k := range s.Moved {
			if hashslot.Of([]byte(k)) == c.Slot {
				delete(s.Moved, k)
			}
		}
	case Meet:
		if c.Group != self {
			s.Groups[c.Group] = Seeds{Raft: slices.Clone(c.Seeds.Raft), Resp: slices.Clone(c.Seeds.Resp)}
		}
	case List:
		for i := range c.List {
			s.Apply(&c.List[i], self)
		}
	}
}

// ApplyMove applies a TakeMove or DropMove change at now (the entry's
// time, Unix ns), alike on every replica. A TakeMove is refused with a
// *MoveBusyError, changing nothing, while another holder's lease has not
// lapsed (Until > now); the holder taking it again renews it. A DropMove
// by anyone but the holder changes nothing (its lease lapsed and another
// took it). Other actions are Apply's and change nothing here.
func (s *State) ApplyMove(c *Change, now int64) error {
	switch c.Action {
	case TakeMove:
		if l := s.Lease; l.Holder != "" && l.Holder != c.Holder && l.Until > now {
			return &MoveBusyError{Holder: l.Holder, Until: l.Until}
		}
		s.Lease = MoveLease{Holder: c.Holder, Until: now + c.Lease}
	case DropMove:
		if s.Lease.Holder == c.Holder {
			s.Lease = MoveLease{}
		}
	}
	return nil
}

// The move notes: what an applied op changed in the moves.

// Restored notes that key came back (a RESTORE applied here): no longer a
// tombstone, no longer in flight.
func (s *State) Restored(key []byte) {
	delete(s.Moved, string(key))
	delete(s.MovingTo, string(key))
}

// MovedOut notes that key is in flight to dest (a RESP address; empty:
// unknown).
func (s *State) MovedOut(key []byte, dest string) { s.MovingTo[string(key)] = dest }

// MoveDone notes that key's move completed: while its slot (owned)
// migrates, it becomes a tombstone.
func (s *State) MoveDone(key []byte) {
	delete(s.MovingTo, string(key))
	if slot := hashslot.Of(key); s.SlotMigrating(slot) && s.Owns(slot) {
		s.Moved[string(key)] = struct{}{}
	}
}

// MoveAborted notes that key's move was put back (no longer in flight).
func (s *State) MoveAborted(key []byte) { delete(s.MovingTo, string(key)) }

// Flushed notes that the keyspace was emptied: nothing is in flight.
func (s *State) Flushed() { clear(s.MovingTo) }

// Tombstone reports whether key is in Moved.
func (s *State) Tombstone(key []byte) bool {
	_, ok := s.Moved[string(key)]
	return ok
}

// OwnedCount returns the number of slots owned.
func (s *State) OwnedCount() int { return s.nOwned }
