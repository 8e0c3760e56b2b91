package cluster

import "github.com/cellserver/cellserver/internal/hashslot"

// The slot rule: whether a command's keys are served by this group, and if
// not, where the client goes. It is written once, here, and run in three
// places that know different things (Mode): the state machine applying a
// write, and the wire before a write goes to the log or before a read is
// served from the node's keyspace.

// Owner says who serves a slot, as a Table knows it.
type Owner int8

// The owners of a slot.
const (
	Nobody    Owner = iota // no group owns the slot
	Here                   // this group owns it
	Elsewhere              // another group owns it (or, for a State, any group but this one)
)

// Table is the slot state Check reads: a group's replicated State (at
// apply time) or a node's Routing (on the wire).
type Table interface {
	// SlotOwner says who serves slot.
	SlotOwner(slot int) Owner
	// SlotMigrating reports whether slot, owned here, migrates out.
	SlotMigrating(slot int) bool
	// SlotImporting reports whether this group imports slot.
	SlotImporting(slot int) bool
}

// Keys is what Check reads of the keyspace, for keys of slots this group
// owns. Implementations must agree with one another at one instant (the
// apply instant, or the read instant).
type Keys interface {
	// Here reports whether key is live in this group's keyspace.
	Here(key []byte) bool
	// InFlight reports whether key is being moved out (MIGRATE's first
	// phase): absent for reads, refused for writes, until the move ends.
	InFlight(key []byte) bool
	// Moved reports whether key is a tombstone: moved away while its slot
	// migrated (State.Moved).
	Moved(key []byte) bool
}

// Mode is what the caller of Check knows, and so what Check decides.
type Mode uint8

// The modes of Check.
const (
	// Apply: the group's state machine, applying a write, from the
	// replicated State, so that every replica decides alike. It knows
	// only its own group: a key not served here is Moved, whatever owns
	// it (the wire words it from its Routing). Keys of several slots are
	// fine when every one is served here (owned, or imported after
	// ASKING).
	Apply Mode = iota
	// Route: the wire, before a write goes to the group's log. It decides
	// only what the log cannot: another group's slots, CROSSSLOT, ASKING.
	// The keys of a slot this group owns are the log's to decide (Apply),
	// and after ASKING a write goes to the log even when this node does
	// not know the slot is imported (a follower that has not applied
	// IMPORTING yet): Apply refuses it if it is not.
	Route
	// Read: the wire, before a read served from this node's keyspace (or a
	// transaction's check at EXEC): everything, keys included.
	Read
	// Queue: the wire, queueing a command of a transaction: only the
	// slots (the keys are decided at EXEC, in Read mode); after ASKING,
	// only a slot this node knows is imported.
	Queue
)

// Query is one command's keys and circumstances.
type Query struct {
	Keys [][]byte
	Mode Mode
	// Asking: the command came right after ASKING (or is a RESTORE sent by
	// MIGRATE, which implies it).
	Asking bool
	// Restore: the op brings keys back (RESTORE): a tombstone does not
	// count against it.
	Restore bool
	// OneSlot: the keys must share one slot even when this group serves
	// them all (a transaction, as Redis Cluster requires).
	OneSlot bool
	// Open: the command runs on either group of a slot being moved,
	// whoever owns it (MIGRATE, as in Redis Cluster). Wire modes only.
	Open bool
}

// Kind is the kind of a Verdict.
type Kind uint8

// The verdicts of Check.
const (
	Serve       Kind = iota // served here
	ServeAsking             // served here, as an ASKING command of a slot imported (or, in Route, maybe imported) here
	InFlight                // a key is being moved out: the client retries (Slot is its slot)
	Moved                   // Slot is served by another group (Redirect there)
	Ask                     // Slot migrates out and none of the keys is here: the target serves them after ASKING
	TryAgain                // the keys of Slot are split between here and the target, or one is a tombstone
	CrossSlot               // keys of several slots, not all served here (or OneSlot)
	Unassigned              // no group owns Slot
)

// Verdict is Check's decision about a query. Slot is the slot concerned
// (for Moved, Ask, TryAgain, InFlight, Unassigned); -1 when none.
type Verdict struct {
	Kind Kind
	Slot int
}

// Served reports whether the command runs here.
func (v Verdict) Served() bool { return v.Kind == Serve || v.Kind == ServeAsking }

