package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cellserver/cellserver/engine"
)

// One key's state outside a snapshot: the bare state encoding (AppendState,
// ParseState), which the replication log carries, and the DUMP payload
// (EncodeDump, DecodeDump), which a client carries from DUMP to RESTORE.
// Both are described in FORMAT.md ("DUMP payload").

// DumpMagic opens every DUMP payload. Its first byte, 0xCE, can never open a
// Redis DUMP payload, which starts with an RDB value type (a small number,
// below 32 in every Redis release so far), so the two are told apart by the
// first byte.
const DumpMagic = "\xceCELL"

// DumpVersion is the newest DUMP payload version this package writes and
// reads. Version 2 is the payload of a concurrency key (its leases); every
// other key is still written as version 1, which older builds read.
const DumpVersion = 2

// dumpOverhead is the bytes of a DUMP payload besides the state: magic,
// version and checksum.
const dumpOverhead = len(DumpMagic) + 1 + crcLen

// Errors of DecodeDump, wrapped with detail (match them with errors.Is).
var (
	// ErrDumpNotCellserver is returned for a payload that does not start
	// with DumpMagic: a Redis RDB payload, or anything else.
	ErrDumpNotCellserver = errors.New("DUMP payload is not a cellserver payload")
	// ErrDumpVersion is returned for a cellserver payload of a version this
	// build does not read.
	ErrDumpVersion = errors.New("unsupported DUMP payload version")
	// ErrDumpChecksum is returned for a cellserver payload that is
	// truncated, fails its checksum or holds an invalid state.
	ErrDumpChecksum = errors.New("DUMP payload checksum mismatch or corrupt state")
)

// AppendState appends the bare encoding of st (a snapshot record's state
// part, its expiry stored as an absolute instant) to dst and returns the
// extended slice. st must pass ValidateState (every state a store holds
// does); ParseState refuses any other.
func AppendState(dst []byte, st *engine.State) []byte {
	return appendState(dst, 0, st)
}

// ParseState decodes one state AppendState wrote at the start of b and
// returns it with the bytes after it. The state is validated
// (ValidateState); errors match ErrCorrupt. A sliding log's entries are a
// fresh slice, not aliasing b.
func ParseState(b []byte) (st engine.State, rest []byte, err error) {
	p := recordParser{buf: b}
	st, _, err = p.state(nil)
	if err != nil {
		return engine.State{}, nil, err
	}
	if err := ValidateState(&st); err != nil {
		return engine.State{}, nil, corruptf(0, "state: %v", err)
	}
	return st, b[p.pos:], nil
}

// EncodeDump returns the DUMP payload of st: DumpMagic, DumpVersion, the
// state (AppendState) and the CRC-32C of everything before it, little
// endian. st must pass ValidateState.
func EncodeDump(st *engine.State) []byte {
	b := make([]byte, 0, dumpOverhead+48)
	b = append(b, DumpMagic...)
	v := byte(1)
	if st.Kind == engine.KindConcurrency {
		v = 2
	}
	b = append(b, v)
	b = AppendState(b, st)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeDump decodes and verifies a DUMP payload, returning its state
// (validated). The checks run from the outside in: the magic
// (ErrDumpNotCellserver), the version (ErrDumpVersion), then the length,
// the checksum and the state, which must fill the payload exactly
// (ErrDumpChecksum).
func DecodeDump(b []byte) (engine.State, error) {
	if err := checkDumpMagic(b); err != nil {
		return engine.State{}, err
	}
	if len(b) < dumpOverhead {
		return engine.State{}, fmt.Errorf("%w: payload of %d bytes is truncated", ErrDumpChecksum, len(b))
	}
	if v := b[len(DumpMagic)]; v < 1 || v > DumpVersion {
		return engine.State{}, fmt.Errorf("%w: version %d, this build reads 1..%d", ErrDumpVersion, v, DumpVersion)
	}
	body, sum := b[:len(b)-crcLen], binary.LittleEndian.Uint32(b[len(b)-crcLen:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return engine.State{}, fmt.Errorf("%w: stored 0x%08x, computed 0x%08x", ErrDumpChecksum, sum, got)
	}
	st, rest, err := ParseState(body[len(DumpMagic)+1:])
	if err != nil {
		return engine.State{}, fmt.Errorf("%w: %v", ErrDumpChecksum, err)
	}
	if len(rest) != 0 {
		return engine.State{}, fmt.Errorf("%w: %d bytes after the state", ErrDumpChecksum, len(rest))
	}
	return st, nil
}

// checkDumpMagic refuses a payload that is not ours. A payload shorter than
// the magic but agreeing with it so far is ours, truncated: that is left to
// the length check (ErrDumpChecksum).
func checkDumpMagic(b []byte) error {
	n := min(len(b), len(DumpMagic))
	if n == 0 || string(b[:n]) != DumpMagic[:n] {
		what := "empty payload"
		if len(b) > 0 {
			what = fmt.Sprintf("first byte 0x%02x", b[0])
		}
		return fmt.Errorf("%w: %s", ErrDumpNotCellserver, what)
	}
	return nil
}
