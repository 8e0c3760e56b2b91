package cmdmeta

import (
	"bytes"
	"fmt"
	"strings"
)

// groupTitles are docs/commands.md's section titles, one per group of
// Groups.
var groupTitles = map[string]string{
	"ratelimit": "Rate limiters", "generic": "Keys", "connection": "Connection", "transactions": "Transactions", "server": "Server",
	"cluster": "Cluster (only in cluster mode)",
	"region":  "Regions (only with a region configured)",
}

// Markdown returns docs/commands.md: intro, then an index and the
// reference of cmds (the top-level commands, sorted by name) by group.
func Markdown(intro string, cmds []Command) []byte {
	var b bytes.Buffer
	b.WriteString(intro)
	b.WriteString("## Index\n\n| Command | Summary |\n|---|---|\n")
	for _, g := range Groups {
		for i := range cmds {
			if cmds[i].Group == g {
				fmt.Fprintf(&b, "| [%s](#%s) | %s |\n", strings.ToUpper(cmds[i].Name), anchor(cmds[i].Name), cmds[i].Summary)
			}
		}
	}
	for _, g := range Groups {
		fmt.Fprintf(&b, "\n## %s\n", groupTitles[g])
		for i := range cmds {
			if cmds[i].Group == g {
				writeCommandDoc(&b, &cmds[i], cmds[i].Name, "###")
			}
		}
	}
	return b.Bytes()
}

func anchor(name string) string {
	return strings.NewReplacer(".", "", "|", "").Replace(strings.ToLower(name))
}

func writeCommandDoc(b *bytes.Buffer, cmd *Command, full, h string) {
	fmt.Fprintf(b, "\n%s %s\n\n%s\n\n", h, strings.ToUpper(strings.ReplaceAll(full, "|", " ")), cmd.Summary)
	if len(cmd.Subcommands) == 0 || cmd.Bare {
		fmt.Fprintf(b, "```\n%s\n```\n\n", Syntax(full, cmd.Arguments))
	}
	if rows := argRows(cmd.Arguments, ""); len(rows) > 0 {
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
	if len(cmd.Flags) > 0 {
		fmt.Fprintf(b, ". **Flags:** %s", strings.Join(cmd.Flags, ", "))
	}
	b.WriteString(".\n")
	for _, n := range cmd.Notes {
		fmt.Fprintf(b, "\n%s\n", n)
	}
	for i := range cmd.Subcommands {
		writeCommandDoc(b, &cmd.Subcommands[i], full+"|"+cmd.Subcommands[i].Name, h+"#")
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
		if len(a.Arguments) > 0 {
			rows = append(rows, argRows(a.Arguments, prefix+"↳ ")...)
		}
	}
	return rows
}

// Syntax returns a command's syntax line from its full name and
// arguments, e.g. "CL.THROTTLE key max_burst count_per_period period
// [quantity]" ("CLIENT SETNAME connection-name" for "client|setname").
func Syntax(full string, args []Arg) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(strings.ReplaceAll(full, "|", " ")))
	for _, a := range args {
		b.WriteByte(' ')
		writeArgSyntax(&b, a)
	}
	return b.String()
}

func writeArgSyntax(b *strings.Builder, a Arg) {
	if a.Optional {
		b.WriteByte('[')
	}
	if a.Token != "" {
		b.WriteString(a.Token)
		if a.Type != "pure-token" {
			b.WriteByte(' ')
		}
	}
	switch a.Type {
	case "pure-token":
	case "oneof":
		if !a.Optional {
			b.WriteByte('<')
		}
		for i, s := range a.Arguments {
			if i > 0 {
				b.WriteString(" | ")
			}
			writeArgSyntax(b, s)
		}
		if !a.Optional {
			b.WriteByte('>')
		}
	default:
		writeArgBody(b, a)
	}
	if a.Multiple {
		b.WriteString(" [")
		if a.Token != "" {
			b.WriteString(a.Token)
			b.WriteByte(' ')
		}
		writeArgBody(b, a)
		b.WriteString(" ...]")
	}
	if a.Optional {
		b.WriteByte(']')
	}
}

// writeArgBody writes a's words after its token: a block's arguments, in
// order, or a's name.
func writeArgBody(b *strings.Builder, a Arg) {
	if a.Type != "block" {
		b.WriteString(a.Name)
		return
	}
	for i, s := range a.Arguments {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeArgSyntax(b, s)
	}
}

// Help returns the lines a container's HELP answers, as Redis's "<CMD>
// HELP" lists its subcommands: each one's syntax and, indented, summary.
func Help(container *Command) []string {
	up := strings.ToUpper(container.Name)
	lines := []string{up + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"}
	for i := range container.Subcommands {
		sub := &container.Subcommands[i]
		syn := Syntax(container.Name+"|"+sub.Name, sub.Arguments)
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(syn, up)), "    "+sub.Summary)
	}
	return lines
}
