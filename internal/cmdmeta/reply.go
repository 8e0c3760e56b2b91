package cmdmeta

import "slices"

// Kind is the RESP type a Node is written as.
type Kind uint8

// The kinds of Node.
const (
	// KindArray is an array of Elems.
	KindArray Kind = iota
	// KindMap is a map whose Elems are its keys and values in turn (an
	// array of them in RESP2).
	KindMap
	// KindSet is a set of Elems (an array in RESP2).
	KindSet
	// KindBulk is the bulk string Str.
	KindBulk
	// KindSimple is the simple string Str.
	KindSimple
	// KindInt is the integer Int.
	KindInt
)

// Node is one value of a COMMAND INFO or COMMAND DOCS reply, in RESP3's
// types: this package says what the reply holds, resp writes it.
type Node struct {
	Kind  Kind
	Str   string
	Int   int64
	Elems []Node
}

func bulk(s string) Node        { return Node{Kind: KindBulk, Str: s} }
func integer(n int) Node        { return Node{Kind: KindInt, Int: int64(n)} }
func array(e ...Node) Node      { return Node{Kind: KindArray, Elems: e} }
func mapOf(kv ...Node) Node     { return Node{Kind: KindMap, Elems: kv} }
func simpleSet(s []string) Node { n := Node{Kind: KindSet}; n.Elems = simples(s); return n }

func simples(s []string) []Node {
	out := make([]Node, len(s))
	for i, v := range s {
		out[i] = Node{Kind: KindSimple, Str: v}
	}
	return out
}

// Info returns cmd's COMMAND INFO entry in Redis 7's ten-element shape;
// full is its full name ("client|setname" for a subcommand).
func Info(cmd *Command, full string) Node {
	flags := cmd.Flags
	if cmd.MovableKeys {
		flags = append(slices.Clip(flags), "movablekeys")
	}
	subs := make([]Node, len(cmd.Subcommands))
	for i := range cmd.Subcommands {
		subs[i] = Info(&cmd.Subcommands[i], full+"|"+cmd.Subcommands[i].Name)
	}
	return array(bulk(full), integer(cmd.Arity), simpleSet(flags),
		integer(cmd.FirstKey), integer(cmd.LastKey), integer(cmd.KeyStep),
		simpleSet(ACLCategories(cmd)),
		array(), // tips
		keySpecs(cmd), array(subs...))
}

// keySpecs describes the key positions in Redis 7's key-spec form.
func keySpecs(cmd *Command) Node {
	if cmd.FirstKey <= 0 {
		return array()
	}
	flags, access := "RW", "UPDATE"
	if slices.Contains(cmd.Flags, "readonly") {
		flags, access = "RO", "ACCESS"
	}
	last := -1
	if cmd.LastKey >= 0 {
		last = cmd.LastKey - cmd.FirstKey
	}
	return array(mapOf(
		bulk("flags"), simpleSet([]string{flags, access}),
		bulk("begin_search"), mapOf(
			bulk("type"), bulk("index"),
			bulk("spec"), mapOf(bulk("index"), integer(cmd.FirstKey))),
		bulk("find_keys"), mapOf(
			bulk("type"), bulk("range"),
			bulk("spec"), mapOf(bulk("lastkey"), integer(last), bulk("keystep"), integer(cmd.KeyStep), bulk("limit"), integer(0))),
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
func Docs(cmd *Command, full string) Node {
	m := mapOf(bulk("summary"), bulk(cmd.Summary), bulk("since"), bulk(cmd.Since),
		bulk("group"), bulk(cmd.Group), bulk("complexity"), bulk(cmd.Complexity))
	if len(cmd.Arguments) > 0 {
		m.Elems = append(m.Elems, bulk("arguments"), argDocs(cmd.Arguments))
	}
	if len(cmd.Subcommands) > 0 {
		subs := mapOf()
		for i := range cmd.Subcommands {
			sf := full + "|" + cmd.Subcommands[i].Name
			subs.Elems = append(subs.Elems, bulk(sf), Docs(&cmd.Subcommands[i], sf))
		}
		m.Elems = append(m.Elems, bulk("subcommands"), subs)
	}
	return m
}

func argDocs(args []Arg) Node {
	out := array()
	for _, a := range args {
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		m := mapOf(bulk("name"), bulk(a.Name), bulk("type"), bulk(a.Type))
		if a.Type != "pure-token" && a.Type != "oneof" && a.Type != "block" {
			m.Elems = append(m.Elems, bulk("display_text"), bulk(a.Name))
		}
		if a.Token != "" {
			m.Elems = append(m.Elems, bulk("token"), bulk(a.Token))
		}
		if len(flags) > 0 {
			m.Elems = append(m.Elems, bulk("flags"), simpleSet(flags))
		}
		if len(a.Arguments) > 0 {
			m.Elems = append(m.Elems, bulk("arguments"), argDocs(a.Arguments))
		}
		out.Elems = append(out.Elems, m)
	}
	return out
}
