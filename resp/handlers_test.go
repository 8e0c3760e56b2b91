package resp

import (
	"bytes"
	"os"
	"sort"
	"testing"

	"github.com/cellserver/cellserver/internal/cmdmeta"
)

// TestBindingsMatchMetadata fails when a command of resp/commands/ has no
// code bound in handlers.go, or when a binding names no command: the two
// halves of a command are kept in step by name.
func TestBindingsMatchMetadata(t *testing.T) {
	b := bindings()
	named := map[string]bool{}
	check := func(cmd *Command, full string) {
		named[full] = true
		h, ok := b[full]
		switch {
		case len(cmd.Subcommands) > 0 && !ok:
			// A container needs code only to run without a subcommand.
		case !ok:
			t.Errorf("%s: metadata in resp/commands/ but no binding in handlers.go", full)
		case h.Handler == nil && (h.Prepare == nil || h.Finish == nil):
			t.Errorf("%s: bound to neither a Handler nor both Prepare and Finish", full)
		case h.Handler != nil && h.Prepare != nil:
			t.Errorf("%s: bound to both a Handler and a batch writer", full)
		case cmd.Command.MovableKeys != (h.MovableKeys != nil):
			t.Errorf("%s: movable_keys is %v in its metadata, but MovableKeys is bound: %v", full, cmd.Command.MovableKeys, h.MovableKeys != nil)
		}
	}
	for _, cmd := range commandMeta() {
		check(cmd, cmd.Name)
		for _, sub := range cmd.Subcommands {
			check(sub, cmd.Name+"|"+sub.Name)
		}
	}
	var extra []string
	for name := range b {
		if !named[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		t.Errorf("%s: bound in handlers.go but has no metadata in resp/commands/", name)
	}
	if t.Failed() {
		return
	}
	// Every set builds a table (the table's own checks panic otherwise).
	tab := newTable()
	for _, set := range []string{registerBuiltin, registerRaft, registerRegion} {
		if len(commands(set)) == 0 {
			t.Errorf("command set %q is empty", set)
		}
		for _, cmd := range commands(set) {
			tab.add(cmd)
		}
	}
}

// TestCommandsGenUpToDate fails when commands_gen.go differs from what
// resp/commands/*.json generate: edit the JSON, then run `go generate ./resp`.
func TestCommandsGenUpToDate(t *testing.T) {
	cmds, err := cmdmeta.Load(os.DirFS("."), "commands")
	if err != nil {
		t.Fatalf("resp/commands: %v", err)
	}
	want, err := cmdmeta.Generate(cmds)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("commands_gen.go")
	if err != nil {
		t.Fatalf("read commands_gen.go: %v (generate it with `go generate ./resp`)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("commands_gen.go is out of date with resp/commands/*.json: run `go generate ./resp`")
	}
}
