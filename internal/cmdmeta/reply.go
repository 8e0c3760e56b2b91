package cmdmeta

import (
	"slices"

	"github.com/cellserver/cellserver/internal/reply"
)

// Info returns cmd's COMMAND INFO entry in Redis 7's ten-element shape;
// full is its full name ("client|setname" for a subcommand).
func Info(cmd *Command, full string) reply.Node {
	flags := cmd.Flags
	if cmd.MovableKeys {
		flags = append(slices.Clip(flags), "movablekeys")
	}
	subs := make([]reply.Node, len(cmd.Subcommands))
	for i := range cmd.Subcommands {
		subs[i] = Info(&cmd.Subcommands[i], full+"|"+cmd.Subcommands[i].Name)
	}
	return reply.Array(reply.Bulk(full), reply.Int(cmd.Arity), reply.SimpleSet(flags),
		reply.Int(cmd.FirstKey), reply.Int(cmd.LastKey), reply.Int(cmd.KeyStep),
		reply.SimpleSet(ACLCategories(cmd)),
		reply.Array(), // tips
		keySpecs(cmd), reply.Array(subs...))
}

// keySpecs describes the key positions in Redis 7's key-spec form.
func keySpecs(cmd *Command) reply.Node {
	if cmd.FirstKey <= 0 {
		return reply.Array()
	}
	flags, access := "RW", "UPDATE"
	if slices.Contains(cmd.Flags, "readonly") {
		flags, access = "RO", "ACCESS"
	}
	last := -1
	if cmd.LastKey >= 0 {
		last = cmd.LastKey - cmd.FirstKey
	}
	return reply.Array(reply.Map(
		reply.Bulk("flags"), reply.SimpleSet([]string{flags, access}),
		reply.Bulk("begin_search"), reply.Map(
			reply.Bulk("type"), reply.Bulk("index"),
			reply.Bulk("spec"), reply.Map(reply.Bulk("index"), reply.Int(cmd.FirstKey))),
		reply.Bulk("find_keys"), reply.Map(
			reply.Bulk("type"), reply.Bulk("range"),
			reply.Bulk("spec"), reply.Map(reply.Bulk("lastkey"), reply.Int(last), reply.Bulk("keystep"), reply.Int(cmd.KeyStep), reply.Bulk("limit"), reply.Int(0))),
	))
}

// ACLCategories returns the ACL categories COMMAND INFO lists for cmd,
// from its flags and group.
func ACLCategories(cmd *Command) []string {
	var cats []string
	switch {
	case slices.Contains(cmd.Flags, "write"):
		cats = append(cats, "@write")
	case slices.Contains(cmd.Flags, "readonly"):
		cats = append(cats, "@read")
	}
	if slices.Contains(cmd.Flags, "fast") {
		cats = append(cats, "@fast")
	} else {
		cats = append(cats, "@slow")
	}
	if slices.Contains(cmd.Flags, "admin") {
		cats = append(cats, "@admin", "@dangerous")
	}
	switch cmd.Group {
	case "ratelimit":
		cats = append(cats, "@ratelimit")
	case "generic":
		cats = append(cats, "@keyspace")
	case "connection":
		cats = append(cats, "@connection")
	}
	return cats
}

// Docs returns cmd's COMMAND DOCS map; full is its full name.
func Docs(cmd *Command, full string) reply.Node {
	m := reply.Map(reply.Bulk("summary"), reply.Bulk(cmd.Summary), reply.Bulk("since"), reply.Bulk(cmd.Since),
		reply.Bulk("group"), reply.Bulk(cmd.Group), reply.Bulk("complexity"), reply.Bulk(cmd.Complexity))
	if len(cmd.Arguments) > 0 {
		m.Elems = append(m.Elems, reply.Bulk("arguments"), argDocs(cmd.Arguments))
	}
	if len(cmd.Subcommands) > 0 {
		subs := reply.Map()
		for i := range cmd.Subcommands {
			sf := full + "|" + cmd.Subcommands[i].Name
			subs.Elems = append(subs.Elems, reply.Bulk(sf), Docs(&cmd.Subcommands[i], sf))
		}
		m.Elems = append(m.Elems, reply.Bulk("subcommands"), subs)
	}
	return m
}

func argDocs(args []Arg) reply.Node {
	out := reply.Array()
	for _, a := range args {
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		m := reply.Map(reply.Bulk("name"), reply.Bulk(a.Name), reply.Bulk("type"), reply.Bulk(a.Type))
		if a.Type != "pure-token" && a.Type != "oneof" && a.Type != "block" {
			m.Elems = append(m.Elems, reply.Bulk("display_text"), reply.Bulk(a.Name))
		}
		if a.Token != "" {
			m.Elems = append(m.Elems, reply.Bulk("token"), reply.Bulk(a.Token))
		}
		if len(flags) > 0 {
			m.Elems = append(m.Elems, reply.Bulk("flags"), reply.SimpleSet(flags))
		}
		if len(a.Arguments) > 0 {
			m.Elems = append(m.Elems, reply.Bulk("arguments"), argDocs(a.Arguments))
		}
		out.Elems = append(out.Elems, m)
	}
	return out
}
