package clientlist

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

// Client is what one CLIENT LIST line shows of a connection.
type Client struct {
	ID          int64
	Addr, LAddr string
	Name        string
	Age, Idle   int64 // seconds
	// Multi is -1 outside a transaction, else the commands queued;
	// MultiMem what the queue accounts for, in bytes.
	Multi, MultiMem int64
	NoEvict         bool  // CLIENT NO-EVICT on
	OutMem, TotMem  int64 // omem and tot-mem, in bytes
	Cmd             string
	Proto           int
	LibName, LibVer string
}

// field is one name=value of a line: a fixed value (the fields of Redis
// that cellserver has no counterpart for, such as fd or sub), or one
// taken from the Client.
type field struct {
	name  string
	fixed string
	value func(b []byte, c *Client) []byte
}

func str(f func(c *Client) string) func([]byte, *Client) []byte {
	return func(b []byte, c *Client) []byte { return append(b, f(c)...) }
}

func num(f func(c *Client) int64) func([]byte, *Client) []byte {
	return func(b []byte, c *Client) []byte { return strconv.AppendInt(b, f(c), 10) }
}

// fields is a line, in Redis's order.
var fields = []field{
	{name: "id", value: num(func(c *Client) int64 { return c.ID })},
	{name: "addr", value: str(func(c *Client) string { return c.Addr })},
	{name: "laddr", value: str(func(c *Client) string { return c.LAddr })},
	{name: "fd", fixed: "-1"},
	{name: "name", value: str(func(c *Client) string { return c.Name })},
	{name: "age", value: num(func(c *Client) int64 { return max(c.Age, 0) })},
	{name: "idle", value: num(func(c *Client) int64 { return max(c.Idle, 0) })},
	{name: "flags", value: str((*Client).flags)},
	{name: "db", fixed: "0"}, {name: "sub", fixed: "0"}, {name: "psub", fixed: "0"}, {name: "ssub", fixed: "0"},
	{name: "multi", value: num(func(c *Client) int64 { return c.Multi })},
	{name: "watch", fixed: "0"}, {name: "qbuf", fixed: "0"}, {name: "qbuf-free", fixed: "0"}, {name: "argv-mem", fixed: "0"},
	{name: "multi-mem", value: num(func(c *Client) int64 { return c.MultiMem })},
	{name: "rbs", fixed: "0"}, {name: "rbp", fixed: "0"}, {name: "obl", fixed: "0"}, {name: "oll", fixed: "0"},
	{name: "omem", value: num(func(c *Client) int64 { return c.OutMem })},
	{name: "tot-mem", value: num(func(c *Client) int64 { return c.TotMem })},
	{name: "events", fixed: "r"},
	{name: "cmd", value: str(func(c *Client) string { return c.Cmd })},
	{name: "user", fixed: "default"}, {name: "redir", fixed: "-1"},
	{name: "resp", value: num(func(c *Client) int64 { return int64(c.Proto) })},
	{name: "lib-name", value: str(func(c *Client) string { return c.LibName })},
	{name: "lib-ver", value: str(func(c *Client) string { return c.LibVer })},
}

// flags are Redis's: x inside MULTI, e with CLIENT NO-EVICT on, N for
// neither.
func (c *Client) flags() string {
	switch {
	case c.Multi >= 0 && c.NoEvict:
		return "xe"
	case c.Multi >= 0:
		return "x"
	case c.NoEvict:
		return "e"
	}
	return "N"
}

// AppendLine appends c's CLIENT LIST line, with its "\n".
func (c *Client) AppendLine(b []byte) []byte {
	for i, f := range fields {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, f.name...)
		b = append(b, '=')
		if f.value != nil {
			b = f.value(b, c)
		} else {
			b = append(b, f.fixed...)
		}
	}
	return append(b, '\n')
}

// Errors of the filters' arguments, worded by resp.
var (
	// ErrKillID: CLIENT KILL ID's value is not a positive integer.
	ErrKillID = errors.New("client-id is not positive")
	// ErrListID: CLIENT LIST ID's value is not a positive integer.
	ErrListID = errors.New("invalid client id")
)