// Err returns the sentinel of v (ErrMoved for Moved and Unassigned, the
// group knowing no better), nil when served. InFlight has no sentinel here:
// the keyspace refuses a key in flight itself (shards.ErrMoving), under
// the key's lock, so Err returns nil for it too; callers that answer it
// before running anything check the Kind.
func (v Verdict) Err() error {
	switch v.Kind {
	case Moved, Unassigned:
		return ErrMoved
	case Ask:
		return ErrAsk
	case TryAgain:
		return ErrTryAgain
	case CrossSlot:
		return ErrCrossSlot
	}
	return nil
}

// Check decides q under t, reading the keyspace through k (which Route and
// Queue modes never read). It only reads t, k and q, so it is as safe for
// concurrent use as they are, and it does not allocate. The rule, in order
// of precedence:
//
//  1. No keys: served.
//  2. Open (wire modes): keys of one slot that this group imports or
//     migrates run here.
//  3. Apply: a key of a slot not owned here, unless imported after ASKING,
//     is Moved (the first such key's slot). Wire modes: when this group
//     owns every key's slot, go on to 5 (OneSlot: keys of several slots
//     are CrossSlot first); otherwise keys of several slots are CrossSlot,
//     and the one slot is ServeAsking after ASKING when imported here (in
//     Route, unless Open: after ASKING whatever this node knows, see
//     Route), else Moved (Unassigned when no group owns it).
//  4. Route, Queue: every key's slot owned here: served (the log, or
//     EXEC, decides the keys).
//  5. The keys of owned slots (Apply, Read): a tombstone (except for a
//     RESTORE) of a slot no longer migrating is TryAgain, whatever else;
//     in a migrating slot a key is here (live or in flight) or away
//     (absent, or a tombstone). None away: served, or InFlight when a
//     key (of any slot) is in flight. All away, one slot: Ask. Otherwise
//     (some of each, or away keys among several slots, where one ASK
//     cannot name them all): TryAgain.
func Check(t Table, k Keys, q *Query) Verdict {
	if len(q.Keys) == 0 {
		return Verdict{Serve, -1}
	}
	slot, cross, mine, notServed := -1, false, true, -1
	for _, key := range q.Keys {
		s := hashslot.Of(key)
		if slot < 0 {
			slot = s
		} else if s != slot {
			cross = true
		}
		if t.SlotOwner(s) != Here {
			mine = false
			if notServed < 0 && !(q.Asking && t.SlotImporting(s)) {
				notServed = s
			}
		}
	}
	if q.Mode == Apply {
		if notServed >= 0 {
			return Verdict{Moved, notServed}
		}
		v := checkKeys(t, k, q, cross)
		if v.Kind == Serve && !mine {
			v.Kind = ServeAsking // some keys imported, after ASKING
		}
		return v
	}
	switch {
	case q.Open && !cross && (t.SlotImporting(slot) || t.SlotMigrating(slot)):
		return Verdict{Serve, -1}
	case cross && (q.OneSlot || !mine):
		return Verdict{CrossSlot, -1}
	case mine && (q.Mode == Route || q.Mode == Queue):
		return Verdict{Serve, -1}
	case mine:
		return checkKeys(t, k, q, cross)
	case q.Asking && (q.Mode == Route && !q.Open || t.SlotImporting(slot)):
		return Verdict{ServeAsking, -1}
	case t.SlotOwner(slot) == Nobody:
		return Verdict{Unassigned, slot}
	}
	return Verdict{Moved, slot}
}

// checkKeys is step 5 of Check: the keys of slots this group owns (others,
// imported after ASKING, are not looked at).
func checkKeys(t Table, k Keys, q *Query, cross bool) Verdict {
	here, away, gone, inflight := 0, 0, -1, -1
	awaySlot := -1
	for _, key := range q.Keys {
		s := hashslot.Of(key)
		if t.SlotOwner(s) != Here {
			continue
		}
		migrating := t.SlotMigrating(s)
		switch {
		case !q.Restore && k.Moved(key):
			if !migrating {
				gone = s
			} else if away++; awaySlot < 0 {
				awaySlot = s
			}
		case !migrating:
			// A missing key of a stable slot is a fresh key; one in
			// flight (a move left open by SETSLOT STABLE) is not.
			if inflight < 0 && k.InFlight(key) {
				inflight = s
			}
		case k.Here(key):
			here++
		case k.InFlight(key):
			here++
			if inflight < 0 {
				inflight = s
			}
		default:
			if away++; awaySlot < 0 {
				awaySlot = s
			}
		}
	}
	switch {
	case gone >= 0:
		return Verdict{TryAgain, gone}
	case away == 0 && inflight >= 0:
		return Verdict{InFlight, inflight}
	case away == 0:
		return Verdict{Serve, -1}
	case here == 0 && !cross:
		return Verdict{Ask, awaySlot}
	}
	return Verdict{TryAgain, awaySlot}
}
