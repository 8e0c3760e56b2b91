package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cellserver/cellserver/engine"
)

// Version is the format version this package writes. The decoder reads every
// version listed in FORMAT.md up to this one (today: 1 and 2). Version 2
// adds the concurrency kind's records (kind 7, with their leases); a
// version-1 file never holds one, and a build that reads version 1 only
// refuses a version-2 file with ErrVersion rather than calling it corrupt.
const Version = 2

// Magic opens every snapshot file.
const Magic = "CELLSNAP"

// Limits of format version 1. The decoder refuses a file that exceeds one
// of them before allocating for it, so a corrupt length field can never make
// it allocate gigabytes.
const (
	// MaxMetaLen bounds the opaque metadata blob: 64 MiB.
	MaxMetaLen = 64 << 20
	// MaxKeyLen bounds a key: 256 MiB - 1 bytes (the keyspace's own limit).
	MaxKeyLen = 1<<28 - 1
	// MaxLogEntries bounds a sliding log's entries: 2^25 (each admitted
	// entry counts at least 1, and a log's limit is far below this).
	MaxLogEntries = 1 << 25
	// MaxLeases bounds a concurrency key's leases (engine.MaxLeases).
	MaxLeases = engine.MaxLeases
	// MaxBlockLen bounds a block's payload: 1 GiB. A single record larger
	// than this cannot be written.
	MaxBlockLen = 1 << 30
	// MaxShards bounds the header's shard count: 2^20.
	MaxShards = 1 << 20
)

const (
	headerFixedLen = 8 + 4 + 4 + 8 + 4 + 4 // magic, version, flags, created, shards, meta length
	blockHeadLen   = 1 + 4 + 4             // tag, payload length, record count
	trailerLen     = 1 + 8 + 4             // tag, key count, file checksum
	crcLen         = 4

	tagBlock   = 'B'
	tagTrailer = 'T'

	// blockTarget is the payload size at which the encoder closes a block:
	// large enough that per-block overhead (13 bytes) is noise, small enough
	// that a block fits in cache while its checksum is computed.
	blockTarget = 64 << 10

	// Record mode bits: the field is stored relative to ExpireAt.
	modeRelA = 1 << 0
	modeRelB = 1 << 1
	modeRelC = 1 << 2
	modeMask = modeRelA | modeRelB | modeRelC
)

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64);
// read-only after initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the information a snapshot carries before its records.
type Header struct {
	// Version is the format version of the file. The decoder sets it; the
	// encoder always writes Version and ignores this field.
	Version uint32
	// Created is the instant the capture was taken, in Unix nanoseconds:
	// every record was live (ExpireAt > Created) at that instant. Restores
	// that must not read a clock (a Raft replica) may use it as "now".
	Created int64
	// Shards is the number of shards of the store that was captured,
	// 0..MaxShards. It is informational: a loader routes every key by its
	// own hash, so a snapshot loads into a store with any shard count.
	Shards int
	// Meta is an opaque blob for the snapshot's user (replication stores
	// cluster membership and the last applied log time in it); at most
	// MaxMetaLen bytes, nil when absent.
	Meta []byte
}

// Sentinel errors. Decoding errors are *CorruptError values that match
// ErrCorrupt (and ErrTruncated when the input ended early) with errors.Is.
var (
	// ErrCorrupt is matched by every error about malformed snapshot bytes:
	// a bad magic, a checksum mismatch, an invalid record or state, or
	// a truncated file.
	ErrCorrupt = errors.New("snapshot corrupt")
	// ErrTruncated is matched by a *CorruptError whose input ended before
	// the trailer (it matches ErrCorrupt too).
	ErrTruncated = errors.New("snapshot truncated")
	// ErrVersion is returned for a well-formed file of a format version this
	// build cannot read (a newer one). It does not match ErrCorrupt: such a
	// file is not damaged and must not be discarded.
	ErrVersion = errors.New("unsupported snapshot format version")
	// ErrInvalidState is returned by ValidateState (and so by Encoder.Encode)
	// for a state that no limiter can hold.
	ErrInvalidState = errors.New("invalid limiter state")
	// ErrClosed is returned by Encoder.Encode after Close.
	ErrClosed = errors.New("snapshot encoder closed")
)

