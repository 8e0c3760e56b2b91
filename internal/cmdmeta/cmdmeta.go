package cmdmeta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
)

// Command is one command's metadata, as a JSON file holds it. A container
// (CLIENT, CONFIG) lists its subcommands in Subcommands, in the order HELP
// and COMMAND show them.
type Command struct {
	// Name is the command's name in lower case ("cl.throttle"; for a
	// subcommand its own word: "setname").
	Name string `json:"name"`
	// Arity counts the arguments with the name, as Redis does: N exactly N,
	// -N at least N. For a subcommand it counts both words.
	Arity int `json:"arity"`
	// MaxArgs, when set, is the most words accepted (with a negative Arity).
	MaxArgs int `json:"max_args,omitempty"`
	// Flags are Redis's command flags: write, readonly, denyoom, admin,
	// noscript, loading, stale, fast, no_auth, no_multi.
	Flags []string `json:"flags,omitempty"`
	// FirstKey, LastKey and KeyStep are the key positions COMMAND INFO
	// reports (LastKey -1: up to the last argument; no FirstKey: no keys).
	FirstKey int `json:"first_key,omitempty"`
	LastKey  int `json:"last_key,omitempty"`
	KeyStep  int `json:"key_step,omitempty"`
	// MovableKeys says the keys are found by code (the handler's binding
	// gives a MovableKeys function), as Redis's movablekeys.
	MovableKeys bool `json:"movable_keys,omitempty"`
	// OpenSlot lets the command run on either group of an open slot.
	OpenSlot bool `json:"open_slot,omitempty"`
	// Waits marks a limiter command that takes a trailing WAIT duration.
	Waits bool `json:"waits,omitempty"`
	// Register names the server set the command belongs to: empty for every
	// server, "raft" for RegisterCluster, "region" for RegisterRegions.
	// Only a top-level command has one.
	Register string `json:"register,omitempty"`
	// Group, Since, Summary and Complexity are COMMAND DOCS's fields.
	Group      string `json:"group"`
	Since      string `json:"since"`
	Summary    string `json:"summary"`
	Complexity string `json:"complexity"`
	// Arguments document the arguments after the name (after both words
	// for a subcommand).
	Arguments []Arg `json:"arguments,omitempty"`
	// Reply, Errors and Notes are docs/commands.md's prose (Markdown).
	Reply  string   `json:"reply,omitempty"`
	Errors []string `json:"errors,omitempty"`
	Notes  []string `json:"notes,omitempty"`
	// Subcommands make this a container.
	Subcommands []Command `json:"subcommands,omitempty"`
	// Bare is set by resp, never by a file: the container also runs with
	// no subcommand, so docs/commands.md shows its own syntax line.
	Bare bool `json:"-"`
}

// Keys appends to dst the keys of a call (args, the name first) by the
// key positions: FirstKey to LastKey (counted from the end when negative)
// every KeyStep. A command whose MovableKeys is set finds its keys by code
// instead.
func (c *Command) Keys(dst, args [][]byte) [][]byte {
	if c.FirstKey <= 0 {
		return dst
	}
	last := c.LastKey
	if last < 0 {
		last += len(args)
	}
	for i := c.FirstKey; i <= last && i < len(args); i += max(c.KeyStep, 1) {
		dst = append(dst, args[i])
	}
	return dst
}

// Arg documents one argument, in the shape of Redis 7's COMMAND DOCS
// (resp's Arg is this type).
type Arg struct {
	// Name is the argument's name (lower case, as in the syntax).
	Name string `json:"name"`
	// Type is one of Redis's argument types: "key", "integer", "string",
	// "pattern", "pure-token", "oneof", "block".
	Type string `json:"type"`
	// Token is the literal keyword that introduces the argument (MATCH,
	// INTERVAL), if any.
	Token string `json:"token,omitempty"`
	// Optional and Multiple mirror Redis's argument flags.
	Optional bool `json:"optional,omitempty"`
	Multiple bool `json:"multiple,omitempty"`
	// Arguments are the members of a "oneof" or "block" argument.
	Arguments []Arg `json:"arguments,omitempty"`
	// Doc states the argument's meaning, unit and range for
	// docs/commands.md.
	Doc string `json:"doc,omitempty"`
}

// Flag is one command flag a file may name.
type Flag struct {
	Name  string // Redis's name, as COMMAND INFO lists it ("write")
	Ident string // resp's constant ("FlagWrite")
	Doc   string // what the flag marks, the constant's doc comment
}

