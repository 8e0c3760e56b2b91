package cluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/respclient"
)

// MIGRATE's arguments and its exchange with the target over RESP
// (RESPTarget). This package opens no socket: the Dialer is injected
// (internal/respclient's Dial, passed by resp).

// Errors of MIGRATE's exchange and arguments, worded by resp/errors.go in
// Redis's words.
var (
	// ErrTargetWrite: writing to the target failed or timed out.
	ErrTargetWrite = errors.New("cluster: error or timeout writing to target instance")
	// ErrTargetRead: reading the target's reply failed or timed out, or
	// the reply was not RESP, too large or not RESTORE's.
	ErrTargetRead = errors.New("cluster: error or timeout reading from target instance")
	// ErrMigrateKeysArg: MIGRATE ... KEYS with a non-empty key argument.
	ErrMigrateKeysArg = errors.New("cluster: MIGRATE KEYS needs an empty key argument")
)

// TargetReplyError is an error reply of MIGRATE's target, relayed as
// Redis does.
type TargetReplyError struct{ Msg string }

func (e *TargetReplyError) Error() string { return "cluster: target replied: " + e.Msg }

// MigrateArgs is a parsed MIGRATE call.
type MigrateArgs struct {
	Addr          string // host:port
	DB            int64
	Timeout       time.Duration // (0, 1 h]; 1 s when the call gave 0 or less
	Copy, Replace bool
	Auth          [][]byte // AUTH password or AUTH2 username password
	Keys          [][]byte // distinct
}

// MigrateKeys appends MIGRATE's keys to dst (args as the command has
// them, args[0] the name): its key argument, or the arguments after KEYS
// when the key argument is empty. The options before KEYS are skipped
// with their values (an AUTH password may read "keys").
func MigrateKeys(dst [][]byte, args [][]byte) [][]byte {
	if len(args) < 6 {
		return dst
	}
	if len(args[3]) > 0 {
		return append(dst, args[3])
	}
	for i := 6; i < len(args); i++ {
		switch strings.ToLower(string(args[i])) {
		case "auth":
			i++
		case "auth2":
			i += 2
		case "keys":
			return append(dst, args[i+1:]...)
		}
	}
	return dst
}

// ParseMigrate parses MIGRATE host port key|"" destination-db timeout
// [COPY] [REPLACE] [AUTH password | AUTH2 username password] [KEYS key ...]
// (args[0] the name; at least 6 arguments). A key named twice is sent once.
func ParseMigrate(args [][]byte) (*MigrateArgs, error) {
	m := &MigrateArgs{Addr: net.JoinHostPort(string(args[1]), string(args[2]))}
	var err error
	if m.DB, err = engine.ParseInt(args[4]); err != nil {
		return nil, err
	}
	ms, err := engine.ParseInt(args[5])
	if err != nil {
		return nil, err
	}
	if ms <= 0 {
		ms = 1000 // Redis's default
	}
	m.Timeout = time.Duration(min(ms, int64(time.Hour/time.Millisecond))) * time.Millisecond
	keysAt := -1
	for i := 6; i < len(args) && keysAt < 0; i++ {
		switch strings.ToLower(string(args[i])) {
		case "copy":
			m.Copy = true
		case "replace":
			m.Replace = true
		case "auth":
			if i+1 >= len(args) {
				return nil, engine.ErrSyntax
			}
			m.Auth = [][]byte{args[i+1]}
			i++
		case "auth2":
			if i+2 >= len(args) {
				return nil, engine.ErrSyntax
			}
			m.Auth = [][]byte{args[i+1], args[i+2]}
			i += 2
		case "keys":
			if len(args[3]) != 0 {
				return nil, ErrMigrateKeysArg
			}
			keysAt = i + 1
		default:
			return nil, engine.ErrSyntax
		}
	}
	seen := map[string]bool{}
	for _, k := range MigrateKeys(nil, args) {
		if !seen[string(k)] {
			seen[string(k)] = true
			m.Keys = append(m.Keys, k)
		}
	}
	return m, nil
}

// TargetConn is a connection to MIGRATE's target; *respclient.Client is
// one.
type TargetConn interface {
	Do(args ...[]byte) (respclient.Value, error)
	Send(args ...[]byte)
	Flush() error
	Read() (respclient.Value, error)
	Close() error
}

// Dialer opens a TargetConn to addr (respclient.Dial).
type Dialer func(ctx context.Context, addr string, cfg respclient.Config) (TargetConn, error)

