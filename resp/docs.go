package resp

import (
	"bytes"
	"fmt"
	"strings"
)

//go:generate sh -c "go run ../cmd/cellserver --gen-docs > ../docs/commands.md"

// CommandsMarkdown returns docs/commands.md: the reference of every built-in
// command, generated from the command table (a test fails when the file in
// the repository differs, so the two cannot drift).
func CommandsMarkdown() []byte {
	t := newTable()
	for _, cmd := range builtinCommands() {
		t.add(cmd)
	}
	// The cluster's commands, registered by RegisterCluster in cluster mode
	// (their handlers are not called here, so no node is needed).
	for _, cmd := range clusterCommands(nil) {
		t.add(cmd)
	}
	// The region commands, registered by RegisterRegions with a region.
	for _, cmd := range regionCommands(nil) {
		t.add(cmd)
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

const docsIntro = `# cellserver commands

<!-- Generated from the command table in resp/ by ` + "`go generate ./resp`" + ` (or
` + "`go run ./cmd/cellserver --gen-docs > docs/commands.md`" + `). Do not edit: a test fails
when this file differs from what the table generates. -->

cellserver speaks RESP2, and RESP3 after ` + "`HELLO 3`" + `. Command names are
case-insensitive; keys are binary-safe. Every command that takes a key is atomic
per key. Time is the server's clock, one instant per command.

## Limiter replies

Every limiter command replies with an array whose first five integers mean the
same as redis-cell's, in RESP2 and RESP3 alike:

| # | Field | Meaning | HTTP header |
|---|---|---|---|
| 1 | ` + "`limited`" + ` | 0 allowed, 1 limited | (429 when 1) |
| 2 | ` + "`limit`" + ` | the key's total limit | ` + "`X-RateLimit-Limit`" + ` |
| 3 | ` + "`remaining`" + ` | what is left after this request, never below 0 | ` + "`X-RateLimit-Remaining`" + ` |
| 4 | ` + "`retry_after`" + ` | time until this same request would be allowed; -1 when allowed, and -1 when it can never be | ` + "`Retry-After`" + ` |
| 5 | ` + "`reset_after`" + ` | time until the key is back to fresh; 0 when it holds nothing | ` + "`X-RateLimit-Reset`" + ` |

LB.ADD adds a sixth, ` + "`wait`" + `, and CC.ACQUIRE a sixth, the lease id (in-flight limits:
CC.ACQUIRE holds units until CC.RELEASE or its ttl; a quantity there is at least 1). CL.THROTTLE and CL.THROTTLEALL take the period in
whole seconds and reply in whole seconds (redis-cell's rounding); every other
limiter takes durations as seconds or with a unit (` + "`500ms`, `15m`, `2S`" + `: ` + "`ms`, `s`, `m`, `h`, `d`" + `)
and replies in milliseconds, rounded up so a client that waits that long is
never early.

A quantity (cost, count) of 0 peeks without consuming. A request larger than
the whole limit is limited with ` + "`retry_after`" + ` -1. Rejected requests consume
nothing. A key holds one kind of limiter; another limiter command on it answers
WRONGTYPE and changes nothing. Every key expires by itself when its state is back
to fresh.

## Generic errors

- ` + "`ERR wrong number of arguments for '<command>' command`" + `
- ` + "`ERR unknown command '<name>', with args beginning with: ...`" + `
- ` + "`ERR unknown subcommand '<sub>'. Try <COMMAND> HELP.`" + `
- ` + "`NOAUTH Authentication required.`" + ` before AUTH when a password is set (every command but AUTH, HELLO and QUIT).
- ` + "`ERR Protocol error: ...`" + ` for malformed input (the connection is then closed).
- ` + "`ERR value is not an integer or out of range`" + ` for a numeric argument that is not a decimal integer.
- ` + "`ERR <argument> <value> is out of range: must be <min>..<max>`" + ` for a limiter's numeric argument outside its range,
  naming the argument as the command's syntax does, the value as given and the range (in seconds for CL.THROTTLE's
  period, as a duration for other periods and windows); a bound set by another argument is said after the range
  (` + "`for this period`" + `, ` + "`with these rate and period`" + `, ` + "`(sl-max-limit)`" + `). Each command below lists its own.

The connection stays usable after any error reply other than a protocol error.

## Deliberate differences from redis-cell

1. Inputs on which redis-cell returns garbage are errors: a negative ` + "`max_burst`" + `,
   ` + "`count_per_period`" + ` or ` + "`period`" + `, and a tolerance that overflows 64-bit nanoseconds.
2. Error texts use Redis's ` + "`ERR …`" + ` wording; an argument out of range is named, with its value and its range.
3. A refund (negative quantity) never gives back more than a fresh key's state.
4. ` + "`TYPE`" + ` names the limiter kind (` + "`gcra`" + `, ...) instead of ` + "`string`" + `.
5. Keys are binary-safe and never crash the server.
6. ` + "`SELECT`" + ` of a database other than 0 is an error.

`