// Flags are the command flags, in the order COMMAND INFO lists them
// (Redis's). resp's Flag constants and their names are generated from
// them, one bit each in this order.
var Flags = []Flag{
	{"write", "FlagWrite", "marks a command that changes the keyspace."},
	{"readonly", "FlagReadonly", "marks a command that reads the keyspace only."},
	{"denyoom", "FlagDenyOOM", "marks a command refused when memory is exhausted."},
	{"admin", "FlagAdmin", "marks an administrative command."},
	{"noscript", "FlagNoScript", "marks a command not allowed in scripts."},
	{"loading", "FlagLoading", "marks a command allowed while the dataset loads."},
	{"stale", "FlagStale", "marks a command allowed on a replica that is not in sync."},
	{"fast", "FlagFast", "marks a command that runs in O(1) or O(log N)."},
	{"no_auth", "FlagNoAuth", "marks a command allowed before authentication."},
	{"no_multi", "FlagNoMulti", "marks a command refused inside a transaction (MULTI)."},
}

// flagIdent returns resp's constant for the flag named name ("" for none).
func flagIdent(name string) string {
	for _, f := range Flags {
		if f.Name == name {
			return f.Ident
		}
	}
	return ""
}

// Groups are the COMMAND DOCS groups a command may name (docs/commands.md
// has one section each).
var Groups = []string{"ratelimit", "generic", "connection", "transactions", "server", "cluster", "region"}

// Registers are the values Register may take.
var Registers = []string{"", "raft", "region"}

var argTypes = []string{"key", "integer", "string", "pattern", "pure-token", "oneof", "block"}

// Error is a metadata file that does not decode or does not check: File is
// its path, Field the JSON field at fault ("arguments[2].type"), empty when
// the file as a whole is.
type Error struct {
	File, Field, Msg string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": field " + e.Field + ": " + e.Msg
}

// SharedFile is the file of dir that holds the shared error lists; it is
// not a command.
const SharedFile = "_shared.json"

// Shared holds prose several commands share. An entry "@name" of a
// command's errors stands for the list Errors[name], in its place (the
// limiter commands share their parameter errors this way, the CLUSTER
// subcommands the standalone server's refusal).
type Shared struct {
	Errors map[string][]string `json:"errors"`
}

