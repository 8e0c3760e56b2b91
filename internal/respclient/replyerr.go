package respclient

import (
	"errors"
	"strconv"
	"strings"
)

// The codes (first words) of the error replies a Client decodes into typed
// errors. A reply with any other code is a *ReplyError that wraps nothing.
const (
	CodeMoved         = "MOVED"
	CodeAsk           = "ASK"
	CodeTryAgain      = "TRYAGAIN"
	CodeClusterDown   = "CLUSTERDOWN"
	CodeLoading       = "LOADING"
	CodeOOM           = "OOM"
	CodeNoAuth        = "NOAUTH"
	CodeWrongPass     = "WRONGPASS"
	CodeReadOnly      = "READONLY"
	CodeBusyKey       = "BUSYKEY"
	CodeOutOfSequence = "OUTOFSEQ"
)

// Sentinels of the error replies, for errors.Is on what Value.Err (and
// DecodeError) return. Those with data (MOVED, ASK, OUTOFSEQ) are also
// available as structs through errors.As; their sentinel matches a
// malformed reply of the code as well (no slot, address or sequence).
var (
	// ErrMoved: MOVED slot host:port — the key's slot is served by the
	// node named (*MovedError).
	ErrMoved = errors.New("respclient: MOVED")
	// ErrAsk: ASK slot host:port — the slot migrates; the node named
	// serves the key after ASKING (*AskError).
	ErrAsk = errors.New("respclient: ASK")
	// ErrTryAgain: TRYAGAIN — the keys of a migrating slot are split, a
	// key is in flight, or the node is not (or no longer) the leader.
	ErrTryAgain = errors.New("respclient: TRYAGAIN")
	// ErrClusterDown: CLUSTERDOWN — no leader, a slot not served, a node
	// removed or shutting down.
	ErrClusterDown = errors.New("respclient: CLUSTERDOWN")
	// ErrLoading: LOADING — the server is loading its data.
	ErrLoading = errors.New("respclient: LOADING")
	// ErrOOM: OOM — over maxmemory, the server refuses to create keys.
	ErrOOM = errors.New("respclient: OOM")
	// ErrNoAuth: NOAUTH — authentication is required.
	ErrNoAuth = errors.New("respclient: NOAUTH")
	// ErrWrongPass: WRONGPASS — the credentials were refused.
	ErrWrongPass = errors.New("respclient: WRONGPASS")
	// ErrReadOnly: READONLY — the node does not take writes.
	ErrReadOnly = errors.New("respclient: READONLY")
	// ErrBusyKey: BUSYKEY — RESTORE of a key that exists (without
	// REPLACE).
	ErrBusyKey = errors.New("respclient: BUSYKEY")
	// ErrOutOfSequence: OUTOFSEQ expected ... — a region peer refused a
	// batch that skips some of its lane (*OutOfSequenceError).
	ErrOutOfSequence = errors.New("respclient: OUTOFSEQ")
	// ErrTooManyRedirects: Follow met more MOVED replies than allowed.
	ErrTooManyRedirects = errors.New("respclient: too many MOVED redirections")
)

// codeSentinels maps the codes without data to their sentinel.
var codeSentinels = map[string]error{
	CodeTryAgain:    ErrTryAgain,
	CodeClusterDown: ErrClusterDown,
	CodeLoading:     ErrLoading,
	CodeOOM:         ErrOOM,
	CodeNoAuth:      ErrNoAuth,
	CodeWrongPass:   ErrWrongPass,
	CodeReadOnly:    ErrReadOnly,
	CodeBusyKey:     ErrBusyKey,
}

// ReplyError is an error reply of the peer (-ERR ...), decoded once: Msg
// is its whole text without the '-', Code its first word (ERR, WRONGTYPE,
// MOVED...). It unwraps to the typed error of its code, if any: one of the
// sentinels above, or a *MovedError, *AskError or *OutOfSequenceError.
type ReplyError struct {
	Code string
	Msg  string
	kind error
}

func (e *ReplyError) Error() string { return e.Msg }

