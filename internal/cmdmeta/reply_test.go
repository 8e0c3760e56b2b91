package cmdmeta

import (
	"slices"
	"testing"

	"github.com/cellserver/cellserver/internal/reply"
)

func TestSyntax(t *testing.T) {
	tests := []struct {
		full string
		args []Arg
		want string
	}{
		{"cl.throttle", []Arg{{Name: "key", Type: "key"}, {Name: "quantity", Type: "integer", Optional: true}}, "CL.THROTTLE key [quantity]"},
		{"client|kill", []Arg{{Name: "filter", Type: "oneof", Multiple: true, Arguments: []Arg{
			{Name: "id", Type: "integer", Token: "ID"}, {Name: "skipme", Type: "pure-token", Token: "SKIPME"}}}},
			"CLIENT KILL <ID id | SKIPME> [filter ...]"},
		{"scan", []Arg{{Name: "pattern", Type: "pattern", Token: "MATCH", Optional: true}, {Name: "pair", Type: "block", Multiple: true, Arguments: []Arg{{Name: "k", Type: "key"}, {Name: "v", Type: "string"}}}},
			"SCAN [MATCH pattern] k v [k v ...]"},
	}
	for _, tt := range tests {
		if got := Syntax(tt.full, tt.args); got != tt.want {
			t.Errorf("Syntax(%q) = %q, want %q", tt.full, got, tt.want)
		}
	}
}

func TestInfoEntry(t *testing.T) {
	cmd := Command{Name: "get", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "generic", MovableKeys: true}
	n := Info(&cmd, "get")
	if n.Kind != reply.KindArray || len(n.Elems) != 10 {
		t.Fatalf("Info = %+v, want a ten-element array", n)
	}
	var flags, cats []string
	for _, e := range n.Elems[2].Elems {
		flags = append(flags, e.Str)
	}
	for _, e := range n.Elems[6].Elems {
		cats = append(cats, e.Str)
	}
	if want := []string{"readonly", "fast", "movablekeys"}; !slices.Equal(flags, want) {
		t.Errorf("flags = %q, want %q", flags, want)
	}
	if want := []string{"@read", "@fast", "@keyspace"}; !slices.Equal(cats, want) {
		t.Errorf("categories = %q, want %q", cats, want)
	}
	if len(cmd.Flags) != 2 {
		t.Errorf("Info changed the command's flags: %q", cmd.Flags)
	}
}

func TestHelp(t *testing.T) {
	c := Command{Name: "client", Subcommands: []Command{
		{Name: "setname", Summary: "Names the connection.", Arguments: []Arg{{Name: "connection-name", Type: "string"}}},
		{Name: "help", Summary: "Lists the subcommands of CLIENT."},
	}}
	want := []string{"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"SETNAME connection-name", "    Names the connection.", "HELP", "    Lists the subcommands of CLIENT."}
	if got := Help(&c); !slices.Equal(got, want) {
		t.Errorf("Help = %q, want %q", got, want)
	}
}