// Load reads every *.json file of fsys's directory dir, in name order, and
// checks each. A file holds one top-level command named as the file
// (cl.throttle.json holds "cl.throttle"), except _shared.json (Shared),
// whose lists replace the references to them. The errors are *Error
// values, joined; Load stops at none, so that one run reports every fault.
func Load(fsys fs.FS, dir string) ([]Command, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var errs []error
	var shared Shared
	if data, err := fs.ReadFile(fsys, path.Join(dir, SharedFile)); err == nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&shared); err != nil {
			errs = append(errs, decodeError(path.Join(dir, SharedFile), data, err))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	var cmds []Command
	for _, name := range names {
		if path.Base(name) == SharedFile {
			continue
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cmd, err := Parse(name, data)
		if err == nil {
			err = expand(&cmd, name, "", &shared)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cmds = append(cmds, cmd)
	}
	if len(cmds) == 0 && len(errs) == 0 {
		return nil, &Error{File: dir, Msg: "no *.json command files"}
	}
	return cmds, errors.Join(errs...)
}

// expand replaces each "@name" entry of cmd's errors (and its
// subcommands') with the shared list it names.
func expand(cmd *Command, file, prefix string, shared *Shared) error {
	var errs []error
	var out []string
	for i, e := range cmd.Errors {
		name, ok := strings.CutPrefix(e, "@")
		if !ok {
			out = append(out, e)
			continue
		}
		list, ok := shared.Errors[name]
		if !ok {
			errs = append(errs, &Error{File: file, Field: fmt.Sprintf("%serrors[%d]", prefix, i),
				Msg: fmt.Sprintf("%q names no list of %s (known: %s)", e, SharedFile, strings.Join(slices.Sorted(maps.Keys(shared.Errors)), ", "))})
			continue
		}
		out = append(out, list...)
	}
	cmd.Errors = out
	for i := range cmd.Subcommands {
		errs = append(errs, expand(&cmd.Subcommands[i], file, fmt.Sprintf("%ssubcommands[%d].", prefix, i), shared))
	}
	return errors.Join(errs...)
}

// Parse decodes and checks one file's contents; file names it in errors
// and must be "<command name>.json".
func Parse(file string, data []byte) (Command, error) {
	var cmd Command
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cmd); err != nil {
		return cmd, decodeError(file, data, err)
	}
	if dec.More() {
		return cmd, &Error{File: file, Msg: "more than one JSON value: a file holds one command"}
	}
	var errs []error
	report := func(field, format string, a ...any) {
		errs = append(errs, &Error{File: file, Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	checkCommand(&cmd, "", false, report)
	if want := strings.TrimSuffix(path.Base(file), ".json"); cmd.Name != "" && cmd.Name != want {
		report("name", "%q does not match the file's name (want %q, or rename the file %s.json)", cmd.Name, want, cmd.Name)
	}
	return cmd, errors.Join(errs...)
}

// decodeError words a JSON decoding error with the file, the field when
// the decoder names one, and the line and column.
func decodeError(file string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset-1) // Offset is just past the faulty byte
		return &Error{File: file, Msg: fmt.Sprintf("line %d, column %d: %v", line, col, se)}
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		return &Error{File: file, Field: te.Field, Msg: fmt.Sprintf("near line %d, column %d: a JSON %s where %s is expected", line, col, te.Value, te.Type)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{File: file, Field: f, Msg: "unknown field (known: the json names of cmdmeta.Command and cmdmeta.Arg)"}
	}
	return &Error{File: file, Msg: err.Error()}
}

// position returns the 1-based line and column of byte offset off.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func checkCommand(cmd *Command, prefix string, sub bool, report func(field, format string, a ...any)) {
	f := func(name string) string { return prefix + name }
	switch {
	case cmd.Name == "":
		report(f("name"), "missing")
	case cmd.Name != strings.ToLower(cmd.Name) || strings.ContainsAny(cmd.Name, " |"):
		report(f("name"), "%q must be one lower-case word", cmd.Name)
	}
	switch {
	case cmd.Arity == 0:
		report(f("arity"), "missing or 0: N for exactly N words with the name, -N for at least N")
	case sub && cmd.Arity > 0 && cmd.Arity < 2, sub && cmd.Arity < 0 && cmd.Arity > -2:
		report(f("arity"), "%d: a subcommand's arity counts both words (at least 2)", cmd.Arity)
	}
	if cmd.MaxArgs != 0 && (cmd.Arity > 0 || cmd.MaxArgs < -cmd.Arity) {
		report(f("max_args"), "%d: only with a negative arity, and at least -arity (%d)", cmd.MaxArgs, -cmd.Arity)
	}
	seen := map[string]bool{}
	for i, fl := range cmd.Flags {
		if flagIdent(fl) == "" {
			var known []string
			for _, f := range Flags {
				known = append(known, f.Name)
			}
			sort.Strings(known)
			report(fmt.Sprintf("%sflags[%d]", prefix, i), "unknown flag %q (known: %s)", fl, strings.Join(known, ", "))
		}
		if seen[fl] {
			report(fmt.Sprintf("%sflags[%d]", prefix, i), "flag %q given twice", fl)
		}
		seen[fl] = true
	}
	switch {
	case cmd.FirstKey < 0:
		report(f("first_key"), "%d: a position from 1, or absent for no keys", cmd.FirstKey)
	case cmd.FirstKey == 0 && (cmd.LastKey != 0 || cmd.KeyStep != 0):
		report(f("first_key"), "missing while last_key or key_step is set")
	case cmd.FirstKey > 0 && cmd.KeyStep < 1:
		report(f("key_step"), "%d: at least 1 when first_key is set", cmd.KeyStep)
	case cmd.FirstKey > 0 && cmd.LastKey != -1 && cmd.LastKey < cmd.FirstKey:
		report(f("last_key"), "%d: -1 (up to the last argument) or at least first_key (%d)", cmd.LastKey, cmd.FirstKey)
	}
	if sub && cmd.Register != "" {
		report(f("register"), "only a top-level command has one")
	}
	if !slices.Contains(Registers, cmd.Register) {
		report(f("register"), "unknown %q (known: raft, region, or absent for every server)", cmd.Register)
	}
	if !slices.Contains(Groups, cmd.Group) {
		report(f("group"), "unknown group %q (known: %s)", cmd.Group, strings.Join(Groups, ", "))
	}
	for _, s := range []struct{ field, v string }{{"since", cmd.Since}, {"summary", cmd.Summary}, {"complexity", cmd.Complexity}} {
		if strings.TrimSpace(s.v) == "" {
			report(f(s.field), "missing")
		}
	}
	checkArgs(cmd.Arguments, prefix+"arguments", report)
	if sub && len(cmd.Subcommands) > 0 {
		report(f("subcommands"), "a subcommand cannot have subcommands")
	}
	names := map[string]bool{}
	for i := range cmd.Subcommands {
		sc := &cmd.Subcommands[i]
		p := fmt.Sprintf("%ssubcommands[%d].", prefix, i)
		if names[sc.Name] || sc.Name == "help" {
			report(p+"name", "%q given twice (help is generated for every container)", sc.Name)
		}
		names[sc.Name] = true
		checkCommand(sc, p, true, report)
	}
}

func checkArgs(args []Arg, prefix string, report func(field, format string, a ...any)) {
	for i := range args {
		a := &args[i]
		p := fmt.Sprintf("%s[%d].", prefix, i)
		if a.Name == "" {
			report(p+"name", "missing")
		}
		if !slices.Contains(argTypes, a.Type) {
			report(p+"type", "unknown type %q (known: %s)", a.Type, strings.Join(argTypes, ", "))
		}
		switch a.Type {
		case "pure-token":
			if a.Token == "" {
				report(p+"token", "missing: a pure-token argument is its token")
			}
		case "oneof", "block":
			if len(a.Arguments) == 0 {
				report(p+"arguments", "missing: a %s argument lists its members", a.Type)
			}
		default:
			if len(a.Arguments) > 0 {
				report(p+"arguments", "only a oneof or block argument has members")
			}
		}
		checkArgs(a.Arguments, p+"arguments", report)
	}
}
