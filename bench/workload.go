package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// keyPlaceholder is replaced by a generated key in every argument where it
// appears; shaPlaceholder by the digest of the loaded Lua script.
const (
	keyPlaceholder = "{key}"
	shaPlaceholder = "{sha}"
)

// segment is one piece of an encoded command: either fixed bytes (the array
// header and every argument without a key) or one argument that holds the key,
// kept as the pieces around each {key}.
type segment struct {
	static []byte   // encoded bytes, when pieces is nil
	pieces []string // the argument split on {key}; len(pieces)-1 keys go between them
}

// template is a command line compiled to RESP, ready to be appended to a
// buffer with a key substituted, without allocating.
type template struct {
	name     string // the command name, for reports
	segments []segment
	hasKey   bool
}

// splitArgs splits a command line on spaces, honouring "double" and 'single'
// quotes (with \" and \\ escapes inside double quotes) as redis-cli does.
func splitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case ch == '"' || ch == '\'':
			quote := ch
			inArg = true
			closed := false
			for i++; i < len(line); i++ {
				c := line[i]
				if c == quote {
					closed = true
					break
				}
				if quote == '"' && c == '\\' && i+1 < len(line) {
					i++
					c = line[i]
				}
				cur.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("unbalanced %c quote in %q", quote, line)
			}
		default:
			inArg = true
			cur.WriteByte(ch)
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// parseTemplate compiles a command line; sha replaces {sha}.
func parseTemplate(line, sha string) (*template, error) {
	args, err := splitArgs(line)
	if err != nil {
		return nil, fmt.Errorf("command %q: %w", line, err)
	}
	if len(args) == 0 {
		return nil, errors.New("command is empty")
	}
	t := &template{name: strings.ToUpper(args[0])}
	static := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		a = strings.ReplaceAll(a, shaPlaceholder, sha)
		if !strings.Contains(a, keyPlaceholder) {
			static = append(static, '$')
			static = strconv.AppendInt(static, int64(len(a)), 10)
			static = append(static, "\r\n"...)
			static = append(static, a...)
			static = append(static, "\r\n"...)
			continue
		}
		if len(static) > 0 {
			t.segments = append(t.segments, segment{static: static})
			static = nil
		}
		t.segments = append(t.segments, segment{pieces: strings.Split(a, keyPlaceholder)})
		t.hasKey = true
	}
	if len(static) > 0 {
		t.segments = append(t.segments, segment{static: static})
	}
	return t, nil
}

// usesSHA reports whether a command line needs the Lua script's digest.
func usesSHA(line string) bool { return strings.Contains(line, shaPlaceholder) }

// appendCommand appends the RESP encoding of the command with key substituted.
func (t *template) appendCommand(buf, key []byte) []byte {
	for i := range t.segments {
		s := &t.segments[i]
		if s.pieces == nil {
			buf = append(buf, s.static...)
			continue
		}
		n := len(key) * (len(s.pieces) - 1)
		for _, p := range s.pieces {
			n += len(p)
		}
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(n), 10)
		buf = append(buf, '\r', '\n')
		for j, p := range s.pieces {
			if j > 0 {
				buf = append(buf, key...)
			}
			buf = append(buf, p...)
		}
		buf = append(buf, '\r', '\n')
	}
	return buf
}

// keyGen draws key indexes in [0, keys) and formats them as prefix plus a
// zero-padded decimal, so every key of a keyspace has the same length (as
// redis-benchmark's __rand_int__ does). One keyGen belongs to one worker.
type keyGen struct {
	rng    *rand.Rand
	zipf   *rand.Zipf // nil for uniform
	keys   uint64
	prefix []byte
	width  int // digits of keys-1
}

// newKeyGen returns a generator for dist "uniform" or "zipf" (exponent s > 1,
// index 0 the hottest key), seeded deterministically.
func newKeyGen(dist string, s float64, keys int, prefix string, seed uint64) (*keyGen, error) {
	if keys < 1 {
		return nil, fmt.Errorf("keyspace of %d keys", keys)
	}
	g := &keyGen{
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		keys:   uint64(keys),
		prefix: []byte(prefix),
		width:  len(strconv.Itoa(keys - 1)),
	}
	switch dist {
	case "uniform":
	case "zipf":
		if !(s > 1) {
			return nil, fmt.Errorf("zipf exponent %g: must be greater than 1", s)
		}
		g.zipf = rand.NewZipf(g.rng, s, 1, uint64(keys-1))
	default:
		return nil, fmt.Errorf("distribution %q: want uniform or zipf", dist)
	}
	return g, nil
}

// next returns the next key index, in [0, keys).
func (g *keyGen) next() uint64 {
	if g.zipf != nil {
		return g.zipf.Uint64()
	}
	return g.rng.Uint64N(g.keys)
}

// appendKey appends the key of index i.
func (g *keyGen) appendKey(buf []byte, i uint64) []byte {
	buf = append(buf, g.prefix...)
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], i, 10)
	for pad := g.width - len(d); pad > 0; pad-- {
		buf = append(buf, '0')
	}
	return append(buf, d...)
}
