// Package codec is the one encoding of an engine.Request, in the two forms
// it travels in: binary, inside a Raft log entry and a forwarded batch
// (replication), and as RESP arguments, inside a region link's REGION.EXEC
// and REGION.APPLY (region). Every field of the request travels in both, so
// that every hop decides what the first one parsed: the parameters after
// limit-override, the Shadow flag of limit-shadow, the Interval variant and
// the Exact flag of a region's sequence record.
//
// The package only encodes and decodes; it checks syntax, not ranges:
// callers run engine.Request.Validate (and their own limits) on what they
// decode. It imports nothing of the project but engine, and sits below
// every package that carries a request.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

// The request's flags, one bit each, the same in both forms: bit 0 is
// Interval, bit 1 Shadow, bit 2 Exact, bit 3 Lease (the request carries a
// concurrency op and lease id, which follow the other fields), bit 4 Wait
// (a request with a non-zero Wait: its value follows, see AppendBinary and
// AppendArgs). Bits were added in that order; an
// encoding written before a bit existed never set it, and a decoder older
// than a bit refuses a request that carries it (binary: the log entry; RESP:
// the peer's call) rather than reading it as unset.
const (
	FlagInterval = 1 << 0
	FlagShadow   = 1 << 1
	FlagExact    = 1 << 2
	FlagLease    = 1 << 3
	FlagWait     = 1 << 4
	// Flags are the bits a decoder accepts.
	Flags = FlagInterval | FlagShadow | FlagExact | FlagLease | FlagWait
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed request")

// FlagsOf returns r's flags.
func FlagsOf(r *engine.Request) byte {
	var f byte
	if r.Interval {
		f |= FlagInterval
	}
	if r.Shadow {
		f |= FlagShadow
	}
	if r.Exact {
		f |= FlagExact
	}
	if r.Op != 0 || r.Lease != "" {
		f |= FlagLease
	}
	if r.Wait != 0 {
		f |= FlagWait
	}
	return f
}

// setFlags sets r's flag fields from f, refusing unknown bits.
func setFlags(r *engine.Request, f uint64) error {
	if f&^Flags != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrMalformed, f)
	}
	r.Interval = f&FlagInterval != 0
	r.Shadow = f&FlagShadow != 0
	r.Exact = f&FlagExact != 0
	return nil // FlagLease: the caller reads the fields that follow
}

// MinBinary is the fewest bytes a binary request takes (kind, flags and
// four one-byte varints): a decoder bounds a count of requests by it.
const MinBinary = 6

// AppendBinary appends r's binary form: byte kind, byte flags, then varint
// burst, rate, period and quantity; with FlagLease, then byte op, uvarint
// lease length and the lease's bytes; with FlagWait, then varint wait.
func AppendBinary(dst []byte, r *engine.Request) []byte {
	f := FlagsOf(r)
	dst = append(dst, byte(r.Kind), f)
	dst = binary.AppendVarint(dst, r.Burst)
	dst = binary.AppendVarint(dst, r.Rate)
	dst = binary.AppendVarint(dst, r.Period)
	dst = binary.AppendVarint(dst, r.Quantity)
	if f&FlagLease != 0 {
		dst = append(dst, byte(r.Op))
		dst = binary.AppendUvarint(dst, uint64(len(r.Lease)))
		dst = append(dst, r.Lease...)
	}
	if f&FlagWait != 0 {
		dst = binary.AppendVarint(dst, r.Wait)
	}
	return dst
}

// MaxLease bounds the lease id a decoder accepts, in bytes: far above
// engine.MaxLeaseID (Validate checks that), low enough that a corrupt length
// cannot make a decoder allocate much.
const MaxLease = 1 << 10

// ReadBinary decodes the request at the start of b (AppendBinary's form)
// and returns it with the number of bytes it took. It allocates nothing
// but a concurrency request's lease id; an error wraps ErrMalformed and names the field.
func ReadBinary(b []byte) (engine.Request, int, error) {
	var r engine.Request
	if len(b) < 2 {
		return r, 0, fmt.Errorf("%w: truncated kind or flags", ErrMalformed)
	}
	r.Kind = engine.Kind(b[0])
	if err := setFlags(&r, uint64(b[1])); err != nil {
		return r, 0, err
	}
	n := 2
	// Field by field rather than through a table of pointers into r: the
	// pointers made r escape, one allocation per request decoded (every
	// decision a replica applies).
	var m int
	if r.Burst, m = binary.Varint(b[n:]); m <= 0 {
		return r, 0, errTruncated("burst")
	}
	n += m
	if r.Rate, m = binary.Varint(b[n:]); m <= 0 {
		return r, 0, errTruncated("rate")
	}
	n += m
	if r.Period, m = binary.Varint(b[n:]); m <= 0 {
		return r, 0, errTruncated("period")
	}
	n += m
	if r.Quantity, m = binary.Varint(b[n:]); m <= 0 {
		return r, 0, errTruncated("quantity")
	}
	n += m
	if b[1]&FlagLease != 0 {
		if len(b) <= n {
			return r, 0, errTruncated("op")
		}
		r.Op = engine.LeaseOp(b[n])
		n++
		l, m := binary.Uvarint(b[n:])
		if m <= 0 || l > MaxLease || uint64(len(b)-n-m) < l {
			return r, 0, errTruncated("lease")
		}
		n += m
		r.Lease = string(b[n : n+int(l)])
		n += int(l)
	}
	if b[1]&FlagWait != 0 {
		v, m := binary.Varint(b[n:])
		if m <= 0 {
			return r, 0, errTruncated("wait")
		}
		if v == 0 {
			return r, 0, fmt.Errorf("%w: wait flag with a zero wait", ErrMalformed)
		}
		r.Wait = v
		n += m
	}
	return r, n, nil
}

