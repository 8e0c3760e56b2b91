package resp

import (
	_ "embed"

	"github.com/cellserver/cellserver/internal/cmdmeta"
)

// The metadata first (resp/commands/*.json → commands_gen.go), then the
// reference generated from the table it makes (go generate runs a file's
// directives in order).
//go:generate go run ../internal/cmdmeta/gen -dir commands -out commands_gen.go
//go:generate sh -c "go run ../cmd/cellserver --gen-docs > ../docs/commands.md"

// CommandsMarkdown returns docs/commands.md: the reference of every built-in
// command, generated from the command table (a test fails when the file in
// the repository differs, so the two cannot drift).
func CommandsMarkdown() []byte {
	t := newTable()
	// Every set: the cluster's commands (RegisterCluster) and the region
	// commands (RegisterRegions) too; no handler is called here.
	for _, set := range []string{registerBuiltin, registerRaft, registerRegion} {
		for _, cmd := range commands(set) {
			t.add(cmd)
		}
	}
	sorted := t.sorted()
	cmds := make([]cmdmeta.Command, len(sorted))
	for i, cmd := range sorted {
		cmds[i] = cmd.meta()
	}
	return cmdmeta.Markdown(docsIntro, cmds)
}

// meta returns cmd's metadata (its subcommands' included, HELP too) in
// cmdmeta's form, from which COMMAND INFO, COMMAND DOCS and the reference
// are made.
func (cmd *Command) meta() cmdmeta.Command {
	m := cmd.Command
	m.Flags = cmd.Flags.names()
	m.Bare = len(cmd.Subcommands) > 0 && cmd.Handler != nil
	for _, sub := range cmd.Subcommands {
		m.Subcommands = append(m.Subcommands, sub.meta())
	}
	return m
}

// docsIntro opens docs/commands.md: what holds for every command (replies,
// generic errors, differences from redis-cell), kept as Markdown.
//
//go:embed commands/intro.md
var docsIntro string