// RESPTarget is MIGRATE's Target over RESP: every reply bounded in size
// and due within the call's timeout.
type RESPTarget struct {
	Ctx  context.Context // ends the dial (the server shuts down)
	Dial Dialer
	Args *MigrateArgs // its Auth and DB
	// Asking: send ASKING before each RESTORE (in a cluster), so that a
	// group importing the slot takes it. An error answering ASKING is
	// ignored: a standalone server gives one and still restores.
	Asking bool
}

// Restore dials the target at addr, authenticates, selects the database
// and restores every key (Target.Restore), marking those it took, those
// it refused and those whose outcome is unknown (an I/O failure or a
// reply that is not RESP once the RESTOREs were sent), each with its
// failure. It returns the first failure.
func (t RESPTarget) Restore(addr string, timeout time.Duration, keys []MoveKey) error {
	err := t.exchange(addr, timeout, keys)
	if err != nil {
		for i := range keys {
			if !keys[i].Restored && keys[i].Err == nil {
				keys[i].Err = err
				keys[i].Retry = err == ErrTargetUnreachable
			}
		}
	}
	return err
}

// exchange is Restore's exchange with the target: it marks the keys
// restored, unknown or refused (with their own refusal) and returns the
// first failure.
func (t RESPTarget) exchange(addr string, timeout time.Duration, keys []MoveKey) error {
	cfg := respclient.Config{Timeout: timeout, MaxArray: 64}
	switch len(t.Args.Auth) {
	case 1:
		cfg.Password = string(t.Args.Auth[0])
	case 2:
		cfg.Username, cfg.Password = string(t.Args.Auth[0]), string(t.Args.Auth[1])
	}
	cl, err := t.Dial(t.Ctx, addr, cfg)
	if err != nil {
		var re *respclient.ReplyError
		if errors.As(err, &re) {
			return &TargetReplyError{re.Msg}
		}
		return ErrTargetUnreachable
	}
	defer cl.Close()
	if t.Args.DB != 0 {
		v, err := cl.Do([]byte("SELECT"), strconv.AppendInt(nil, t.Args.DB, 10))
		if err != nil {
			return targetIOError(err)
		}
		if v.Kind == respclient.Error {
			return &TargetReplyError{v.Str}
		}
	}
	for _, k := range keys {
		if t.Asking {
			cl.Send([]byte("ASKING"))
		}
		args := [][]byte{[]byte("RESTORE"), k.Key, []byte("0"), k.Payload}
		if k.Replace {
			args = append(args, []byte("REPLACE"))
		}
		cl.Send(args...)
	}
	for i := range keys {
		keys[i].Unknown = true
	}
	if err := cl.Flush(); err != nil {
		return ErrTargetWrite
	}
	var first error
	for i := range keys {
		if t.Asking {
			if _, err := cl.Read(); err != nil {
				return targetIOError(err)
			}
		}
		v, err := cl.Read()
		if err != nil {
			return targetIOError(err)
		}
		switch v.Kind {
		case respclient.Simple:
			keys[i].Unknown = false
			keys[i].Restored = true
		case respclient.Error:
			refusal := v.Err()
			if errors.Is(refusal, respclient.ErrBusyKey) && (keys[i].Again || keys[i].Home) {
				// Sent again, or to a group importing the slot from
				// this one: the target has the key, so a RESTORE of it
				// from here landed (an earlier MIGRATE's, an earlier
				// attempt of this one, or another node's at the same
				// time; while a key is in flight here nobody is sent
				// there to create it). Done; never REPLACE it: clients
				// may have used it there since.
				keys[i].Unknown, keys[i].Restored = false, true
				continue
			}
			// A refusal leaves the key here, except one that may have
			// been applied (TRYAGAIN Leadership changed …) or whose
			// outcome a group without a leader cannot tell: those keys
			// stay in flight, like a lost reply.
			keys[i].Unknown = errors.Is(refusal, respclient.ErrTryAgain) || errors.Is(refusal, respclient.ErrClusterDown)
			keys[i].Retry = keys[i].Unknown
			keys[i].Err = &TargetReplyError{v.Str}
			if first == nil {
				first = keys[i].Err
			}
		default:
			// Not RESTORE's answer: not a cellserver, and what it did
			// with the key is unknown.
			return ErrTargetRead
		}
	}
	return first
}

// targetIOError is ErrTargetWrite for a failed write, ErrTargetRead
// otherwise (a reply that is not RESP, too large or late counts as a
// failed read).
func targetIOError(err error) error {
	var ioe *respclient.IOError
	if errors.As(err, &ioe) && ioe.Op == "write" {
		return ErrTargetWrite
	}
	return ErrTargetRead
}