// CorruptError describes malformed snapshot input: what is wrong and the
// byte offset (from the start of the snapshot) where it was found.
type CorruptError struct {
	// Offset is the byte offset of the faulty field, or of the end of the
	// input for a truncation.
	Offset int64
	// What says what is wrong, e.g. "block checksum mismatch".
	What string
	// Truncated is true when the input ended before the trailer.
	Truncated bool
}

// Error implements error.
func (e *CorruptError) Error() string {
	if e.Truncated {
		return fmt.Sprintf("snapshot truncated at offset %d: %s", e.Offset, e.What)
	}
	return fmt.Sprintf("snapshot corrupt at offset %d: %s", e.Offset, e.What)
}

// Is makes errors.Is match ErrCorrupt, and ErrTruncated for a truncation.
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || (e.Truncated && target == ErrTruncated)
}

func corruptf(off int64, format string, args ...any) error {
	return &CorruptError{Offset: off, What: fmt.Sprintf(format, args...)}
}

// ValidateState reports (as an error matching ErrInvalidState) whether st
// is a state its limiter can hold, following the state layouts documented
// in package engine:
//
//   - gcra: A (the TAT) == ExpireAt; B == C == 0.
//   - token bucket, continuous: 1 <= C <= MaxCount, 0 <= B < C, ExpireAt is
//     A or A+1. INTERVAL (C == -1, or -2 written by a WAIT reservation):
//     0 <= B <= MaxCount, A <= ExpireAt.
//   - leaky bucket: 1 <= C <= MaxCount, 0 <= B < C, ExpireAt is A or A+1.
//   - fixed window: 0 <= B <= MaxCount, C == 0, 0 < ExpireAt-A <= MaxPeriod.
//   - sliding window: 0 <= B, C <= MaxCount, 0 < ExpireAt-A <= 2×MaxPeriod.
//   - sliding log: 1..MaxLogEntries entries, instants strictly increasing,
//     each counting 1..MaxCount, summing to A <= MaxCount; B == C == 0; the
//     newest entry before ExpireAt by at most MaxPeriod.
//   - concurrency: 1..MaxLeases leases and waiters with distinct ids of
//     1..MaxLeaseID bytes, each holding (or, waiting, asking for) 1..MaxCount
//     units, the held ones summing to A <= MaxCount; a waiter's max in
//     units..MaxCount and ttl in 1..MaxPeriod; 0 <= B; C the number of
//     waiters; ExpireAt is the latest lease expiry or waiter deadline and
//     none is more than MaxSpan before it.
//
// Only a sliding log holds Log entries, and only a concurrency key Leases. The encoder refuses, and the decoder
// rejects, any state that fails this, so a snapshot never carries garbage
// state in either direction.
func ValidateState(st *engine.State) error {
	if !st.Kind.Valid() {
		return invalidf("kind %d is not a limiter kind", st.Kind)
	}
	if st.Kind != engine.KindSlidingLog && len(st.Log) != 0 {
		return invalidf("%s state holds %d log entries", st.Kind, len(st.Log))
	}
	if st.Kind != engine.KindConcurrency && len(st.Leases) != 0 {
		return invalidf("%s state holds %d leases", st.Kind, len(st.Leases))
	}
	switch st.Kind {
	case engine.KindGCRA:
		if st.A != st.ExpireAt || st.B != 0 || st.C != 0 {
			return invalidf("gcra state A=%d B=%d C=%d is not (expiry %d, 0, 0)", st.A, st.B, st.C, st.ExpireAt)
		}
	case engine.KindTokenBucket:
		if st.C == -1 || st.C == -2 { // INTERVAL variant (-2: reserved ahead)
			if !inCount(st.B) || st.A > st.ExpireAt {
				return invalidf("token bucket (interval) state A=%d B=%d expiry %d out of range", st.A, st.B, st.ExpireAt)
			}
			return nil
		}
		return validateDrain(st)
	case engine.KindLeakyBucket:
		return validateDrain(st)
	case engine.KindFixedWindow:
		if !inCount(st.B) || st.C != 0 || !inSpan(st.A, st.ExpireAt, engine.MaxPeriod) {
			return invalidf("fixed window state A=%d B=%d C=%d expiry %d out of range", st.A, st.B, st.C, st.ExpireAt)
		}
	case engine.KindSlidingWindow:
		if !inCount(st.B) || !inCount(st.C) || !inSpan(st.A, st.ExpireAt, 2*engine.MaxPeriod) {
			return invalidf("sliding window state A=%d B=%d C=%d expiry %d out of range", st.A, st.B, st.C, st.ExpireAt)
		}
	case engine.KindSlidingLog:
		return validateLog(st)
	case engine.KindConcurrency:
		return validateLeases(st)
	}
	return nil
}

