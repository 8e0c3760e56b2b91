package cmdmeta

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"testing/fstest"
)

const good = `{
  "name": "x.take",
  "arity": -3,
  "max_args": 4,
  "flags": ["write", "fast"],
  "first_key": 1, "last_key": 1, "key_step": 1,
  "group": "ratelimit", "since": "0.1.0",
  "summary": "Takes.", "complexity": "O(1)",
  "arguments": [
    {"name": "key", "type": "key"},
    {"name": "mode", "type": "oneof", "optional": true, "arguments": [
      {"name": "a", "type": "pure-token", "token": "A"},
      {"name": "b", "type": "pure-token", "token": "B"}]}
  ],
  "reply": "Integer.",
  "subcommands": []
}`

// TestParseErrors checks that every fault of a file is reported with the
// file and the JSON field to fix.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"good", "x.take.json", "", "", ""},
		{"syntax", "x.take.json", `"arity": -3,`, `"arity": -3`, `x.take.json: line 4, column 3: invalid character '"' after object key:value pair`},
		{"unknown field", "x.take.json", `"arity": -3,`, `"aritee": 1, "arity": -3,`, `x.take.json: field aritee: unknown field`},
		{"type", "x.take.json", `"arity": -3,`, `"arity": "-3",`, `x.take.json: field arity: near line 3, column 16: a JSON string where int is expected`},
		{"nested type", "x.take.json", `"optional": true`, `"optional": 1`, `x.take.json: field arguments.optional: near line 11, column 52: a JSON number where bool is expected`},
		{"two values", "x.take.json", "[]\n}", "[]\n}\n{}", `x.take.json: more than one JSON value`},
		{"name vs file", "x.give.json", "", "", `x.give.json: field name: "x.take" does not match the file's name`},
		{"arity 0", "x.take.json", `"arity": -3`, `"arity": 0`, `x.take.json: field arity: missing or 0`},
		{"max_args", "x.take.json", `"max_args": 4`, `"max_args": 2`, `x.take.json: field max_args: 2: only with a negative arity, and at least -arity (3)`},
		{"flag", "x.take.json", `"fast"]`, `"quick"]`, `x.take.json: field flags[1]: unknown flag "quick"`},
		{"flag twice", "x.take.json", `"fast"]`, `"write"]`, `x.take.json: field flags[1]: flag "write" given twice`},
		{"no key step", "x.take.json", `, "key_step": 1`, ``, `x.take.json: field key_step: 0: at least 1 when first_key is set`},
		{"last key", "x.take.json", `"last_key": 1`, `"last_key": -2`, `x.take.json: field last_key: -2`},
		{"bad group", "x.take.json", `"group": "ratelimit"`, `"group": "limits"`, `x.take.json: field group: unknown group "limits"`},
		{"summary", "x.take.json", `"summary": "Takes."`, `"summary": ""`, `x.take.json: field summary: missing`},
		{"arg type", "x.take.json", `"type": "key"`, `"type": "ky"`, `x.take.json: field arguments[0].type: unknown type "ky"`},
		{"nested token", "x.take.json", `"token": "B"`, `"token": ""`, `x.take.json: field arguments[1].arguments[1].token: missing`},
		{"oneof members", "x.take.json", `"optional": true, "arguments": [`, `"optional": true, "args": [`, `x.take.json: field args: unknown field`},
		{"bad register", "x.take.json", `"reply": "Integer."`, `"reply": "Integer.", "register": "gossip"`, `x.take.json: field register: unknown "gossip"`},
		{"subcommand arity", "x.take.json", `"subcommands": []`, `"subcommands": [{"name": "go", "arity": 1, "group": "server", "since": "1", "summary": "s", "complexity": "c"}]`,
			`x.take.json: field subcommands[0].arity: 1: a subcommand's arity counts both words`},
		{"subcommand help", "x.take.json", `"subcommands": []`, `"subcommands": [{"name": "help", "arity": 2, "group": "server", "since": "1", "summary": "s", "complexity": "c"}]`,
			`x.take.json: field subcommands[0].name: "help" given twice`},
		{"subcommand register", "x.take.json", `"subcommands": []`, `"subcommands": [{"name": "go", "arity": 2, "group": "server", "since": "1", "summary": "s", "complexity": "c", "register": "raft"}]`,
			`x.take.json: field subcommands[0].register: only a top-level command has one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := good
			if tc.old != "" {
				if !strings.Contains(src, tc.old) {
					t.Fatalf("%q is not in the fixture", tc.old)
				}
				src = strings.Replace(src, tc.old, tc.new, 1)
			}
			_, err := Parse(tc.file, []byte(src))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Parse = %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
			var me *Error
			if err != nil && !errors.As(err, &me) {
				t.Errorf("Parse error %T is not a *cmdmeta.Error", err)
			}
		})
	}
}

// TestLoadReportsEveryFile checks that Load goes on past a bad file, so one
// run names every fault, and that a good directory loads in name order.
func TestLoadReportsEveryFile(t *testing.T) {
	fsys := fstest.MapFS{
		"cmds/x.take.json": {Data: []byte(good)},
		"cmds/a.json":      {Data: []byte(`{"name": "a", "arity": 1}`)},
		"cmds/b.json":      {Data: []byte(`{"name": "b", "arity": 1, "group": "server", "since": "1", "summary": "s", "complexity": "c", "flags": ["nope"]}`)},
	}
	_, err := Load(fsys, "cmds")
	for _, want := range []string{"cmds/a.json: field group", "cmds/a.json: field summary: missing", "cmds/b.json: field flags[0]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want it to contain %q", err, want)
		}
	}
	delete(fsys, "cmds/a.json")
	delete(fsys, "cmds/b.json")
	fsys["cmds/c.json"] = &fstest.MapFile{Data: []byte(`{"name": "c", "arity": 1, "group": "server", "since": "1", "summary": "s", "complexity": "c"}`)}
	cmds, err := Load(fsys, "cmds")
	if err != nil || len(cmds) != 2 || cmds[0].Name != "c" || cmds[1].Name != "x.take" {
		t.Fatalf("Load = %v, %v; want c, x.take", cmds, err)
	}
	if _, err := Load(fsys, "none"); err == nil {
		t.Error("Load of an empty directory succeeded")
	}
	src, err := Generate(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), Header+"\n") {
		t.Errorf("generated source does not start with the header %q", Header)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "gen.go", src, 0); err != nil {
		t.Errorf("generated source does not parse: %v", err)
	}
	for _, want := range []string{`Flags: FlagWrite | FlagFast`, `{Name: "b", Type: "pure-token", Token: "B"}`, `MaxArgs:    4`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated source lacks %q:\n%s", want, src)
		}
	}
}

// TestSharedErrors checks that "@name" entries expand to _shared.json's
// list in place, and that an unknown one is reported with its field.
func TestSharedErrors(t *testing.T) {
	cmd := func(errs string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(`{"name": "c", "arity": -2, "group": "server", "since": "1", "summary": "s", "complexity": "c",
			"subcommands": [{"name": "go", "arity": 2, "group": "server", "since": "1", "summary": "s", "complexity": "c", "errors": ` + errs + `}]}`)}
	}
	fsys := fstest.MapFS{
		"cmds/_shared.json": {Data: []byte(`{"errors": {"two": ["a", "b"]}}`)},
		"cmds/c.json":       cmd(`["first", "@two", "last"]`),
	}
	cmds, err := Load(fsys, "cmds")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cmds[0].Subcommands[0].Errors, ","); got != "first,a,b,last" {
		t.Errorf("errors = %s, want first,a,b,last", got)
	}
	fsys["cmds/c.json"] = cmd(`["first", "@three"]`)
	if _, err := Load(fsys, "cmds"); err == nil || !strings.Contains(err.Error(), `cmds/c.json: field subcommands[0].errors[1]: "@three" names no list of _shared.json (known: two)`) {
		t.Errorf("Load(unknown shared list) = %v", err)
	}
	fsys["cmds/_shared.json"] = &fstest.MapFile{Data: []byte(`{"errors": {"two": "a"}}`)}
	if _, err := Load(fsys, "cmds"); err == nil || !strings.Contains(err.Error(), `cmds/_shared.json: field errors: near line 1, column 23: a JSON string where []string is expected`) {
		t.Errorf("Load(bad _shared.json) = %v", err)
	}
}

func TestKeys(t *testing.T) {
	args := [][]byte{[]byte("cmd"), []byte("a"), []byte("1"), []byte("b"), []byte("2")}
	for _, tc := range []struct {
		first, last, step int
		want              string
	}{
		{0, 0, 0, ""},     // no keys
		{1, 1, 1, "a"},    // one key
		{1, -1, 2, "a b"}, // pairs up to the last argument
		{1, -2, 1, "a 1 b"},
		{3, 9, 1, "b 2"}, // positions past the call are not read
	} {
		c := Command{FirstKey: tc.first, LastKey: tc.last, KeyStep: tc.step}
		if got := string(bytes.Join(c.Keys(nil, args), []byte(" "))); got != tc.want {
			t.Errorf("Keys(%d, %d, %d) = %q, want %q", tc.first, tc.last, tc.step, got, tc.want)
		}
	}
}
