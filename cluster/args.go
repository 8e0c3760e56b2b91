package cluster

import (
	"net"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
)

// The slot arguments of the CLUSTER commands that change slots (ADDSLOTS,
// DELSLOTS, their RANGE forms, SETSLOT, ABORTMOVE), of COUNTKEYSINSLOT,
// GETKEYSINSLOT, FAILOVER and MEET, parsed
// into this package's types. Refusals are typed (errors.go); the wire
// layer words them.

// ParseSlotArg parses a slot of ADDSLOTS, DELSLOTS, SETSLOT or ABORTMOVE:
// anything but an integer in [0, 16384) is ErrBadSlot, as Redis answers a
// non-integer too.
func ParseSlotArg(b []byte) (int, error) {
	n, err := engine.ParseInt(b)
	if err != nil || n < 0 || n >= hashslot.Count {
		return 0, ErrBadSlot
	}
	return int(n), nil
}

// ParseKeysInSlot parses COUNTKEYSINSLOT slot or GETKEYSINSLOT slot
// count (args after the subcommand): a non-integer is engine's error; a
// slot out of [0, 16384) is ErrInvalidSlot for COUNTKEYSINSLOT,
// ErrInvalidSlotOrCount for GETKEYSINSLOT, as is a negative count. count
// is 0 for COUNTKEYSINSLOT.
func ParseKeysInSlot(args [][]byte) (slot int, count int64, err error) {
	invalid := ErrInvalidSlot
	if len(args) > 1 {
		invalid = ErrInvalidSlotOrCount
	}
	n, err := engine.ParseInt(args[0])
	if err != nil {
		return 0, 0, err
	}
	if n < 0 || n >= hashslot.Count {
		return 0, 0, invalid
	}
	if len(args) > 1 {
		if count, err = engine.ParseInt(args[1]); err != nil {
			return 0, 0, err
		}
		if count < 0 {
			return 0, 0, invalid
		}
	}
	return int(n), count, nil
}

// ParseAbortMove parses ABORTMOVE slot [FORCE] (args after the
// subcommand).
func ParseAbortMove(args [][]byte) (slot int, force bool, err error) {
	if slot, err = ParseSlotArg(args[0]); err != nil {
		return 0, false, err
	}
	force = len(args) == 2
	if force && !strings.EqualFold(string(args[1]), "force") {
		return 0, false, engine.ErrSyntax
	}
	return slot, force, nil
}

// ParseFailover parses FAILOVER's option (args after the subcommand): none
// is nil; FORCE and TAKEOVER, which a group never needs (one whose leader
// is down elects another by itself), are ErrFailoverOption.
func ParseFailover(args [][]byte) error {
	if len(args) == 0 {
		return nil
	}
	if o := strings.ToLower(string(args[0])); o != "force" && o != "takeover" {
		return engine.ErrSyntax
	}
	return ErrFailoverOption
}

// ParseSlotList parses ADDSLOTS / DELSLOTS arguments: each a slot, none
// twice (a *SlotRepeatError).
func ParseSlotList(args [][]byte) ([]int, error) {
	slots := make([]int, 0, len(args))
	seen := map[int]bool{}
	for _, a := range args {
		s, err := ParseSlotArg(a)
		if err != nil {
			return nil, err
		}
		if seen[s] {
			return nil, &SlotRepeatError{Slot: s}
		}
		seen[s] = true
		slots = append(slots, s)
	}
	return slots, nil
}

// ParseSlotRanges parses ADDSLOTSRANGE / DELSLOTSRANGE arguments: pairs of
// start and end slots (inclusive; a start past its end is a
// *SlotOrderError), no slot twice. An odd count is engine.ErrArity, as in
// Redis.
func ParseSlotRanges(args [][]byte) ([]int, error) {
	if len(args)%2 != 0 {
		return nil, engine.ErrArity
	}
	var slots []int
	seen := map[int]bool{}
	for i := 0; i < len(args); i += 2 {
		lo, err := ParseSlotArg(args[i])
		if err != nil {
			return nil, err
		}
		hi, err := ParseSlotArg(args[i+1])
		if err != nil {
			return nil, err
		}
		if lo > hi {
			return nil, &SlotOrderError{First: lo, Last: hi}
		}
		for s := lo; s <= hi; s++ {
			if seen[s] {
				return nil, &SlotRepeatError{Slot: s}
			}
			seen[s] = true
			slots = append(slots, s)
		}
	}
	return slots, nil
}

// ParseSetSlot parses SETSLOT's arguments after the subcommand: slot
// action [node-id]. A wrong action or argument count is ErrSetSlotSyntax.
func ParseSetSlot(args [][]byte) (SlotChange, error) {
	if len(args) < 2 {
		return SlotChange{}, ErrSetSlotSyntax
	}
	slot, err := ParseSlotArg(args[0])
	if err != nil {
		return SlotChange{}, err
	}
	var a SlotAction
	switch strings.ToLower(string(args[1])) {
	case "importing":
		a = SlotImporting
	case "migrating":
		a = SlotMigrating
	case "node":
		a = SlotNode
	case "stable":
		if len(args) != 2 {
			return SlotChange{}, ErrSetSlotSyntax
		}
		return SlotChange{Kind: SlotSet, Slot: slot, Action: SlotStable}, nil
	default:
		return SlotChange{}, ErrSetSlotSyntax
	}
	if len(args) != 3 {
		return SlotChange{}, ErrSetSlotSyntax
	}
	return SlotChange{Kind: SlotSet, Slot: slot, Action: a, NodeID: string(args[2])}, nil
}

// ParseMeet parses MEET's host, port and optional bus port into the RESP
// address to meet; a port outside [0, 65535] is a *PortError.
func ParseMeet(args [][]byte) (string, error) {
	port, err := strconv.Atoi(string(args[1]))
	if err != nil || port < 0 || port > 65535 {
		return "", &PortError{Value: string(args[1])}
	}
	if len(args) > 2 {
		if bus, err := strconv.Atoi(string(args[2])); err != nil || bus < 0 || bus > 65535 {
			return "", &PortError{Bus: true, Value: string(args[2])}
		}
	}
	return net.JoinHostPort(string(args[0]), strconv.Itoa(port)), nil
}