func validateLeases(st *engine.State) error {
	n := len(st.Leases)
	if n == 0 || n > MaxLeases {
		return invalidf("concurrency key of %d leases (range 1..%d)", n, MaxLeases)
	}
	if st.B < 0 || st.C < 0 {
		return invalidf("concurrency state B=%d C=%d is not (>= 0, >= 0)", st.B, st.C)
	}
	var sum, waiters int64
	latest := st.Leases[0].ExpireAt
	ids := make(map[string]struct{}, n)
	for i, l := range st.Leases {
		if len(l.ID) == 0 || len(l.ID) > engine.MaxLeaseID {
			return invalidf("lease %d id of %d bytes (range 1..%d)", i, len(l.ID), engine.MaxLeaseID)
		}
		if _, dup := ids[l.ID]; dup {
			return invalidf("lease %d id %q held twice", i, l.ID)
		}
		ids[l.ID] = struct{}{}
		if l.Units < 1 || l.Units > engine.MaxCount {
			return invalidf("lease %d holds %d units (range 1..%d)", i, l.Units, engine.MaxCount)
		}
		if l.Waiting() {
			waiters++
			if l.Max < l.Units || l.Max > engine.MaxCount || l.TTL < 1 || l.TTL > engine.MaxPeriod {
				return invalidf("waiter %d max %d or ttl %d out of range", i, l.Max, l.TTL)
			}
		} else if l.Max != 0 {
			return invalidf("lease %d holds a max %d", i, l.Max)
		} else if sum += l.Units; sum > engine.MaxCount {
			return invalidf("leases hold more than %d units", engine.MaxCount)
		}
		if l.ExpireAt > st.ExpireAt || uint64(st.ExpireAt)-uint64(l.ExpireAt) > uint64(engine.MaxSpan) {
			return invalidf("lease %d expiry %d out of range of the key's %d", i, l.ExpireAt, st.ExpireAt)
		}
		latest = max(latest, l.ExpireAt)
	}
	if sum != st.A {
		return invalidf("concurrency A=%d differs from its leases' units %d", st.A, sum)
	}
	if waiters != st.C {
		return invalidf("concurrency C=%d differs from its %d waiters", st.C, waiters)
	}
	if latest != st.ExpireAt {
		return invalidf("concurrency expiry %d is not its latest lease's %d", st.ExpireAt, latest)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidState, fmt.Sprintf(format, args...))
}

// inCount reports whether n is a count a state may hold: 0..MaxCount.
func inCount(n int64) bool { return n >= 0 && n <= engine.MaxCount }

