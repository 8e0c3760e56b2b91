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

	"github.com/cellserver/cellserver/engine"
)

// The request's flags, one bit each, the same in both forms: bit 0 is
// Interval, bit 1 Shadow, bit 2 Exact. Bits were added in that order; an
// encoding written before a bit existed never set it, and a decoder older
// than a bit refuses a request that carries it (binary: the log entry; RESP:
// the peer's call) rather than reading it as unset.
const (
	FlagInterval = 1 << 0
	FlagShadow   = 1 << 1
	FlagExact    = 1 << 2
	// Flags are the bits a decoder accepts.
	Flags = FlagInterval | FlagShadow | FlagExact
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
	return nil
}

// MinBinary is the fewest bytes a binary request takes (kind, flags and
// four one-byte varints): a decoder bounds a count of requests by it.
const MinBinary = 6

// AppendBinary appends r's binary form: byte kind, byte flags, then varint
// burst, rate, period and quantity.
func AppendBinary(dst []byte, r *engine.Request) []byte {
	dst = append(dst, byte(r.Kind), FlagsOf(r))
	dst = binary.AppendVarint(dst, r.Burst)
	dst = binary.AppendVarint(dst, r.Rate)
	dst = binary.AppendVarint(dst, r.Period)
	return binary.AppendVarint(dst, r.Quantity)
}

// ReadBinary decodes the request at the start of b (AppendBinary's form)
// and returns it with the number of bytes it took. It allocates nothing;
// an error wraps ErrMalformed and names the field.
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
	return r, n + m, nil
}

func errTruncated(field string) error {
	return fmt.Errorf("%w: truncated or overlong %s", ErrMalformed, field)
}

// ArgFields is the number of RESP arguments of one request: kind, burst,
// rate, period (ns), quantity and flags.
const ArgFields = 6

// AppendArgs appends r's RESP form: the kind's name, then decimal burst,
// rate, period (ns), quantity and flags. The flags field is 0 or 1 for a
// request with no flag but Interval, as the field (then named interval) was
// before it carried the others, so a receiver older than them reads such a
// request as it always did, and refuses one that carries them.
func AppendArgs(args [][]byte, r *engine.Request) [][]byte {
	return append(args, []byte(r.Kind.String()),
		strconv.AppendInt(nil, r.Burst, 10), strconv.AppendInt(nil, r.Rate, 10),
		strconv.AppendInt(nil, r.Period, 10), strconv.AppendInt(nil, r.Quantity, 10),
		strconv.AppendUint(nil, uint64(FlagsOf(r)), 10))
}

// ParseArgs decodes ArgFields arguments (AppendArgs's form). An error wraps
// ErrMalformed and names the field.
func ParseArgs(f [][]byte) (engine.Request, error) {
	var r engine.Request
	if len(f) != ArgFields {
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
	fl, err := strconv.ParseUint(string(f[5]), 10, 8)
	if err != nil {
		return r, fmt.Errorf("%w: flags %q: not 0..%d", ErrMalformed, f[5], Flags)
	}
	return r, setFlags(&r, fl)
}