// Unwrap returns the typed error of the reply's code; nil for a code
// without one (ERR, WRONGTYPE...).
func (e *ReplyError) Unwrap() error { return e.kind }

// MovedError is a well-formed MOVED reply: Slot's keys are served by the
// node at Addr (host:port). errors.Is(err, ErrMoved) holds for it.
type MovedError struct {
	Slot int
	Addr string
}

func (e *MovedError) Error() string {
	return "MOVED " + strconv.Itoa(e.Slot) + " " + e.Addr
}

// Is reports whether target is ErrMoved.
func (e *MovedError) Is(target error) bool { return target == ErrMoved }

// AskError is a well-formed ASK reply: Slot migrates and the node at Addr
// decides the key when asked with ASKING first. errors.Is(err, ErrAsk)
// holds for it.
type AskError struct {
	Slot int
	Addr string
}

func (e *AskError) Error() string {
	return "ASK " + strconv.Itoa(e.Slot) + " " + e.Addr
}

// Is reports whether target is ErrAsk.
func (e *AskError) Is(target error) bool { return target == ErrAsk }

// OutOfSequenceError is a well-formed OUTOFSEQ reply of a region peer to a
// batch of async consumption: its lane expects batch Expected next (the
// sender sends again from there). errors.Is(err, ErrOutOfSequence) holds
// for it.
type OutOfSequenceError struct {
	Expected int64
}

func (e *OutOfSequenceError) Error() string {
	return CodeOutOfSequence + " " + strconv.FormatInt(e.Expected, 10)
}

// Is reports whether target is ErrOutOfSequence.
func (e *OutOfSequenceError) Is(target error) bool { return target == ErrOutOfSequence }

// DecodeError decodes the text of an error reply (without the '-') into a
// *ReplyError wrapping the typed error of its code. It is the one place a
// reply's text is read for its meaning; Value.Err calls it.
func DecodeError(msg string) *ReplyError {
	code, rest, _ := strings.Cut(msg, " ")
	e := &ReplyError{Code: code, Msg: msg}
	switch code {
	case CodeMoved, CodeAsk:
		e.kind = ErrMoved
		if code == CodeAsk {
			e.kind = ErrAsk
		}
		slot, addr, ok := redirect(rest)
		switch {
		case !ok:
		case code == CodeMoved:
			e.kind = &MovedError{Slot: slot, Addr: addr}
		default:
			e.kind = &AskError{Slot: slot, Addr: addr}
		}
	case CodeOutOfSequence:
		e.kind = ErrOutOfSequence
		word, _, _ := strings.Cut(rest, " ")
		if n, err := strconv.ParseInt(word, 10, 64); err == nil && n >= 0 {
			e.kind = &OutOfSequenceError{Expected: n}
		}
	default:
		e.kind = codeSentinels[code]
	}
	return e
}

// redirect parses "slot host:port" of a MOVED or ASK reply.
func redirect(s string) (slot int, addr string, ok bool) {
	w, addr, ok := strings.Cut(s, " ")
	if !ok || addr == "" {
		return 0, "", false
	}
	slot, err := strconv.Atoi(w)
	if err != nil || slot < 0 {
		return 0, "", false
	}
	return slot, addr, true
}

// Follow follows MOVED: while v is a MOVED reply naming a node, it asks
// that node (do(addr), which sends the same command there) and looks at
// its reply, at most maxRedirects times; then it returns the first reply
// that is no MOVED with an address (a MOVED without one included), or an
// error: do's, or ErrTooManyRedirects when the last reply still redirects.
// It is the one place a caller follows MOVED; ASK is left to the caller
// (it needs ASKING first, on the same connection).
func Follow(v Value, maxRedirects int, do func(addr string) (Value, error)) (Value, error) {
	for n := 0; ; n++ {
		var moved *MovedError
		if !errors.As(v.Err(), &moved) {
			return v, nil
		}
		if n == maxRedirects {
			return Value{}, ErrTooManyRedirects
		}
		var err error
		if v, err = do(moved.Addr); err != nil {
			return Value{}, err
		}
	}
}