// inSpan reports whether 0 < to-from <= max, without overflow.
func inSpan(from, to, max int64) bool {
	return to > from && uint64(to)-uint64(from) <= uint64(max)
}

// validateDrain checks the continuous token or leaky bucket layout.
func validateDrain(st *engine.State) error {
	if st.C < 1 || st.C > engine.MaxCount || st.B < 0 || st.B >= st.C ||
		st.ExpireAt < st.A || uint64(st.ExpireAt)-uint64(st.A) > 1 {
		return invalidf("%s state A=%d B=%d C=%d expiry %d out of range", st.Kind, st.A, st.B, st.C, st.ExpireAt)
	}
	return nil
}

func validateLog(st *engine.State) error {
	n := len(st.Log)
	if n == 0 || n > MaxLogEntries {
		return invalidf("sliding log of %d entries (range 1..%d)", n, MaxLogEntries)
	}
	if st.B != 0 || st.C != 0 {
		return invalidf("sliding log state B=%d C=%d is not (0, 0)", st.B, st.C)
	}
	var sum int64
	for i, e := range st.Log {
		if e.Count < 1 || e.Count > engine.MaxCount {
			return invalidf("log entry %d counts %d (range 1..%d)", i, e.Count, engine.MaxCount)
		}
		if i > 0 && e.At <= st.Log[i-1].At {
			return invalidf("log entry %d at %d is not after entry %d at %d", i, e.At, i-1, st.Log[i-1].At)
		}
		// Both terms are at most MaxCount (2^40), so the sum cannot
		// overflow before the check stops it.
		if sum += e.Count; sum > engine.MaxCount {
			return invalidf("log counts sum beyond %d", engine.MaxCount)
		}
	}
	if sum != st.A {
		return invalidf("sliding log A=%d differs from its entries' sum %d", st.A, sum)
	}
	if !inSpan(st.Log[n-1].At, st.ExpireAt, engine.MaxPeriod) {
		return invalidf("sliding log newest entry at %d, expiry %d out of range", st.Log[n-1].At, st.ExpireAt)
	}
	return nil
}

// zigzag maps signed to unsigned so that small magnitudes encode short.
func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// uvarintLen is the length of u as a uvarint.
func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// appendRecord appends the encoding of one record to b. created is the
// header's creation time, against which ExpireAt is stored. The state must
// have passed ValidateState.
//
// Differences are taken with wrapping int64 arithmetic, which the decoder
// undoes exactly, so every int64 value round-trips whatever its magnitude.
func appendRecord(b []byte, created int64, key []byte, st *engine.State) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return appendState(b, created, st)
}

// appendState appends the state part of a record (kind, mode, expiry, A, B,
// C and a sliding log's entries), its expiry stored against created. It is
// shared by snapshot records, AppendState and DUMP payloads.
func appendState(b []byte, created int64, st *engine.State) []byte {
	// Each of A, B, C is stored either as is or relative to ExpireAt,
	// whichever is shorter: timestamps (a TAT, a window start) are close to
	// the expiry, counts are close to zero. Ties store the value as is.
	var mode byte
	vals := [3]int64{st.A, st.B, st.C}
	for i, v := range vals {
		if rel := v - st.ExpireAt; uvarintLen(zigzag(rel)) < uvarintLen(zigzag(v)) {
			mode |= 1 << i
			vals[i] = rel
		}
	}
	b = append(b, byte(st.Kind), mode)
	b = binary.AppendUvarint(b, zigzag(st.ExpireAt-created))
	for _, v := range vals {
		b = binary.AppendUvarint(b, zigzag(v))
	}
	if st.Kind == engine.KindSlidingLog {
		b = binary.AppendUvarint(b, uint64(len(st.Log)))
		prev := st.ExpireAt
		for i, e := range st.Log {
			if i == 0 {
				b = binary.AppendUvarint(b, zigzag(e.At-prev))
			} else {
				b = binary.AppendUvarint(b, uint64(e.At-prev))
			}
			prev = e.At
			b = binary.AppendUvarint(b, uint64(e.Count))
		}
	}
	if st.Kind == engine.KindConcurrency {
		// Version 2: the leases, each id, units and expiry before the
		// key's (ExpireAt - lease expiry >= 0).
		b = binary.AppendUvarint(b, uint64(len(st.Leases)))
		for _, l := range st.Leases {
			b = binary.AppendUvarint(b, uint64(len(l.ID)))
			b = append(b, l.ID...)
			b = binary.AppendUvarint(b, uint64(l.Units))
			b = binary.AppendUvarint(b, uint64(st.ExpireAt)-uint64(l.ExpireAt))
			if st.C > 0 {
				// Waiters in line (C of them): each entry then tells
				// its ttl, 0 for a held lease, and a waiter its max.
				b = binary.AppendUvarint(b, uint64(l.TTL))
				if l.TTL > 0 {
					b = binary.AppendUvarint(b, uint64(l.Max))
				}
			}
		}
	}
	return b
}

