package region

import (
	"fmt"
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/engine/codec"
	"github.com/cellserver/cellserver/internal/reply"
	"github.com/cellserver/cellserver/internal/respclient"
	"github.com/cellserver/cellserver/shards"
)

// The peer-facing command that carries a forwarded decision:
//
//	REGION.EXEC origin target ONE|ALL key kind burst rate period quantity flags [key ...]
//
// origin is the sending region, target the region it means to reach; ONE
// is one limiter request (OpLimit), ALL a CL.THROTTLEALL (OpLimitAll) of one
// or more groups of seven fields. ONE's request may be a concurrency one
// (CC.*, flag 8), whose op and lease follow as two more fields, and whose
// reply adds the lease id as a seventh element, a bulk string. Each key's request is engine/codec's RESP
// form: numbers are decimal, burst, rate, period (ns) and quantity as in
// engine.Request, and flags the request's flags (bit 0 interval, bit 1
// shadow, bit 2 exact; a request with none but interval reads 0 or 1, as
// the field did before it carried the others). The reply is an array
// holding, per key, [limited, limit, remaining, retry_after, reset_after,
// wait] with durations in nanoseconds, unrounded.
const (
	// ExecCommand is the command's name.
	ExecCommand = "REGION.EXEC"
	// execFields is the number of arguments per key: the key and the
	// request.
	execFields = 1 + codec.ArgFields
	// execHead is the number of arguments before the first key.
	execHead = 3
	// resultFields is the number of integers per key in the reply.
	resultFields = 6
)

// encodeExec returns the REGION.EXEC call of op (OpLimit or OpLimitAll)
// from origin to target.
func encodeExec(origin, target string, op *shards.Op) [][]byte {
	how := "ONE"
	if op.Code == shards.OpLimitAll {
		how = "ALL"
	}
	args := make([][]byte, 0, 1+execHead+execFields*len(op.Keys))
	args = append(args, []byte(ExecCommand), []byte(origin), []byte(target), []byte(how))
	for i, k := range op.Keys {
		args = appendRequest(args, k, &op.Reqs[i])
	}
	return args
}

// appendRequest appends one key and its request (engine/codec's RESP form).
func appendRequest(args [][]byte, key []byte, r *engine.Request) [][]byte {
	return codec.AppendArgs(append(args, key), r)
}

// ExecKeys appends the keys of a REGION.EXEC call (args with the command's
// name first) to dst: every seventh argument from the fifth, or, for ONE,
// the fifth alone (a concurrency request's op and lease follow its seven
// fields).
func ExecKeys(dst, args [][]byte) [][]byte {
	if len(args) <= 1+execHead {
		return dst
	}
	if strings.EqualFold(string(args[3]), "ONE") {
		return append(dst, args[1+execHead])
	}
	for i := 1 + execHead; i < len(args); i += execFields {
		dst = append(dst, args[i])
	}
	return dst
}

// ExecCall is a decoded REGION.EXEC.
type ExecCall struct {
	Origin, Target string
	// Op is OpLimit or OpLimitAll; its keys alias the arguments.
	Op shards.Op
}

// DecodeExec decodes REGION.EXEC's arguments after the command name. Every
// request must pass engine's Validate and a sliding log's limit must not
// exceed maxLogLimit, as if parsed from the limiter command; ALL takes GCRA
// requests with non-negative quantities only (CL.THROTTLEALL's rule). An
// error wraps ErrBadBatch and says which field is wrong.
func DecodeExec(args [][]byte, maxLogLimit int64) (ExecCall, error) {
	var c ExecCall
	// ONE may carry a concurrency request: seven fields and its op and
	// lease (engine/codec's FlagLease).
	leaseOne := len(args) == execHead+execFields+codec.LeaseFields && strings.EqualFold(string(args[2]), "ONE")
	if !leaseOne && (len(args) < execHead+execFields || (len(args)-execHead)%execFields != 0) {
		return c, fmt.Errorf("%w: %d arguments, want 3 + 7 per key", ErrBadBatch, len(args))
	}
	c.Origin, c.Target = string(args[0]), string(args[1])
	n := (len(args) - execHead) / execFields
	switch strings.ToUpper(string(args[2])) {
	case "ONE":
		if n != 1 {
			return c, fmt.Errorf("%w: ONE takes one key, got %d", ErrBadBatch, n)
		}
		c.Op.Code = shards.OpLimit
	case "ALL":
		c.Op.Code = shards.OpLimitAll
	default:
		return c, fmt.Errorf("%w: %q is neither ONE nor ALL", ErrBadBatch, args[2])
	}
	c.Op.Keys = make([][]byte, n)
	c.Op.Reqs = make([]engine.Request, n)
	for i := range n {
		f := args[execHead+i*execFields:]
		width := execFields
		if leaseOne {
			width = len(f)
		}
		req, err := decodeField(f[:width], maxLogLimit)
		switch {
		case err != nil:
		case c.Op.Code == shards.OpLimitAll && (req.Kind != engine.KindGCRA || req.Quantity < 0):
			err = fmt.Errorf("ALL takes GCRA requests of quantity >= 0")
		}
		if err != nil {
			return c, fmt.Errorf("%w: key %d: %v", ErrBadBatch, i+1, err)
		}
		c.Op.Keys[i] = f[0]
		c.Op.Reqs[i] = req
	}
	return c, nil
}

