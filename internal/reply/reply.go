// Package reply describes a command's reply as data: a tree of values in
// RESP3's types, which resp writes in the connection's protocol (a map or
// a set is an array in RESP2, a null RESP2's nil bulk string). Packages
// below the wire build a structured reply with it (cmdmeta's COMMAND INFO
// and DOCS entries, cluster's CLUSTER SLOTS and SHARDS) without knowing
// RESP; resp writes any of them with one function.
package reply

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
	// KindSimple is the simple string Str (no CR or LF).
	KindSimple
	// KindInt is the integer Int.
	KindInt
	// KindNull is the null reply.
	KindNull
)

// Node is one value of a reply.
type Node struct {
	Kind  Kind
	Str   string
	Int   int64
	Elems []Node
}

// Bulk is the bulk string s.
func Bulk(s string) Node { return Node{Kind: KindBulk, Str: s} }

// Simple is the simple string s, which must not contain CR or LF.
func Simple(s string) Node { return Node{Kind: KindSimple, Str: s} }

// Int is the integer n.
func Int[T ~int | ~int64 | ~uint64](n T) Node { return Node{Kind: KindInt, Int: int64(n)} }

// Null is the null reply.
func Null() Node { return Node{Kind: KindNull} }

// Array is an array of elems.
func Array(elems ...Node) Node { return Node{Kind: KindArray, Elems: elems} }

// Map is a map of kv's keys and values in turn.
func Map(kv ...Node) Node { return Node{Kind: KindMap, Elems: kv} }

// SimpleSet is a set of simple strings.
func SimpleSet(s []string) Node {
	n := Node{Kind: KindSet, Elems: make([]Node, len(s))}
	for i, v := range s {
		n.Elems[i] = Simple(v)
	}
	return n
}