func errTruncated(field string) error {
	return fmt.Errorf("%w: truncated or overlong %s", ErrMalformed, field)
}

// ArgFields is the number of RESP arguments of one request: kind, burst,
// rate, period (ns), quantity and flags. A request with FlagLease takes
// LeaseFields more: op and lease.
const (
	ArgFields   = 6
	LeaseFields = 2
)

// NumArgs returns how many RESP arguments r's form takes: ArgFields, plus
// LeaseFields for a concurrency request.
func NumArgs(r *engine.Request) int {
	if FlagsOf(r)&FlagLease != 0 {
		return ArgFields + LeaseFields
	}
	return ArgFields
}

// AppendArgs appends r's RESP form: the kind's name, then decimal burst,
// rate, period (ns), quantity and flags; with FlagWait the flags field is
// followed by a comma and the decimal wait (ns) in the same field, so that
// a receiver older than the flag refuses the field; with FlagLease, then
// decimal op and the lease. The flags field is 0 or 1 for a
// request with no flag but Interval, as the field (then named interval) was
// before it carried the others, so a receiver older than them reads such a
// request as it always did, and refuses one that carries them.
func AppendArgs(args [][]byte, r *engine.Request) [][]byte {
	f := FlagsOf(r)
	args = append(args, []byte(r.Kind.String()),
		strconv.AppendInt(nil, r.Burst, 10), strconv.AppendInt(nil, r.Rate, 10),
		strconv.AppendInt(nil, r.Period, 10), strconv.AppendInt(nil, r.Quantity, 10),
		appendFlagsArg(r, f))
	if f&FlagLease != 0 {
		args = append(args, strconv.AppendUint(nil, uint64(r.Op), 10), []byte(r.Lease))
	}
	return args
}

// appendFlagsArg is the flags field of the RESP form.
func appendFlagsArg(r *engine.Request, f byte) []byte {
	b := strconv.AppendUint(nil, uint64(f), 10)
	if f&FlagWait != 0 {
		b = strconv.AppendInt(append(b, ','), r.Wait, 10)
	}
	return b
}

// ParseArgs decodes ArgFields arguments (AppendArgs's form), or
// ArgFields+LeaseFields when the flags carry FlagLease. An error wraps
// ErrMalformed and names the field.
func ParseArgs(f [][]byte) (engine.Request, error) {
	var r engine.Request
	if len(f) != ArgFields && len(f) != ArgFields+LeaseFields {
		return r, fmt.Errorf("%w: %d fields, want %d", ErrMalformed, len(f), ArgFields)
	}
	k, ok := engine.ParseKind(string(f[0]))
	if !ok || !k.Valid() {
		return r, fmt.Errorf("%w: unknown kind %q", ErrMalformed, f[0])
	}
	r.Kind = k
	for j, p := range [...]*int64{&r.Burst, &r.Rate, &r.Period, &r.Quantity} {
		v, err := strconv.ParseInt(string(f[1+j]), 10, 64)
		if err != nil {
			return r, fmt.Errorf("%w: field %d: not an integer: %q", ErrMalformed, j+2, f[1+j])
		}
		*p = v
	}
	flags, wait, hasWait := strings.Cut(string(f[5]), ",")
	fl, err := strconv.ParseUint(flags, 10, 8)
	if err != nil {
		return r, fmt.Errorf("%w: flags %q: not 0..%d", ErrMalformed, f[5], Flags)
	}
	if err := setFlags(&r, fl); err != nil {
		return r, err
	}
	if want := ArgFields + int(fl&FlagLease>>3)*LeaseFields; len(f) != want {
		return r, fmt.Errorf("%w: %d fields, want %d for flags %d", ErrMalformed, len(f), want, fl)
	}
	if fl&FlagLease != 0 {
		op, err := strconv.ParseUint(string(f[ArgFields]), 10, 8)
		if err != nil {
			return r, fmt.Errorf("%w: op %q: not a byte", ErrMalformed, f[ArgFields])
		}
		if len(f[ArgFields+1]) > MaxLease {
			return r, fmt.Errorf("%w: lease of %d bytes", ErrMalformed, len(f[ArgFields+1]))
		}
		r.Op, r.Lease = engine.LeaseOp(op), string(f[ArgFields+1])
	}
	if hasWait != (fl&FlagWait != 0) {
		return r, fmt.Errorf("%w: flags %q: the wait flag and a wait go together", ErrMalformed, f[5])
	}
	if hasWait {
		if r.Wait, err = strconv.ParseInt(wait, 10, 64); err != nil || r.Wait == 0 {
			return r, fmt.Errorf("%w: flags %q: wait not a non-zero integer", ErrMalformed, f[5])
		}
	}
	return r, nil
}