// ValidName reports whether b may be a client name or library field, as
// Redis checks them: printable ASCII without spaces.
func ValidName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

// TypeError is a TYPE filter naming no client type; Given is the word as
// given.
type TypeError struct{ Given string }

func (e *TypeError) Error() string { return "unknown client type " + e.Given }

// parseType reads a TYPE filter's word: normal, or another type (master,
// replica, slave, pubsub), which no cellserver client is.
func parseType(v []byte) (normal bool, err error) {
	switch t := strings.ToLower(string(v)); t {
	case "normal":
		return true, nil
	case "master", "replica", "slave", "pubsub":
		return false, nil
	}
	return false, &TypeError{Given: string(v)}
}

// Kill is CLIENT KILL's selection; zero fields match every client.
type Kill struct {
	ID          int64
	Addr, LAddr string
	User        string
	NoNormal    bool  // TYPE other than normal: matches none (every client is normal)
	MaxAge      int64 // seconds; 0: any
	SkipMe      bool
}

// Match reports whether the selection takes c; self is whether c is the
// connection that sent CLIENT KILL.
func (f *Kill) Match(c *Client, self bool) bool {
	switch {
	case f.NoNormal, f.SkipMe && self:
		return false
	case f.ID != 0 && c.ID != f.ID, f.Addr != "" && c.Addr != f.Addr, f.LAddr != "" && c.LAddr != f.LAddr:
		return false
	case f.User != "" && f.User != "default":
		return false
	case f.MaxAge > 0 && c.Age < f.MaxAge:
		return false
	}
	return true
}

// ParseKill reads CLIENT KILL's filter form (the arguments after KILL:
// pairs of ID, TYPE, ADDR, LADDR, USER, MAXAGE or SKIPME and a value).
func ParseKill(args [][]byte) (*Kill, error) {
	f := &Kill{SkipMe: true}
	if len(args)%2 != 0 {
		return nil, engine.ErrSyntax
	}
	for i := 0; i < len(args); i += 2 {
		v := args[i+1]
		switch strings.ToLower(string(args[i])) {
		case "id":
			id, err := engine.ParseInt(v)
			if err != nil || id < 1 {
				return nil, ErrKillID
			}
			f.ID = id
		case "type":
			normal, err := parseType(v)
			if err != nil {
				return nil, err
			}
			f.NoNormal = !normal
		case "addr":
			f.Addr = string(v)
		case "laddr":
			f.LAddr = string(v)
		case "user":
			f.User = string(v)
		case "maxage":
			age, err := engine.ParseInt(v)
			if err != nil || age < 0 {
				return nil, engine.ErrSyntax
			}
			f.MaxAge = age
		case "skipme":
			switch {
			case bytes.EqualFold(v, []byte("yes")):
				f.SkipMe = true
			case bytes.EqualFold(v, []byte("no")):
				f.SkipMe = false
			default:
				return nil, engine.ErrSyntax
			}
		default:
			return nil, engine.ErrSyntax
		}
	}
	return f, nil
}

// List is CLIENT LIST's selection: IDs (nil: any) and whether normal
// clients, the only kind there is, are listed.
type List struct {
	IDs    map[int64]bool
	Normal bool
}

// ParseList reads CLIENT LIST's arguments after LIST: TYPE type, and ID
// followed by every remaining argument as a client id.
func ParseList(args [][]byte) (*List, error) {
	l := &List{Normal: true}
	for i := 0; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("type")) && i+1 < len(args):
			normal, err := parseType(args[i+1])
			if err != nil {
				return nil, err
			}
			l.Normal = normal
			i++
		case bytes.EqualFold(args[i], []byte("id")) && i+1 < len(args):
			l.IDs = make(map[int64]bool)
			for i++; i < len(args); i++ {
				id, err := engine.ParseInt(args[i])
				if err != nil || id < 1 {
					return nil, ErrListID
				}
				l.IDs[id] = true
			}
		default:
			return nil, engine.ErrSyntax
		}
	}
	return l, nil
}

// Match reports whether the selection lists the client with id.
func (l *List) Match(id int64) bool { return l.Normal && (l.IDs == nil || l.IDs[id]) }