// recordParser decodes records out of one verified block payload.
type recordParser struct {
	buf     []byte
	pos     int
	base    int64 // offset of buf[0] in the snapshot
	created int64
}

func (p *recordParser) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(p.buf[p.pos:])
	if n <= 0 {
		if n == 0 {
			return 0, corruptf(p.base+int64(p.pos), "record %s runs past the end of its block", what)
		}
		return 0, corruptf(p.base+int64(p.pos), "record %s overflows 64 bits", what)
	}
	p.pos += n
	return v, nil
}

// next decodes the record at p.pos. The key aliases p.buf. With logBuf
// non-nil the log is decoded into it (reused) instead of a fresh slice.
func (p *recordParser) next(logBuf []engine.LogEntry) ([]byte, engine.State, []engine.LogEntry, error) {
	var st engine.State
	start := p.base + int64(p.pos)
	klen, err := p.uvarint("key length")
	if err != nil {
		return nil, st, logBuf, err
	}
	if klen > MaxKeyLen || klen > uint64(len(p.buf)-p.pos) {
		return nil, st, logBuf, corruptf(start, "key length %d exceeds its block", klen)
	}
	key := p.buf[p.pos : p.pos+int(klen)]
	p.pos += int(klen)
	st, logBuf, err = p.state(logBuf)
	if err != nil {
		return nil, st, logBuf, err
	}
	if err := ValidateState(&st); err != nil {
		return nil, st, logBuf, corruptf(start, "record for key %q: %v", truncKey(key), err)
	}
	return key, st, logBuf, nil
}