// decodeField decodes one key's fields (the key, then decodeRequest's),
// refusing a sliding log above this server's maxLogLimit.
func decodeField(f [][]byte, maxLogLimit int64) (engine.Request, error) {
	req, err := decodeRequest(f[1:])
	if err == nil && req.Kind == engine.KindSlidingLog && req.Burst > maxLogLimit {
		err = engine.ErrLogLimit
	}
	return req, err
}

func decodeRequest(f [][]byte) (engine.Request, error) {
	r, err := codec.ParseArgs(f)
	if err != nil {
		return r, err
	}
	return r, r.Validate()
}

// EncodeResult appends r as REGION.EXEC's per-key reply fields: six, and
// a seventh, the delay (ns), for a waiting request admitted for a later
// turn (engine.Result.Delay; only a request that carried a wait, which an
// older home refuses, gets one). The first field is 0 (allowed), 1
// (limited) or 2: limited and queued, a CC.ACQUIRE … WAIT now in the
// home's line (engine.Result.Queued), which the forwarding region's
// client waits for.
func EncodeResult(dst []int64, r *engine.Result) []int64 {
	l := int64(0)
	switch {
	case r.Queued:
		l = 2
	case r.Limited:
		l = 1
	}
	dst = append(dst, l, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter, r.Wait)
	if r.Delay > 0 {
		dst = append(dst, r.Delay)
	}
	return dst
}

// ExecReply is REGION.EXEC's reply to the results rs: per key an array of
// its EncodeResult fields, then CC.ACQUIRE's lease id when it has one.
func ExecReply(rs []engine.Result) reply.Node {
	out := reply.Array()
	var f []int64
	for i := range rs {
		f = EncodeResult(f[:0], &rs[i])
		e := reply.Array()
		for _, v := range f {
			e.Elems = append(e.Elems, reply.Int(v))
		}
		if rs[i].Lease != "" {
			e.Elems = append(e.Elems, reply.Bulk(rs[i].Lease))
		}
		out.Elems = append(out.Elems, e)
	}
	return out
}

// decodeResults reads REGION.EXEC's reply for n keys into out.
func decodeResults(v respclient.Value, n int, out []engine.Result) error {
	if v.Kind != respclient.Array || len(v.Elems) != n {
		return fmt.Errorf("region: malformed REGION.EXEC reply (kind %q, %d elements, want %d)", v.Kind, len(v.Elems), n)
	}
	for i, e := range v.Elems {
		// Six integers, then at most one of: the delay of a waiting
		// request (an integer) or a CC.ACQUIRE's lease id (a bulk string).
		extra := len(e.Elems) == resultFields+1
		lease := extra && e.Elems[resultFields].Kind == respclient.Bulk
		if e.Kind != respclient.Array || len(e.Elems) != resultFields && !extra {
			return fmt.Errorf("region: malformed REGION.EXEC reply for key %d", i+1)
		}
		var f [resultFields + 1]int64
		ints := e.Elems
		if lease {
			ints = e.Elems[:resultFields]
		}
		for j, x := range ints {
			if x.Kind != respclient.Integer {
				return fmt.Errorf("region: malformed REGION.EXEC reply for key %d", i+1)
			}
			f[j] = x.Int
		}
		if f[0] < 0 || f[0] > 2 {
			return fmt.Errorf("region: malformed REGION.EXEC reply for key %d: limited %d", i+1, f[0])
		}
		out[i] = engine.Result{Limited: f[0] != 0, Queued: f[0] == 2, Limit: f[1], Remaining: f[2], RetryAfter: f[3], ResetAfter: f[4], Wait: f[5], Delay: f[6]}
		if lease {
			out[i].Lease = e.Elems[resultFields].Str
		}
		if f[6] < 0 || f[6] > 0 && f[0] != 0 {
			return fmt.Errorf("region: malformed REGION.EXEC reply for key %d: delay %d", i+1, f[6])
		}
	}
	return nil
}
