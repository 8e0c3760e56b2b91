package resp

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
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
	var b bytes.Buffer
	b.WriteString(docsIntro)
	groups := []struct{ name, title string }{
		{"ratelimit", "Rate limiters"}, {"generic", "Keys"}, {"connection", "Connection"}, {"transactions", "Transactions"}, {"server", "Server"},
		{"cluster", "Cluster (only in cluster mode)"},
		{"region", "Regions (only with a region configured)"},
	}
	b.WriteString("## Index\n\n| Command | Summary |\n|---|---|\n")
	for _, g := range groups {
		for _, cmd := range t.sorted() {
			if cmd.Group == g.name {
				fmt.Fprintf(&b, "| [%s](#%s) | %s |\n", strings.ToUpper(cmd.Name), anchor(cmd.Name), cmd.Summary)
			}
		}
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "\n## %s\n", g.title)
		for _, cmd := range t.sorted() {
			if cmd.Group == g.name {
				writeCommandDoc(&b, cmd, "###")
			}
		}
	}
	return b.Bytes()
}

func anchor(name string) string {
	return strings.NewReplacer(".", "", "|", "").Replace(strings.ToLower(name))
}

func writeCommandDoc(b *bytes.Buffer, cmd *Command, h string) {
	fmt.Fprintf(b, "\n%s %s\n\n%s\n\n", h, strings.ToUpper(strings.ReplaceAll(cmd.fullName, "|", " ")), cmd.Summary)
	if len(cmd.Subcommands) == 0 || cmd.Handler != nil {
		fmt.Fprintf(b, "```\n%s\n```\n\n", cmd.Syntax())
	}
	if rows := argRows(cmd.Args, ""); len(rows) > 0 {
		b.WriteString("| Argument | Type | Meaning and range |\n|---|---|---|\n")
		for _, r := range rows {
			b.WriteString(r)
		}
		b.WriteString("\n")
	}
	if cmd.Reply != "" {
		fmt.Fprintf(b, "**Reply:** %s\n\n", cmd.Reply)
	}
	if len(cmd.Errors) > 0 {
		b.WriteString("**Errors:**\n\n")
		for _, e := range cmd.Errors {
			fmt.Fprintf(b, "- %s\n", e)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "**Complexity:** %s. **Arity:** %d", cmd.Complexity, cmd.Arity)
	if cmd.MaxArgs > 0 {
		fmt.Fprintf(b, " (at most %d words with the name)", cmd.MaxArgs)
	}
	if f := cmd.Flags.names(); len(f) > 0 {
		fmt.Fprintf(b, ". **Flags:** %s", strings.Join(f, ", "))
	}
	b.WriteString(".\n")
	for _, n := range cmd.Notes {
		fmt.Fprintf(b, "\n%s\n", n)
	}
	for _, sub := range cmd.Subcommands {
		writeCommandDoc(b, sub, h+"#")
	}
}

func argRows(args []Arg, prefix string) []string {
	var rows []string
	for _, a := range args {
		name := a.Name
		if a.Token != "" {
			name = a.Token
			if a.Type != "pure-token" {
				name += " " + a.Name
			}
		}
		var notes []string
		if a.Optional {
			notes = append(notes, "optional")
		}
		if a.Multiple {
			notes = append(notes, "repeatable")
		}
		doc := a.Doc
		if len(notes) > 0 {
			if doc != "" {
				doc += " "
			}
			doc += "(" + strings.Join(notes, ", ") + ")"
		}
		rows = append(rows, fmt.Sprintf("| %s`%s` | %s | %s |\n", prefix, name, a.Type, doc))
		if len(a.Args) > 0 {
			rows = append(rows, argRows(a.Args, prefix+"↳ ")...)
		}
	}
	return rows
}

// docsIntro opens docs/commands.md: what holds for every command (replies,
// generic errors, differences from redis-cell), kept as Markdown.
//
//go:embed commands/intro.md
var docsIntro string