// state decodes the state part of a record at p.pos (what appendState
// wrote), without validating it. With logBuf non-nil the log is decoded
// into it (reused) instead of a fresh slice.
func (p *recordParser) state(logBuf []engine.LogEntry) (engine.State, []engine.LogEntry, error) {
	var st engine.State
	if len(p.buf)-p.pos < 2 {
		return st, logBuf, corruptf(p.base+int64(p.pos), "record kind runs past the end of its block")
	}
	kindOff := p.base + int64(p.pos)
	st.Kind, p.pos = engine.Kind(p.buf[p.pos]), p.pos+1
	mode := p.buf[p.pos]
	p.pos++
	if !st.Kind.Valid() {
		return st, logBuf, corruptf(kindOff, "record kind %d is not a limiter kind", st.Kind)
	}
	if mode&^modeMask != 0 {
		return st, logBuf, corruptf(kindOff+1, "record mode 0x%02x has unknown bits", mode)
	}
	u, err := p.uvarint("expiry")
	if err != nil {
		return st, logBuf, err
	}
	st.ExpireAt = p.created + unzigzag(u)
	var vals [3]int64
	for i, name := range [3]string{"A", "B", "C"} {
		if u, err = p.uvarint(name); err != nil {
			return st, logBuf, err
		}
		vals[i] = unzigzag(u)
		if mode&(1<<i) != 0 {
			vals[i] += st.ExpireAt
		}
	}
	st.A, st.B, st.C = vals[0], vals[1], vals[2]
	if st.Kind == engine.KindSlidingLog {
		lenOff := p.base + int64(p.pos)
		n, err := p.uvarint("log length")
		if err != nil {
			return st, logBuf, err
		}
		// Each entry takes at least 2 bytes, which bounds n by the block
		// before anything is allocated for it.
		if n > MaxLogEntries || n > uint64(len(p.buf)-p.pos)/2 {
			return st, logBuf, corruptf(lenOff, "log length %d exceeds its block", n)
		}
		var log []engine.LogEntry
		if logBuf != nil {
			log = logBuf[:0]
		} else if n > 0 {
			log = make([]engine.LogEntry, 0, n)
		}
		prev := st.ExpireAt
		for i := uint64(0); i < n; i++ {
			d, err := p.uvarint("log time")
			if err != nil {
				return st, logBuf, err
			}
			at := prev + int64(d)
			if i == 0 {
				at = prev + unzigzag(d)
			}
			c, err := p.uvarint("log count")
			if err != nil {
				return st, logBuf, err
			}
			log = append(log, engine.LogEntry{At: at, Count: int64(c)})
			prev = at
		}
		if logBuf != nil {
			logBuf = log
		}
		st.Log = log
	}
	if st.Kind == engine.KindConcurrency {
		lenOff := p.base + int64(p.pos)
		n, err := p.uvarint("lease count")
		if err != nil {
			return st, logBuf, err
		}
		// Each lease takes at least 4 bytes (length, a byte of id, units,
		// expiry), which bounds n by the block before allocating.
		if n > MaxLeases || n > uint64(len(p.buf)-p.pos)/4 {
			return st, logBuf, corruptf(lenOff, "lease count %d exceeds its block", n)
		}
		leases := make([]engine.Lease, 0, n)
		for i := uint64(0); i < n; i++ {
			off := p.base + int64(p.pos)
			l, err := p.uvarint("lease id length")
			if err != nil {
				return st, logBuf, err
			}
			if l > engine.MaxLeaseID || l > uint64(len(p.buf)-p.pos) {
				return st, logBuf, corruptf(off, "lease id length %d out of range", l)
			}
			id := string(p.buf[p.pos : p.pos+int(l)])
			p.pos += int(l)
			units, err := p.uvarint("lease units")
			if err != nil {
				return st, logBuf, err
			}
			before, err := p.uvarint("lease expiry")
			if err != nil {
				return st, logBuf, err
			}
			if units > uint64(engine.MaxCount) || before > uint64(engine.MaxSpan) {
				return st, logBuf, corruptf(off, "lease units %d or expiry %d out of range", units, before)
			}
			ls := engine.Lease{ID: id, Units: int64(units), ExpireAt: st.ExpireAt - int64(before)}
			if st.C > 0 {
				ttl, err := p.uvarint("waiter ttl")
				if err != nil {
					return st, logBuf, err
				}
				if ttl > uint64(engine.MaxPeriod) {
					return st, logBuf, corruptf(off, "waiter ttl %d out of range", ttl)
				}
				if ls.TTL = int64(ttl); ttl > 0 {
					m, err := p.uvarint("waiter max")
					if err != nil {
						return st, logBuf, err
					}
					if m > uint64(engine.MaxCount) {
						return st, logBuf, corruptf(off, "waiter max %d out of range", m)
					}
					ls.Max = int64(m)
				}
			}
			leases = append(leases, ls)
		}
		st.Leases = leases
	}
	return st, logBuf, nil
}

// truncKey shortens a key for an error message.
func truncKey(k []byte) []byte {
	if len(k) > 64 {
		return k[:64]
	}
	return k
}
